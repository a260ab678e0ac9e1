/* SPDX-License-Identifier: MIT */
/*
 * io/uring.c: the io_uring backend's hot path (the backend is described in
 * uring.h; its set-up is uring_setup.c): submission and the enters, the
 * registered-file table in use, operations, listeners, completions in CQ
 * order, and the worker's poll, flush, wait and kick.
 *
 * Threading: every function here runs on the ring's worker thread, except
 * kick (any thread: writes the eventfd).
 *
 * Ordering: the ring itself is single-threaded (SINGLE_ISSUER); the kernel
 * side is ordered by liburing. The provided-buffer ring's tail is published
 * with io_uring_buf_ring_advance (store-release for the kernel). Cross-
 * thread state lives in op.c, socket.c and driver.c.
 */
#include "config.h"

#include "io/uring.h"
#include "base/histogram.h"
#include "base/time.h"

#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define REAP_BATCH 64

/* How long a park that submitted quiet sends waits for one completion
 * more than those sends (ur_wait). */
#define QUIET_WAIT_US 1000

/* Test hook (internal.h): vio__uring_get_sqe treats a full SQ as the
 * kernel's -EBUSY (its CQ must be emptied before it takes more
 * submissions). */
bool vio__uring_test_sq_busy;
/* Test hook (internal.h): this many receives and sends in 1000 end with
 * -EAGAIN without reaching the kernel (a NOP stands in for them), as the
 * kernel may end them on an O_NONBLOCK socket. */
uint32_t vio__uring_test_eagain_permille;

static struct vb_ratelimit fixed_rl = VB_RATELIMIT_INIT(5000, 3);

/* ------------------------------------------------------------ submission */

/* Move every CQE from the CQ to the stash (in order), advancing the CQ so
 * the kernel can post more. Dispatches nothing: vio__uring_get_sqe may run
 * inside a completion handler, and dispatching there would run later CQEs
 * before the earlier ones still waiting in the reap that called the handler
 * (a multishot receive's final CQE before its buffers: bytes out of order). */
static unsigned stash_cqes(struct vio_uring_w *uw)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	io_uring_for_each_cqe(&uw->ring, head, cqe) {
		if (uw->stash_tail == uw->stash_cap) {
			if (uw->stash_head) {
				memmove(uw->cq_stash, uw->cq_stash + uw->stash_head,
					(uw->stash_tail - uw->stash_head) * sizeof(*cqe));
				uw->stash_tail -= uw->stash_head;
				uw->stash_head = 0;
			} else {
				unsigned cap = uw->stash_cap ? 2 * uw->stash_cap : REAP_BATCH;
				struct io_uring_cqe *v = realloc(uw->cq_stash, cap * sizeof(*v));

				if (!v)
					break; /* the rest stays in the CQ (NODROP) */
				uw->cq_stash = v;
				uw->stash_cap = cap;
			}
		}
		uw->cq_stash[uw->stash_tail++] = *cqe;
		n++;
	}
	io_uring_cq_advance(&uw->ring, n);
	return n;
}

/*
 * The SQEs the next enter hands to the kernel. A send's connection whose
 * request bytes a reap delivered since its last send gets its rx_tx time
 * (that reap to `now`: how long a response waits on this worker).
 * Returns how many sends are quiet (VIO_OP_QUIET: a keep-alive response
 * whose success wakes nobody).
 */
static unsigned sq_scan(struct vio_worker *w, unsigned from, unsigned to, int64_t now)
{
	struct io_uring_sq *sq = &uring_worker(w)->ring.sq;
	unsigned quiet = 0;

	for (unsigned i = from; i != to; i++) {
		const struct io_uring_sqe *sqe = &sq->sqes[i & sq->ring_mask];
		struct vio_op *op;
		int64_t t;

		if ((sqe->opcode != IORING_OP_SEND && sqe->opcode != IORING_OP_SENDMSG) ||
		    (sqe->user_data & TAG_MASK) != TAG_OP)
			continue;
		op = (struct vio_op *)(uintptr_t)sqe->user_data;
		/* Relaxed: a hint. Set by the task before it waits (on this
		 * thread, or it was stolen after); a stale value costs an
		 * enter or at most QUIET_WAIT_US, never a lost wakeup. */
		if (atomic_load_explicit(&op->state, memory_order_relaxed) & VIO_OP_QUIET)
			quiet++;
		/* Relaxed: a statistic; the stamp may come from another
		 * worker's reap (a migrated connection), any value will do. */
		if (vb_unlikely(op->conn->trace_tx != NULL) && !op->conn->trace_tx[0])
			op->conn->trace_tx[0] = now; /* vio_conn_trace_tx */
		t = atomic_load_explicit(&op->conn->rx_at, memory_order_relaxed);
		if (!t)
			continue;
		atomic_store_explicit(&op->conn->rx_at, 0, memory_order_relaxed);
		vb_hist_record_owner(&w->hist[VIO_HIST_RX_TX], now > t ? (uint64_t)(now - t) : 0);
	}
	return quiet;
}

/*
 * Every io_uring_enter of this backend (counted: enters). With `submit`,
 * hands the kernel what is queued in the SQ first, as liburing's
 * __io_uring_flush_sq does (liburing maps SQ slot i to SQE i at setup, so
 * publishing the tail is all it takes), and records how long the oldest
 * waited (sq_wait). With IORING_ENTER_GETEVENTS it runs the ring's deferred
 * task work and waits for min_complete CQEs in the CQ (those already there
 * count) or `ts`. With `quiet` (the park's wait, kernel 6.12's min-timeout
 * wait), it waits for one more CQE per quiet send it submits, for at most
 * QUIET_WAIT_US, after which one CQE is enough; *quiet says how many.
 * Returns the count submitted or -errno.
 */
int vio__uring_enter(struct vio_worker *w, bool submit, unsigned min_complete, unsigned flags,
		     const struct __kernel_timespec *ts, unsigned *quiet)
{
	struct vio_uring_w *uw = uring_worker(w);
	struct io_uring_sq *sq = &uw->ring.sq;
	struct io_uring_getevents_arg arg;
	unsigned to_submit = 0, nquiet = 0;
	uint32_t min_wait_us = 0;
	long r;

	if (submit) {
		unsigned tail = sq->sqe_tail, head = IO_URING_READ_ONCE(*sq->khead);

		if (sq->sqe_head != tail) {
			sq->sqe_head = tail;
			/* The syscall orders it (no SQPOLL thread reads it). */
			IO_URING_WRITE_ONCE(*sq->ktail, tail);
		}
		to_submit = tail - head;
		uw->submit_due = false;
		if (to_submit) {
			int64_t now = vb_now_ns();

			vb_hist_record_owner(&w->hist[VIO_HIST_SQ_WAIT],
					     now > uw->sq_since ? (uint64_t)(now - uw->sq_since) : 0);
			nquiet = sq_scan(w, head, tail, now);
		}
	}
	if (quiet) {
		*quiet = uw->min_wait ? nquiet : 0;
		min_complete += *quiet;
		min_wait_us = *quiet ? QUIET_WAIT_US : 0;
	}
	if (flags & IORING_ENTER_GETEVENTS) {
		memset(&arg, 0, sizeof(arg));
		arg.sigmask_sz = _NSIG / 8;
		arg.pad = min_wait_us; /* min_wait_usec */
		arg.ts = (uint64_t)(uintptr_t)ts;
		flags |= IORING_ENTER_EXT_ARG;
	}
	VIO_STAT_INC(w, enters);
	r = syscall(__NR_io_uring_enter, uw->ring.ring_fd, to_submit, min_complete, flags,
		    (flags & IORING_ENTER_EXT_ARG) ? &arg : NULL,
		    (flags & IORING_ENTER_EXT_ARG) ? sizeof(arg) : 0);
	if (flags & IORING_ENTER_GETEVENTS)
		uw->collected_ns = vb_now_ns();
	return r < 0 ? -errno : (int)r;
}

/* An SQE, flushing a full SQ first (never drops a request). */
struct io_uring_sqe *vio__uring_get_sqe(struct vio_worker *w)
{
	struct vio_uring_w *uw = uring_worker(w);
	struct io_uring_sqe *sqe;
	unsigned tries = 0;

	if (!io_uring_sq_ready(&uw->ring))
		uw->sq_since = vb_now_ns(); /* the first of a batch (ur_flush) */
	while (!(sqe = io_uring_get_sqe(&uw->ring))) {
		int r;

		VIO_STAT_INC(w, sq_full);
		r = vio__uring_test_sq_busy ? -EBUSY : vio__uring_enter(w, true, 0, 0, NULL, NULL);
		if (r < 0 && r != -EINTR) {
			/* -EBUSY / -EAGAIN: the kernel wants the CQ emptied
			 * first. Stash, never dispatch (stash_cqes). */
			vio__uring_enter(w, false, 0, IORING_ENTER_GETEVENTS, NULL, NULL);
			stash_cqes(uw);
			if (vio__uring_test_sq_busy)
				vio__uring_enter(w, true, 0, 0, NULL, NULL);
		}
		VB_BUG_ON(++tries > 100000);
	}
	return sqe;
}

/* vio__uring_test_eagain_permille: should this receive or send end with
 * a made-up -EAGAIN? Then a NOP carries its user_data instead. */
static bool test_fake_eagain(struct vio_worker *w, struct vio_op *op, struct io_uring_sqe *sqe)
{
	struct vio_uring_w *uw = uring_worker(w);
	uint64_t x;

	if (!vio__uring_test_eagain_permille || op->kind == VIO_K_CLOSE)
		return false;
	x = uw->test_rng ? uw->test_rng : 0x9E3779B97F4A7C15ull + w->id;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	uw->test_rng = x;
	if (x % 1000 >= vio__uring_test_eagain_permille)
		return false;
	io_uring_prep_nop(sqe);
	io_uring_sqe_set_data64(sqe, user_data(op, op->kind == VIO_K_RECV_MS ? TAG_MS : TAG_OP));
	op->wflags |= VIO_WF_FAKE_EAGAIN;
	return true;
}

/* ------------------------------------------------ registered-file table */

/* Slot fd of w's table holds descriptor fd. Owner. */
static bool fixed_holds(const struct vio_uring_w *uw, int fd)
{
	return uw->fixed_held && fd >= 0 && (uint32_t)fd < uw->fixed_slots && uw->fixed_held[fd];
}

/* Queue the clear of slot fd if it is set: ahead of whatever closes fd. */
static void fixed_clear(struct vio_worker *w, int fd)
{
	struct vio_uring_w *uw = uring_worker(w);
	struct io_uring_sqe *sqe;

	if (!fixed_holds(uw, fd))
		return;
	uw->fixed_held[fd] = 0;
	sqe = vio__uring_get_sqe(w);
	io_uring_prep_close_direct(sqe, (unsigned)fd);
	sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(sqe, ((uint64_t)fd << 3) | TAG_FIXED);
}

static bool ur_fixed_install(struct vio_worker *w, struct vio_conn *c)
{
	struct vio_uring_w *uw = uring_worker(w);
	struct io_uring_sqe *sqe;
	int fd = c->fd;

	/* Set already: impossible while fd is open (socket.c); stay regular. */
	if (!uw->fixed_held || fd < 0 || (uint32_t)fd >= uw->fixed_slots || uw->fixed_held[fd])
		return false;
	sqe = vio__uring_get_sqe(w);
	/* The kernel reads c->fd when the SQE is issued: the operation the
	 * task submits next holds its memory until after that. */
	io_uring_prep_files_update(sqe, &c->fd, 1, fd);
	sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(sqe, ((uint64_t)fd << 3) | TAG_FIXED);
	uw->fixed_held[fd] = 1;
	VIO_STAT_INC(w, fixed_installs);
	return true;
}

static void ur_fixed_close(struct vio_worker *w, int fd)
{
	struct io_uring_sqe *sqe;

	fixed_clear(w, fd);
	sqe = vio__uring_get_sqe(w);
	io_uring_prep_close(sqe, fd);
	io_uring_sqe_set_data64(sqe, user_data(NULL, TAG_IGNORE));
	uring_worker(w)->inflight++;
}

/* A table update the kernel refused. The slot stays marked: the
 * connection's fixed operations fail (-EBADF) and it ends; its clear
 * fails too, harmlessly. Unmarking here could unmark a later install of
 * the same number whose update is already queued. */
static void fixed_cqe(struct vio_worker *w, int res)
{
	VIO_STAT_INC(w, fixed_update_errors);
	vb_log_rl(&fixed_rl, LOG_WARNING, "io: worker %u: registered-file update: %s", w->id,
		  strerror(-res));
}

/* ------------------------------------------------------------ operations */

static void prep_op(struct vio_worker *w, struct vio_op *op)
{
	struct io_uring_sqe *sqe;
	int fd = op->conn->fd;
	bool fixed;

	if (op->kind == VIO_K_CLOSE)
		fixed_clear(w, fd); /* before the close's SQE */
	sqe = vio__uring_get_sqe(w);
	if (test_fake_eagain(w, op, sqe))
		return;
	/* Slot fd of this ring holds this connection's socket (socket.c). */
	fixed = op->kind != VIO_K_CLOSE && fixed_holds(uring_worker(w), fd);
	if (fixed)
		VIO_STAT_INC(w, fixed_ops);
	switch (op->kind) {
	case VIO_K_RECV:
		io_uring_prep_recv(sqe, fd, op->buf, op->len, 0);
		break;
	case VIO_K_RECV_WAIT:
		/* A lent receive waits for readability, no buffer held; the
		 * task receives once this ends. */
		io_uring_prep_poll_add(sqe, fd, POLLIN);
		break;
	case VIO_K_RECV_MS:
		io_uring_prep_recv_multishot(sqe, fd, NULL, 0, 0);
		sqe->flags |= IOSQE_BUFFER_SELECT | (fixed ? IOSQE_FIXED_FILE : 0);
		sqe->buf_group = BGID;
		io_uring_sqe_set_data64(sqe, user_data(op, TAG_MS));
		return;
	case VIO_K_SEND:
		io_uring_prep_send(sqe, fd, (char *)op->buf + op->done, op->len - op->done,
				   MSG_NOSIGNAL);
		break;
	case VIO_K_SENDV:
		memset(&op->u.msg, 0, sizeof(op->u.msg));
		op->u.msg.msg_iov = op->iov;
		op->u.msg.msg_iovlen = op->iovcnt;
		io_uring_prep_sendmsg(sqe, fd, &op->u.msg, MSG_NOSIGNAL);
		break;
	case VIO_K_CLOSE:
		io_uring_prep_close(sqe, fd);
		break;
	default:
		VB_BUG_ON(1);
	}
	if (fixed)
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, user_data(op, TAG_OP));
}

static void ur_submit(struct vio_worker *w, struct vio_op *op)
{
	uring_worker(w)->inflight++;
	prep_op(w, op);
}

static void ur_cancel(struct vio_worker *w, struct vio_op *op)
{
	struct vio_uring_w *uw = uring_worker(w);
	struct io_uring_sqe *sqe = vio__uring_get_sqe(w);

	io_uring_prep_cancel64(sqe, user_data(op, op->kind == VIO_K_RECV_MS ? TAG_MS : TAG_OP), 0);
	io_uring_sqe_set_data64(sqe, user_data(NULL, TAG_IGNORE));
	uw->inflight++;
}

static void arm_wake(struct vio_worker *w)
{
	struct vio_uring_w *uw = uring_worker(w);
	struct io_uring_sqe *sqe = vio__uring_get_sqe(w);

	io_uring_prep_read(sqe, uw->efd, &uw->efd_val, sizeof(uw->efd_val), 0);
	io_uring_sqe_set_data64(sqe, user_data(NULL, TAG_WAKE));
	uw->efd_armed = true;
	uw->inflight++;
}

/* ------------------------------------------------------------ listeners */

static void ur_lsock_arm(struct vio_worker *w, struct vio_lsock *ls)
{
	struct io_uring_sqe *sqe;

	if (ls->armed || ls->stopping || ls->fd_closed)
		return;
	sqe = vio__uring_get_sqe(w);
	if (atomic_load_explicit(&w->io->ms_accept_broken, memory_order_relaxed))
		io_uring_prep_accept(sqe, ls->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	else
		io_uring_prep_multishot_accept(sqe, ls->fd, NULL, NULL,
					       SOCK_NONBLOCK | SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, user_data(ls, TAG_LSOCK));
	ls->armed = true;
	uring_worker(w)->inflight++;
	VIO_STAT_INC(w, submitted);
}

static void lsock_close_fd(struct vio_lsock *ls)
{
	if (!ls->fd_closed) {
		vio__lsock_close_fd(ls);
		ls->fd_closed = true;
		vio__lsock_done(ls);
	}
}

static void ur_lsock_stop(struct vio_worker *w, struct vio_lsock *ls)
{
	if (ls->armed) {
		struct io_uring_sqe *sqe = vio__uring_get_sqe(w);

		io_uring_prep_cancel64(sqe, user_data(ls, TAG_LSOCK), 0);
		io_uring_sqe_set_data64(sqe, user_data(NULL, TAG_IGNORE));
		uring_worker(w)->inflight++;
		return; /* the fd closes at the final CQE */
	}
	lsock_close_fd(ls);
}

static void lsock_cqe(struct vio_worker *w, struct vio_lsock *ls, int res, unsigned flags)
{
	bool more = flags & IORING_CQE_F_MORE;

	if (!more) {
		ls->armed = false;
		uring_worker(w)->inflight--;
	}
	if (res >= 0) {
		VIO_STAT_INC(w, accepts);
		if (!vio__lsock_push(ls, res) && more) {
			struct io_uring_sqe *sqe = vio__uring_get_sqe(w);

			/* Throttled: stop until the acceptor drains the queue. */
			io_uring_prep_cancel64(sqe, user_data(ls, TAG_LSOCK), 0);
			io_uring_sqe_set_data64(sqe, user_data(NULL, TAG_IGNORE));
			uring_worker(w)->inflight++;
		}
		/* A one-shot accept is re-armed by vio__lsock_service. */
	} else if (!more && !ls->stopping) {
		if (res == -EINVAL &&
			 !atomic_load_explicit(&w->io->ms_accept_broken, memory_order_relaxed))
			/* No multishot accept in this kernel: one-shot from now on. */
			atomic_store_explicit(&w->io->ms_accept_broken, true, memory_order_relaxed);
		else if (res != -ECANCELED)
			vio__lsock_error(ls, -res);
	}
	/* A stopped listener's socket closes after its last CQE. */
	if (!ls->armed && ls->stopping)
		lsock_close_fd(ls);
}

/* ------------------------------------------------------------ completion */

/*
 * A receive or send on an O_NONBLOCK socket may end with -EAGAIN: the
 * kernel arms a poll and issues it again on every wake-up, but after 128
 * wake-ups that found nothing (APOLL_MAX_RETRY) it hands the request to an
 * io-wq thread, whose attempt on a non-blocking socket returns -EAGAIN to
 * us. It is "not ready yet", never an error: issue it again (from where it
 * stopped) unless it is being cancelled. Seen under load as a server that
 * dropped a healthy connection mid-echo (test_io_echo, 1 in ~75 runs).
 */
static bool retry_eagain(struct vio_worker *w, struct vio_op *op, int *res)
{
	if (*res != -EAGAIN)
		return false;
	/* Relaxed: CANCEL only says "do not go on"; a missed bit is followed
	 * by the cancel request, which finds the request issued again. */
	if (uring_worker(w)->stopping ||
	    (atomic_load_explicit(&op->state, memory_order_relaxed) & VIO_OP_CANCEL)) {
		*res = -ECANCELED; /* what the cancel would have said */
		return false;
	}
	VIO_STAT_INC(w, eagain_retries);
	uring_worker(w)->inflight++;
	prep_op(w, op);
	return true;
}

/* Bytes arrived for c: the first since its last send starts its rx_tx
 * time (sq_scan). */
static void rx_stamp(struct vio_worker *w, struct vio_conn *c)
{
	/* Relaxed: a statistic (see sq_scan); no RMW on the hot path. */
	if (!atomic_load_explicit(&c->rx_at, memory_order_relaxed))
		atomic_store_explicit(&c->rx_at, uring_worker(w)->reap_ns, memory_order_relaxed);
}

static void op_cqe(struct vio_worker *w, struct vio_op *op, int res)
{
	uring_worker(w)->inflight--;
	if (op->wflags & VIO_WF_FAKE_EAGAIN) {
		op->wflags &= (uint8_t)~VIO_WF_FAKE_EAGAIN;
		res = -EAGAIN;
	}
	if (retry_eagain(w, op, &res))
		return;
	switch (op->kind) {
	case VIO_K_SEND:
	case VIO_K_SENDV:
		if (res > 0) {
			VIO_STAT_ADD(w, send_bytes, (uint64_t)res);
			if (vio__op_send_advance(op, (size_t)res)) {
				/* Relaxed: CANCEL only says "do not go on"; a
				 * missed bit is followed by the cancel request. */
				if (uring_worker(w)->stopping ||
				    (atomic_load_explicit(&op->state, memory_order_relaxed) &
				     VIO_OP_CANCEL)) {
					vio__op_complete(w, op, -ECANCELED);
					return;
				}
				VIO_STAT_INC(w, send_partial);
				uring_worker(w)->inflight++;
				prep_op(w, op);
				return;
			}
			res = 0;
		} else if (res == 0) {
			res = -EPIPE; /* nothing taken from a non-empty send */
		}
		if (vb_unlikely(op->conn->trace_tx != NULL))
			op->conn->trace_tx[1] = uring_worker(w)->reap_ns; /* vio_conn_trace_tx */
		break;
	case VIO_K_RECV:
		if (res > 0) {
			VIO_STAT_ADD(w, recv_bytes, (uint64_t)res);
			rx_stamp(w, op->conn);
		}
		break;
	case VIO_K_RECV_WAIT:
		if (res > 0)
			res = 0; /* the poll's events: readable, or the end, or an error */
		break;
	default:
		break;
	}
	vio__op_complete(w, op, res);
}

/* Owner: give a provided buffer back to the kernel (buf_recycle). */
static void ur_buf_recycle(struct vio_worker *w, struct vio_buf *b)
{
	struct vio_uring_w *uw = uring_worker(w);

	io_uring_buf_ring_add(uw->br, vio__buf_data(b), w->buf_size, b->bid, (int)uw->br_mask, 0);
	io_uring_buf_ring_advance(uw->br, 1);
	atomic_store_explicit(&w->st.bufs_out,
			      atomic_load_explicit(&w->st.bufs_out, memory_order_relaxed) - 1,
			      memory_order_relaxed); /* single writer */
}

static void ms_cqe(struct vio_worker *w, struct vio_op *op, int res, unsigned flags)
{
	if (op->wflags & VIO_WF_FAKE_EAGAIN) {
		op->wflags &= (uint8_t)~VIO_WF_FAKE_EAGAIN;
		res = -EAGAIN;
		flags = 0;
	}
	if (flags & IORING_CQE_F_BUFFER) {
		struct vio_buf *b = &w->bufs[flags >> IORING_CQE_BUFFER_SHIFT];

		atomic_store_explicit(&w->st.bufs_out,
				      atomic_load_explicit(&w->st.bufs_out, memory_order_relaxed) + 1,
				      memory_order_relaxed); /* single writer */
		if (res > 0) {
			b->len = (uint32_t)res;
			VIO_STAT_ADD(w, recv_bytes, (uint64_t)res);
			rx_stamp(w, op->conn);
			vio__conn_rx_push(w, op->conn, b);
		} else {
			ur_buf_recycle(w, b);
		}
	}
	if (flags & IORING_CQE_F_MORE)
		return;
	uring_worker(w)->inflight--;
	if (res == -EAGAIN) {
		/* Not ready yet (see retry_eagain): the task arms it again. */
		VIO_STAT_INC(w, eagain_retries);
		res = VIO_MS_REARM;
	}
	vio__op_complete(w, op, res > 0 ? VIO_MS_REARM : res);
}

static void cqe_dispatch(struct vio_worker *w, const struct io_uring_cqe *cqe)
{
	void *p = (void *)(uintptr_t)(cqe->user_data & ~(uint64_t)TAG_MASK);
	struct vio_uring_w *uw = uring_worker(w);

	if ((cqe->user_data & TAG_MASK) < TAG_WAKE)
		uw->io_cqes++;
	switch (cqe->user_data & TAG_MASK) {
	case TAG_OP:
		op_cqe(w, p, cqe->res);
		break;
	case TAG_MS:
		ms_cqe(w, p, cqe->res, cqe->flags);
		break;
	case TAG_LSOCK:
		lsock_cqe(w, p, cqe->res, cqe->flags);
		break;
	case TAG_WAKE:
		uw->efd_armed = false;
		uw->inflight--;
		break;
	case TAG_IGNORE:
		uw->inflight--;
		break;
	case TAG_FIXED:
		fixed_cqe(w, cqe->res);
		break;
	default:
		VB_BUG_ON(1);
	}
}

/* Dispatch CQEs in CQ order: the stash first (CQEs vio__uring_get_sqe
 * moved there), then the CQ, through the stash, one at a time, so that a
 * handler whose submission stashes more CQEs (SQ full) appends them behind
 * the ones already waiting. Never re-entered: handlers do not reap. */
void vio__uring_reap(struct vio_worker *w)
{
	struct vio_uring_w *uw = uring_worker(w);
	unsigned n = 0;

	for (;;) {
		struct io_uring_cqe cqe;

		if (uw->stash_head == uw->stash_tail) {
			uw->stash_head = uw->stash_tail = 0;
			if (!io_uring_cq_ready(&uw->ring) || stash_cqes(uw) == 0)
				break;
		}
		if (n++ == 0)
			uw->reap_ns = vb_now_ns(); /* rx_at's stamp */
		cqe = uw->cq_stash[uw->stash_head++];
		/* CQ order holds only if no handler dispatches. */
		VB_BUG_ON(uw->dispatching);
		uw->dispatching = true;
		cqe_dispatch(w, &cqe);
		uw->dispatching = false;
	}
	if (n) {
		VIO_STAT_INC(w, reaps);
		VIO_STAT_ADD(w, reap_cqes, n);
	}
}

/* ------------------------------------------------------------ the loop */

/* Completions wait in the kernel (deferred task work) until the worker
 * enters to collect them: at most since its last collection. */
static void cq_lag(struct vio_worker *w)
{
	int64_t now = vb_now_ns(), last = uring_worker(w)->collected_ns;

	if (last && now > last)
		vb_hist_record_owner(&w->hist[VIO_HIST_CQ_LAG], (uint64_t)(now - last));
}

/* A poll while the worker is busy: one enter submits what is queued and
 * collects what the kernel holds for us (deferred task work, an overflowed
 * CQ); none when there is neither. */
static void ur_poll(struct vio_worker *w)
{
	struct vio_uring_w *uw = uring_worker(w);
	unsigned f = IO_URING_READ_ONCE(*uw->ring.sq.kflags);

	if (f & IORING_SQ_CQ_OVERFLOW)
		VIO_STAT_INC(w, cq_overflow);
	if (f & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)) {
		cq_lag(w);
		vio__uring_enter(w, true, 0, IORING_ENTER_GETEVENTS, NULL, NULL);
	} else if (io_uring_sq_ready(&uw->ring)) {
		vio__uring_enter(w, true, 0, IORING_ENTER_GETEVENTS, NULL, NULL);
	}
	if (io_uring_cq_ready(&uw->ring) || uw->stash_head != uw->stash_tail)
		vio__uring_reap(w);
}

/*
 * The poll before a park enters the kernel only when it holds completions
 * for us; SQEs alone stay queued, marked due: the park's wait submits them
 * in the enter that sleeps, so a park costs one io_uring_enter, not two.
 * If the worker finds work instead, the flush after its next task poll
 * submits them (so does a park the runtime aborts for work that appeared
 * meanwhile: one task poll later).
 */
static void ur_poll_park(struct vio_worker *w)
{
	struct vio_uring_w *uw = uring_worker(w);
	unsigned f = IO_URING_READ_ONCE(*uw->ring.sq.kflags);

	if (f & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)) {
		ur_poll(w);
		return;
	}
	if (io_uring_sq_ready(&uw->ring))
		uw->submit_due = true;
	if (io_uring_cq_ready(&uw->ring) || uw->stash_head != uw->stash_tail)
		vio__uring_reap(w);
}

/* Submissions do not wait for the next poll or park (up to io_poll_interval
 * task polls, milliseconds): after a task poll, 16 queued SQEs, one that
 * waited 200 us, or those a park's poll left due go to the kernel (no completions
 * are reaped here; the next poll does that). */
#define FLUSH_BATCH 16
#define FLUSH_WAIT_NS (200 * 1000)

static void ur_flush(struct vio_worker *w)
{
	struct vio_uring_w *uw = uring_worker(w);
	unsigned n = io_uring_sq_ready(&uw->ring);

	if (n == 0)
		return;
	if (n >= FLUSH_BATCH || uw->submit_due || vb_now_ns() - uw->sq_since >= FLUSH_WAIT_NS) {
		VIO_STAT_INC(w, flushes);
		vio__uring_enter(w, true, 0, 0, NULL, NULL);
	}
}

/*
 * The park's sleep: one io_uring_enter submits what is queued and waits.
 * A quiet send usually completes inside that enter, and its CQE would end
 * the wait at once, for nothing (it wakes no task): the worker would enter
 * again to sleep, two enters per keep-alive request. With the kernel's
 * min-timeout wait the enter asks for one completion more than the quiet
 * sends it submits, for at most QUIET_WAIT_US; after that any CQE ends it,
 * so a quiet send that failed (it wakes its task), a kick that arrives
 * while a quiet send is still in flight, or a task that cleared QUIET from
 * another worker waits at most that long. A timer's earlier deadline is
 * kept (the general timeout ends the wait first).
 */
static void ur_wait(struct vio_worker *w, int64_t timeout_ns)
{
	struct vio_uring_w *uw = uring_worker(w);
	uint64_t before = uw->io_cqes;

	if (!uw->efd_armed)
		arm_wake(w);
	if (timeout_ns == 0 || io_uring_cq_ready(&uw->ring) || uw->stash_head != uw->stash_tail ||
	    (IO_URING_READ_ONCE(*uw->ring.sq.kflags) &
	     (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW))) {
		if (IO_URING_READ_ONCE(*uw->ring.sq.kflags) & IORING_SQ_TASKRUN)
			cq_lag(w);
		vio__uring_enter(w, true, 0, IORING_ENTER_GETEVENTS, NULL, NULL);
	} else {
		struct __kernel_timespec ts = {
			.tv_sec = timeout_ns / 1000000000,
			.tv_nsec = timeout_ns % 1000000000,
		};
		unsigned quiet;

		vio__uring_enter(w, true, 1, IORING_ENTER_GETEVENTS, timeout_ns < 0 ? NULL : &ts, &quiet);
		/* Fewer CQEs than asked: the bound (or the timeout) ended it;
		 * the worker will enter again to sleep. */
		if (quiet && io_uring_cq_ready(&uw->ring) < 1 + quiet)
			VIO_STAT_INC(w, quiet_wait_short);
	}
	vio__uring_reap(w);
	if (uw->io_cqes != before)
		VIO_STAT_INC(w, park_wakeups_io);
}

static void ur_kick(struct vio_worker *w)
{
	uint64_t one = 1;
	ssize_t r = write(uring_worker(w)->efd, &one, sizeof(one));

	(void)r; /* EAGAIN: the counter is saturated, a wakeup is pending */
}

const struct vio_backend_ops vio__uring_ops = {
	.name = "uring",
	.worker_init = vio__uring_worker_init,
	.worker_fini = vio__uring_worker_fini,
	.worker_start = vio__uring_worker_start,
	.worker_stop = vio__uring_worker_stop,
	.wait = ur_wait,
	.poll = ur_poll,
	.poll_park = ur_poll_park,
	.kick = ur_kick,
	.flush = ur_flush,
	.try_now = NULL,
	.submit = ur_submit,
	.cancel = ur_cancel,
	.lsock_arm = ur_lsock_arm,
	.lsock_stop = ur_lsock_stop,
	.buf_recycle = ur_buf_recycle,
	.fixed_install = ur_fixed_install,
	.fixed_close = ur_fixed_close,
};

/* Test hook (w's own thread): does the kernel hold completions that w's
 * next poll collects (deferred task work, CQEs not reaped yet)? */
bool vio__uring_test_pending(struct vio_worker *w)
{
	struct vio_uring_w *uw = uring_worker(w);

	return (IO_URING_READ_ONCE(*uw->ring.sq.kflags) & IORING_SQ_TASKRUN) ||
	       io_uring_cq_ready(&uw->ring);
}
