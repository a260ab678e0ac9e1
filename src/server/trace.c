/* SPDX-License-Identifier: MIT */
/*
 * server/trace.c: per-request timestamps at each hand-over, sampled
 * (doc/server.md, "Tracing"): where a request's time goes under load,
 * segment by segment, light and heavy apart (bench/attrib reads them).
 *
 * One request in `every` (a countdown per worker thread, at parse) gets
 * its connection's trace record; a connection has one, for one request in
 * flight at a time (a pick while it is busy is skipped and counted). The
 * stamps are plain stores into the record by whoever holds the request:
 * the connection task (parse, collect, send, end), an exec task (taken,
 * slices), a writer (taken, deposit), the I/O driver (send handed over,
 * completed: vio_conn_trace_tx). Those hand-overs order them already (the
 * channels, the slot's [S1]/[S2], the op's [IO1]/[IO2]), so a record needs
 * no atomics of its own. When the connection collects the send, the
 * record is copied to the server's log (trace_mu, a FIFO of
 * VSRV_TRACE_LOG records; full: the record is lost, counted), which
 * vsrv_trace_take empties. Off, the request path pays a relaxed load at
 * parse, a byte test in the stages and a pointer test on the output path.
 */
#include "config.h"
#include "server/internal.h"
#include "base/query.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const point_names[VSRV_TP_N] = {
	[VSRV_TP_CLIENT] = "client",   [VSRV_TP_REAP] = "reap",       [VSRV_TP_RUN] = "run",
	[VSRV_TP_PARSED] = "parsed",   [VSRV_TP_QUEUED] = "queued",   [VSRV_TP_EXEC] = "exec",
	[VSRV_TP_SLICE1] = "slice1",   [VSRV_TP_DONE] = "done",       [VSRV_TP_WRITER] = "writer",
	[VSRV_TP_DEPOSIT] = "deposit", [VSRV_TP_COLLECT] = "collect", [VSRV_TP_SEND] = "send",
	[VSRV_TP_ENTER] = "enter",     [VSRV_TP_SENT] = "sent",       [VSRV_TP_END] = "end",
};

const char *vsrv_trace_point_name(unsigned p)
{
	return p < VSRV_TP_N ? point_names[p] : NULL;
}

/* Requests left before the next pick, per worker thread (and for any
 * other thread that parses: none does). */
static __thread uint32_t countdown;

static int8_t worker_id(void)
{
	int w = vrt_worker_id();

	return (int8_t)(w >= 0 && w < INT8_MAX ? w : -1);
}

bool vsrv__trace_pick(struct vsrv_conn *c, const struct vhttp_request *req, uint64_t seq,
		      int64_t now)
{
	struct vsrv *srv = c->srv;
	/* Relaxed: see vsrv__trace_begin. */
	uint32_t every = atomic_load_explicit(&srv->live.trace_every, memory_order_relaxed);
	struct vsrv_trace *tr;
	uint64_t t0;

	if (countdown > every)
		countdown = every; /* made rarer meanwhile */
	if (countdown > 1) {
		countdown--;
		return false;
	}
	countdown = every;
	if (c->busy->trace_seq) {
		VSRV_INC(srv, trace_skipped); /* its record is taken */
		return false;
	}
	if (!c->busy->trace && !(c->busy->trace = malloc(sizeof(*c->busy->trace))))
		return false;
	tr = c->busy->trace;
	memset(tr, 0, sizeof(*tr));
	memset(tr->r.worker, -1, sizeof(tr->r.worker));
	/* The client's own send time, when it says (same host, same clock:
	 * bench/mixload -T); kinds ignore parameters they do not know. */
	if (vb_query_u64(req->query, req->query_len, "trace_t0", &t0) == 0 && t0 < INT64_MAX)
		tr->r.t[VSRV_TP_CLIENT] = (int64_t)t0;
	tr->r.t[VSRV_TP_REAP] = vio_conn_rx_at(&c->io);
	tr->r.t[VSRV_TP_RUN] = now;
	tr->r.t[VSRV_TP_PARSED] = vb_now_ns();
	tr->r.worker[VSRV_TW_PARSE] = worker_id();
	c->busy->trace_seq = seq + 1;
	VSRV_INC(srv, trace_sampled);
	return true;
}

void vsrv__trace_mark(struct vsrv_trace *tr, enum vsrv_trace_point p)
{
	tr->r.t[p] = vb_now_ns();
	if (p == VSRV_TP_EXEC)
		tr->r.worker[VSRV_TW_EXEC] = worker_id();
	else if (p == VSRV_TP_WRITER)
		tr->r.worker[VSRV_TW_WRITER] = worker_id();
}

void vsrv__trace_slice(struct vsrv_trace *tr, int64_t start, bool done)
{
	int64_t end = vb_now_ns();

	/* The exec task's clock for a slice is read at the top of its loop,
	 * before it takes a job: not before the job was taken. */
	if (start < tr->r.t[VSRV_TP_EXEC])
		start = tr->r.t[VSRV_TP_EXEC];
	if (!tr->r.slices++)
		tr->r.t[VSRV_TP_SLICE1] = start;
	else if (start - tr->slice_end > tr->r.gap_max_ns)
		tr->r.gap_max_ns = start - tr->slice_end;
	tr->r.run_ns += end - start;
	tr->slice_end = end;
	if (done)
		tr->r.t[VSRV_TP_DONE] = end;
}

/* Is the traced request in the batch (its index there, else -1)? */
static int in_batch(const struct vsrv_conn *c)
{
	uint64_t i;

	if (!c->busy->trace_seq || !c->busy->out)
		return -1;
	i = c->busy->trace_seq - 1 - c->busy->sent_seq;
	return i < c->busy->out->n ? (int)i : -1;
}

void vsrv__trace_collected(struct vsrv_conn *c)
{
	/* The response just added is the batch's last. */
	if (c->busy->trace_seq && c->busy->trace_seq - 1 == c->busy->sent_seq + c->busy->out->n - 1)
		c->busy->trace->r.t[VSRV_TP_COLLECT] = vb_now_ns();
}

void vsrv__trace_send(struct vsrv_conn *c)
{
	if (in_batch(c) < 0)
		return;
	c->busy->trace->r.t[VSRV_TP_SEND] = c->busy->tx_since;
	c->busy->trace->r.worker[VSRV_TW_SEND] = worker_id();
	vio_conn_trace_tx(&c->io, &c->busy->trace->r.t[VSRV_TP_ENTER]);
}

void vsrv__trace_sent(struct vsrv_conn *c)
{
	struct vsrv *srv = c->srv;
	struct vsrv_trace *tr = c->busy->trace;
	int i = in_batch(c);

	if (i < 0)
		return;
	static_assert(VSRV_TP_SENT == VSRV_TP_ENTER + 1, "vio_conn_trace_tx's pair");
	vio_conn_trace_tx(&c->io, NULL);
	tr->r.t[VSRV_TP_END] = vb_now_ns();
	tr->r.kind = c->busy->out->kind[i];
	tr->r.status = c->busy->out->status[i];
	c->busy->trace_seq = 0;
	pthread_mutex_lock(&srv->trace_mu);
	if (srv->trace_log && srv->trace_len < VSRV_TRACE_LOG) {
		srv->trace_log[(srv->trace_head + srv->trace_len++) % VSRV_TRACE_LOG] = tr->r;
		srv->trace_finished++;
	} else {
		srv->trace_lost++;
	}
	pthread_mutex_unlock(&srv->trace_mu);
}

int vsrv_trace_set(struct vsrv *srv, unsigned every)
{
	int rc = 0;

	pthread_mutex_lock(&srv->trace_mu);
	if (every && !srv->trace_log &&
	    !(srv->trace_log = calloc(VSRV_TRACE_LOG, sizeof(*srv->trace_log))))
		rc = -ENOMEM;
	pthread_mutex_unlock(&srv->trace_mu);
	if (rc == 0)
		/* Relaxed: a setting on its own; a record finishing before
		 * the log exists is lost (counted), never written anywhere. */
		atomic_store_explicit(&srv->live.trace_every, every, memory_order_relaxed);
	return rc;
}

unsigned vsrv_trace_take(struct vsrv *srv, struct vsrv_trace_rec *out, unsigned max,
			 struct vsrv_trace_status *st)
{
	unsigned n = 0;

	pthread_mutex_lock(&srv->trace_mu);
	while (n < max && srv->trace_len) {
		out[n++] = srv->trace_log[srv->trace_head];
		srv->trace_head = (srv->trace_head + 1) % VSRV_TRACE_LOG;
		srv->trace_len--;
	}
	if (st) {
		st->pending = srv->trace_len;
		st->finished = srv->trace_finished;
		st->lost = srv->trace_lost;
	}
	pthread_mutex_unlock(&srv->trace_mu);
	if (st) {
		struct vsrv_stats *s = vsrv_stats_new(srv);

		/* Relaxed: a setting on its own. */
		st->every = atomic_load_explicit(&srv->live.trace_every, memory_order_relaxed);
		st->sampled = st->skipped = 0;
		if (s) {
			vsrv_stats_snapshot(srv, s);
			st->sampled = s->trace_sampled;
			st->skipped = s->trace_skipped;
			free(s);
		}
	}
	return n;
}
