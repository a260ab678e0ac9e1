/* SPDX-License-Identifier: MIT */
/*
 * io/evloop.c: the libev fallback backend. One ev_loop (epoll) per worker;
 * an operation first tries its non-blocking syscall at once, and only when
 * it would block starts an ev_io on the worker's loop; the callback retries
 * the syscall on readiness and completes the op like a CQE would. The
 * worker's timer heap sets one ev_timer per park; unpark is an ev_async.
 *
 * Threading: everything runs on the loop's worker thread except
 * worker_init / worker_fini (control thread, loop idle) and kick
 * (ev_async_send is thread-safe). No shared state of its own.
 */
#include "config.h"

#include "io/internal.h"
#include "base/time.h"

#include <assert.h>
#include <errno.h>
#include <ev.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

struct vio_ev_w {
	struct ev_loop *loop;
	ev_async async;
	ev_timer timer;
	struct vio_op *inflight;     /* ops with a started watcher (for stop) */
	uint64_t io_events;
};

/* The watcher of an in-flight op lives in op->u (task memory, alive while
 * the op holds the task reference) with the in-flight list links. */
struct ev_opx {
	ev_io io;
	struct vio_op *prev, *next;
};
static_assert(sizeof(struct ev_opx) <= sizeof(((struct vio_op *)0)->u), "ev_opx fits in vio_op.u");
static_assert(sizeof(ev_io) <= sizeof(((struct vio_lsock *)0)->evw), "ev_io fits in vio_lsock.evw");

/* The libev backend's state of worker w. */
static struct vio_ev_w *evloop_worker(struct vio_worker *w)
{
	return w->be;
}

static struct ev_opx *opx(struct vio_op *op)
{
	return (struct ev_opx *)(void *)&op->u;
}

static struct vio_op *op_of(ev_io *io)
{
	return vb_container_of((void *)io, struct vio_op, u);
}

static bool would_block(int e)
{
	return e == EAGAIN || e == EWOULDBLOCK;
}

/* Run op's syscall: true when finished (op->res set), false: would block. */
static bool attempt(struct vio_worker *w, struct vio_op *op)
{
	int fd = op->conn->fd;
	ssize_t r;

	switch (op->kind) {
	case VIO_K_RECV_WAIT:
		/* A lent receive: with its buffer (the try at its start) a
		 * receive; on readiness (buffer gone) only "readable", the
		 * task receives. */
		if (!op->buf) {
			op->res = 0;
			return true;
		}
		/* fall through */
	case VIO_K_RECV:
		do
			r = recv(fd, op->buf, op->len, MSG_DONTWAIT);
		while (r < 0 && errno == EINTR);
		if (r < 0 && would_block(errno))
			return false;
		if (r > 0) {
			VIO_STAT_ADD(w, recv_bytes, (uint64_t)r);
			/* vio_conn_rx_at. Relaxed: a statistic. */
			if (!atomic_load_explicit(&op->conn->rx_at, memory_order_relaxed))
				atomic_store_explicit(&op->conn->rx_at, vb_now_ns(),
						      memory_order_relaxed);
		}
		op->res = r < 0 ? -errno : (int32_t)r;
		return true;
	case VIO_K_SEND:
	case VIO_K_SENDV:
		/* Relaxed: a statistic (vio_conn_rx_at: bytes since the last
		 * send). */
		atomic_store_explicit(&op->conn->rx_at, 0, memory_order_relaxed);
		if (vb_unlikely(op->conn->trace_tx != NULL) && !op->conn->trace_tx[0])
			op->conn->trace_tx[0] = vb_now_ns(); /* vio_conn_trace_tx */
		for (;;) {
			if (op->kind == VIO_K_SEND) {
				r = send(fd, (char *)op->buf + op->done, op->len - op->done,
					 MSG_DONTWAIT | MSG_NOSIGNAL);
			} else {
				struct msghdr msg = {
					.msg_iov = op->iov,
					.msg_iovlen = op->iovcnt < IOV_MAX ? op->iovcnt : IOV_MAX,
				};
				r = sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
			}
			if (r > 0) {
				VIO_STAT_ADD(w, send_bytes, (uint64_t)r);
				if (!vio__op_send_advance(op, (size_t)r)) {
					op->res = 0;
					if (vb_unlikely(op->conn->trace_tx != NULL))
						op->conn->trace_tx[1] = vb_now_ns();
					return true;
				}
				continue;
			}
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 && would_block(errno)) {
				if (op->done)
					VIO_STAT_INC(w, send_partial);
				return false;
			}
			op->res = r < 0 ? -errno : -EPIPE;
			return true;
		}
	case VIO_K_CLOSE:
		/* EINTR from close(2) on Linux still closed the fd. */
		op->res = close(fd) < 0 && errno != EINTR ? -errno : 0;
		return true;
	default:
		VB_BUG_ON(1); /* multishot recv is uring-only */
	}
	return true;
}

static bool ev_try_now(struct vio_worker *w, struct vio_op *op)
{
	return attempt(w, op);
}

static void list_del(struct vio_ev_w *ew, struct vio_op *op)
{
	struct ev_opx *x = opx(op);

	if (x->prev)
		opx(x->prev)->next = x->next;
	else
		ew->inflight = x->next;
	if (x->next)
		opx(x->next)->prev = x->prev;
}

static void op_cb(struct ev_loop *loop, ev_io *io, int revents)
{
	struct vio_worker *w = ev_userdata(loop);
	struct vio_op *op = op_of(io);

	(void)revents;
	evloop_worker(w)->io_events++;
	if (!attempt(w, op))
		return; /* spurious readiness: keep waiting */
	ev_io_stop(loop, io);
	list_del(evloop_worker(w), op);
	vio__op_complete(w, op, op->res);
}

static void ev_submit(struct vio_worker *w, struct vio_op *op)
{
	struct vio_ev_w *ew = evloop_worker(w);
	struct ev_opx *x = opx(op);

	ev_io_init(&x->io, op_cb, op->conn->fd,
		   op->kind == VIO_K_RECV || op->kind == VIO_K_RECV_WAIT ? EV_READ : EV_WRITE);
	ev_io_start(ew->loop, &x->io);
	x->prev = NULL;
	x->next = ew->inflight;
	if (ew->inflight)
		opx(ew->inflight)->prev = op;
	ew->inflight = op;
}

static void ev_cancel(struct vio_worker *w, struct vio_op *op)
{
	struct vio_ev_w *ew = evloop_worker(w);

	/* The watcher stops before anyone may close the fd (libev must not
	 * keep an fd it does not own). */
	ev_io_stop(ew->loop, &opx(op)->io);
	list_del(ew, op);
	vio__op_complete(w, op, -ECANCELED);
}

/* ------------------------------------------------------------ listeners */

static void lsock_cb(struct ev_loop *loop, ev_io *io, int revents)
{
	struct vio_worker *w = ev_userdata(loop);
	struct vio_lsock *ls = vb_container_of((void *)io, struct vio_lsock, evw);

	(void)revents;
	evloop_worker(w)->io_events++;
	for (unsigned i = 0; i < 64; i++) {
		int fd = accept4(ls->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd >= 0) {
			VIO_STAT_INC(w, accepts);
			if (!vio__lsock_push(ls, fd)) {
				ev_io_stop(loop, io); /* throttled or closed */
				ls->armed = false;
				return;
			}
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (would_block(errno))
			return;
		ev_io_stop(loop, io);
		ls->armed = false;
		vio__lsock_error(ls, errno);
		return;
	}
}

static void ev_lsock_arm(struct vio_worker *w, struct vio_lsock *ls)
{
	ev_io *io = (ev_io *)(void *)ls->evw;

	if (ls->armed || ls->stopping || ls->fd_closed)
		return;
	ev_io_init(io, lsock_cb, ls->fd, EV_READ);
	ev_io_start(evloop_worker(w)->loop, io);
	ls->armed = true;
	VIO_STAT_INC(w, submitted);
}

static void ev_lsock_stop(struct vio_worker *w, struct vio_lsock *ls)
{
	if (ls->armed) {
		ev_io_stop(evloop_worker(w)->loop, (ev_io *)(void *)ls->evw);
		ls->armed = false;
	}
	if (!ls->fd_closed) {
		vio__lsock_close_fd(ls);
		ls->fd_closed = true;
		vio__lsock_done(ls);
	}
}

/* ------------------------------------------------------------ the loop */

static void async_cb(struct ev_loop *loop, ev_async *a, int revents)
{
	(void)loop, (void)a, (void)revents; /* only ends ev_run */
}

static void timer_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop, (void)t, (void)revents; /* only ends ev_run */
}

static void ev_wait(struct vio_worker *w, int64_t timeout_ns)
{
	struct vio_ev_w *ew = evloop_worker(w);
	uint64_t before = ew->io_events;

	if (timeout_ns == 0) {
		ev_run(ew->loop, EVRUN_NOWAIT);
	} else {
		if (timeout_ns > 0) {
			ev_now_update(ew->loop);
			ev_timer_set(&ew->timer, (double)timeout_ns / 1e9, 0.);
			ev_timer_start(ew->loop, &ew->timer);
		}
		ev_run(ew->loop, EVRUN_ONCE);
		ev_timer_stop(ew->loop, &ew->timer);
	}
	if (ew->io_events != before)
		VIO_STAT_INC(w, park_wakeups_io);
}

static void ev_poll(struct vio_worker *w)
{
	ev_run(evloop_worker(w)->loop, EVRUN_NOWAIT);
}

static void ev_kick(struct vio_worker *w)
{
	ev_async_send(evloop_worker(w)->loop, &evloop_worker(w)->async);
}

/* ------------------------------------------------------------ lifecycle */

static int ev_worker_init(struct vio_worker *w)
{
	struct vio_ev_w *ew = calloc(1, sizeof(*ew));

	if (!ew)
		return -ENOMEM;
	ew->loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOSIGMASK | EVFLAG_NOENV);
	if (!ew->loop)
		ew->loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK | EVFLAG_NOENV);
	if (!ew->loop) {
		free(ew);
		return -ENOMEM;
	}
	ev_set_userdata(ew->loop, w);
	ev_async_init(&ew->async, async_cb);
	ev_async_start(ew->loop, &ew->async); /* also keeps ev_run(ONCE) blocking */
	ev_init(&ew->timer, timer_cb);
	w->be = ew;
	return 0;
}

static void ev_worker_fini(struct vio_worker *w)
{
	struct vio_ev_w *ew = evloop_worker(w);

	if (!ew)
		return;
	ev_loop_destroy(ew->loop);
	free(ew);
	w->be = NULL;
}

static int ev_worker_start(struct vio_worker *w)
{
	(void)w;
	return 0;
}

/* Complete every op still waiting, so their task references drop. */
static void ev_worker_stop(struct vio_worker *w)
{
	struct vio_ev_w *ew = evloop_worker(w);

	while (ew->inflight)
		ev_cancel(w, ew->inflight);
	for (unsigned i = 0; i < w->nlsocks; i++)
		if (w->lsocks[i]->armed) {
			ev_io_stop(ew->loop, (ev_io *)(void *)w->lsocks[i]->evw);
			w->lsocks[i]->armed = false;
		}
}

const struct vio_backend_ops vio__ev_ops = {
	.name = "libev",
	.worker_init = ev_worker_init,
	.worker_fini = ev_worker_fini,
	.worker_start = ev_worker_start,
	.worker_stop = ev_worker_stop,
	.wait = ev_wait,
	.poll = ev_poll,
	.kick = ev_kick,
	.flush = NULL, /* operations run at once or wait in epoll */
	.try_now = ev_try_now,
	.submit = ev_submit,
	.cancel = ev_cancel,
	.lsock_arm = ev_lsock_arm,
	.lsock_stop = ev_lsock_stop,
};
