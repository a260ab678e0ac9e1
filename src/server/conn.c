/* SPDX-License-Identifier: MIT */
/*
 * server/conn.c: the connection task: the parse stage (doc/server.md) and
 * the sending end of the write stage. One task per accepted socket:
 *   - reads into the parser's buffer (a recv is started only when every
 *     buffered byte has been parsed, so the buffer never moves under it),
 *     or, without a parser, into a buffer lent for the call only, so an
 *     idle connection waits holding no buffer; what it needs only while
 *     it has work (the send operation, the slots, ...) is its busy block,
 *     a spare taken when bytes arrive and given back when it is idle;
 *   - hands each request to request.c, which answers it at once or makes
 *     it a job on `jobs` (wait: parsing and reading stop until there is
 *     room);
 *   - collects responses in sequence order, from its own answers and from
 *     the reorder slots the writers fill, into one batch per sendv
 *     (output.c), at most max_pipeline requests in flight; a send that
 *     nothing but the next request waits for finishes quietly (no wakeup:
 *     it is collected when that request arrives);
 *   - keeps one lazily armed timer for its deadlines (deadline.c), and
 *     closes when the exchange is over.
 *
 * A connection's state is three machines (internal.h): what it receives
 * (rx), what it sends (tx) and how it ends (end). Each moves only through
 * its transition function below (vsrv__rx_to, vsrv__tx_to, vsrv__end_to;
 * aborts through vsrv__conn_abort), which checks the move against the
 * machine's list beside its enum and traces it at debug level, so the next
 * feature adds a state and its moves, not a flag; conn_poll reads as the
 * list of steps a poll takes.
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
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * The lingering close after an answer sent before the whole request was
 * read (a parse error, 408; RFC 9112 9.6): our write side is shut and what
 * the client still sends is read and dropped, until it closes or a bound
 * passes, so that its writes never meet the reset a close with unread input
 * makes. A client that writes its whole request before it reads (h2load)
 * reads the answer only once everything is written: the byte bound must
 * take a body several times max_body_bytes (dropping 64 MiB costs a few
 * milliseconds of one worker); over a slow link the time bound is the one
 * that ends it. A bound that passes closes with a reset (linger_cut).
 */
#define LINGER_MS 2000
#define LINGER_BYTES (64u << 20)

struct vb_ratelimit vsrv__conn_rl = VB_RATELIMIT_INIT(5000, 10);

static void conn_release(struct vsrv_conn *c);

/* ------------------------------------------------------ state machines */

#define NAME(m, st) [VSRV_##m##_##st] = #st
const char *const vsrv__rx_name[VSRV_RX_N] = {
	NAME(RX, READ), NAME(RX, PARSE), NAME(RX, CONTINUE), NAME(RX, JOBS_WAIT),
	NAME(RX, BUDGET_WAIT), NAME(RX, EOF), NAME(RX, DONE),
};
const char *const vsrv__tx_name[VSRV_TX_N] = {
	NAME(TX, IDLE), NAME(TX, SENDING), NAME(TX, QUIET), NAME(TX, OVERDUE),
};
const char *const vsrv__end_name[VSRV_END_N] = {
	NAME(END, OPEN), NAME(END, FAILED), NAME(END, LINGER), NAME(END, ABORTED), NAME(END, CLOSING),
};
#undef NAME

/* Each machine's moves as a table [from][to], from its list in internal.h
 * (MOVE_BUG, 0, where the list says nothing). The list's state names are
 * only ever pasted (##), never expanded: EOF is also stdio's. */
enum { MOVE_BUG = 0, MOVE_GO, MOVE_STAY };
#define RX_GO(f, t) [VSRV_RX_##f][VSRV_RX_##t] = MOVE_GO,
#define RX_STAY(f, t) [VSRV_RX_##f][VSRV_RX_##t] = MOVE_STAY,
#define TX_GO(f, t) [VSRV_TX_##f][VSRV_TX_##t] = MOVE_GO,
#define TX_STAY(f, t) [VSRV_TX_##f][VSRV_TX_##t] = MOVE_STAY,
#define END_GO(f, t) [VSRV_END_##f][VSRV_END_##t] = MOVE_GO,
#define END_STAY(f, t) [VSRV_END_##f][VSRV_END_##t] = MOVE_STAY,
static const uint8_t rx_moves[VSRV_RX_N][VSRV_RX_N] = { VSRV_RX_MOVES(RX_GO, RX_STAY) };
static const uint8_t tx_moves[VSRV_TX_N][VSRV_TX_N] = { VSRV_TX_MOVES(TX_GO, TX_STAY) };
static const uint8_t end_moves[VSRV_END_N][VSRV_END_N] = { VSRV_END_MOVES(END_GO, END_STAY) };

/* The end machine moves forward only: code tests `c->end >= X`. */
#define END_FORWARD(f, t) \
	static_assert(VSRV_END_##f < VSRV_END_##t, "end moves forward: " #f " -> " #t);
#define END_BACK_STAY(f, t) \
	static_assert(VSRV_END_##f > VSRV_END_##t, "a STAY of end names an earlier state: " #f " -> " #t);
VSRV_END_MOVES(END_FORWARD, END_BACK_STAY)

/* A legal move goes on, a STAY returns false; anything else stops here,
 * naming the machine and both states. */
static bool move_ok(const struct vsrv_conn *c, const char *m, uint8_t kind, const char *from,
		    const char *to)
{
	if (vb_unlikely(kind == MOVE_BUG)) {
		vb_log(LOG_CRIT, "connection fd %d: %s %s -> %s is not a move of its machine", c->io.fd,
		       m, from, to);
		VB_BUG_ON(kind == MOVE_BUG);
	}
	if (kind == MOVE_STAY)
		return false;
	if (vb_unlikely(vb_log_get_level() >= LOG_DEBUG))
		vb_log(LOG_DEBUG, "conn fd %d: %s %s -> %s", c->io.fd, m, from, to);
	return true;
}

/* The receive machine. */
void vsrv__rx_to(struct vsrv_conn *c, enum vsrv_rx to)
{
	if (c->rx == to ||
	    !move_ok(c, "rx", rx_moves[c->rx][to], vsrv__rx_name[c->rx], vsrv__rx_name[to]))
		return;
	if (to == VSRV_RX_BUDGET_WAIT)
		VSRV_INC(c->srv, budget_waits);
	c->rx = to;
}

/* The send machine. Between the states of a send under way the I/O layer
 * is told whether its end must wake us; true when it has ended already
 * (collect it now: the state stays, so a quiet send is dated by its
 * submission). A new send (from IDLE) wakes us by default. */
bool vsrv__tx_to(struct vsrv_conn *c, enum vsrv_tx to)
{
	if (c->tx == to)
		return false;
	if (c->tx != VSRV_TX_IDLE && to != VSRV_TX_IDLE && tx_moves[c->tx][to] == MOVE_GO &&
	    vio_conn_tx_quiet(&c->io, to == VSRV_TX_QUIET))
		return true;
	if (move_ok(c, "tx", tx_moves[c->tx][to], vsrv__tx_name[c->tx], vsrv__tx_name[to]))
		c->tx = to;
	return false;
}

/* The end machine. */
void vsrv__end_to(struct vsrv_conn *c, enum vsrv_end to, int64_t now)
{
	if (c->end == to ||
	    !move_ok(c, "end", end_moves[c->end][to], vsrv__end_name[c->end], vsrv__end_name[to]))
		return;
	c->end = to;
	switch (to) {
	case VSRV_END_LINGER:
		/* The early answer is out: drain what the client still sends
		 * so it reads the answer, not a reset. The parser's buffer
		 * takes the drained bytes (it will parse nothing more; a
		 * receive under way into it still lands in its memory). The
		 * failure answered a request, so the connection is busy. */
		VB_BUG_ON(!c->busy);
		VSRV_INC(c->srv, lingers);
		c->busy->linger_until = now + vsrv__ms(LINGER_MS);
		if (c->busy->parser)
			vhttp_parser_reset(c->busy->parser);
		vio_conn_shutdown_write(&c->io);
		break;
	case VSRV_END_ABORTED:
		vsrv__rx_to(c, VSRV_RX_DONE);
		break;
	case VSRV_END_CLOSING:
		conn_release(c);
		break;
	default:
		break;
	}
}

void vsrv__conn_abort(struct vsrv_conn *c, const char *reason)
{
	/* Without a busy block nothing is in flight: no reason is logged. */
	if (c->end < VSRV_END_ABORTED && c->busy)
		c->busy->close_reason = reason;
	vsrv__end_to(c, VSRV_END_ABORTED, 0);
}

void vsrv__conn_fail(struct vsrv_conn *c, int status, int64_t now)
{
	vsrv__respond_unparsed(c, status, now);
	vsrv__rx_to(c, VSRV_RX_DONE);
	vsrv__end_to(c, VSRV_END_FAILED, now);
}

void vsrv__conn_linger_cut(struct vsrv_conn *c)
{
	VSRV_INC(c->srv, linger_cut);
	vsrv__conn_abort(c, NULL); /* answered already: nothing to drop */
}

/* ----------------------------------------- the busy state, lazily */

bool vsrv__conn_take_busy(struct vsrv_conn *c)
{
	struct vsrv_busy *b;

	if (c->busy)
		return true;
	if (!(b = vsrv__busy_get(c->srv)))
		return false;
	/* A spare comes back empty (no parser, batch, pending job, trace in
	 * flight or filled slot, nothing charged to the budget); the rest is
	 * set here or before its first use. */
	b->collect_seq = b->sent_seq = c->next_seq;
	b->linger_bytes = 0;
	b->recv_buf = NULL;
	b->probe_at = 0;
	b->close_reason = NULL;
	vch_waiter_init(&b->pending_waiter);
	vio_conn_tx_lend(&c->io, &b->tx);
	c->busy = b;
	return true;
}

/* Bytes arrived: make sure there is a busy block and a parser (this
 * worker's spares first). false: no memory. */
static bool conn_take_rx(struct vsrv_conn *c)
{
	if (!vsrv__conn_take_busy(c))
		return false;
	return c->busy->parser || (c->busy->parser = vsrv__parser_get(c->srv));
}

/* Give the parser back when it holds nothing (between requests) and no
 * read into it is under way, the batch when it is empty and no send is
 * under way, and the busy block once the connection is idle: every
 * request answered (no job of the connection is anywhere else), nothing
 * waiting, open, reading. An idle connection holds no request buffers
 * and no busy state. All go back empty. */
static void conn_give_back(struct vsrv_conn *c)
{
	struct vsrv_busy *b = c->busy;

	if (!b)
		return;
	if (b->out && c->tx == VSRV_TX_IDLE && b->out->niov == 0) {
		VB_BUG_ON(b->out->n != 0);
		vsrv__spare_put(c->srv, VSRV_SPARE_BATCH, b->out);
		b->out = NULL;
	}
	if (b->parser && !b->recv_buf && c->rx != VSRV_RX_CONTINUE &&
	    vhttp_parser_phase(b->parser) == VHTTP_PHASE_IDLE) {
		vsrv__parser_put(c->srv, b->parser);
		b->parser = NULL;
		/* What c->phase last saw may be older (a request parsed whole
		 * with no parse after it, the pipeline full): no parser, no
		 * request under way, so no header or body deadline. */
		c->phase = VHTTP_PHASE_IDLE;
		if (c->rx == VSRV_RX_PARSE)
			vsrv__rx_to(c, VSRV_RX_READ); /* it held nothing */
	}
	if (!b->parser && !b->out && !b->pending && !b->rx_held && b->sent_seq == c->next_seq &&
	    c->tx == VSRV_TX_IDLE && c->rx == VSRV_RX_READ && c->end == VSRV_END_OPEN) {
		/* io's send operation is idle with the send machine. */
		struct vio_op *tx = vio_conn_tx_take(&c->io);

		VB_BUG_ON(tx != &b->tx);
		vsrv__spare_put(c->srv, VSRV_SPARE_BUSY, b);
		c->busy = NULL;
	}
}

enum vhttp_phase vsrv__parser_phase(const struct vsrv_conn *c)
{
	return c->busy && c->busy->parser ? vhttp_parser_phase(c->busy->parser) : VHTTP_PHASE_IDLE;
}

/* The parser's body buffer, charged to the budget as it grows. */
static void conn_sync_held(struct vsrv_conn *c)
{
	struct vsrv_busy *b = c->busy;
	size_t held = b && b->parser ? vhttp_parser_body_held(b->parser) : 0;

	if (b && held != b->rx_held) {
		vsrv__hold(c->srv, (int64_t)held - (int64_t)b->rx_held);
		b->rx_held = held;
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
	struct vsrv_busy *b = c->busy;
	size_t want;

	if (c->srv->cfg.on_full != VSRV_ON_FULL_WAIT)
		return false;
	want = b && b->parser ? vhttp_parser_body_held(b->parser) : 0;
	if (want && b->rx_held)
		return false;
	if (vsrv__over_budget(c->srv))
		return true;
	if (want)
		conn_sync_held(c);
	return false;
}

/* ------------------------------------------------------------- parsing */

/*
 * While draining, is a request still arriving (its first bytes are in: read
 * it to its end, upload included, and answer it), or has a fresh connection
 * not had VSRV_DRAIN_FIRST_MS for its first request yet? Otherwise the connection
 * is idle and closes.
 */
bool vsrv__drain_keeps_reading(const struct vsrv_conn *c)
{
	enum vhttp_phase ph = vsrv__parser_phase(c);

	if (ph == VHTTP_PHASE_HEAD || ph == VHTTP_PHASE_BODY)
		return true;
	return c->next_seq == 0 && c->rx != VSRV_RX_EOF &&
	       vb_now_ns() < c->idle_since + vsrv__ms(VSRV_DRAIN_FIRST_MS);
}

static bool can_parse(const struct vsrv_conn *c)
{
	return c->rx == VSRV_RX_PARSE && c->end == VSRV_END_OPEN && c->busy && c->busy->parser &&
	       vsrv__in_flight(c) < c->srv->cfg.max_pipeline &&
	       (!vsrv__draining(c->srv) || vsrv__drain_keeps_reading(c));
}

static void note_phase(struct vsrv_conn *c, int64_t now)
{
	enum vhttp_phase ph = vhttp_parser_phase(c->busy->parser);

	if (ph != c->phase) {
		c->phase = ph;
		c->busy->phase_since = now;
	}
}

static bool conn_parse(struct vsrv_conn *c, int64_t now)
{
	bool progress = false;

	while (can_parse(c)) {
		struct vhttp_parser *parser = c->busy->parser;
		struct vhttp_request *req;
		const char *reason;
		int status;

		progress = true;
		switch (vhttp_parser_next(parser, &req)) {
		case VHTTP_EV_MORE:
			vsrv__rx_to(c, VSRV_RX_READ);
			note_phase(c, now);
			break;
		case VHTTP_EV_REQUEST:
			if (vsrv__request(c, req, now))
				vsrv__rx_to(c, VSRV_RX_JOBS_WAIT);
			break;
		case VHTTP_EV_CONTINUE:
			vsrv__rx_to(c, VSRV_RX_CONTINUE);
			break;
		case VHTTP_EV_ERROR:
			status = vhttp_parser_error(parser, &reason);
			vb_log_rl(&vsrv__conn_rl, LOG_INFO, "connection fd %d: %d: %s", c->io.fd,
				  status, reason ? reason : "bad request");
			vsrv__conn_fail(c, status, now);
			break;
		case VHTTP_EV_CLOSED:
			vsrv__rx_to(c, VSRV_RX_DONE);
			break;
		}
	}
	return progress;
}

/* ------------------------------------------------------------- closing */

/* Stop taking part: release what waits on others. The socket's ops may
 * still be in flight (vio_conn_close / abandon follow). */
static void conn_release(struct vsrv_conn *c)
{
	struct vsrv *srv = c->srv;
	struct vsrv_busy *b = c->busy;

	/* Relaxed: advice, see the Ordering block. */
	atomic_store_explicit(&c->dead, true, memory_order_relaxed);
	vio_timer_disarm(&c->tmr);
	c->tmr_at = 0;
	if (!b)
		return; /* idle: nothing held, nothing in flight */
	if (b->rx_held) {
		vsrv__hold(srv, -(int64_t)b->rx_held);
		b->rx_held = 0;
	}
	if (b->pending) {
		vch_waiter_cancel(&b->pending_waiter);
		vsrv__job_free(srv, b->pending);
		b->pending = NULL;
	}
	for (uint64_t s = b->collect_seq; s < c->next_seq; s++) {
		/* [S2] acquire: pairs with [S1]. */
		struct vsrv_job *job = atomic_exchange_explicit(&b->slots[s & srv->slot_mask], NULL,
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
		const char *reason = c->busy->close_reason;

		VSRV_ADD(srv, requests_dropped, dropped);
		vb_log_rl(&vsrv__conn_rl, LOG_NOTICE,
			  "connection closed with %llu request(s) unanswered: %s",
			  (unsigned long long)dropped, reason ? reason : "closed");
	}
	VSRV_INC(srv, conns_closed);
	vsrv__reg_del(srv, c);
	vsrv__conn_closed(srv);
}

/* Everything answered and nothing more to read: time to close. */
static bool conn_over(const struct vsrv_conn *c)
{
	const struct vsrv_busy *b = c->busy;

	switch (c->end) {
	case VSRV_END_ABORTED:
		return true;
	case VSRV_END_LINGER:
		return false;
	default:
		break;
	}
	if (c->tx != VSRV_TX_IDLE || vsrv__in_flight(c) || (b && (b->pending || (b->out && b->out->niov))))
		return false;
	return c->rx == VSRV_RX_EOF || c->rx == VSRV_RX_DONE ||
	       (vsrv__draining(c->srv) && !vsrv__drain_keeps_reading(c));
}

static enum vrt_poll conn_close_step(struct vsrv_conn *c)
{
	int res;
	enum vrt_poll p = vio_conn_close(&c->io, &res);

	if (p != VRT_READY)
		return p;
	/* No operation is in flight any more: the batch may go. */
	if (c->busy->out) {
		vsrv__batch_free_jobs(c->srv, c->busy->out);
		vsrv__batch_reset(c->busy->out);
	}
	conn_finish(c);
	return VRT_READY;
}

/* Stop without waiting for the kernel: whatever is in flight is cancelled
 * and the last completion closes the socket; the busy block (if any) stays
 * until drop(), when no operation can touch it. */
static enum vrt_poll conn_stop_now(struct vsrv_conn *c)
{
	vio_conn_abandon(&c->io);
	conn_finish(c);
	return VRT_READY;
}

static enum vrt_poll conn_close(struct vsrv_conn *c, int64_t now)
{
	/* The close is the send operation's, in the busy block: an idle
	 * connection takes one now (a spare). Without memory for it, the
	 * connection stops as a cut does (CLOSING has released it). */
	if (!vsrv__conn_take_busy(c)) {
		vsrv__end_to(c, VSRV_END_CLOSING, now);
		return conn_stop_now(c);
	}
	vsrv__end_to(c, VSRV_END_CLOSING, now);
	return conn_close_step(c);
}

/* Cut at shutdown. */
static enum vrt_poll conn_cut(struct vsrv_conn *c)
{
	if (vsrv__drain_keeps_reading(c) && vsrv__parser_phase(c) != VHTTP_PHASE_IDLE) {
		/* A request still arriving when the drain bound came:
		 * received in part, never answered: counted. */
		VSRV_INC(c->srv, requests);
		VSRV_INC(c->srv, requests_dropped);
	}
	vsrv__conn_abort(c, "cut at shutdown");
	conn_release(c);
	return conn_stop_now(c);
}

/* ------------------------------------------------------------ the task */

/* A receive is under way: lent (no buffer of ours), or into the parser. */
static bool conn_receiving(const struct vsrv_conn *c)
{
	return c->recv_lent || (c->busy && c->busy->recv_buf);
}

/* Receive into the parser, or, without one (idle; lingering), into a
 * buffer lent for the call only (on this stack: the wait holds none). */
static enum vrt_poll conn_recv(struct vsrv_conn *c, bool *progress)
{
	struct vsrv *srv = c->srv;
	struct vsrv_busy *b = c->busy;
	char lent_buf[VSRV_IDLE_BUF];
	void *buf = b ? b->recv_buf : NULL;
	size_t room = b ? b->recv_room : 0;
	bool lent = c->recv_lent;
	ssize_t n;
	enum vrt_poll p;

	if (!buf && !lent) {
		/* A new receive: into the parser when there is one. */
		if (c->end != VSRV_END_LINGER)
			conn_give_back(c);
		b = c->busy;
		if (b && b->parser) {
			/* Lingering, its buffer holds nothing that counts. */
			buf = vhttp_parser_rbuf(b->parser, &room);
			VB_BUG_ON(room == 0); /* everything was parsed (or reset) */
		} else {
			lent = true;
		}
	}
	if (lent)
		p = vio_conn_recv_lent(&c->io, lent_buf, sizeof(lent_buf), &n);
	else
		p = vio_conn_recv(&c->io, buf, room, &n);
	if (p == VRT_PENDING) {
		c->recv_lent = lent;
		if (!lent) {
			b->recv_buf = buf;
			b->recv_room = room;
		}
		return p;
	}
	c->recv_lent = false;
	if (!lent)
		b->recv_buf = NULL;
	if (p == VRT_YIELD)
		return p;
	*progress = true;
	if (c->end == VSRV_END_LINGER) {
		if (n <= 0) {
			vsrv__conn_abort(c, NULL); /* the client closed (or reset) */
			return VRT_READY;
		}
		VSRV_ADD(srv, linger_drained, n);
		c->busy->linger_bytes += (size_t)n;
		if (c->busy->linger_bytes > LINGER_BYTES)
			vsrv__conn_linger_cut(c);
		return VRT_READY;
	}
	if (n > 0) {
		VSRV_ADD(srv, bytes_in, n);
		if (c->rx != VSRV_RX_READ)
			return VRT_READY; /* no more requests: dropped */
		if (lent) {
			/* The first bytes after idle: now the busy block and the
			 * parser, which takes them. */
			if (!conn_take_rx(c)) {
				vsrv__conn_abort(c, "out of memory for a parser");
				return VRT_READY;
			}
			size_t took = vhttp_parser_feed(c->busy->parser, lent_buf, (size_t)n);
			VB_BUG_ON(took != (size_t)n); /* an empty parser holds VSRV_IDLE_BUF */
		} else {
			vhttp_parser_commit(b->parser, (size_t)n);
		}
		vsrv__rx_to(c, VSRV_RX_PARSE);
	} else if (n == 0) {
		if (vsrv__parser_phase(c) != VHTTP_PHASE_IDLE && vsrv__parser_phase(c) != VHTTP_PHASE_DONE) {
			/* Gone in the middle of a request: nobody to answer. */
			VSRV_INC(srv, client_resets);
			c->busy->close_reason = "peer closed mid-request";
		}
		vsrv__rx_to(c, VSRV_RX_EOF);
	} else {
		VSRV_INC(srv, client_resets);
		vsrv__conn_abort(c, n == -ECONNRESET ? "reset by peer" : "receive error");
	}
	return VRT_READY;
}

static enum vrt_poll conn_send(struct vsrv_conn *c, int64_t now, bool *progress)
{
	struct vsrv_busy *b = c->busy;
	ssize_t res;
	enum vrt_poll p;
	bool fresh = c->tx == VSRV_TX_IDLE;

	if (fresh) {
		/* The clock now, not the poll's start: the requests of this
		 * batch may have been parsed after it, and a response would
		 * then seem to take no time at all (or less than none). */
		b->tx_since = b->tx_mark = vb_now_ns();
		b->tx_acked = VSRV_ACKED_UNSEEN;
		if (vb_unlikely(b->trace_seq))
			vsrv__trace_send(c);
	}
	p = vio_conn_sendv(&c->io, b->out->iov, b->out->niov, &res);
	if (p == VRT_PENDING) {
		if (fresh)
			vsrv__tx_to(c, VSRV_TX_SENDING);
		return p;
	}
	if (p == VRT_YIELD)
		return p;
	/* A send that finished at once, or later without waking us, is
	 * dated by its submission: sends finish as they are submitted unless
	 * the peer's window is full, and we may only notice at the next
	 * request. */
	if (fresh || c->tx == VSRV_TX_QUIET)
		now = b->tx_since;
	vsrv__tx_to(c, VSRV_TX_IDLE);
	*progress = true;
	if (res < 0) {
		VSRV_INC(c->srv, client_resets);
		vsrv__conn_abort(c, res == -EPIPE || res == -ECONNRESET ? "reset by peer while sending"
								 : "send error");
		return VRT_READY;
	}
	if (vsrv__batch_done(c, now))
		vsrv__rx_to(c, VSRV_RX_DONE); /* an answer in it said close */
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
	switch (c->rx) {
	case VSRV_RX_READ:
	case VSRV_RX_PARSE:
	case VSRV_RX_BUDGET_WAIT:
		break;
	default:
		return false;
	}
	return c->end == VSRV_END_OPEN && !c->busy->out->close_after && c->busy->collect_seq == c->next_seq &&
	       vsrv__in_flight(c) < c->srv->cfg.max_pipeline && !vsrv__draining(c->srv);
}

/* Before waiting: tell the I/O layer whether the send under way must wake
 * us. True when it has finished already (collect it now). */
static bool conn_tx_settle(struct vsrv_conn *c)
{
	if (c->tx != VSRV_TX_SENDING && c->tx != VSRV_TX_QUIET)
		return false;
	return vsrv__tx_to(c, tx_may_quiet(c) ? VSRV_TX_QUIET : VSRV_TX_SENDING);
}

static bool may_read(const struct vsrv_conn *c)
{
	switch (c->end) {
	case VSRV_END_LINGER:
		return true;
	case VSRV_END_OPEN:
		break;
	default:
		return false;
	}
	switch (c->rx) {
	case VSRV_RX_READ:
	case VSRV_RX_BUDGET_WAIT:
		return !vsrv__draining(c->srv) || vsrv__drain_keeps_reading(c);
	default:
		return false;
	}
}

/* ------------------------------------------------------- a poll's steps */

/* The send under way, if any. */
static enum vrt_poll step_send(struct vsrv_conn *c, int64_t now, bool *progress)
{
	return c->tx == VSRV_TX_IDLE ? VRT_READY : conn_send(c, now, progress);
}

/* The job waiting for room in `jobs`. It goes even once the requests are
 * DONE (it was parsed, so it is answered), not once aborted. */
static enum vrt_poll step_pending(struct vsrv_conn *c, bool *progress)
{
	enum vch_status st;

	if (!c->busy || !c->busy->pending || c->end >= VSRV_END_ABORTED)
		return VRT_READY;
	st = vsrv__request_retry(c);
	if (st == VCH_YIELD)
		return VRT_YIELD;
	if (st == VCH_PENDING)
		return VRT_READY;
	*progress = true;
	if (c->rx == VSRV_RX_JOBS_WAIT)
		vsrv__rx_to(c, c->busy->parser ? VSRV_RX_PARSE : VSRV_RX_READ);
	return VRT_READY;
}

/* The receive under way, if any. */
static enum vrt_poll step_recv(struct vsrv_conn *c, bool *progress)
{
	return conn_receiving(c) && c->end < VSRV_END_ABORTED ? conn_recv(c, progress) : VRT_READY;
}

/* A body's growth and its end, against the budget (wait reserves in
 * budget_blocks). */
static void step_budget(struct vsrv_conn *c)
{
	struct vsrv_busy *b = c->busy;

	if (b && (b->rx_held || (c->srv->cfg.on_full != VSRV_ON_FULL_WAIT && b->parser &&
				 vhttp_parser_body_held(b->parser))))
		conn_sync_held(c);
}

/* Collect the answers next in order into the batch and send it. */
static enum vrt_poll step_output(struct vsrv_conn *c, int64_t now, bool *progress)
{
	if (!c->busy || c->tx != VSRV_TX_IDLE || c->end >= VSRV_END_ABORTED)
		return VRT_READY; /* idle: nothing to answer */
	if (vsrv__batch_collect(c)) {
		vsrv__rx_to(c, VSRV_RX_PARSE); /* the 100 Continue went in: on with the body */
		*progress = true;
	}
	if (!c->busy->parser)
		conn_give_back(c); /* the last job collected */
	return c->busy && c->busy->out && c->busy->out->niov ? conn_send(c, now, progress) : VRT_READY;
}

/* Start a receive when the machines want one; over the budget, wait for
 * it (the timer looks again). */
static enum vrt_poll step_read(struct vsrv_conn *c, bool *progress)
{
	if (conn_receiving(c) || !may_read(c))
		return VRT_READY;
	if (c->end == VSRV_END_OPEN) {
		vsrv__rx_to(c, budget_blocks(c) ? VSRV_RX_BUDGET_WAIT : VSRV_RX_READ);
		if (c->rx == VSRV_RX_BUDGET_WAIT)
			return VRT_READY;
	}
	return conn_recv(c, progress);
}

/* Nothing more to do now: give idle buffers (and, idle, the busy block)
 * back, probe for a reset while not reading with requests in flight, arm
 * the timer. */
static void step_before_wait(struct vsrv_conn *c, int64_t now)
{
	struct vsrv_busy *b;

	conn_give_back(c);
	if (!(b = c->busy))
		; /* idle: nothing in flight to probe for */
	else if (conn_receiving(c) || c->end >= VSRV_END_LINGER || c->rx == VSRV_RX_EOF || !vsrv__in_flight(c))
		b->probe_at = 0;
	else if (!b->probe_at)
		b->probe_at = now + VSRV_PROBE_NS;
	vsrv__conn_arm(c, now);
}

static enum vrt_poll conn_poll(struct vrt_task *t)
{
	struct vsrv_conn *c = vb_container_of(t, struct vsrv_conn, task);
	int64_t now = vb_now_ns();
	bool progress;

	if (c->end == VSRV_END_CLOSING)
		return conn_close_step(c);
	if (vrt_task_is_cancelled(t))
		return conn_cut(c);
	do {
		progress = false;
		if (step_send(c, now, &progress) == VRT_YIELD ||
		    step_pending(c, &progress) == VRT_YIELD ||
		    step_recv(c, &progress) == VRT_YIELD)
			return VRT_YIELD;
		progress |= conn_parse(c, now);
		step_budget(c);
		if (step_output(c, now, &progress) == VRT_YIELD)
			return VRT_YIELD;
		if (conn_over(c)) {
			if (c->end != VSRV_END_FAILED)
				return conn_close(c, now);
			vsrv__end_to(c, VSRV_END_LINGER, now); /* the early answer is out */
		}
		if (step_read(c, &progress) == VRT_YIELD)
			return VRT_YIELD;
	} while (progress || vsrv__conn_timeouts(c, now) || conn_tx_settle(c));
	step_before_wait(c, now);
	return VRT_PENDING;
}

static void conn_drop(struct vrt_task *t)
{
	struct vsrv_conn *c = vb_container_of(t, struct vsrv_conn, task);
	struct vsrv *srv = c->srv;
	struct vsrv_busy *b = c->busy;

	for (uint32_t i = 0; b && i <= srv->slot_mask; i++) {
		/* Jobs writers deposited after the task ended. Relaxed: the
		 * runtime's last-reference release/acquire orders every
		 * writer's [S1] before this. */
		struct vsrv_job *job = atomic_load_explicit(&b->slots[i], memory_order_relaxed);
		if (job) {
			VSRV_INC(srv, results_dropped);
			vsrv__job_free(srv, job);
			/* Relaxed: nobody else holds the connection now. */
			atomic_store_explicit(&b->slots[i], NULL, memory_order_relaxed);
		}
	}
	/* The buffers go back as spares, empty, for the next connection (no
	 * operation can touch the send op or the batch any more). */
	if (b) {
		if (b->out) {
			vsrv__batch_free_jobs(srv, b->out);
			vsrv__spare_put(srv, VSRV_SPARE_BATCH, b->out);
			b->out = NULL;
		}
		if (b->parser) {
			vsrv__parser_put(srv, b->parser);
			b->parser = NULL;
		}
		vsrv__access_forget(srv, b);
		b->trace_seq = 0;
		vsrv__spare_put(srv, VSRV_SPARE_BUSY, b);
	}
	vsrv__conn_dealloc(srv, c);
	/* Relaxed: vsrv_stop polls it; the memory above is already free. */
	VB_LINE_WRITE(srv_conns);
	atomic_fetch_sub_explicit(&srv->conns_alive, 1, memory_order_relaxed);
}

const struct vrt_task_vtable vsrv__conn_vt = { .poll = conn_poll, .drop = conn_drop, .name = "conn" };

int vsrv__conn_new(struct vsrv *srv, int fd, struct vsrv_conn **out)
{
	struct vsrv_conn *c;
	int rc;

	c = vsrv__conn_alloc(srv);
	if (!c) {
		rc = -ENOMEM;
		goto fail;
	}
	/* No busy block, no parser yet: taken when bytes arrive. */
	c->srv = srv;
	vrt_task_init(&c->task, &vsrv__conn_vt);
	vio_conn_init(&c->io, fd);
	vio_timer_init(&c->tmr);
	atomic_init(&c->dead, false);
	c->phase = VHTTP_PHASE_IDLE;
	c->rx = VSRV_RX_READ; /* nothing to parse before the first read */
	c->idle_since = vb_now_ns();
	/* Relaxed: a count for vsrv_stop; see conn_drop. */
	VB_LINE_WRITE(srv_conns);
	atomic_fetch_add_explicit(&srv->conns_alive, 1, memory_order_relaxed);
	*out = c;
	return 0;

fail:
	close(fd);
	return rc;
}
