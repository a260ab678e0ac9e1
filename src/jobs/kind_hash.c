/* SPDX-License-Identifier: MIT */
/*
 * jobs/kind_hash.c: POST /v1/hash?alg=sha256|sha512 -> 200 text/plain, the
 * lowercase hex digest of the body and "\n" (OpenSSL libcrypto EVP). alg
 * defaults to sha256; any other value, or alg given twice, is a 400. Runs
 * in slices of HASH_PIECE bytes, checking the deadline after each. The EVP
 * context is created at the first step (queued jobs hold no library state)
 * and freed when done. Threading: the job contract of <voltd/module.h>.
 */
#include "jobs/builtin.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#define HASH_PIECE 16384

struct hash_state {
	const EVP_MD *md;
	EVP_MD_CTX *ctx;
	size_t off;
};

static int hash_start(struct voltd_job *job, void *state)
{
	struct hash_state *s = state;
	const char *v;
	size_t n;

	if (voltd->query_param(job, "alg", &v, &n) < 0 || (n == 6 && memcmp(v, "sha256", 6) == 0))
		s->md = EVP_sha256();
	else if (n == 6 && memcmp(v, "sha512", 6) == 0)
		s->md = EVP_sha512();
	else
		return voltd->respondf(job, 400, "alg: sha256 or sha512\n");
	if (vjob_builtin_query_count(job, "alg") > 1)
		return voltd->respondf(job, 400, "alg: given more than once\n");
	return VOLTD_STEP_MORE;
}

static int hash_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	struct hash_state *s = state;
	size_t len;
	const uint8_t *body = voltd->body(job, &len);

	if (!s->ctx) {
		s->ctx = EVP_MD_CTX_new();
		if (!s->ctx)
			return -ENOMEM;
		if (EVP_DigestInit_ex(s->ctx, s->md, NULL) != 1)
			return -EIO;
	}
	for (;;) {
		size_t k = len - s->off;
		if (k > HASH_PIECE)
			k = HASH_PIECE;
		if (k && EVP_DigestUpdate(s->ctx, body + s->off, k) != 1)
			return -EIO;
		s->off += k;
		if (s->off == len)
			break;
		if (voltd->now_ns() >= deadline_ns)
			return VOLTD_STEP_MORE;
	}
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	if (EVP_DigestFinal_ex(s->ctx, md, &mdlen) != 1)
		return -EIO;
	static const char hex[] = "0123456789abcdef";
	/* Short (129 bytes at most): the job's own memory. */
	uint8_t *out = voltd->body_alloc(job, 2 * (size_t)mdlen + 1);
	if (!out)
		return -ENOMEM;
	for (unsigned i = 0; i < mdlen; i++) {
		out[2 * i] = (uint8_t)hex[md[i] >> 4];
		out[2 * i + 1] = (uint8_t)hex[md[i] & 15];
	}
	out[2 * mdlen] = '\n';
	if (voltd->set_header(job, "Content-Type", "text/plain") < 0)
		return -ENOMEM;
	return VOLTD_STEP_DONE;
}

static void hash_fini(struct voltd_job *job, void *state)
{
	struct hash_state *s = state;

	(void)job;
	EVP_MD_CTX_free(s->ctx); /* NULL is fine */
	s->ctx = NULL;
}

const struct voltd_kind vjob_builtin_hash = {
	.name = "hash",
	.route = "/v1/hash",
	.methods = "POST",
	.state_size = sizeof(struct hash_state),
	.start = hash_start,
	.step = hash_step,
	.fini = hash_fini,
	.doc = "the hex sha256 or sha512 digest of the body, in slices",
};
