/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz_http.c: libFuzzer harness for the request path below the
 * sockets: arbitrary bytes through http/parser, then what the server's
 * per-request code (server/request.c vsrv__request, server/output.c) does with
 * each event, through the same public calls: the server's own routes
 * (/healthz, /readyz and /livez with the server's ready/alive flags),
 * routing (404, 405 with Allow), query parsing, the job (created with the
 * server's live limits, stepped slice by slice), the response head (inline
 * text answers, HEAD without body, 503 with Retry-After, 100 Continue) and
 * the error answers of the parser. vsrv__request itself needs a connection
 * task on a running worker: not reachable without sockets.
 * Built by scripts/fuzz with clang -fsanitize=fuzzer,address,undefined;
 * `make check` replays tests/fuzz/corpus/http through it (replay.c).
 *
 * Input: byte 0 chooses the limits (bits 0-2), how the rest is split into
 * reads (bits 3-7), and the server's state: not ready (bit 6: /readyz 503),
 * a worker stalled (bit 7: /livez 503); the rest is the byte stream of one
 * connection. Besides the sanitizers, it checks properties and aborts when
 * one fails:
 *  - the same stream fed whole and in pieces gives the same events;
 *  - requests are self-consistent (lengths, path and query inside the target,
 *    body within the limit), errors carry a status of the documented set;
 *  - every job finishes with a status and a head that encodes;
 *  - every answer (head, or head and text body) parses back with llhttp as
 *    one HTTP/1.1 response with that status, Content-Length equal to its
 *    body (HEAD: none sent), and Connection: close exactly when it closes.
 * Single-threaded, like libFuzzer's default.
 */
#include "config.h"
#include "fuzz.h"
#include "http/parser.h"
#include "base/query.h"
#include "http/response.h"
#include "jobs/job.h"

#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	/* the kept fields: n_fields lines "name:value\n", within the limit */
	CHECK(strlen(r->fields) == r->fields_len);
	CHECK(r->target_len + r->fields_len <= lim->max_header_bytes);
	uint32_t lines = 0;
	for (const char *l = r->fields, *end = r->fields + r->fields_len; l < end; lines++) {
		const char *nl = memchr(l, '\n', (size_t)(end - l));
		const char *colon = memchr(l, ':', (size_t)(end - l));
		CHECK(nl != NULL && colon != NULL && colon > l && colon < nl);
		l = nl + 1;
	}
	CHECK(lines == r->n_fields);
}

/* What llhttp saw of one response. */
struct seen {
	bool complete, keep_alive, with_body;
	uint64_t body, content_length;
};

static int on_body(llhttp_t *p, const char *at, size_t len)
{
	((struct seen *)p->data)->body += len;
	return 0;
}

static int on_complete(llhttp_t *p)
{
	((struct seen *)p->data)->complete = true;
	return 0;
}

/* Read at the end of the head (llhttp resets them per message); 1: a
 * HEAD answer, the head says Content-Length, no body follows. */
static int on_head(llhttp_t *p)
{
	struct seen *s = p->data;
	s->keep_alive = llhttp_should_keep_alive(p);
	s->content_length = p->content_length;
	return s->with_body ? 0 : 1;
}

/*
 * buf[0..n) is what the server sends for one request: a head (with_body
 * false: the body goes separately, clen bytes, or none for HEAD) or a head
 * and its text body. It must be exactly one response of `status`.
 */
static void check_answer(const char *buf, int n, int status, bool close, bool with_body, uint64_t clen)
{
	llhttp_settings_t st;
	llhttp_t p;
	struct seen seen = { .with_body = with_body };

	CHECK(n > 0);
	llhttp_settings_init(&st);
	st.on_body = on_body;
	st.on_message_complete = on_complete;
	st.on_headers_complete = on_head;
	llhttp_init(&p, HTTP_RESPONSE, &st);
	p.data = &seen;
	const char *end = memmem(buf, (size_t)n, "\r\n\r\n", 4);
	CHECK(end != NULL);
	size_t len = with_body ? (size_t)n : (size_t)(end + 4 - buf);
	enum llhttp_errno e = llhttp_execute(&p, buf, len);
	if (e != HPE_OK)
		fprintf(stderr, "fuzz_http: answer does not parse (%s): %.*s\n", llhttp_get_error_reason(&p), n, buf);
	CHECK(e == HPE_OK);
	CHECK(seen.complete);
	CHECK(p.status_code == status);
	CHECK(p.http_major == 1 && p.http_minor == 1);
	CHECK(!seen.keep_alive == close);
	if (with_body)
		CHECK(seen.body == seen.content_length && seen.body == (uint64_t)n - (uint64_t)(end + 4 - buf));
	else
		CHECK(seen.content_length == clen);
}

/* server/output.c: an answer the server makes itself (404, 405, 503):
 * head and text body, the body left out for HEAD. */
static void answer_text(const struct vhttp_request *r, int status, const char *text, const char *allow,
			int retry_after_s)
{
	struct vhttp_response resp;
	char buf[VHTTP_HEAD_MAX + 64];
	bool head_only = r->method == VHTTP_M_HEAD;

	vhttp_response_init(&resp, status);
	resp.version_minor = r->version_minor;
	resp.close = !r->keep_alive;
	resp.allow = allow;
	if (status == 503)
		resp.retry_after_s = retry_after_s;
	int n = vhttp_response_text(&resp, text, buf, sizeof(buf));
	CHECK(n > 0);
	/* HEAD: the server strips the text body, Content-Length stays. */
	const char *end = memmem(buf, (size_t)n, "\r\n\r\n", 4);
	CHECK(end != NULL);
	check_answer(buf, n, status, resp.close, !head_only, (uint64_t)(buf + n - (end + 4)));
	if (allow)
		CHECK(memmem(buf, (size_t)n, allow, strlen(allow)) != NULL);
}

static void answer_status(const struct vhttp_request *r, int status, const char *allow, int retry_after_s)
{
	answer_text(r, status, NULL, allow, retry_after_s);
}

/* server/request.c's own routes: true when the path is one (answered). */
static bool serve_route(const struct vhttp_request *r, bool ready, bool alive)
{
	static const char *const paths[] = { "/healthz", "/readyz", "/livez" };
	size_t i;

	for (i = 0; i < 3; i++)
		if (strlen(paths[i]) == r->path_len && memcmp(paths[i], r->path, r->path_len) == 0)
			break;
	if (i == 3)
		return false;
	if (r->method != VHTTP_M_GET && r->method != VHTTP_M_HEAD)
		answer_status(r, 405, "GET, HEAD", 0);
	else if (i == 0)
		answer_text(r, 200, "ok\n", NULL, 0);
	else if (i == 1)
		answer_text(r, ready ? 200 : 503, ready ? "ready\n" : "not ready\n", NULL, 0);
	else
		answer_text(r, alive ? 200 : 503, alive ? "alive\n" : "stalled\n", NULL, 0);
	return true;
}

/* Route, run the job like the stages would, encode the answer. */
static void serve(struct vhttp_request *r, bool ready, bool alive)
{
	uint64_t n;
	(void)vb_query_u64(r->query, r->query_len, "n", &n);
	(void)vb_query_count(r->query, r->query_len, "n");

	const struct vjob_kind *kind = NULL;
	struct vhttp_response resp;
	char head[VHTTP_HEAD_MAX + 64];
	if (serve_route(r, ready, alive))
		return;
	enum vjob_route rt = vjob_route(r->path, r->path_len, r->method_name, &kind);
	if (rt == VJOB_ROUTE_NOT_FOUND) {
		answer_status(r, 404, NULL, 0);
		return;
	}
	CHECK(kind != NULL);
	CHECK(vjob_kind_index(kind) >= 0 && (size_t)vjob_kind_index(kind) < vjob_kind_count());
	if (rt == VJOB_ROUTE_BAD_METHOD) {
		CHECK(kind->allow != NULL);
		answer_status(r, 405, kind->allow, 0);
		return;
	}
	struct vjob_input in = {
		.method = r->method_name, .path = r->path, .path_len = r->path_len,
		.query = r->query, .query_len = r->query_len,
		.fields = r->fields, .fields_len = r->fields_len, .n_fields = r->n_fields,
	};
	in.body = vhttp_request_take_body(r, &in.body_len);
	struct vjob *job;
	if (vjob_new(kind, &in, &job) < 0) {
		answer_status(r, 503, NULL, 1);
		return;
	}
	/* deadline 0: the smallest slice every time */
	for (int i = 0; i < 1000 && !vjob_done(job); i++)
		if (vjob_step(job, 0) == VJOB_SLEEP)
			break; /* the timer is the server's business */
	const struct vjob_result *res = vjob_result(job);
	if (res) {
		CHECK(res->status >= 200 && res->status <= 599);
		CHECK(res->hdrs_len > 0 && memcmp(res->hdrs + res->hdrs_len, "\r\n", 2) == 0);
		vhttp_response_init(&resp, res->status);
		resp.fields = res->hdrs;
		resp.fields_len = res->hdrs_len;
		resp.content_length = res->body_len;
		resp.close = !r->keep_alive;
		resp.version_minor = r->version_minor;
		int hl = vhttp_response_head(&resp, head, sizeof(head));
		CHECK(hl > 0);
		check_answer(head, hl, res->status, resp.close, false, res->body_len);
	} else {
		CHECK(strcmp(kind->name, "sleep") == 0);
	}
	vjob_free(job);
}

/* Parse the stream fed in pieces (piece 0: whole); returns a fingerprint. */
static uint64_t run(const uint8_t *data, size_t size, const struct vhttp_limits *lim,
		    unsigned pieces, uint64_t rng, bool do_serve, bool ready, bool alive)
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
				mix(&h, r->fields, r->fields_len);
				mix_u64(&h, r->keep_alive | r->chunked << 1 | r->expect_continue << 2);
				mix_u64(&h, r->method);
				if (ev == VHTTP_EV_CONTINUE) {
					CHECK(r->expect_continue);
					if (do_serve)
						check_answer(VHTTP_RESPONSE_100, (int)VHTTP_RESPONSE_100_LEN, 100, false,
							     true, 0);
					continue;
				}
				mix(&h, r->body ? r->body : (const uint8_t *)"", r->body_len);
				if (do_serve)
					serve(r, ready, alive);
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
				int n = vhttp_response_text(&resp, NULL, buf, sizeof(buf));
				CHECK(n > 0);
				check_answer(buf, n, st, true, true, 0);
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

/* The registry as the daemon builds it, once: the built-in module with
 * small limits (an input's work stays small), frozen. */
static void jobs_setup(void)
{
	static bool done;
	struct vjob_mod *m = vjob_mod_builtin();
	char err[256];

	if (done)
		return;
	done = true;
	CHECK(vjob_mod_key_set(m, (size_t)vjob_mod_key_find(m, "spin_max_n"), "100000", err, sizeof(err)) == 0);
	CHECK(vjob_mod_key_set(m, (size_t)vjob_mod_key_find(m, "sleep_max_ms"), "1000", err, sizeof(err)) == 0);
	CHECK(vjob_mod_start(m, 0, err, sizeof(err)) == 0);
	vjob_registry_freeze();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	jobs_setup();
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
	bool ready = !(ctl & 0x40), alive = !(ctl & 0x80);
	uint64_t whole = run(data, size, &lim, 0, 0, true, ready, alive);
	uint64_t split = run(data, size, &lim, pieces, 0x9E3779B97F4A7C15ull ^ ctl, false, ready, alive);
	CHECK(whole == split);
	return 0;
}
