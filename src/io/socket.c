/* SPDX-License-Identifier: MIT */
/*
 * io/socket.c: a connected socket as awaitable operations: receive (multishot
 * into provided buffers, or plain), send / vectored send, deadline, close,
 * abandon. Task side, plus the owner side of multishot receive.
 *
 * Threading: one task drives a connection (its polls are ordered by the
 * runtime, possibly on different workers). The rx op's owner pushes
 * received buffers while the task consumes them elsewhere.
 *
 * Ordering (besides op.c's [IO1]..[IO6]):
 * Shared: c->inbox (rx owner pushes; the task, or the owner after detach,
 * takes all), c->rx_queued (heuristic count, both sides), c->close_count
 * (task and completing owners).
 * [C1] owner push: CAS (release) publishes b->len and the received bytes;
 *      pairs with [C2], the taker's exchange (acquire). A multishot's
 *      buffers are all pushed before its terminal [IO1], so a task that saw
 *      DONE by [IO2] then empties the inbox gets every one of them.
 * [C3] close_count fetch_sub (acq_rel): the last of the task and the
 *      completing owners closes the fd after everyone is done with it.
 * Registered files (io_uring, fixed_files): the connection's first
 * operation offers fd to its worker's table (slot = fd); c->fixed_w names that
 * worker, written by the task before that operation and never again. Only
 * that worker's submissions use the slot (its owner-private table state
 * says so); a task stolen elsewhere submits with the regular fd. The slot
 * holds a reference on the socket, so it is cleared on c->fixed_w, and only
 * there, before fd is closed (vio__conn_close_fd, vio_conn_close): from
 * another thread through c->fixed_w's mailbox ([IM1]/[IM2] in op.c carry the
 * request), which then closes fd itself; the poster shuts the socket down
 * first, so the peer sees the end at once. A completing owner reads c->fixed_w
 * in vio__conn_detached_done after its [IO1] saw the task's [IO4]
 * (DETACHED): that pair carries the task's write.
 * Per-connection atomics share cache lines on purpose: they are contended
 * only while a connection's task runs on another worker than its receive,
 * and padding them would multiply the memory of idle connections.
 */
#include "config.h"

#include "io/internal.h"
#include "base/time.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void vio_conn_init(struct vio_conn *c, int fd)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	atomic_init(&c->rx.state, 0);
	c->rx.conn = c;
	atomic_init(&c->inbox, NULL);
	atomic_init(&c->rx_queued, 0);
	atomic_init(&c->close_count, 0);
	atomic_init(&c->rx_at, 0);
}

void vio_conn_tx_lend(struct vio_conn *c, struct vio_op *op)
{
	VB_BUG_ON(c->tx != NULL);
	memset(op, 0, sizeof(*op));
	atomic_init(&op->state, 0);
	op->conn = c;
	c->tx = op;
}

struct vio_op *vio_conn_tx_take(struct vio_conn *c)
{
	struct vio_op *op = c->tx;

	/* Relaxed: only this task starts or collects the op, and its state
	 * is 0 only once it collected it ([IO2] saw the owner done with it,
	 * mailbox included). */
	if (!op || atomic_load_explicit(&op->state, memory_order_relaxed) != 0)
		return NULL;
	c->tx = NULL;
	return op;
}

int64_t vio_conn_rx_at(const struct vio_conn *c)
{
	/* Relaxed: a statistic, written by whichever worker reaped. */
	return atomic_load_explicit(&c->rx_at, memory_order_relaxed);
}

void vio_conn_trace_tx(struct vio_conn *c, int64_t *at)
{
	if (at)
		at[0] = at[1] = 0;
	c->trace_tx = at;
}

int vio_conn_set_deadline(struct vio_conn *c, struct vio_timer *t, int64_t deadline_ns)
{
	VB_BUG_ON(c->deadline && c->deadline != t); /* one timer per connection */
	c->deadline = t;
	if (deadline_ns == 0) {
		vio_timer_disarm(t);
		return 0;
	}
	return vio_timer_arm(t, deadline_ns);
}

static bool deadline_passed(const struct vio_conn *c)
{
	return c->deadline && c->deadline->deadline != 0 && vio_timer_expired(c->deadline);
}

static void note_worker(struct vio_conn *c, struct vio_worker *w)
{
	if (c->last_worker && c->last_worker != w)
		VIO_STAT_INC(w, migrations);
	c->last_worker = w;
}

/* Before the connection's first operation on w (not a close): offer fd to
 * w's registered-file table, once. */
static void fixed_claim(struct vio_conn *c, struct vio_worker *w)
{
	const struct vio_backend_ops *be = w->io->be;

	if (c->cflags & VIO_CF_FIXED_TRIED)
		return;
	c->cflags |= VIO_CF_FIXED_TRIED;
	if (be->fixed_install && be->fixed_install(w, c))
		c->fixed_w = w;
}

void vio__fixed_post_close(struct vio_worker *w, int fd)
{
	struct vio_req *r = &w->fixed_reqs[fd];

	/* The peer must not wait for w: w runs its mailbox only between
	 * polls, so behind one long poll the socket would stay open (the
	 * slot holds it) and the peer see its EOF only when that poll ends.
	 * Shutting both directions now sends the FIN (and, as a close
	 * would, answers later data with a reset); the descriptor and the
	 * socket's memory stay until w clears the slot and closes fd.
	 * Nothing is in flight on fd any more (the callers waited for
	 * that); a socket the peer reset already fails with ENOTCONN,
	 * which changes nothing. */
	(void)shutdown(fd, SHUT_RDWR);
	/* Ours until the handler runs: slot fd is installed once at a time,
	 * and w frees it only by closing fd. Published by [IM1]. */
	r->type = VIO_REQ_FIXED_CLOSE;
	vio__mbox_post(w, r);
}

void vio__conn_close_fd(struct vio_conn *c)
{
	struct vio_worker *h = c->fixed_w;

	if (!h)
		close(c->fd);
	else if (h == vio__self())
		h->io->be->fixed_close(h, c->fd);
	else
		vio__fixed_post_close(h, c->fd);
}

/* An op that is not idle: collect it, or cancel it when the deadline has
 * passed, or keep waiting. */
static enum vrt_poll op_check(struct vio_conn *c, struct vio_op *op, uint32_t s, int32_t *res)
{
	if ((s & VIO_OP_DONE) && !(s & VIO_OP_MBOX)) {
		int32_t r = op->res;

		if (r == -ECANCELED && (op->tflags & VIO_TF_TIMEDOUT))
			r = -ETIMEDOUT;
		/* Relaxed: [IO2] showed the owner is done with the op. */
		atomic_store_explicit(&op->state, 0, memory_order_relaxed);
		op->tflags = 0;
		*res = r;
		return VRT_READY;
	}
	if ((s & VIO_OP_INFLIGHT) && !(op->tflags & VIO_TF_CANCELLED) && deadline_passed(c)) {
		op->tflags |= VIO_TF_CANCELLED | VIO_TF_TIMEDOUT;
		vio__op_cancel(op);
	}
	return VRT_PENDING;
}

/* Start (idle op) or check `op`. The caller consumed the budget. */
static enum vrt_poll conn_op(struct vio_conn *c, struct vio_worker *w, struct vio_op *op,
			     enum vio_kind kind, void *buf, size_t len,
			     struct iovec *iov, unsigned iovcnt, int32_t *res)
{
	/* [IO2] acquire: pairs with [IO1]/[IO5]. */
	uint32_t s = atomic_load_explicit(&op->state, memory_order_acquire);

	if (s != 0)
		return op_check(c, op, s, res);
	if (kind != VIO_K_CLOSE && deadline_passed(c)) {
		*res = -ETIMEDOUT;
		return VRT_READY;
	}
	op->kind = (uint8_t)kind;
	op->buf = buf;
	op->len = len;
	op->iov = iov;
	op->iovcnt = iovcnt;
	op->done = 0;
	op->tflags = 0;
	note_worker(c, w);
	if (kind != VIO_K_CLOSE)
		fixed_claim(c, w);
	if (vio__op_start(w, op)) {
		*res = op->res;
		return VRT_READY;
	}
	return VRT_PENDING;
}

/* The calling worker, when the call comes from a task on one. */
static struct vio_worker *task_worker(void)
{
	struct vio_worker *w = vio__self();

	return w && vrt_current() ? w : NULL;
}

/* ---------------------------------------------------------------- send */

enum vrt_poll vio_conn_send(struct vio_conn *c, const void *buf, size_t len, ssize_t *res)
{
	struct vio_worker *w = task_worker();
	enum vrt_poll p;
	int32_t r;

	if (!w) {
		*res = -EPERM;
		return VRT_READY;
	}
	VB_BUG_ON(!c->tx); /* vio_conn_tx_lend first */
	if (!vrt_budget_consume())
		return VRT_YIELD;
	if (len == 0 && atomic_load_explicit(&c->tx->state, memory_order_relaxed) == 0) {
		*res = 0;
		return VRT_READY;
	}
	p = conn_op(c, w, c->tx, VIO_K_SEND, (void *)buf, len, NULL, 0, &r);
	if (p == VRT_READY)
		*res = r < 0 ? r : (ssize_t)c->tx->done;
	return p;
}

enum vrt_poll vio_conn_sendv(struct vio_conn *c, struct iovec *iov, unsigned iovcnt,
			     ssize_t *res)
{
	struct vio_worker *w = task_worker();
	enum vrt_poll p;
	int32_t r;

	if (!w) {
		*res = -EPERM;
		return VRT_READY;
	}
	VB_BUG_ON(!c->tx); /* vio_conn_tx_lend first */
	if (!vrt_budget_consume())
		return VRT_YIELD;
	if (atomic_load_explicit(&c->tx->state, memory_order_relaxed) == 0) {
		/* Skip leading empty entries; nothing at all is sent at once. */
		while (iovcnt > 0 && iov->iov_len == 0) {
			iov++;
			iovcnt--;
		}
		if (iovcnt == 0) {
			*res = 0;
			return VRT_READY;
		}
	}
	p = conn_op(c, w, c->tx, VIO_K_SENDV, NULL, 0, iov, iovcnt, &r);
	if (p == VRT_READY)
		*res = r < 0 ? r : (ssize_t)c->tx->done;
	return p;
}

bool vio_conn_tx_quiet(struct vio_conn *c, bool quiet)
{
	uint32_t s;

	if (!c->tx)
		return false;
	/* Relaxed peek: only this task starts or collects the op. */
	s = atomic_load_explicit(&c->tx->state, memory_order_relaxed);
	if (!(s & VIO_OP_INFLIGHT) || c->tx->kind == VIO_K_CLOSE)
		return (s & VIO_OP_DONE) && !(s & VIO_OP_MBOX);
	/* [IO6] acq_rel: ordered against the owner's [IO1]; see op.c. */
	if (quiet)
		/* acq_rel: pairs with the owner worker's completion RMW on tx.state (see op.c). */
		s = atomic_fetch_or_explicit(&c->tx->state, VIO_OP_QUIET, memory_order_acq_rel);
	else
		s = atomic_fetch_and_explicit(&c->tx->state, ~VIO_OP_QUIET, memory_order_acq_rel);
	/* With a cancel request queued the mailbox still holds the op; its
	 * handler wakes the task. */
	return (s & VIO_OP_DONE) && !(s & VIO_OP_MBOX);
}

int vio_conn_shutdown_write(struct vio_conn *c)
{
	return shutdown(c->fd, SHUT_WR) < 0 ? -errno : 0;
}

/* ------------------------------------------------------------- receive */

/* Move whatever the owner pushed to the task's FIFO. */
static bool take_inbox(struct vio_conn *c)
{
	struct vio_buf *b, *rev = NULL, *next;

	if (!atomic_load_explicit(&c->inbox, memory_order_relaxed))
		return false; /* cheap peek; the push also wakes us */
	/* [C2] acquire: pairs with [C1]. */
	b = atomic_exchange_explicit(&c->inbox, NULL, memory_order_acquire);
	for (; b; b = next) { /* LIFO -> FIFO */
		next = b->next;
		b->next = rev;
		rev = b;
	}
	if (!rev)
		return false;
	if (c->rxq_tail)
		c->rxq_tail->next = rev;
	else
		c->rxq_head = rev;
	while (rev->next)
		rev = rev->next;
	c->rxq_tail = rev;
	return true;
}

static void rxq_pop(struct vio_worker *w, struct vio_conn *c)
{
	struct vio_buf *b = c->rxq_head;

	c->rxq_head = b->next;
	if (!c->rxq_head)
		c->rxq_tail = NULL;
	c->rx_off = 0;
	/* Relaxed: a heuristic count for the owner's throttle. */
	atomic_fetch_sub_explicit(&c->rx_queued, 1, memory_order_relaxed);
	vio__buf_release(w, b);
}

static size_t rx_copy(struct vio_worker *w, struct vio_conn *c, char *buf, size_t len)
{
	size_t got = 0;

	while (got < len && c->rxq_head) {
		struct vio_buf *b = c->rxq_head;
		size_t n = b->len - c->rx_off;

		if (n > len - got)
			n = len - got;
		memcpy(buf + got, vio__buf_data(b) + c->rx_off, n);
		got += n;
		c->rx_off += (uint32_t)n;
		if (c->rx_off == b->len)
			rxq_pop(w, c);
	}
	return got;
}

/* Return every buffer the connection holds (task side, rx op idle). */
static void rx_release_all(struct vio_worker *w, struct vio_conn *c)
{
	take_inbox(c);
	while (c->rxq_head)
		rxq_pop(w, c);
}

static bool use_multishot(const struct vio_worker *w, const struct vio_conn *c)
{
	return w->buf_count > 0 && w->io->cfg.recv_multishot &&
	       !(c->cflags & VIO_CF_PLAIN_ONCE) &&
	       !atomic_load_explicit(&w->io->ms_recv_broken, memory_order_relaxed);
}

/*
 * The multishot receive ended (state DONE, MBOX clear) and its buffers are
 * queued: decide what the next receive does. Returns 1 to go on, or 0 with
 * *res set for the caller.
 */
static int rx_ms_ended(struct vio_worker *w, struct vio_conn *c, ssize_t *res)
{
	int32_t term = c->rx.res;
	uint8_t tflags = c->rx.tflags;

	atomic_store_explicit(&c->rx.state, 0, memory_order_relaxed); /* [IO2] seen */
	c->rx.tflags = 0;
	c->rx.kind = VIO_K_NONE;
	if (term == 0) {
		c->cflags |= VIO_CF_EOF;
	} else if (term == VIO_MS_REARM) {
		/* ended with data but without CQE_F_MORE: arm again */
	} else if (term == -ENOBUFS) {
		VIO_STAT_INC(w, recv_enobufs);
		c->cflags |= VIO_CF_PLAIN_ONCE;
	} else if (term == -ECANCELED) {
		if (tflags & VIO_TF_TIMEDOUT) {
			*res = -ETIMEDOUT;
			return 0;
		}
		/* throttled by the owner: arm again when asked */
	} else if (term == -EINVAL || term == -EOPNOTSUPP) {
		/* The kernel has buffer rings but not multishot recv. */
		atomic_store_explicit(&w->io->ms_recv_broken, true, memory_order_relaxed);
	} else if (term < 0) {
		c->rx_err = term;
	}
	return 1;
}

/*
 * A lent receive without multishot: the buffer is the caller's for this
 * call only, so the wait for bytes holds none (VIO_K_RECV_WAIT: readiness,
 * a poll on io_uring, the descriptor's readiness with libev) and the
 * receive itself is made here once it reports. At its start the backend
 * may try the receive at once into the lent buffer (libev does, as it
 * does every operation: op->buf is set for that try only), so a caller
 * whose bytes are there pays no wait.
 */
static enum vrt_poll recv_lent_plain(struct vio_worker *w, struct vio_conn *c, void *buf, size_t len,
				     ssize_t *res)
{
	enum vrt_poll p;
	int32_t r;
	ssize_t n;

	for (;;) {
		/* [IO2] acquire: pairs with [IO1]/[IO5]. */
		uint32_t s = atomic_load_explicit(&c->rx.state, memory_order_acquire);

		if (s == 0) {
			/* A new wait: its start may receive at once. */
			c->cflags &= ~VIO_CF_PLAIN_ONCE;
			VIO_STAT_INC(w, recv_plain);
			p = conn_op(c, w, &c->rx, VIO_K_RECV_WAIT, buf, len, NULL, 0, &r);
			c->rx.buf = NULL; /* lent for the try at the start only */
			if (p != VRT_READY)
				return p;
			c->rx.kind = VIO_K_NONE;
			if (r == 0)
				c->cflags |= VIO_CF_EOF;
			*res = r;
			return VRT_READY;
		}
		VB_BUG_ON(c->rx.kind != VIO_K_RECV_WAIT); /* vio_conn_recv's receive under way */
		p = op_check(c, &c->rx, s, &r);
		if (p != VRT_READY)
			return p;
		c->rx.kind = VIO_K_NONE;
		if (r < 0) {
			*res = r; /* the deadline, a cancel */
			return VRT_READY;
		}
		/* Readable (or the end, or an error): receive now. */
		do
			n = recv(c->fd, buf, len, MSG_DONTWAIT);
		while (n < 0 && errno == EINTR);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			continue; /* spurious: wait again */
		if (n > 0) {
			VIO_STAT_ADD(w, recv_bytes, (uint64_t)n);
			/* vio_conn_rx_at. Relaxed: a statistic. */
			if (!atomic_load_explicit(&c->rx_at, memory_order_relaxed))
				atomic_store_explicit(&c->rx_at, vb_now_ns(), memory_order_relaxed);
		} else if (n == 0) {
			c->cflags |= VIO_CF_EOF;
		}
		*res = n < 0 ? -errno : n;
		return VRT_READY;
	}
}

static enum vrt_poll conn_recv(struct vio_conn *c, void *buf, size_t len, ssize_t *res, bool lent)
{
	struct vio_worker *w = task_worker();
	enum vrt_poll p;
	uint32_t s;
	int32_t r;

	if (!w) {
		*res = -EPERM;
		return VRT_READY;
	}
	if (!vrt_budget_consume())
		return VRT_YIELD;
	if (len > INT32_MAX)
		len = INT32_MAX;
	for (;;) {
		if (c->rxq_head || take_inbox(c)) {
			*res = (ssize_t)rx_copy(w, c, buf, len);
			return VRT_READY;
		}
		/* [IO2] acquire: pairs with [IO1]/[IO5]. */
		s = atomic_load_explicit(&c->rx.state, memory_order_acquire);
		if (c->rx.kind == VIO_K_RECV_MS && s != 0) {
			if (!(s & VIO_OP_DONE) || (s & VIO_OP_MBOX)) {
				if (take_inbox(c))
					continue;
				return op_check(c, &c->rx, s, &r);
			}
			/* Terminated: its buffers were pushed before [IO1]. */
			if (take_inbox(c))
				continue;
			if (!rx_ms_ended(w, c, res))
				return VRT_READY;
			continue;
		}
		if ((c->rx.kind == VIO_K_RECV || c->rx.kind == VIO_K_RECV_WAIT) && s != 0)
			break; /* a plain recv, or a lent one's wait, is under way */
		if (c->rx_err) {
			*res = c->rx_err;
			return VRT_READY;
		}
		if (c->cflags & VIO_CF_EOF) {
			*res = 0;
			return VRT_READY;
		}
		if (!use_multishot(w, c))
			break;
		if (deadline_passed(c)) {
			*res = -ETIMEDOUT;
			return VRT_READY;
		}
		c->rx.kind = VIO_K_RECV_MS;
		c->rx.tflags = 0;
		note_worker(c, w);
		fixed_claim(c, w);
		VIO_STAT_INC(w, recv_multishot_arms);
		vio__op_start(w, &c->rx); /* never finishes at once */
		return VRT_PENDING;
	}
	if (lent)
		return recv_lent_plain(w, c, buf, len, res);
	VB_BUG_ON(c->rx.kind == VIO_K_RECV_WAIT); /* a lent receive's wait is under way */
	/* Plain recv into the caller's buffer. */
	if (atomic_load_explicit(&c->rx.state, memory_order_relaxed) == 0) {
		c->cflags &= ~VIO_CF_PLAIN_ONCE;
		VIO_STAT_INC(w, recv_plain);
	}
	p = conn_op(c, w, &c->rx, VIO_K_RECV, buf, len, NULL, 0, &r);
	if (p == VRT_READY) {
		if (r == 0)
			c->cflags |= VIO_CF_EOF;
		*res = r;
	}
	return p;
}

enum vrt_poll vio_conn_recv(struct vio_conn *c, void *buf, size_t len, ssize_t *res)
{
	return conn_recv(c, buf, len, res, false);
}

enum vrt_poll vio_conn_recv_lent(struct vio_conn *c, void *buf, size_t len, ssize_t *res)
{
	return conn_recv(c, buf, len, res, true);
}

/* -------------------------------------------- owner side of multishot */

/*
 * Fair shares of the worker's provided buffers: while half of them or more
 * are out (rx_squeeze), every buffer that arrives becomes a heap copy and
 * the provided buffer goes back to the ring at once, and a connection may
 * queue only 2 before its multishot stops. Connections whose task is not
 * reading (a client that sends and never reads) then hold at most the half
 * of the ring they took before the squeeze, and can no longer push every
 * other connection of the worker onto the ENOBUFS path (without the
 * shares, 200 such connections held all 256 buffers). A reading connection
 * pays a copy while the squeeze lasts. The copies are charged to the heap
 * budget (vio_set_heap_budget: the server's share of max_inflight_bytes
 * for them); a copy that would pass it is not made and the provided
 * buffer is kept, so the heap stays within the budget and the ring is the
 * fixed reserve beyond it (reading connections then fall back to plain
 * receives; nothing is lost). Owner worker only.
 */
static struct vio_buf *rx_fair(struct vio_worker *w, struct vio_buf *b, uint32_t *limit)
{
	struct vio *io = w->io;
	struct vio_buf *h;
	int64_t len = (int64_t)b->len, cur;

	/* Relaxed: the owner's own gauge. */
	if (atomic_load_explicit(&w->st.bufs_out, memory_order_relaxed) < io->rx_squeeze || !b->w)
		return b;
	*limit = 2;
	/* Relaxed: a budget count; the bytes themselves are published by
	 * the inbox push ([C1]). A CAS so
	 * that io's own charges never take it past the budget, even for a
	 * moment. */
	cur = atomic_load_explicit(io->heap_used, memory_order_relaxed);
	do {
		if (cur + len > io->heap_max) {
			VIO_STAT_INC(w, rx_copy_refused);
			return b; /* over budget: the provided buffer stays */
		}
	} while (!atomic_compare_exchange_weak_explicit(io->heap_used, &cur, cur + len,
							memory_order_relaxed, memory_order_relaxed));
	h = malloc(sizeof(*h) + b->len);
	if (!h) {
		atomic_fetch_sub_explicit(io->heap_used, len, memory_order_relaxed);
		return b; /* keep the provided buffer: the throttle still holds */
	}
	memcpy(h + 1, vio__buf_data(b), b->len);
	h->w = NULL;
	h->charged = io->heap_used;
	h->len = b->len;
	h->bid = 0;
	VIO_STAT_INC(w, rx_copies);
	vio__buf_release(w, b);
	return h;
}

void vio__conn_rx_push(struct vio_worker *w, struct vio_conn *c, struct vio_buf *b)
{
	struct vio_buf *head;
	uint32_t queued, limit = w->io->rx_throttle;

	/* Relaxed peek: a push racing with the detach is still drained by
	 * vio__conn_detached_done at the terminal completion. */
	if (atomic_load_explicit(&c->rx.state, memory_order_relaxed) & VIO_OP_DETACHED) {
		vio__buf_release(w, b);
		return;
	}
	b = rx_fair(w, b, &limit);
	head = atomic_load_explicit(&c->inbox, memory_order_relaxed);
	do {
		b->next = head;
		/* [C1] release: publishes b->len and the data; pairs with [C2]. */
	} while (!atomic_compare_exchange_weak_explicit(&c->inbox, &head, b,
							memory_order_release,
							memory_order_relaxed));
	/* Relaxed: a heuristic count (see rxq_pop). */
	queued = atomic_fetch_add_explicit(&c->rx_queued, 1, memory_order_relaxed) + 1;
	if (queued >= limit && !(c->rx.wflags & VIO_WF_THROTTLED)) {
		/* The task is not reading: stop filling the worker's buffers. */
		c->rx.wflags |= VIO_WF_THROTTLED;
		w->io->be->cancel(w, &c->rx);
	}
	vrt_task_wake(c->rx.task); /* our in-flight reference keeps it alive */
}

void vio__conn_detached_done(struct vio_worker *w, struct vio_op *op)
{
	struct vio_conn *c = op->conn;

	/* A close request closed the fd itself; the abandon that detached it
	 * counted nothing down (see vio_conn_abandon). */
	if (op->kind == VIO_K_CLOSE)
		return;
	if (op->kind == VIO_K_RECV_MS) {
		/* [C2] acquire: every push came from this thread anyway. */
		struct vio_buf *b = atomic_exchange_explicit(&c->inbox, NULL, memory_order_acquire);
		while (b) {
			struct vio_buf *next = b->next;
			vio__buf_release(w, b);
			b = next;
		}
	}
	/* [C3] acq_rel: the last one closes. */
	if (atomic_fetch_sub_explicit(&c->close_count, 1, memory_order_acq_rel) == 1)
		vio__conn_close_fd(c);
}

/* --------------------------------------------------------------- close */

enum vrt_poll vio_conn_close(struct vio_conn *c, int *res)
{
	struct vio_worker *w = task_worker();
	struct vio_op *ops[2] = { &c->rx, c->tx };
	bool busy = false;
	enum vrt_poll p;
	int32_t r;

	if (!w) {
		*res = -EPERM;
		return VRT_READY;
	}
	VB_BUG_ON(!c->tx); /* vio_conn_tx_lend first: the close is its operation */
	if (!vrt_budget_consume())
		return VRT_YIELD;
	if (c->tx->kind != VIO_K_CLOSE) {
		if (c->deadline)
			vio_timer_disarm(c->deadline);
		/* The close waits for the send under way: its end must wake
		 * us, even a quiet success ([IO6] before the [IO2] below: a
		 * send that ended first is seen DONE there, one that ends
		 * after sees QUIET clear and wakes us). Otherwise a quiet
		 * send that succeeds after the close asked for its cancel
		 * wakes nobody, and the connection stays closing for good. */
		vio_conn_tx_quiet(c, false);
		for (unsigned i = 0; i < 2; i++) {
			struct vio_op *op = ops[i];
			/* [IO2] acquire: pairs with [IO1]/[IO5]. */
			uint32_t s = atomic_load_explicit(&op->state, memory_order_acquire);

			if (s == 0)
				continue;
			if ((s & VIO_OP_DONE) && !(s & VIO_OP_MBOX)) {
				atomic_store_explicit(&op->state, 0, memory_order_relaxed);
				continue;
			}
			busy = true;
			if ((s & VIO_OP_INFLIGHT) && !(op->tflags & VIO_TF_CANCELLED)) {
				op->tflags |= VIO_TF_CANCELLED;
				vio__op_cancel(op);
			}
		}
		if (busy)
			return VRT_PENDING;
		rx_release_all(w, c);
		c->rx.kind = VIO_K_NONE;
		c->tx->kind = VIO_K_NONE;
		if (c->fixed_w && c->fixed_w != w) {
			/* Its table slot is on another worker, which must clear
			 * it before the socket closes: that worker closes it. */
			vio__fixed_post_close(c->fixed_w, c->fd);
			c->fd = -1;
			*res = 0;
			return VRT_READY;
		}
	}
	p = conn_op(c, w, c->tx, VIO_K_CLOSE, NULL, 0, NULL, 0, &r);
	if (p == VRT_READY) {
		c->tx->kind = VIO_K_NONE;
		c->fd = -1;
		*res = r;
	}
	return p;
}

void vio_conn_abandon(struct vio_conn *c)
{
	struct vio_worker *w = vio__self();
	struct vio_op *ops[2] = { &c->rx, c->tx };
	bool rx_inflight = false;

	if (c->deadline)
		vio_timer_disarm(c->deadline);
	if (c->fd < 0)
		return; /* closed by vio_conn_close */
	if (c->tx && c->tx->kind == VIO_K_CLOSE) {
		/* vio_conn_close started the close request (its receive and
		 * send were over by then) but did not collect it: the request
		 * closes the fd, in flight or already done; closing it here too
		 * could close a descriptor someone has opened on the number
		 * since. [IO4] acq_rel: whichever of [IO1]/[IO4] comes second sees
		 * the other; a detached close completes silently. */
		atomic_fetch_or_explicit(&c->tx->state, VIO_OP_DETACHED, memory_order_acq_rel);
		return;
	}
	/* Relaxed: published to the owners by the [IO4] RMWs below. */
	atomic_store_explicit(&c->close_count, 3, memory_order_relaxed);
	for (unsigned i = 0; i < 2; i++) {
		struct vio_op *op = ops[i];

		if (!op) {
			/* No send op lent: nothing of it to wait for. [C3] */
			atomic_fetch_sub_explicit(&c->close_count, 1, memory_order_acq_rel);
			continue;
		}
		/* [IO4] acq_rel: ordered against the owner's [IO1]. */
		uint32_t s = atomic_fetch_or_explicit(&op->state, VIO_OP_DETACHED,
						      memory_order_acq_rel);

		if (s & VIO_OP_INFLIGHT) {
			/* Its completion counts down (vio__conn_detached_done). */
			if (op == &c->rx)
				rx_inflight = true;
			if (!(op->tflags & VIO_TF_CANCELLED)) {
				op->tflags |= VIO_TF_CANCELLED;
				vio__op_cancel(op);
			}
			continue;
		}
		/* Nothing in flight (a pending mailbox request, if any, only
		 * wakes and unrefs): count down for it ourselves. [C3] */
		atomic_fetch_sub_explicit(&c->close_count, 1, memory_order_acq_rel);
	}
	/* An rx still in flight drains its own inbox at its completion. */
	if (!rx_inflight)
		take_inbox(c);
	while (c->rxq_head)
		rxq_pop(w, c);
	/* [C3] acq_rel: the last one closes; c->fd is not written again. */
	if (atomic_fetch_sub_explicit(&c->close_count, 1, memory_order_acq_rel) == 1)
		vio__conn_close_fd(c);
}
