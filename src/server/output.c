/* SPDX-License-Identifier: MIT */
/*
 * server/output.c: the output side of a connection: the send batch (one
 * sendv of consecutive responses, heads and bodies as iovecs, answers the
 * server makes itself copied into the batch's own buffer), its collection
 * in request order from the reorder slots, the answers of the parse
 * stage (the server's routes, errors, 408, shed 503), and the access log (log.access:
 * a line per response once its batch went out).
 *
 * Threading: everything here runs in the connection's task (task-private
 * state of struct vsrv_conn); the slots are shared with the writers under
 * the ordering of conn.c ([S1]/[S2]).
 */
#include "config.h"
#include "server/internal.h"
#include "base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- the batch */

bool vsrv__batch_open(const struct vsrv_conn *c)
{
	const struct vsrv_batch *out = c->busy ? c->busy->out : NULL;

	return c->tx == VSRV_TX_IDLE && (!out || (out->n < VSRV_BATCH &&
					 out->niov + 3 <= VB_ARRAY_SIZE(out->iov)));
}

bool vsrv__batch_get(struct vsrv_conn *c)
{
	struct vsrv_busy *b;

	if (c->busy && c->busy->out)
		return true;
	if (!vsrv__conn_take_busy(c) || !((b = c->busy)->out = vsrv__batch_alloc(c->srv))) {
		vsrv__conn_abort(c, "out of memory for a response");
		return false;
	}
	vsrv__batch_reset(b->out);
	return true;
}

/* Account n bytes just written at out.buf + buf_len. */
static void batch_add_raw(struct vsrv_conn *c, size_t n)
{
	struct vsrv_batch *b = c->busy->out;
	char *at = b->buf + b->buf_len;

	if (b->niov && (char *)b->iov[b->niov - 1].iov_base + b->iov[b->niov - 1].iov_len == at)
		b->iov[b->niov - 1].iov_len += n;
	else
		b->iov[b->niov++] = (struct iovec){ .iov_base = at, .iov_len = n };
	b->buf_len += n;
	b->bytes += n;
}

static void batch_meta(struct vsrv_conn *c, struct vsrv_job *job, unsigned kind, int status,
		       int64_t t0, bool close, size_t len)
{
	struct vsrv_batch *b = c->busy->out;

	b->len[b->n] = (uint32_t)(len < UINT32_MAX ? len : UINT32_MAX);
	b->jobs[b->n] = job;
	b->kind[b->n] = kind;
	b->status[b->n] = (uint16_t)status;
	b->t0[b->n] = t0;
	b->n++;
	b->close_after |= close;
	if (vb_unlikely(c->busy->trace_seq))
		vsrv__trace_collected(c);
}

static void batch_add_job(struct vsrv_conn *c, struct vsrv_job *job)
{
	struct vsrv_batch *b = c->busy->out;

	b->iov[b->niov++] = (struct iovec){ .iov_base = job->head, .iov_len = job->head_len };
	b->bytes += job->head_len;
	if (job->xhdrs_len) {
		b->iov[b->niov++] = (struct iovec){ .iov_base = (void *)job->xhdrs, .iov_len = job->xhdrs_len };
		b->bytes += job->xhdrs_len;
	}
	if (job->body_len) {
		b->iov[b->niov++] = (struct iovec){ .iov_base = (void *)job->body,
						    .iov_len = job->body_len };
		b->bytes += job->body_len;
	}
	batch_meta(c, job, job->to.kind, job->status, job->to.t0, job->to.close,
		   job->head_len + job->xhdrs_len + job->body_len);
}

void vsrv__batch_free_jobs(struct vsrv *srv, struct vsrv_batch *b)
{
	for (unsigned i = 0; i < b->n; i++) {
		if (b->jobs[i])
			vsrv__job_free(srv, b->jobs[i]);
		b->jobs[i] = NULL;
	}
}

void vsrv__batch_reset(struct vsrv_batch *b)
{
	b->niov = 0;
	b->n = 0;
	b->continues = 0;
	b->close_after = false;
	b->bytes = 0;
	b->buf_len = 0;
}

/* ------------------------------------------------------ the access log */

/* One request's part of its access line. */
struct vsrv_access {
	char method[8];
	char target[120]; /* cut at 119 bytes */
};

void vsrv__access_note(struct vsrv_conn *c, uint64_t seq, const char *method, const char *target,
		       size_t target_len)
{
	struct vsrv_busy *b = c->busy;
	uint32_t mask = c->srv->slot_mask;

	/* Relaxed: a setting on its own (server.c's Ordering block). */
	if (!atomic_load_explicit(&c->srv->live.access_log, memory_order_relaxed))
		return;
	if (!b->alog && !(b->alog = calloc((size_t)mask + 1, sizeof(*b->alog))))
		return; /* no memory: the line says "-" */
	struct vsrv_access *a = &b->alog[seq & mask];
	snprintf(a->method, sizeof(a->method), "%s", method);
	snprintf(a->target, sizeof(a->target), "%.*s", (int)target_len, target);
}

/* The access lines of a batch that went out (its first response is
 * request sent_seq): through the log sink at info, in request order. A
 * response without a noted request (a parse error, or noted before
 * log.access was on) says "-" for method and target. */
static void access_log(struct vsrv_conn *c, const struct vsrv_batch *b, int64_t now)
{
	struct vsrv_access *alog = c->busy->alog;
	int worker = vrt_worker_id();

	for (unsigned i = 0; i < b->n; i++) {
		struct vsrv_access *a = alog ? &alog[(c->busy->sent_seq + i) & c->srv->slot_mask] : NULL;
		vb_info("access: %s %s %d %u bytes %.3f ms worker %d", a && *a->method ? a->method : "-",
			a && *a->method ? a->target : "-", (int)b->status[i], (unsigned)b->len[i],
			(double)(now - b->t0[i]) / 1e6, worker);
		if (a)
			a->method[0] = '\0';
	}
}

void vsrv__access_forget(struct vsrv *srv, struct vsrv_busy *b)
{
	if (b->alog)
		memset(b->alog, 0, ((size_t)srv->slot_mask + 1) * sizeof(*b->alog));
}

/* The batch went out whole. */
bool vsrv__batch_done(struct vsrv_conn *c, int64_t now)
{
	struct vsrv *srv = c->srv;
	struct vsrv_batch *b = c->busy->out;
	bool close_after;

	if (vb_unlikely(c->busy->trace_seq))
		vsrv__trace_sent(c); /* before sent_seq moves */
	for (unsigned i = 0; i < b->n; i++)
		vsrv__count_response(srv, b->kind[i], b->status[i], b->t0[i], now);
	/* Relaxed: a setting on its own (server.c's Ordering block). */
	if (b->n && atomic_load_explicit(&srv->live.access_log, memory_order_relaxed))
		access_log(c, b, now);
	vsrv__batch_free_jobs(srv, b);
	if (b->continues)
		VSRV_ADD(srv, continues, b->continues);
	VSRV_ADD(srv, bytes_out, b->bytes);
	c->busy->sent_seq += b->n;
	close_after = b->close_after;
	vsrv__batch_reset(b);
	if (vsrv__in_flight(c) == 0)
		c->idle_since = now;
	return close_after;
}

/* Move the responses that are next in order from the slots to the batch,
 * and the 100 Continue owed (VSRV_RX_CONTINUE) once every answer before it
 * is in. True when the 100 Continue went in (parsing may go on). */
bool vsrv__batch_collect(struct vsrv_conn *c)
{
	struct vsrv_busy *bz = c->busy;

	while (bz->collect_seq < c->next_seq && vsrv__batch_open(c)) {
		_Atomic(struct vsrv_job *) *slot = &bz->slots[bz->collect_seq & c->srv->slot_mask];
		/* [S2] acquire: pairs with [S1] in vsrv__job_deposit. */
		struct vsrv_job *job = atomic_load_explicit(slot, memory_order_acquire);

		if (!job || !vsrv__batch_get(c))
			break;
		/* Relaxed: see the Ordering block. */
		atomic_store_explicit(slot, NULL, memory_order_relaxed);
		batch_add_job(c, job);
		bz->collect_seq++;
	}
	if (c->rx == VSRV_RX_CONTINUE && bz->collect_seq == c->next_seq && vsrv__batch_open(c) &&
	    vsrv__batch_get(c) && VSRV_OBUF - bz->out->buf_len >= VHTTP_RESPONSE_100_LEN) {
		memcpy(bz->out->buf + bz->out->buf_len, VHTTP_RESPONSE_100, VHTTP_RESPONSE_100_LEN);
		batch_add_raw(c, VHTTP_RESPONSE_100_LEN);
		bz->out->continues++;
		return true;
	}
	return false;
}

/* ------------------------------------------------------------- answers */

/* A head of a text answer without its body (for HEAD requests). */
static int strip_body(char *buf, int n)
{
	char *end = memmem(buf, (size_t)n, "\r\n\r\n", 4);

	return end ? (int)(end + 4 - buf) : n;
}

void vsrv__reply_init(struct vsrv *srv, struct vhttp_response *r, const struct vsrv_reply_to *to,
		      int status)
{
	vhttp_response_init(r, status);
	r->version_minor = to->version_minor;
	r->close = to->close || vsrv__closing(srv);
}

/* Put an encoded job (head, header fields, body) in request order: straight
 * into the batch, copied, when it is next in order and fits (the job is
 * freed), otherwise in the request's slot, collected in turn. */
static void respond_encoded(struct vsrv_conn *c, struct vsrv_job *job)
{
	struct vsrv *srv = c->srv;
	size_t n = job->head_len + job->xhdrs_len + job->body_len;

	if (job->to.seq == c->busy->collect_seq && vsrv__batch_open(c) && vsrv__batch_get(c) &&
	    VSRV_OBUF - c->busy->out->buf_len >= n) {
		char *dst = c->busy->out->buf + c->busy->out->buf_len;

		memcpy(dst, job->head, job->head_len);
		if (job->xhdrs_len)
			memcpy(dst + job->head_len, job->xhdrs, job->xhdrs_len);
		if (job->body_len)
			memcpy(dst + job->head_len + job->xhdrs_len, job->body, job->body_len);
		batch_add_raw(c, n);
		batch_meta(c, NULL, job->to.kind, job->status, job->to.t0, job->to.close, n);
		c->busy->collect_seq++;
		vsrv__job_free(srv, job);
		return;
	}
	/* A job the slot owns: no connection reference (we are the task). */
	vsrv__job_stage(srv, job, VSRV_J_SEND);
	/* Relaxed: the task stores into its own slot (conn.c's Ordering block). */
	atomic_store_explicit(&c->busy->slots[job->to.seq & srv->slot_mask], job, memory_order_relaxed);
}

/*
 * Answer `to` from the parse stage with r's status and a short text body
 * (text, or "<status> <reason>\n" when NULL): straight into the batch when
 * it is next in order and fits, otherwise through a job in the request's
 * slot, collected in turn.
 */
static void respond(struct vsrv_conn *c, const struct vsrv_reply_to *to, struct vhttp_response *r,
		    const char *text)
{
	struct vsrv *srv = c->srv;
	struct vsrv_job *job;
	int n;

	/* An answer is work: the busy block holds its place in order. */
	if (!vsrv__conn_take_busy(c)) {
		vsrv__conn_abort(c, "out of memory for a response");
		return;
	}
	if (to->seq == c->busy->collect_seq && vsrv__batch_open(c) && vsrv__batch_get(c)) {
		char *dst = c->busy->out->buf + c->busy->out->buf_len;
		size_t room = VSRV_OBUF - c->busy->out->buf_len;

		n = vhttp_response_text(r, text, dst, room);
		if (n >= 0 && to->head_only)
			n = strip_body(dst, n);
		if (n >= 0) {
			batch_add_raw(c, (size_t)n);
			batch_meta(c, NULL, to->kind, r->status, to->t0, r->close, (size_t)n);
			c->busy->collect_seq++;
			return;
		}
	}
	if (!(job = vsrv__job_new(srv, to))) {
		vsrv__conn_abort(c, "out of memory for a response");
		return;
	}
	job->status = r->status;
	job->to.close = r->close;
	n = vhttp_response_text(r, text, job->head, sizeof(job->head));
	if (n >= 0 && to->head_only)
		n = strip_body(job->head, n);
	VB_BUG_ON(n < 0); /* our own heads always fit VHTTP_HEAD_MAX */
	job->head_len = (uint16_t)n;
	respond_encoded(c, job);
}

void vsrv__respond_job(struct vsrv_conn *c, struct vsrv_job *job)
{
	vsrv__job_encode(c->srv, job);
	respond_encoded(c, job);
}

void vsrv__respond_status(struct vsrv_conn *c, const struct vsrv_reply_to *to, int status,
			  const char *allow)
{
	struct vhttp_response r;
	unsigned retry_after_s = vsrv__live(c->srv, retry_after_s);

	vsrv__reply_init(c->srv, &r, to, status);
	r.allow = allow;
	if (status == 503 && retry_after_s)
		r.retry_after_s = (int)retry_after_s;
	respond(c, to, &r, NULL);
}

void vsrv__respond_text(struct vsrv_conn *c, const struct vsrv_reply_to *to, int status, const char *text)
{
	struct vhttp_response r;

	vsrv__reply_init(c->srv, &r, to, status);
	respond(c, to, &r, text);
}

/* An answer to a request that never parsed whole (an error, 408): it
 * takes the next request number, answers in HTTP/1.1 and closes. */
void vsrv__respond_unparsed(struct vsrv_conn *c, int status, int64_t now)
{
	struct vsrv_reply_to to = {
		.seq = c->next_seq++,
		.t0 = now,
		.kind = c->srv->kind_other,
		.version_minor = 1,
		.close = true,
	};

	VSRV_INC(c->srv, requests);
	vsrv__respond_status(c, &to, status, NULL);
}
