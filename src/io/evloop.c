/* SPDX-License-Identifier: MIT */
/*
 * io/evloop.c: the libev fallback backend. One ev_loop (epoll) per worker,
 * in which the worker sleeps; an operation first tries its non-blocking
 * syscall at once, and only when it would block waits for readiness in the
 * worker's own epoll set (`set`), which the loop watches with one ev_io; the
 * readiness callback retries the syscall and completes the op like a CQE
 * would. The worker's timer heap sets one ev_timer per park; unpark is an
 * ev_async.
 *
 * Sockets are not given to libev: libev leaves a stopped watcher's
 * descriptor in its epoll set and removes it lazily, with epoll_ctl, when
 * the next event for it comes. An operation that waited on one worker left
 * the descriptor in that worker's set after it ended; its task, run on
 * another worker, closed the descriptor there and another socket took the
 * number; the first worker's epoll_ctl then ran, unordered with the close,
 * on a number that was closed or named another socket (it failed, and libev
 * rebuilt that worker's whole epoll set). Here only an operation in flight
 * on this worker arms its descriptor, one-shot (EPOLLONESHOT: once it
 * reports, the kernel keeps it quiet until it is armed again), and the
 * operation's connection cannot close the descriptor before the
 * operation's completion ([IO1]/[IO2] in op.c, [C3] in socket.c): every
 * epoll_ctl on a connection's descriptor happens before its close, on
 * whichever thread that runs, and the close needs no hand-off. A cancelled
 * wait leaves its registration armed: it may report once more, to a slot
 * where nothing waits or whose generation has moved on, and nothing is
 * done. A listener's socket is in the set (level-triggered) while it is
 * armed and leaves it with EPOLL_CTL_DEL before its close ([L1] in
 * listener.c for a socket the workers share).
 *
 * Threading: everything runs on the loop's worker thread except
 * worker_init / worker_fini (control thread, loop idle) and kick
 * (ev_async_send is thread-safe). No shared state of its own.
 */
#include "config.h"

#include "io/internal.h"
#include "base/time.h"

#include <errno.h>
#include <ev.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* What waits on one descriptor number in this worker's set (owner-private).
 * A connection's receive and its send may both wait at once; a listener's
 * socket is never a connection's. */
struct ev_slot {
	struct vio_op *rd, *wr;     /* the waiting receive, send (or NULL) */
	struct vio_lsock *ls;       /* the armed listener on this number (or NULL) */
	const void *who;            /* whom fd was last added for (compared, never followed) */
	uint32_t gen;               /* bumped at each EPOLL_CTL_ADD; in the event's data */
	bool added;                 /* fd was added for `who`: that socket may be gone since */
};

struct vio_ev_w {
	struct ev_loop *loop;
	ev_async async;
	ev_timer timer;
	ev_io set_io;               /* the loop's watcher of `set` */
	int set;                    /* epoll set of the descriptors waited on here */
	struct ev_slot *slots;      /* [nslots], by descriptor number */
	unsigned nslots;
	uint64_t io_events;
};

/* The libev backend's state of worker w. */
static struct vio_ev_w *evloop_worker(struct vio_worker *w)
{
	return w->be;
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
		/* The kernel dropped its registration here, if any: the next
		 * socket on the number is added without a failed modify. */
		if ((unsigned)fd < evloop_worker(w)->nslots)
			evloop_worker(w)->slots[fd].added = false;
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

/* ------------------------------------------------------------ the set */

/* Slot fd, the table grown to hold it; NULL when it cannot grow. */
static struct ev_slot *slot_get(struct vio_ev_w *ew, int fd)
{
	if ((unsigned)fd >= ew->nslots) {
		unsigned n = ew->nslots ? ew->nslots : 64;
		struct ev_slot *v;

		while (n <= (unsigned)fd)
			n *= 2;
		v = realloc(ew->slots, n * sizeof(*v));
		if (!v)
			return NULL;
		memset(v + ew->nslots, 0, (n - ew->nslots) * sizeof(*v));
		ew->slots = v;
		ew->nslots = n;
	}
	return &ew->slots[fd];
}

/*
 * Register descriptor fd in the set for `events`, for `who` (the connection
 * or the listener): 0 or -errno. Called only while something of fd waits
 * here (an op in flight, an armed listener), so fd is open. The slot
 * remembers whom fd was last added for, but that socket may have been
 * closed since (the kernel then dropped its registration) and the number
 * reused. The same `who` modifies the registration it made (ENOENT: its
 * socket went after all, add); another one adds (EEXIST: the same socket
 * after all, modify). Each add takes a new generation, so an event still
 * queued for an older socket on the number is told apart.
 */
static int slot_register(struct vio_ev_w *ew, int fd, struct ev_slot *s, uint32_t events,
			 const void *who)
{
	struct epoll_event ev = { .events = events };
	int op = s->added && s->who == who ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;

	if (op == EPOLL_CTL_ADD)
		s->gen++;
	s->who = who;
	for (unsigned tries = 0; tries < 2; tries++) {
		ev.data.u64 = (uint32_t)fd | (uint64_t)s->gen << 32;
		if (epoll_ctl(ew->set, op, fd, &ev) == 0) {
			s->added = true;
			return 0;
		}
		if (op == EPOLL_CTL_MOD && errno == ENOENT) {
			op = EPOLL_CTL_ADD;
			s->gen++;
		} else if (op == EPOLL_CTL_ADD && errno == EEXIST) {
			op = EPOLL_CTL_MOD;
		} else {
			break;
		}
	}
	return -errno;
}

/* Arm slot fd, one-shot, for its waiting ops: 0 or -errno. */
static int slot_arm(struct vio_ev_w *ew, int fd, struct ev_slot *s)
{
	const struct vio_op *op = s->rd ? s->rd : s->wr;

	return slot_register(ew, fd, s, (s->rd ? EPOLLIN : 0) | (s->wr ? EPOLLOUT : 0) | EPOLLONESHOT,
			     op->conn);
}

/* The op waiting in *pp finishes with `res` (it no longer waits here). */
static void slot_finish(struct vio_worker *w, struct vio_op **pp, int32_t res)
{
	struct vio_op *op = *pp;

	*pp = NULL;
	vio__op_complete(w, op, res);
}

/* Slot fd could not be armed: its ops end with the error. */
static void slot_fail(struct vio_worker *w, struct ev_slot *s, int err)
{
	if (s->rd)
		slot_finish(w, &s->rd, err);
	if (s->wr)
		slot_finish(w, &s->wr, err);
}

/* Readiness for the op in *pp: retry its syscall and complete the op if
 * it finished; otherwise (spurious readiness) it keeps waiting. */
static void op_ready(struct vio_worker *w, struct vio_op **pp)
{
	struct vio_op *op = *pp;

	if (attempt(w, op))
		slot_finish(w, pp, op->res);
}

static void ev_submit(struct vio_worker *w, struct vio_op *op)
{
	struct vio_ev_w *ew = evloop_worker(w);
	int fd = op->conn->fd, r;
	struct ev_slot *s = slot_get(ew, fd);

	if (!s) {
		vio__op_complete(w, op, -ENOMEM);
		return;
	}
	/* One receive and one send per connection, one connection per
	 * open descriptor. */
	if (op->kind == VIO_K_RECV || op->kind == VIO_K_RECV_WAIT) {
		VB_BUG_ON(s->rd || s->ls);
		s->rd = op;
	} else {
		VB_BUG_ON(s->wr || s->ls);
		s->wr = op;
	}
	r = slot_arm(ew, fd, s);
	if (r < 0)
		slot_fail(w, s, r);
}

static void ev_cancel(struct vio_worker *w, struct vio_op *op)
{
	struct ev_slot *s = &evloop_worker(w)->slots[op->conn->fd];

	/* No epoll_ctl: the registration may report once more, and nothing
	 * waits then (see the file's header). */
	if (s->rd == op) {
		slot_finish(w, &s->rd, -ECANCELED);
	} else {
		VB_BUG_ON(s->wr != op);
		slot_finish(w, &s->wr, -ECANCELED);
	}
}

/* ------------------------------------------------------------ listeners */

/* Stop accepting on ls: out of the set (its socket is still open). */
static void lsock_disarm(struct vio_worker *w, struct vio_lsock *ls)
{
	struct vio_ev_w *ew = evloop_worker(w);
	struct ev_slot *s = &ew->slots[ls->fd];

	/* Cannot fail: ls->fd is open and in the set. */
	(void)epoll_ctl(ew->set, EPOLL_CTL_DEL, ls->fd, NULL);
	s->ls = NULL;
	s->added = false;
	ls->armed = false;
}

static void lsock_ready(struct vio_worker *w, struct vio_lsock *ls)
{
	for (unsigned i = 0; i < 64; i++) {
		int fd = accept4(ls->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd >= 0) {
			VIO_STAT_INC(w, accepts);
			if (!vio__lsock_push(ls, fd)) {
				lsock_disarm(w, ls); /* throttled or closed */
				return;
			}
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (would_block(errno))
			return;
		lsock_disarm(w, ls);
		vio__lsock_error(ls, errno);
		return;
	}
}

static void ev_lsock_arm(struct vio_worker *w, struct vio_lsock *ls)
{
	struct vio_ev_w *ew = evloop_worker(w);
	struct ev_slot *s;
	int r;

	if (ls->armed || ls->stopping || ls->fd_closed)
		return;
	s = slot_get(ew, ls->fd);
	if (!s) {
		vio__lsock_error(ls, ENOMEM); /* paused, then armed again */
		return;
	}
	VB_BUG_ON(s->rd || s->wr || s->ls);
	s->ls = ls;
	/* Level-triggered: it stays until the listener stops. */
	r = slot_register(ew, ls->fd, s, EPOLLIN, ls);
	if (r < 0) {
		s->ls = NULL;
		vio__lsock_error(ls, -r);
		return;
	}
	ls->armed = true;
	VIO_STAT_INC(w, submitted);
}

static void ev_lsock_stop(struct vio_worker *w, struct vio_lsock *ls)
{
	if (ls->armed)
		lsock_disarm(w, ls);
	if (!ls->fd_closed) {
		vio__lsock_close_fd(ls);
		ls->fd_closed = true;
		vio__lsock_done(ls);
	}
}

/* ------------------------------------------------------ readiness */

#define SET_EVENTS 64

/* The set has events: dispatch them. A batch at most; when more are ready
 * the set stays readable and the loop calls again. */
static void set_cb(struct ev_loop *loop, ev_io *io, int revents)
{
	struct vio_worker *w = ev_userdata(loop);
	struct vio_ev_w *ew = evloop_worker(w);
	struct epoll_event evs[SET_EVENTS];
	int n;

	(void)io, (void)revents;
	n = epoll_wait(ew->set, evs, SET_EVENTS, 0);
	for (int i = 0; i < n; i++) {
		int fd = (int)(uint32_t)evs[i].data.u64;
		uint32_t got = evs[i].events;
		struct ev_slot *s = &ew->slots[fd];
		int r;

		/* Another generation: the event of a socket closed since (or
		 * held open elsewhere) whose number was added again. */
		if ((uint32_t)(evs[i].data.u64 >> 32) != s->gen)
			continue;
		if (s->ls) {
			ew->io_events++;
			lsock_ready(w, s->ls);
			continue;
		}
		if (!s->rd && !s->wr)
			continue; /* a cancelled wait's registration reported */
		ew->io_events++;
		if (s->rd && (got & (EPOLLIN | EPOLLERR | EPOLLHUP)))
			op_ready(w, &s->rd);
		if (s->wr && (got & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			op_ready(w, &s->wr);
		/* One-shot: it reported, so it is quiet now; arm it again for
		 * whatever still waits (spurious readiness, or the other
		 * direction). */
		if ((s->rd || s->wr) && (r = slot_arm(ew, fd, s)) < 0)
			slot_fail(w, s, r);
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
	int r;

	if (!ew)
		return -ENOMEM;
	ew->set = epoll_create1(EPOLL_CLOEXEC);
	if (ew->set < 0) {
		r = -errno;
		goto err_free;
	}
	ew->loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOSIGMASK | EVFLAG_NOENV);
	if (!ew->loop)
		ew->loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK | EVFLAG_NOENV);
	if (!ew->loop) {
		r = -ENOMEM;
		goto err_set;
	}
	ev_set_userdata(ew->loop, w);
	ev_async_init(&ew->async, async_cb);
	ev_async_start(ew->loop, &ew->async); /* also keeps ev_run(ONCE) blocking */
	ev_init(&ew->timer, timer_cb);
	/* The set's own descriptor lives as long as the loop: libev keeps it
	 * registered, and nobody else closes it. */
	ev_io_init(&ew->set_io, set_cb, ew->set, EV_READ);
	ev_io_start(ew->loop, &ew->set_io);
	w->be = ew;
	return 0;

err_set:
	close(ew->set);
err_free:
	free(ew);
	return r;
}

static void ev_worker_fini(struct vio_worker *w)
{
	struct vio_ev_w *ew = evloop_worker(w);

	if (!ew)
		return;
	ev_io_stop(ew->loop, &ew->set_io);
	ev_loop_destroy(ew->loop);
	close(ew->set);
	free(ew->slots);
	free(ew);
	w->be = NULL;
}

static int ev_worker_start(struct vio_worker *w)
{
	(void)w;
	return 0;
}

/* Complete every op still waiting, so their task references drop; stop
 * accepting. */
static void ev_worker_stop(struct vio_worker *w)
{
	struct vio_ev_w *ew = evloop_worker(w);

	for (unsigned fd = 0; fd < ew->nslots; fd++) {
		struct ev_slot *s = &ew->slots[fd];

		if (s->rd)
			slot_finish(w, &s->rd, -ECANCELED);
		if (s->wr)
			slot_finish(w, &s->wr, -ECANCELED);
	}
	for (unsigned i = 0; i < w->nlsocks; i++)
		if (w->lsocks[i]->armed)
			lsock_disarm(w, w->lsocks[i]);
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
	.flush = NULL, /* operations run at once or wait in the set */
	.try_now = ev_try_now,
	.submit = ev_submit,
	.cancel = ev_cancel,
	.lsock_arm = ev_lsock_arm,
	.lsock_stop = ev_lsock_stop,
};
