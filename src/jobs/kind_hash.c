/* SPDX-License-Identifier: MIT */
/*
 * jobs/kind_hash.c: POST /v1/hash?alg=sha256|sha512 -> 200 text/plain, the
 * lowercase hex digest of the body and "\n" (OpenSSL libcrypto EVP). alg
 * defaults to sha256; any other value is a 400. Runs in slices of HASH_PIECE
 * bytes, checking the deadline after each. The EVP context is created at the
 * first step (queued jobs hold no library state) and freed when done.
 * Threading: a job is stepped by one thread at a time (job.h).
 */
#include "jobs/internal.h"
#include "base/time.h"
#include "base/query.h"

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

static int hash_start(struct vjob *job, const struct vjob_config *cfg)
{
	(void)cfg;
	struct hash_state *s = vjob__state(job);
	const char *v;
	size_t n;
	if (!vb_query_get(job->query, job->query_len, "alg", &v, &n) ||
	    (n == 6 && memcmp(v, "sha256", 6) == 0))
		s->md = EVP_sha256();
	else if (n == 6 && memcmp(v, "sha512", 6) == 0)
		s->md = EVP_sha512();
	else
		return vjob__finish_fmt(job, 400, "alg: sha256 or sha512\n");
	if (vb_query_count(job->query, job->query_len, "alg") > 1)
		return vjob__finish_fmt(job, 400, "alg: given more than once\n");
	return VJOB_MORE;
}

static int hash_step(struct vjob *job, int64_t deadline_ns)
{
	struct hash_state *s = vjob__state(job);
	if (!s->ctx) {
		s->ctx = EVP_MD_CTX_new();
		if (!s->ctx)
			return -ENOMEM;
		if (EVP_DigestInit_ex(s->ctx, s->md, NULL) != 1)
			return -EIO;
	}
	for (;;) {
		size_t k = job->in_len - s->off;
		if (k > HASH_PIECE)
			k = HASH_PIECE;
		if (k && EVP_DigestUpdate(s->ctx, job->in_body + s->off, k) != 1)
			return -EIO;
		s->off += k;
		if (s->off == job->in_len)
			break;
		if (vb_now_ns() >= deadline_ns)
			return VJOB_MORE;
	}
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	if (EVP_DigestFinal_ex(s->ctx, md, &mdlen) != 1)
		return -EIO;
	static const char hex[] = "0123456789abcdef";
	uint8_t *out = vjob__body_buf(job, 2 * (size_t)mdlen + 1);
	if (!out)
		return -ENOMEM;
	for (unsigned i = 0; i < mdlen; i++) {
		out[2 * i] = (uint8_t)hex[md[i] >> 4];
		out[2 * i + 1] = (uint8_t)hex[md[i] & 15];
	}
	out[2 * mdlen] = '\n';
	return vjob__finish_owned(job, 200, "text/plain", out, 2 * (size_t)mdlen + 1);
}

static void hash_fini(struct vjob *job)
{
	struct hash_state *s = vjob__state(job);
	EVP_MD_CTX_free(s->ctx); /* NULL is fine */
	s->ctx = NULL;
}

static void hash_warm_up(void)
{
	/* One digest of each algorithm: OpenSSL 3 fetches and caches the
	 * implementations on first use. */
	const EVP_MD *mds[] = { EVP_sha256(), EVP_sha512() };
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len;
	for (size_t i = 0; i < sizeof(mds) / sizeof(mds[0]); i++)
		(void)EVP_Digest("", 0, md, &len, mds[i], NULL);
}

const struct vjob_kind vjob_kind_hash = {
	.name = "hash",
	.path = "/v1/hash",
	.allow = "POST",
	.state_size = sizeof(struct hash_state),
	.start = hash_start,
	.step = hash_step,
	.fini = hash_fini,
	.warm_up = hash_warm_up,
};
