/* SPDX-License-Identifier: MIT */
/*
 * server/conn.c: the connection task, the parse stage (doc/ARCHITECTURE.md §5) and
 * the sending end of the write stage (its batch and answers: output.c).
 * One task per accepted socket:
 *   - reads into the parser's buffer (a recv is started only when every
 *     buffered byte has been parsed, so the buffer never moves under it);
 *   - turns each request into a job with the next sequence number: the
 *     ones the server answers itself (/healthz, /readyz, 404, 405, parse
 *     errors, 408, a shed 503, every 400 a kind decides at once) go straight
 *     to the output, the others onto `jobs` (wait: stop parsing and reading
 *     until there is room; shed: 503 with Retry-After);
 *   - collects responses in sequence order, from its own answers and from
 *     the reorder slots the writers fill, into one batch per sendv (head and
 *     body iovecs, never copied), at most max_pipeline requests in flight;
 *     a send that nothing but the next request waits for finishes quietly
 *     (no wakeup: it is collected when that request arrives);
 *   - keeps one lazily armed timer for the header, body, idle, send and
 *     linger deadlines, and closes when the exchange is over (the send
 *     deadline moves while the client acknowledges bytes: send_timeout_ms
 *     bounds a send without progress, not a long one).
 *
 * Threading: everything below `task-private` in struct vsrv_conn belongs to
 * the task (one poll at a time, any worker). Writers touch only the slots,
 * `dead` and the task's reference count (see stages.c for the slot
 * ordering [S1]/[S2]); drop() runs when the last reference is gone, on the
 * thread that released it.
 *
 * Ordering
 * [S2] task: slot load (acquire) pairs with the writer's [S1] store; the
 *      slot is then cleared with a relaxed store: only the task (and, after
 *      the last reference, drop()) reads a filled slot, and a writer only
 *      stores into the empty slot of its own sequence number.
 * conn->dead: stored relaxed (advice for exec and writers; see stages.c).
 */
#include "config.h"
#include "server/internal.h"
#include "base/time.h"

#include <errno.h>
#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_acked */
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Input read and thrown away after an error answer, before closing, so
 * the peer sees the answer rather than a reset. */
#define LINGER_MS 2000
#define LINGER_BYTES (1u << 20)

struct vb_ratelimit vsrv__conn_rl = VB_RATELIMIT_INIT(5000, 10);

void vsrv__conn_abort(struct vsrv_conn *c, const char *reason)
{
	if (!c->aborting) {
		c->aborting = true;
		c->close_reason = reason;
	}
	c->rd = VSRV_RD_DONE;
}

/* ------------------------------------------- parser and slots, lazily */

/* This worker's cache block; NULL on another thread (no cache there). */
static struct vsrv_wstats *cache_ws(struct vsrv *srv)
{
	int w = vrt_worker_id();

	return w >= 0 && (unsigned)w < srv->nworkers ? &srv->ws[w] : NULL;
}

/* Bytes arrived: make sure there is a parser and slots (this worker's
 * cache first). false: no memory. */
static bool conn_take_rx(struct vsrv_conn *c)
{
	struct vsrv *srv = c->srv;
	struct vsrv_wstats *ws;

	if (c->parser && c->slots)
		return true;
	ws = cache_ws(srv);
	if (!c->slots) {
		if (ws && ws->n_slots)
			c->slots = ws->slots[--ws->n_slots];
		else if (!(c->slots = calloc(c->slot_mask + 1, sizeof(*c->slots))))
			return false;
	}
	if (!c->parser) {
		if (ws && ws->n_parsers)
			c->parser = ws->parsers[--ws->n_parsers];
		else if (vhttp_parser_new(&srv->limits, &c->parser) < 0)
			return false;
	}
	return true;
}

bool vsrv__batch_get(struct vsrv_conn *c)
{
	struct vsrv_wstats *ws;

	if (c->out)
		return true;
	ws = cache_ws(c->srv);
	if (ws && ws->n_batches)
		c->out = ws->batches[--ws->n_batches];
	else if (!(c->out = malloc(sizeof(*c->out)))) {
		vsrv__conn_abort(c, "out of memory for a response");
		return false;
	}
	vsrv__batch_reset(c->out);
	return true;
}

/* Give the parser back when it holds nothing (between requests) and no
 * read into it is under way, the slots once there is no parser and every
 * request parsed is collected (no job of the connection is anywhere
 * else), the batch when it is empty and no send is under way: an idle
 * connection holds no request buffers. All are empty when given back. */
static void conn_give_back(struct vsrv_conn *c)
{
	struct vsrv_wstats *ws = NULL;

	if (c->out && !c->tx_busy && c->out->niov == 0) {
		VB_BUG_ON(c->out->n != 0);
		ws = cache_ws(c->srv);
		if (ws && ws->n_batches < VSRV_CACHE)
			ws->batches[ws->n_batches++] = c->out;
		else
			free(c->out);
		c->out = NULL;
	}
	if (c->parser && !c->rx_busy && !c->cont_pending &&
	    vhttp_parser_phase(c->parser) == VHTTP_PHASE_IDLE) {
		if (!ws)
			ws = cache_ws(c->srv);
		if (ws && ws->n_parsers < VSRV_PARSER_CACHE) {
			vhttp_parser_reset(c->parser);
			ws->parsers[ws->n_parsers++] = c->parser;
		} else {
			vhttp_parser_free(c->parser);
		}
		c->parser = NULL;
		c->parsed_all = true; /* it held nothing */
	}
	if (!c->parser && c->slots && c->collect_seq == c->next_seq && !c->pending) {
		if (!ws)
			ws = cache_ws(c->srv);
		if (ws && ws->n_slots < VSRV_CACHE)
			ws->slots[ws->n_slots++] = (void *)c->slots;
		else
			free((void *)c->slots);
		c->slots = NULL;
	}
}

void vsrv__cache_free(struct vsrv_wstats *ws)
{
	while (ws->n_parsers)
		vhttp_parser_free(ws->parsers[--ws->n_parsers]);
	while (ws->n_slots)
		free(ws->slots[--ws->n_slots]);
	while (ws->n_batches)
		free(ws->batches[--ws->n_batches]);
}

static enum vhttp_phase conn_parser_phase(const struct vsrv_conn *c)
{
	return c->parser ? vhttp_parser_phase(c->parser) : VHTTP_PHASE_IDLE;
}

/* The parser's body buffer, charged to the budget as it grows. */
static void conn_sync_held(struct vsrv_conn *c)
{
	size_t held = c->parser ? vhttp_parser_body_held(c->parser) : 0;

	if (held != c->rx_held) {
		vsrv__hold(c->srv, (int64_t)held - (int64_t)c->rx_held);
		c->rx_held = held;
	}
}

/*
 * on_full = wait: may the connection read? Over max_inflight_bytes it
 * reads nothing, unless the body under way is reserved already: a body is
 * reserved whole (its Content-Length) before its first byte is read, so a
 * body once started always completes and the budget cannot deadlock on
 * half-read bodies. A chunked body is charged as it grows.
 */
static bool budget_blocks(struct vsrv_conn *c)
{
	size_t want;

	if (c->srv->cfg.on_full != VSRV_ON_FULL_WAIT || c->lingering)
		return false;
	want = c->parser ? vhttp_parser_body_held(c->parser) : 0;
	if (want && c->rx_held)
		return false;
	if (vsrv__over_budget(c->srv))
		return true;
	if (want)
		conn_sync_held(c);
	return false;
}

/* ------------------------------------------------------------- parsing */

static bool ready_for_jobs(struct vsrv *srv)
{
	VB_LINE_WRITE(srv_ready_read);
	/* Relaxed: a status bit (see vsrv__closing). */
	return !vsrv__draining(srv) && !atomic_load_explicit(&srv->unready, memory_order_relaxed) &&
	       vch_len(srv->jobs) < srv->ready_limit;
}

/* Offer a job to `jobs`. Its gauge moves to exec first: once sent, the job
 * is an executor's and we may not touch it; if it was not sent, it moves
 * back. */
static enum vch_status send_job(struct vsrv_conn *c, struct vsrv_job *job, bool wait)
{
	struct vsrv *srv = c->srv;
	enum vch_status st;

	vsrv__job_stage(srv, job, VSRV_J_EXEC);
	st = wait ? vch_send_poll(srv->jobs, &c->jw, vch_val(job)) : vch_try_send(srv->jobs, vch_val(job));
	if (st != VCH_OK)
		vsrv__job_stage(srv, job, VSRV_J_PARSE);
	return st;
}

/* An answer to a request that never parsed whole (an error, 408): it
 * takes the next request number, answers in HTTP/1.1 and closes. */
static void respond_unparsed(struct vsrv_conn *c, int status, int64_t now)
{
	struct vsrv_reply_to to = {
		.seq = c->next_seq++,
		.t0 = now,
		.kind = (uint8_t)c->srv->kind_other,
		.version_minor = 1,
		.close = true,
	};

	VSRV_INC(c->srv, requests);
	vsrv__respond_status(c, &to, status, NULL);
}

/* A job that cannot go to `jobs` (shed, or closed: shutting down): 503. */
static void refuse_job(struct vsrv_conn *c, struct vsrv_job *job)
{
	struct vsrv_reply_to to = job->to;

	vsrv__job_free(c->srv, job);
	vsrv__respond_status(c, &to, 503, NULL);
}

/* Put a job on `jobs`, or leave it in c->pending when it must wait. */
static void dispatch(struct vsrv_conn *c, struct vsrv_job *job)
{
	struct vsrv *srv = c->srv;
	enum vch_status st;

	if (srv->cfg.on_full == VSRV_ON_FULL_SHED && job->held && vsrv__over_budget(srv)) {
		VSRV_INC(srv, budget_shed);
		VSRV_INC(srv, shed);
	} else if (srv->cfg.on_full == VSRV_ON_FULL_WAIT) {
		st = send_job(c, job, true);
		if (st == VCH_OK)
			return;
		if (st == VCH_PENDING || st == VCH_YIELD) {
			c->pending = job; /* parsing and reading stop until it is sent */
			return;
		}
	} else {
		if (send_job(c, job, false) == VCH_OK)
			return;
		VSRV_INC(srv, shed);
	}
	refuse_job(c, job);
}

static void on_request(struct vsrv_conn *c, struct vhttp_request *req, int64_t now)
{
	struct vsrv *srv = c->srv;
	const struct vjob_kind *kind = NULL;
	struct vsrv_reply_to to = {
		.seq = c->next_seq++,
		.t0 = now,
		.kind = (uint8_t)srv->kind_other,
		.version_minor = req->version_minor,
		.close = !req->keep_alive,
		.head_only = req->method == VHTTP_M_HEAD,
	};
	struct vjob *vj = NULL;
	struct vsrv_job *job;

	VSRV_INC(srv, requests);
	vsrv__access_note(c, to.seq, req->method_name, req->target, req->target_len);
	switch (vjob_route(req->path, req->path_len, req->method_name, &kind)) {
	case VJOB_ROUTE_NOT_FOUND:
		vsrv__respond_status(c, &to, 404, NULL);
		goto out;
	case VJOB_ROUTE_BAD_METHOD:
		to.kind = (uint8_t)vjob_kind_index(kind);
		vsrv__respond_status(c, &to, 405, kind->allow);
		goto out;
	case VJOB_ROUTE_OK:
		break;
	}
	to.kind = (uint8_t)vjob_kind_index(kind);
	struct vjob_input in = {
		.query = req->query,
		.query_len = req->query_len,
		/* Only /readyz asks: the jobs channel's length reads its head
		 * and tail lines, which every send and receive writes. */
		.ready = kind->reads_ready && ready_for_jobs(srv),
		/* Relaxed: a status bit set by the daemon's stall check. */
		.alive = atomic_load_explicit(&srv->alive, memory_order_relaxed),
	};
	in.body = vhttp_request_take_body(req, &in.body_len);
	size_t body_len = in.body_len;
	/* The job limits are live (vsrv_set_live): this request's copy. */
	struct vjob_config jc = srv->jcfg;
	jc.spin_max_n = vsrv__live(srv, spin_max_n);
	jc.sleep_max_ms = vsrv__live(srv, sleep_max_ms);
	if (vjob_new(kind, &jc, &in, &vj) < 0) {
		vsrv__respond_status(c, &to, 503, NULL);
		goto out;
	}
	if (vjob_done(vj)) {
		vsrv__respond_job(c, &to, vj);
		goto out;
	}
	job = vsrv__job_new(srv, &to, c);
	if (!job) {
		vjob_free(vj);
		vsrv__respond_status(c, &to, 503, NULL);
		goto out;
	}
	job->vj = vj;
	if (body_len >= VSRV_HOLD_MIN) {
		/* The body moved from the parser (released by conn_sync_held)
		 * to the job, which holds it until the response is sent. */
		job->held = body_len;
		vsrv__hold(srv, (int64_t)body_len);
	}
	dispatch(c, job);
out:
	vhttp_request_free(req);
}

/* A connection accepted just before the drain gets this long for its first
 * request (it was accepted, so the client is sending one). */
#define DRAIN_FIRST_MS 1000

/*
 * While draining, is a request still arriving (its first bytes are in: read
 * it to its end, upload included, and answer it), or has a fresh connection
 * not had DRAIN_FIRST_MS for its first request yet? Otherwise the connection
 * is idle and closes.
 */
static bool drain_keeps_reading(const struct vsrv_conn *c)
{
	enum vhttp_phase ph = conn_parser_phase(c);

	if (ph == VHTTP_PHASE_HEAD || ph == VHTTP_PHASE_BODY)
		return true;
	return !c->first_done && c->next_seq == 0 && !c->eof &&
	       vb_now_ns() < c->idle_since + (int64_t)DRAIN_FIRST_MS * VB_NS_PER_MS;
}

static bool can_parse(const struct vsrv_conn *c)
{
	return c->parser && !c->rx_busy && !c->parsed_all && c->rd == VSRV_RD_OPEN && !c->pending &&
	       !c->cont_pending && vsrv__in_flight(c) < c->srv->cfg.max_pipeline &&
	       (!vsrv__draining(c->srv) || drain_keeps_reading(c));
}

static void note_phase(struct vsrv_conn *c, int64_t now)
{
	enum vhttp_phase ph = vhttp_parser_phase(c->parser);

	if (ph != c->phase) {
		c->phase = ph;
		c->phase_since = now;
	}
}

static bool conn_parse(struct vsrv_conn *c, int64_t now)
{
	bool progress = false;

	while (can_parse(c)) {
		struct vhttp_request *req;
		const char *reason;
		int status;

		progress = true;
		switch (vhttp_parser_next(c->parser, &req)) {
		case VHTTP_EV_MORE:
			c->parsed_all = true;
			note_phase(c, now);
			break;
		case VHTTP_EV_REQUEST:
			on_request(c, req, now);
			break;
		case VHTTP_EV_CONTINUE:
			c->cont_pending = true;
			break;
		case VHTTP_EV_ERROR:
			status = vhttp_parser_error(c->parser, &reason);
			vb_log_rl(&vsrv__conn_rl, LOG_INFO, "connection fd %d: %d: %s", c->io.fd,
				  status, reason ? reason : "bad request");
			respond_unparsed(c, status, now);
			c->rd = VSRV_RD_DONE;
			c->linger = true;
			break;
		case VHTTP_EV_CLOSED:
			c->rd = VSRV_RD_DONE;
			break;
		}
	}
	return progress;
}

/* ----------------------------------------------------------- deadlines */

static int64_t ms(unsigned v)
{
	return (int64_t)v * VB_NS_PER_MS;
}

/* The read deadline while waiting for input (0: none). */
static int64_t read_deadline(const struct vsrv_conn *c)
{
	if (c->lingering)
		return c->linger_until;
	if (!c->rx_busy || c->rd != VSRV_RD_OPEN || c->eof)
		return 0;
	switch (c->phase) {
	case VHTTP_PHASE_HEAD:
		return c->phase_since + ms(vsrv__live(c->srv, header_timeout_ms));
	case VHTTP_PHASE_BODY:
		return c->phase_since + ms(vsrv__live(c->srv, body_timeout_ms));
	case VHTTP_PHASE_IDLE:
		if (vsrv__in_flight(c) || c->pending)
			return 0; /* the client waits for us */
		/* Before the first answer the header timeout bounds the wait;
		 * draining, DRAIN_FIRST_MS (drain_keeps_reading). */
		if (vsrv__draining(c->srv))
			return c->idle_since + ms(DRAIN_FIRST_MS);
		return c->idle_since + ms(c->first_done ? vsrv__live(c->srv, idle_timeout_ms) :
							   vsrv__live(c->srv, header_timeout_ms));
	default:
		return 0;
	}
}

static int64_t send_deadline(const struct vsrv_conn *c)
{
	return c->tx_busy ? c->tx_mark + ms(vsrv__live(c->srv, send_timeout_ms)) : 0;
}

/*
 * The send deadline passed: did the client take anything since the last
 * look? Progress is the socket's acknowledged byte count (TCP_INFO), read
 * only here, never per request. The first look of a batch has nothing to
 * compare with and counts as progress, so a stalled send is cut between
 * one and two send_timeout_ms after its last progress. A socket without
 * TCP_INFO (not TCP) never shows progress: cut at the first deadline.
 */
static bool send_progressed(struct vsrv_conn *c, int64_t now)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	bool first = !c->tx_looked;

	if (getsockopt(c->io.fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 ||
	    len < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(ti.tcpi_bytes_acked))
		return false;
	c->tx_looked = true;
	if (!first && ti.tcpi_bytes_acked == c->tx_acked)
		return false;
	c->tx_acked = ti.tcpi_bytes_acked;
	c->tx_mark = now;
	return true;
}

/* A quiet send is collected by the timer after VSRV_QUIET_NS at the
 * latest (then it wakes us), so that an idle connection gives its batch
 * back; a busy one sees this at most once per VSRV_QUIET_NS (lazy arming). */
static int64_t quiet_deadline(const struct vsrv_conn *c)
{
	return c->tx_busy && c->tx_quiet && !c->tx_loud ? c->tx_since + VSRV_QUIET_NS : 0;
}

/* TCP_CLOSE of include/net/tcp_states.h (not in the uapi headers): the
 * state of a socket the peer reset. */
#define VSRV_TCP_STATE_CLOSE 7

/*
 * A connection that reads nothing (pipeline full, waiting for room in
 * jobs) would not see its peer's reset before it sends, while its jobs
 * burn executors. Once a second it looks at the socket's TCP state: reset
 * means abandoned (a half-close is not: its answers are still sent).
 */
static bool peer_reset(const struct vsrv_conn *c)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (getsockopt(c->io.fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return false;
	return ti.tcpi_state == VSRV_TCP_STATE_CLOSE;
}

static int64_t dl_min(int64_t a, int64_t b)
{
	return !a ? b : !b ? a : a < b ? a : b;
}

/* Act on passed deadlines; true when something changed. */
static bool conn_timeouts(struct vsrv_conn *c, int64_t now)
{
	struct vsrv *srv = c->srv;
	int64_t rd = read_deadline(c), sd = send_deadline(c), qd = quiet_deadline(c);

	if (qd && now >= qd) {
		c->tx_loud = true; /* conn_tx_settle makes the send wake us */
		return true;
	}
	if (c->probe_at && now >= c->probe_at) {
		c->probe_at = now + VSRV_PROBE_NS;
		if (peer_reset(c)) {
			VSRV_INC(srv, client_resets);
			vsrv__conn_abort(c, "reset by peer (seen while not reading)");
			return true;
		}
	}

	if (sd && now >= sd && !send_progressed(c, now)) {
		VSRV_INC(srv, timeouts_send);
		vsrv__conn_abort(c, "send timeout");
		return true;
	}
	if (!rd || now < rd)
		return false;
	if (c->lingering) {
		c->lingering = false;
		c->linger = false;
		vsrv__conn_abort(c, NULL); /* answered already: nothing to drop */
		return true;
	}
	switch (c->phase) {
	case VHTTP_PHASE_HEAD:
	case VHTTP_PHASE_BODY:
		if (c->phase == VHTTP_PHASE_HEAD)
			VSRV_INC(srv, timeouts_header);
		else
			VSRV_INC(srv, timeouts_body);
		respond_unparsed(c, 408, now);
		break;
	default:
		VSRV_INC(srv, timeouts_idle);
		break;
	}
	c->rd = VSRV_RD_DONE;
	return true;
}

/* Arm the timer for the earliest deadline. Lazily: an earlier armed time
 * is kept (its wakeup finds nothing due and re-arms), so a busy keep-alive
 * connection does not touch the timer heap on every request. */
static void conn_arm(struct vsrv_conn *c, int64_t now)
{
	int64_t want = dl_min(dl_min(read_deadline(c), send_deadline(c)), quiet_deadline(c));

	if (c->budget_wait)
		want = dl_min(want, now + VSRV_BUDGET_RECHECK_NS);
	want = dl_min(want, c->probe_at);

	if (!want)
		return;
	if (c->tmr_at && c->tmr_at > now && c->tmr_at <= want)
		return;
	if (vio_timer_arm(&c->tmr, want) == 0)
		c->tmr_at = want;
}

/* ------------------------------------------------------------- closing */

/* Stop taking part: release what waits on others. The socket's ops may
 * still be in flight (vio_conn_close / abandon follow). */
static void conn_release(struct vsrv_conn *c)
{
	struct vsrv *srv = c->srv;

	/* Relaxed: advice, see the Ordering block. */
	atomic_store_explicit(&c->dead, true, memory_order_relaxed);
	if (c->rx_held) {
		vsrv__hold(srv, -(int64_t)c->rx_held);
		c->rx_held = 0;
	}
	c->budget_wait = false;
	vio_timer_disarm(&c->tmr);
	c->tmr_at = 0;
	if (c->pending) {
		vch_waiter_cancel(&c->jw);
		vsrv__job_free(srv, c->pending);
		c->pending = NULL;
	}
	for (uint64_t s = c->collect_seq; s < c->next_seq; s++) {
		/* [S2] acquire: pairs with [S1]. */
		struct vsrv_job *job = atomic_exchange_explicit(&c->slots[s & c->slot_mask], NULL,
								memory_order_acquire);
		if (job) {
			VSRV_INC(srv, results_dropped);
			vsrv__job_free(srv, job);
		}
	}
}

/* The task ends: counters, registry, acceptors. */
static void conn_finish(struct vsrv_conn *c)
{
	struct vsrv *srv = c->srv;
	uint64_t dropped = vsrv__in_flight(c);

	if (dropped) {
		VSRV_ADD(srv, requests_dropped, dropped);
		vb_log_rl(&vsrv__conn_rl, LOG_NOTICE,
			  "connection closed with %llu request(s) unanswered: %s",
			  (unsigned long long)dropped, c->close_reason ? c->close_reason : "closed");
	}
	VSRV_INC(srv, conns_closed);
	vsrv__reg_del(srv, c);
	vsrv__conn_closed(srv);
}

/* Everything answered and nothing more to read: time to close. */
static bool conn_over(const struct vsrv_conn *c)
{
	bool quiet = !c->pending && !c->tx_busy && !(c->out && c->out->niov) &&
		     vsrv__in_flight(c) == 0;

	if (c->aborting)
		return true;
	if (!quiet || c->lingering)
		return false;
	return c->rd == VSRV_RD_DONE || (c->eof && c->parsed_all) ||
	       (vsrv__draining(c->srv) && !drain_keeps_reading(c));
}

/* ------------------------------------------------------------ the task */

/* Receive into the parser (or, lingering, into the spare batch buffer). */
static enum vrt_poll conn_recv(struct vsrv_conn *c, bool *progress)
{
	struct vsrv *srv = c->srv;
	ssize_t n;
	enum vrt_poll p;

	if (!c->rx_busy) {
		if (c->lingering) {
			c->rbuf = c->ibuf;
			c->rroom = sizeof(c->ibuf);
		} else {
			conn_give_back(c);
			if (c->parser) {
				c->rbuf = vhttp_parser_rbuf(c->parser, &c->rroom);
				VB_BUG_ON(c->rroom == 0); /* everything was parsed */
			} else {
				c->rbuf = c->ibuf;
				c->rroom = sizeof(c->ibuf);
			}
		}
	}
	p = vio_conn_recv(&c->io, c->rbuf, c->rroom, &n);
	if (p == VRT_PENDING) {
		c->rx_busy = true;
		return p;
	}
	if (p == VRT_YIELD)
		return p;
	c->rx_busy = false;
	*progress = true;
	if (c->lingering) {
		c->linger_bytes += n > 0 ? (size_t)n : 0;
		if (n <= 0 || c->linger_bytes > LINGER_BYTES) {
			c->lingering = false;
			c->linger = false;
			vsrv__conn_abort(c, NULL);
		}
		return VRT_READY;
	}
	if (n > 0) {
		VSRV_ADD(srv, bytes_in, n);
		if (c->rd != VSRV_RD_OPEN)
			return VRT_READY;
		if (c->rbuf == c->ibuf) {
			/* The first bytes after idle: now the parser. */
			if (!conn_take_rx(c)) {
				vsrv__conn_abort(c, "out of memory for a parser");
				return VRT_READY;
			}
			size_t took = vhttp_parser_feed(c->parser, c->ibuf, (size_t)n);
			VB_BUG_ON(took != (size_t)n); /* an empty parser holds VSRV_IBUF */
		} else {
			vhttp_parser_commit(c->parser, (size_t)n);
		}
		c->parsed_all = false;
	} else if (n == 0) {
		c->eof = true;
		if (conn_parser_phase(c) != VHTTP_PHASE_IDLE && conn_parser_phase(c) != VHTTP_PHASE_DONE) {
			/* Gone in the middle of a request: nobody to answer. */
			VSRV_INC(srv, client_resets);
			c->close_reason = "peer closed mid-request";
			c->rd = VSRV_RD_DONE;
		}
	} else {
		VSRV_INC(srv, client_resets);
		vsrv__conn_abort(c, n == -ECONNRESET ? "reset by peer" : "receive error");
	}
	return VRT_READY;
}

static enum vrt_poll conn_send(struct vsrv_conn *c, int64_t now, bool *progress)
{
	ssize_t res;
	enum vrt_poll p;
	bool fresh = !c->tx_busy;

	if (fresh) {
		/* The clock now, not the poll's start: the requests of this
		 * batch may have been parsed after it (D16: /healthz read 0). */
		c->tx_since = c->tx_mark = vb_now_ns();
		c->tx_looked = false;
		c->tx_loud = false;
	}
	p = vio_conn_sendv(&c->io, c->out->iov, c->out->niov, &res);
	if (p == VRT_PENDING) {
		c->tx_busy = true;
		return p;
	}
	if (p == VRT_YIELD)
		return p;
	/* A send that finished at once, or later without waking us, is
	 * dated by its submission: sends finish as they are submitted unless
	 * the peer's window is full, and we may only notice at the next
	 * request. */
	if (fresh || c->tx_quiet)
		now = c->tx_since;
	c->tx_busy = false;
	c->tx_quiet = false;
	*progress = true;
	if (res < 0) {
		VSRV_INC(c->srv, client_resets);
		vsrv__conn_abort(c, res == -EPIPE || res == -ECONNRESET ? "reset by peer while sending"
								 : "send error");
		return VRT_READY;
	}
	vsrv__batch_done(c, now);
	return VRT_READY;
}

/*
 * May the batch under way finish without waking us? Only when nothing but
 * the next request waits for it (its arrival wakes us and we collect the
 * send then): no other response to send after it, no 100 Continue, no
 * close, drain or pipeline limit that its end would unblock. Saves one
 * poll per response of a keep-alive exchange.
 */
static bool tx_may_quiet(const struct vsrv_conn *c)
{
	return c->rd == VSRV_RD_OPEN && !c->eof && !c->aborting && !c->linger &&
	       !c->lingering && !c->out->close_after && !c->cont_pending && !c->pending &&
	       !c->tx_loud &&
	       c->collect_seq == c->next_seq && vsrv__in_flight(c) < c->srv->cfg.max_pipeline &&
	       !vsrv__draining(c->srv);
}

/* Before waiting: tell the I/O layer whether the send under way must wake
 * us. True when it has finished already (collect it now). */
static bool conn_tx_settle(struct vsrv_conn *c)
{
	bool quiet;

	if (!c->tx_busy)
		return false;
	quiet = tx_may_quiet(c);
	if (quiet == c->tx_quiet)
		return false;
	if (vio_conn_tx_quiet(&c->io, quiet))
		return true;
	c->tx_quiet = quiet;
	return false;
}

static bool may_read(const struct vsrv_conn *c)
{
	if (c->lingering)
		return true;
	return c->rd == VSRV_RD_OPEN && !c->eof && c->parsed_all && !c->pending &&
	       !c->cont_pending && !c->aborting &&
	       (!vsrv__draining(c->srv) || drain_keeps_reading(c));
}

static enum vrt_poll conn_close_step(struct vsrv_conn *c)
{
	int res;
	enum vrt_poll p = vio_conn_close(&c->io, &res);

	if (p != VRT_READY)
		return p;
	/* No operation is in flight any more: the batch may go. */
	if (c->out) {
		vsrv__batch_free_jobs(c->srv, c->out);
		vsrv__batch_reset(c->out);
	}
	conn_finish(c);
	return VRT_READY;
}

static enum vrt_poll conn_poll(struct vrt_task *t)
{
	struct vsrv_conn *c = vb_container_of(t, struct vsrv_conn, task);
	int64_t now = vb_now_ns();
	enum vrt_poll p;

	if (c->closing)
		return conn_close_step(c);
	if (vrt_task_is_cancelled(t)) {
		/* Cut at shutdown: stop without waiting for the kernel; the
		 * batch stays until drop(), when no operation can touch it. */
		if (drain_keeps_reading(c) && conn_parser_phase(c) != VHTTP_PHASE_IDLE) {
			/* A request still arriving when the drain bound
			 * came: received in part, never answered: counted. */
			VSRV_INC(c->srv, requests);
			VSRV_INC(c->srv, requests_dropped);
		}
		vsrv__conn_abort(c, "cut at shutdown");
		conn_release(c);
		vio_conn_abandon(&c->io);
		conn_finish(c);
		return VRT_READY;
	}
	for (;;) {
		bool progress = false;

		if (c->tx_busy) {
			p = conn_send(c, now, &progress);
			if (p == VRT_YIELD)
				return p;
		}
		if (c->pending) {
			struct vsrv_job *job = c->pending;
			enum vch_status st = send_job(c, job, true);

			if (st == VCH_YIELD)
				return VRT_YIELD;
			if (st != VCH_PENDING) {
				c->pending = NULL;
				progress = true;
				if (st != VCH_OK) /* closed: shutting down */
					refuse_job(c, job);
			}
		}
		if (c->rx_busy && !c->aborting) {
			p = conn_recv(c, &progress);
			if (p == VRT_YIELD)
				return p;
		}
		if (!c->aborting && conn_parse(c, now))
			progress = true;
		/* A body's growth and its end (wait reserves in budget_blocks). */
		if (c->rx_held || (c->srv->cfg.on_full == VSRV_ON_FULL_SHED && c->parser &&
				   vhttp_parser_body_held(c->parser)))
			conn_sync_held(c);
		if (!c->tx_busy && !c->aborting) {
			if (vsrv__batch_collect(c))
				progress = true;
			if (!c->parser && c->slots)
				conn_give_back(c); /* the last job collected */
			if (c->out && c->out->niov) {
				p = conn_send(c, now, &progress);
				if (p == VRT_YIELD)
					return p;
			}
		}
		if (conn_over(c)) {
			if (c->linger && !c->aborting && !c->eof) {
				/* An error answer is out: drain what the client
				 * still sends so it reads the answer, not a reset. */
				c->lingering = true;
				c->linger_until = now + ms(LINGER_MS);
				vio_conn_shutdown_write(&c->io);
				c->linger = false;
				continue;
			}
			conn_release(c);
			c->closing = true;
			return conn_close_step(c);
		}
		if (!c->rx_busy && may_read(c)) {
			if (budget_blocks(c)) {
				if (!c->budget_wait)
					VSRV_INC(c->srv, budget_waits);
				c->budget_wait = true; /* the timer looks again */
			} else {
				c->budget_wait = false;
				p = conn_recv(c, &progress);
				if (p == VRT_YIELD)
					return p;
			}
		}
		if (progress)
			continue;
		if (conn_timeouts(c, now))
			continue;
		if (conn_tx_settle(c))
			continue;
		break;
	}
	if (c->out || c->slots)
		conn_give_back(c);
	/* Not reading while requests are in flight: probe for a reset. */
	if (c->rx_busy || c->lingering || c->aborting || c->eof || !vsrv__in_flight(c))
		c->probe_at = 0;
	else if (!c->probe_at)
		c->probe_at = now + VSRV_PROBE_NS;
	conn_arm(c, now);
	return VRT_PENDING;
}

static void conn_drop(struct vrt_task *t)
{
	struct vsrv_conn *c = vb_container_of(t, struct vsrv_conn, task);
	struct vsrv *srv = c->srv;

	/* Jobs writers deposited after the task ended. */
	for (uint32_t i = 0; c->slots && i <= c->slot_mask; i++) {
		/* Relaxed: the runtime's last-reference release/acquire orders
		 * every writer's [S1] before this. */
		struct vsrv_job *job = atomic_load_explicit(&c->slots[i], memory_order_relaxed);
		if (job) {
			VSRV_INC(srv, results_dropped);
			vsrv__job_free(srv, job);
		}
	}
	if (c->out)
		vsrv__batch_free_jobs(srv, c->out);
	free(c->out);
	free(c->alog);
	vhttp_parser_free(c->parser);
	free((void *)c->slots);
	vsrv__conn_dealloc(srv, c);
	/* Relaxed: vsrv_stop polls it; the memory above is already free. */
	VB_LINE_WRITE(srv_conns);
	atomic_fetch_sub_explicit(&srv->conns_alive, 1, memory_order_relaxed);
}

const struct vrt_task_vtable vsrv__conn_vt = { .poll = conn_poll, .drop = conn_drop, .name = "conn" };

int vsrv__conn_new(struct vsrv *srv, int fd, struct vsrv_conn **out)
{
	struct vsrv_conn *c;
	uint32_t nslots = 1;
	int rc;

	/* One spare slot: a late answer (408) never shares a slot. */
	while (nslots < srv->cfg.max_pipeline + 1)
		nslots <<= 1;
	c = vsrv__conn_alloc(srv);
	if (!c) {
		rc = -ENOMEM;
		goto fail;
	}
	/* No parser and no slots yet: taken when bytes arrive. */
	c->slot_mask = nslots - 1;
	c->srv = srv;
	vrt_task_init(&c->task, &vsrv__conn_vt);
	vio_conn_init(&c->io, fd);
	vch_waiter_init(&c->jw);
	vio_timer_init(&c->tmr);
	atomic_init(&c->dead, false);
	c->phase = VHTTP_PHASE_IDLE;
	c->parsed_all = true; /* nothing to parse before the first read */
	c->phase_since = c->idle_since = vb_now_ns();
	/* Relaxed: a count for vsrv_stop; see conn_drop. */
	VB_LINE_WRITE(srv_conns);
	atomic_fetch_add_explicit(&srv->conns_alive, 1, memory_order_relaxed);
	*out = c;
	return 0;

fail:
	close(fd);
	return rc;
}
