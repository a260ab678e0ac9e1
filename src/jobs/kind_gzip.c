/* SPDX-License-Identifier: MIT */
/*
 * jobs/kind_gzip.c: POST /v1/gzip?level=1..9 -> 200 application/gzip, the
 * body compressed by zlib in the gzip format (RFC 1952). level defaults to 6
 * (zlib's default); anything but one digit 1..9, or level given twice, is a
 * 400. Runs in slices: input goes to deflate in pieces and the deadline is
 * checked after each. deflate's cost per byte varies a thousandfold with
 * level and data (level 9 on repetitive input spends microseconds per
 * byte), so the piece size adapts: it aims at a quarter of the slice,
 * halving or shrinking in proportion after a slow piece and doubling after
 * a quick one. The deflate stream (about 256 KiB) and the output buffer
 * (deflateBound of the whole body, so the stream never waits for room) are
 * allocated at the first step and the stream is released as soon as the
 * job is done. Threading: the job contract of <voltd/module.h>.
 */
#include "jobs/builtin.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include <zlib.h>

#define GZIP_PIECE_FIRST 4096
#define GZIP_PIECE_MIN 64
#define GZIP_PIECE_MAX 65536
#define GZIP_WINDOW_BITS (15 + 16) /* 32 KiB window, gzip wrapper */
#define GZIP_MEM_LEVEL 8

struct gzip_state {
	int level;
	bool live; /* zs initialised */
	z_stream zs;
	uint8_t *out;
	size_t out_cap;
	size_t in_off;
	size_t piece; /* input bytes per deflate call (adaptive) */
};

static int gzip_start(struct voltd_job *job, void *state)
{
	struct gzip_state *s = state;
	const char *v;
	size_t n;

	/* zlib counts in 32-bit uInt: keep far below (max_body_bytes is
	 * normally a few MiB). */
	if (voltd->body(job, &n) && n > ((size_t)1 << 30))
		return voltd->respondf(job, 413, "body too large for gzip\n");
	s->level = 6;
	s->piece = GZIP_PIECE_FIRST;
	if (voltd->query_param(job, "level", &v, &n) == 0) {
		if (n != 1 || v[0] < '1' || v[0] > '9' || vjob_builtin_query_count(job, "level") > 1)
			return voltd->respondf(job, 400, "level: one of 1..9\n");
		s->level = v[0] - '0';
	}
	return VOLTD_STEP_MORE;
}

static int gzip_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	struct gzip_state *s = state;
	size_t len;
	const uint8_t *body = voltd->body(job, &len);

	if (!s->live) {
		if (deflateInit2(&s->zs, s->level, Z_DEFLATED, GZIP_WINDOW_BITS, GZIP_MEM_LEVEL,
				 Z_DEFAULT_STRATEGY) != Z_OK)
			return -ENOMEM;
		s->live = true;
		s->out_cap = deflateBound(&s->zs, (uLong)len);
		s->out = malloc(s->out_cap);
		if (!s->out)
			return -ENOMEM;
		s->zs.next_out = s->out;
		s->zs.avail_out = (uInt)s->out_cap;
	}
	int64_t t = voltd->now_ns();
	int64_t target = (deadline_ns - t) / 4; /* <= 0: one piece, no adapting */
	for (;;) {
		size_t k = len - s->in_off;
		if (k > s->piece)
			k = s->piece;
		bool last = s->in_off + k == len;
		s->zs.next_in = body ? (Bytef *)body + s->in_off : NULL;
		s->zs.avail_in = (uInt)k;
		int rc = deflate(&s->zs, last ? Z_FINISH : Z_NO_FLUSH);
		/* With avail_out >= deflateBound the input is always taken whole
		 * and Z_FINISH completes in this call. */
		if (rc == Z_STREAM_ERROR || s->zs.avail_in != 0)
			return -EIO;
		s->in_off += k;
		if (last) {
			if (rc != Z_STREAM_END)
				return -EIO;
			break;
		}
		int64_t now = voltd->now_ns(), took = now - t;
		t = now;
		if (target > 0 && k == s->piece) {
			if (took > target) {
				size_t p = (size_t)((double)s->piece * (double)target / (double)took);
				s->piece = p < GZIP_PIECE_MIN ? GZIP_PIECE_MIN : p;
			} else if (took < target / 2 && s->piece < GZIP_PIECE_MAX) {
				s->piece *= 2;
			}
		}
		if (now >= deadline_ns)
			return VOLTD_STEP_MORE;
	}
	uint8_t *out = s->out;
	s->out = NULL;
	return voltd->respond(job, 200, "application/gzip", out, s->zs.total_out, VOLTD_BODY_MALLOC);
}

static void gzip_fini(struct voltd_job *job, void *state)
{
	struct gzip_state *s = state;

	(void)job;
	if (s->live)
		deflateEnd(&s->zs);
	s->live = false;
	free(s->out);
	s->out = NULL;
}

const struct voltd_kind vjob_builtin_gzip = {
	.name = "gzip",
	.route = "/v1/gzip",
	.methods = "POST",
	.state_size = sizeof(struct gzip_state),
	.start = gzip_start,
	.step = gzip_step,
	.fini = gzip_fini,
	.doc = "the body compressed in the gzip format, in slices",
};
