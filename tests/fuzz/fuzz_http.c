/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz_http.c: libFuzzer harness for the request path below the
 * server: arbitrary bytes through http/parser, then routing, query parsing,
 * the job (validated and stepped slice by slice) and the response head.
 * Built by tests/fuzz/run-fuzz.sh with clang -fsanitize=fuzzer,address,undefined.
 *
 * Input: byte 0 chooses the limits and how the rest is split into reads;
 * the rest is the byte stream of one connection. Besides the sanitizers, it
 * checks properties and aborts when one fails:
 *  - the same stream fed whole and in pieces gives the same events;
 *  - requests are self-consistent (lengths, path and query inside the target,
 *    body within the limit), errors carry a status of the documented set;
 *  - every job finishes with a status and a head that encodes.
 * Single-threaded, like libFuzzer's default.
 */
#include "http/parser.h"
#include "base/query.h"
#include "http/response.h"
#include "jobs/job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                          \
	do {                                                                              \
		if (!(c)) {                                                               \
			fprintf(stderr, "fuzz_http: check failed: %s (line %d)\n", #c, __LINE__); \
			abort();                                                          \
		}                                                                         \
	} while (0)

/* FNV-1a over the events: a fingerprint of one parse. */
static void mix(uint64_t *h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		*h = (*h ^ b[i]) * 0x100000001b3ull;
}

static void mix_u64(uint64_t *h, uint64_t v)
{
	mix(h, &v, sizeof(v));
}

static bool inside(const char *s, size_t n, const char *base, size_t blen)
{
	return s >= base && s + n <= base + blen;
}

static void check_request(const struct vhttp_request *r, const struct vhttp_limits *lim)
{
	CHECK(strlen(r->target) == r->target_len);
	CHECK(strlen(r->host) == r->host_len);
	CHECK(r->version_minor <= 1);
	CHECK(r->method_name != NULL);
	CHECK(inside(r->path, r->path_len, r->target, r->target_len) ||
	      (r->path_len == 1 && r->path[0] == '/'));
	CHECK(r->query_len == 0 || inside(r->query, r->query_len, r->target, r->target_len));
	CHECK(r->target_len <= lim->max_header_bytes);
	CHECK(r->body_len <= lim->max_body_bytes);
	CHECK(!(r->chunked && r->has_content_length));
	if (r->has_content_length)
		CHECK(r->content_length <= lim->max_body_bytes);
}

/* Route, run the job like the stages would, encode the answer. */
static void serve(struct vhttp_request *r)
{
	uint64_t n;
	(void)vb_query_u64(r->query, r->query_len, "n", &n);
	(void)vb_query_count(r->query, r->query_len, "n");

	const struct vjob_kind *kind;
	struct vhttp_response resp;
	char head[VHTTP_HEAD_MAX + 64];
	enum vjob_route rt = vjob_route(r->path, r->path_len, r->method_name, &kind);
	if (rt != VJOB_ROUTE_OK) {
		vhttp_response_init(&resp, rt == VJOB_ROUTE_NOT_FOUND ? 404 : 405);
		resp.allow = kind ? kind->allow : NULL;
		CHECK(vhttp_response_text(&resp, NULL, head, sizeof(head)) > 0);
		return;
	}
	struct vjob_config cfg;
	vjob_config_default(&cfg);
	cfg.spin_max_n = 100000; /* keep an input's work small */
	cfg.sleep_max_ms = 1000;
	struct vjob_input in = { .query = r->query, .query_len = r->query_len, .ready = true };
	in.body = vhttp_request_take_body(r, &in.body_len);
	struct vjob *job;
	if (vjob_new(kind, &cfg, &in, &job) < 0)
		return;
	/* deadline 0: the smallest slice every time */
	for (int i = 0; i < 1000 && !vjob_done(job); i++)
		if (vjob_step(job, 0) == VJOB_SLEEP)
			break; /* the timer is the server's business */
	const struct vjob_result *res = vjob_result(job);
	if (res) {
		CHECK(res->status >= 200 && res->status <= 599);
		CHECK(res->content_type != NULL);
		vhttp_response_init(&resp, res->status);
		resp.content_type = res->content_type;
		resp.content_length = res->body_len;
		resp.close = !r->keep_alive;
		resp.version_minor = r->version_minor;
		CHECK(vhttp_response_head(&resp, head, sizeof(head)) > 0);
	} else {
		CHECK(strcmp(kind->name, "sleep") == 0);
	}
	vjob_free(job);
}

/* Parse the stream fed in pieces (piece 0: whole); returns a fingerprint. */
static uint64_t run(const uint8_t *data, size_t size, const struct vhttp_limits *lim,
		    unsigned pieces, uint64_t rng, bool do_serve)
{
	uint64_t h = 0xcbf29ce484222325ull;
	struct vhttp_parser *p;
	CHECK(vhttp_parser_new(lim, &p) == 0);
	size_t off = 0;
	bool stop = false;
	while (!stop) {
		if (off < size) {
			size_t k = size - off;
			if (pieces == 1) {
				k = 1;
			} else if (pieces > 1) {
				rng ^= rng << 13;
				rng ^= rng >> 7;
				rng ^= rng << 17;
				size_t m = 1 + (size_t)(rng % pieces);
				if (k > m)
					k = m;
			}
			size_t took = vhttp_parser_feed(p, data + off, k);
			CHECK(took > 0);
			off += took;
		}
		struct vhttp_request *r;
		enum vhttp_event ev;
		while ((ev = vhttp_parser_next(p, &r)) != VHTTP_EV_MORE) {
			mix_u64(&h, ev);
			if (ev == VHTTP_EV_REQUEST || ev == VHTTP_EV_CONTINUE) {
				CHECK(r != NULL);
				check_request(r, lim);
				mix(&h, r->target, r->target_len);
				mix(&h, r->host, r->host_len);
				mix_u64(&h, r->keep_alive | r->chunked << 1 | r->expect_continue << 2);
				mix_u64(&h, r->method);
				if (ev == VHTTP_EV_CONTINUE) {
					CHECK(r->expect_continue);
					continue;
				}
				mix(&h, r->body ? r->body : (const uint8_t *)"", r->body_len);
				if (do_serve)
					serve(r);
				vhttp_request_free(r);
				continue;
			}
			CHECK(r == NULL);
			if (ev == VHTTP_EV_ERROR) {
				const char *why = NULL;
				int st = vhttp_parser_error(p, &why);
				CHECK(why != NULL);
				CHECK(st == 400 || st == 413 || st == 414 || st == 417 || st == 431 ||
				      st == 501 || st == 503 || st == 505);
				mix_u64(&h, (uint64_t)st);
				char buf[VHTTP_HEAD_MAX + 64];
				struct vhttp_response resp;
				vhttp_response_init(&resp, st);
				resp.close = true;
				CHECK(vhttp_response_text(&resp, NULL, buf, sizeof(buf)) > 0);
			}
			CHECK(vhttp_parser_phase(p) == VHTTP_PHASE_DONE);
			stop = true;
			break;
		}
		if (!stop && off == size) {
			CHECK(vhttp_parser_buffered(p) == 0);
			mix_u64(&h, vhttp_parser_phase(p));
			break;
		}
	}
	vhttp_parser_free(p);
	return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t ctl = data[0];
	data++;
	size--;
	struct vhttp_limits lim;
	vhttp_limits_default(&lim);
	if (ctl & 1)
		lim.max_header_bytes = 200;
	if (ctl & 2)
		lim.max_body_bytes = 50;
	if (ctl & 4)
		lim.read_buf_bytes = 24;
	unsigned pieces = (ctl & 8) ? 1 : 2 + (ctl >> 4) * 4;
	uint64_t whole = run(data, size, &lim, 0, 0, true);
	uint64_t split = run(data, size, &lim, pieces, 0x9E3779B97F4A7C15ull ^ ctl, false);
	CHECK(whole == split);
	return 0;
}
