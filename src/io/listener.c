/* SPDX-License-Identifier: MIT */
/*
 * io/listener.c: listening sockets, one per worker (SO_REUSEPORT), each
 * accepting on its home worker (the backend's multishot accept or ev_io)
 * into a queue that an acceptor task drains with vio_accept.
 *
 * Threading: a vio_lsock's queue, waiter and flags are guarded by its mutex
 * (home worker pushes, the acceptor task pops, vio_listener_close from any
 * thread); `armed`, `stopping`, `resume_at` belong to the home worker.
 * Wakes and unrefs happen after the mutex is released. An adopted socket
 * is shared by the workers' lsocks: each one's stop drops a count in
 * l->fd_users and the last one closes the fd.
 *
 * Ordering
 * [L1] vio__lsock_close_fd: acq_rel fetch_sub of the shared fd's user
 *      count: every worker's last use of the fd (epoll_ctl, a ring's
 *      accept) happens before the last one's close. Closing stops the
 * accepting but keeps what was accepted: vio_accept hands it out and says
 * -ESHUTDOWN only when the queue is empty and `done` (the home worker's
 * accept has ended, vio__lsock_done). Back pressure: above
 * LSOCK_HIGH queued connections the home worker stops accepting (the kernel
 * backlog then holds clients) until the acceptor drains to LSOCK_LOW and
 * kicks it.
 */
#include "config.h"

#include "io/internal.h"
#include "base/time.h"

#include <errno.h>
#include <linux/filter.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LSOCK_QINIT 64
#define LSOCK_HIGH 512
#define LSOCK_LOW 128

static struct vb_ratelimit accept_rl = VB_RATELIMIT_INIT(5000, 3);

static int lsock_init(struct vio_lsock *ls, struct vio_listener *l, struct vio_worker *home,
		      int fd, bool own_fd)
{
	memset(ls, 0, sizeof(*ls));
	ls->q = malloc(LSOCK_QINIT * sizeof(*ls->q));
	if (!ls->q)
		return -ENOMEM;
	ls->qcap = LSOCK_QINIT;
	ls->fd = fd;
	ls->own_fd = own_fd;
	ls->home = home;
	ls->l = l;
	pthread_mutex_init(&ls->mu, NULL);
	ls->arm_req.type = VIO_REQ_LSOCK_ARM;
	ls->stop_req.type = VIO_REQ_LSOCK_STOP;
	return 0;
}

static void lsock_fini(struct vio_lsock *ls)
{
	if (!ls->q)
		return; /* never initialised */
	while (ls->qlen) {
		close(ls->q[ls->qhead]);
		ls->qhead = (ls->qhead + 1) % ls->qcap;
		ls->qlen--;
	}
	if (ls->waiter)
		vrt_task_unref(ls->waiter);
	if (!ls->fd_closed)
		vio__lsock_close_fd(ls);
	free(ls->q);
	pthread_mutex_destroy(&ls->mu);
}

static void listener_free(struct vio_listener *l)
{
	for (unsigned i = 0; i < l->n; i++)
		lsock_fini(&l->ls[i]);
	free(l->fd_users);
	free(l);
}

void vio__lsock_close_fd(struct vio_lsock *ls)
{
	if (ls->fd_users) {
		/* [L1] acq_rel: see the Ordering block. */
		if (atomic_fetch_sub_explicit(ls->fd_users, 1, memory_order_acq_rel) == 1)
			close(ls->fd);
	} else if (ls->own_fd) {
		close(ls->fd);
	}
}

static struct vio_listener *listener_alloc(struct vio *io)
{
	struct vio_listener *l = calloc(1, sizeof(*l) + io->nworkers * sizeof(l->ls[0]));

	if (l) {
		l->io = io;
		l->n = io->nworkers;
	}
	return l;
}

static int sock_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

static void set_port(struct sockaddr_storage *ss, int port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
	else if (ss->ss_family == AF_INET6)
		((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
}

static int listen_socket(const struct sockaddr_storage *ss, socklen_t len, int backlog)
{
	int one = 1, fd, r;

	fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
	    bind(fd, (const struct sockaddr *)ss, len) < 0 || listen(fd, backlog) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

/* Publish a ready listener: list it and ask each home worker to arm it. */
static void listener_start(struct vio *io, struct vio_listener *l)
{
	pthread_mutex_lock(&io->mu);
	l->next = io->listeners;
	io->listeners = l;
	pthread_mutex_unlock(&io->mu);
	for (unsigned i = 0; i < l->n; i++)
		vio__mbox_post(l->ls[i].home, &l->ls[i].arm_req);
}

int vio_listener_new(struct vio *io, const struct sockaddr *addr, socklen_t addrlen,
		     int backlog, struct vio_listener **out)
{
	struct sockaddr_storage ss;
	struct vio_listener *l;
	int r, fd;

	*out = NULL;
	if (addrlen > sizeof(ss) || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
		return -EINVAL;
	memcpy(&ss, addr, addrlen);
	l = listener_alloc(io);
	if (!l)
		return -ENOMEM;
	l->own = true;
	for (unsigned i = 0; i < l->n; i++) {
		fd = listen_socket(&ss, addrlen, backlog);
		if (fd < 0) {
			r = fd;
			goto err;
		}
		r = lsock_init(&l->ls[i], l, &io->w[i], fd, true);
		if (r < 0) {
			close(fd);
			goto err;
		}
		if (i == 0) {
			/* Port 0: the others bind to the port the kernel chose. */
			l->port = sock_port(fd);
			set_port(&ss, l->port);
		}
	}
	listener_start(io, l);
	*out = l;
	return 0;
err:
	listener_free(l);
	return r;
}

int vio_listener_spread(struct vio_listener *l, unsigned width)
{
	int fd;

	if (!l->own || l->n < 2)
		return 0;
	if (width < 1)
		width = 1;
	if (width > l->n)
		width = l->n;
	if (width == l->width)
		return 0;
	/* The group's sockets are indexed in the order they were bound:
	 * ours are ls[0..n-1], created in that order, so index i is worker
	 * i's queue. A program on any member is the group's. */
	fd = l->ls[0].fd;
	if (width == l->n) {
		if (setsockopt(fd, SOL_SOCKET, SO_DETACH_REUSEPORT_BPF, &(int){ 0 }, sizeof(int)) < 0 &&
		    errno != ENOENT)
			return -errno;
	} else {
		struct sock_filter code[] = {
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)(SKF_AD_OFF + SKF_AD_RANDOM)),
			BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, width),
			BPF_STMT(BPF_RET | BPF_A, 0),
		};
		struct sock_fprog prog = { .len = sizeof(code) / sizeof(code[0]), .filter = code };

		if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog)) < 0)
			return -errno;
	}
	l->width = width;
	return 0;
}

int vio_listener_adopt(struct vio *io, const int *fds, unsigned nfds, struct vio_listener **out)
{
	struct vio_listener *l;
	int r;

	*out = NULL;
	if (nfds == 0)
		return -EINVAL;
	for (unsigned i = 0; i < nfds; i++) {
		int fl = fcntl(fds[i], F_GETFL);
		if (fl < 0 || fcntl(fds[i], F_SETFL, fl | O_NONBLOCK) < 0)
			return -errno;
	}
	l = listener_alloc(io);
	if (!l)
		return -ENOMEM;
	l->fd_users = calloc(nfds, sizeof(*l->fd_users));
	if (!l->fd_users) {
		free(l);
		return -ENOMEM;
	}
	for (unsigned f = 0; f < nfds; f++) /* workers i with i % nfds == f */
		atomic_init(&l->fd_users[f], l->n / nfds + (f < l->n % nfds));
	for (unsigned i = 0; i < l->n; i++) {
		/* Worker i shares fds[i % nfds]; the last user closes it. */
		r = lsock_init(&l->ls[i], l, &io->w[i], fds[i % nfds], true);
		if (r < 0)
			goto err;
		l->ls[i].fd_users = &l->fd_users[i % nfds];
	}
	for (unsigned i = l->n; i < nfds; i++)
		close(fds[i]); /* more sockets than workers: never used */
	l->port = sock_port(fds[0]);
	listener_start(io, l);
	*out = l;
	return 0;
err:
	listener_free(l);
	return r;
}

unsigned vio_listener_count(const struct vio_listener *l)
{
	return l->n;
}

int vio_listener_port(const struct vio_listener *l)
{
	return l->port;
}

/* The acceptor waiting on ls, taken with ls->mu held (its reference moves
 * to the caller), to be woken by wake_taken after the mutex is released. */
static struct vrt_task *take_waiter(struct vio_lsock *ls)
{
	struct vrt_task *waiter = ls->waiter;

	ls->waiter = NULL;
	return waiter;
}

static void wake_taken(struct vrt_task *waiter)
{
	if (waiter) {
		vrt_task_wake(waiter);
		vrt_task_unref(waiter);
	}
}

void vio_listener_close(struct vio_listener *l)
{
	for (unsigned i = 0; i < l->n; i++) {
		struct vio_lsock *ls = &l->ls[i];
		struct vrt_task *waiter;
		bool was_closed;

		pthread_mutex_lock(&ls->mu);
		was_closed = ls->closed;
		ls->closed = true;
		waiter = take_waiter(ls);
		pthread_mutex_unlock(&ls->mu);
		wake_taken(waiter);
		if (!was_closed)
			vio__mbox_post(ls->home, &ls->stop_req);
	}
}

void vio__listeners_free(struct vio *io)
{
	struct vio_listener *l, *next;

	pthread_mutex_lock(&io->mu);
	l = io->listeners;
	io->listeners = NULL;
	pthread_mutex_unlock(&io->mu);
	for (; l; l = next) {
		next = l->next;
		listener_free(l);
	}
}

enum vrt_poll vio_accept(struct vio_listener *l, unsigned idx, int *fd)
{
	struct vrt_task *task = vrt_current(), *old = NULL;
	struct vio_lsock *ls;
	bool kick = false;

	if (!task || idx >= l->n) {
		*fd = -EINVAL;
		return VRT_READY;
	}
	if (!vrt_budget_consume())
		return VRT_YIELD;
	ls = &l->ls[idx];
	pthread_mutex_lock(&ls->mu);
	if (ls->qlen) {
		*fd = ls->q[ls->qhead];
		ls->qhead = (ls->qhead + 1) % ls->qcap;
		ls->qlen--;
		if (ls->throttled && ls->qlen <= LSOCK_LOW) {
			ls->throttled = false;
			kick = true;
		}
		pthread_mutex_unlock(&ls->mu);
		if (kick)
			vio__notify(ls->home); /* it re-arms in its service pass */
		return VRT_READY;
	}
	if (ls->done) {
		pthread_mutex_unlock(&ls->mu);
		*fd = -ESHUTDOWN;
		return VRT_READY;
	}
	if (ls->waiter != task) {
		old = ls->waiter;
		vrt_task_ref(task);
		ls->waiter = task;
	}
	pthread_mutex_unlock(&ls->mu);
	if (old)
		vrt_task_unref(old);
	return VRT_PENDING;
}

/* ----------------------------------------------------- home worker side */

bool vio__lsock_push(struct vio_lsock *ls, int fd)
{
	struct vrt_task *waiter;
	bool throttle;

	pthread_mutex_lock(&ls->mu);
	if (ls->done) {
		pthread_mutex_unlock(&ls->mu);
		close(fd);
		return false;
	}
	/* Closed but not done: an accept that completed meanwhile; the
	 * connection is ours, queue it for the acceptor. */
	if (ls->qlen == ls->qcap) {
		unsigned cap = ls->qcap * 2;
		int *q = malloc(cap * sizeof(*q));

		if (!q) {
			pthread_mutex_unlock(&ls->mu);
			close(fd);
			vb_log_rl(&accept_rl, LOG_WARNING, "io: accept queue: out of memory");
			return false;
		}
		for (unsigned i = 0; i < ls->qlen; i++)
			q[i] = ls->q[(ls->qhead + i) % ls->qcap];
		free(ls->q);
		ls->q = q;
		ls->qhead = 0;
		ls->qcap = cap;
	}
	ls->q[(ls->qhead + ls->qlen) % ls->qcap] = fd;
	ls->qlen++;
	waiter = ls->waiter;
	ls->waiter = NULL;
	throttle = ls->qlen >= LSOCK_HIGH;
	if (throttle)
		ls->throttled = true;
	pthread_mutex_unlock(&ls->mu);
	if (waiter) {
		vrt_task_wake(waiter);
		vrt_task_unref(waiter);
	}
	return !throttle;
}

void vio__lsock_done(struct vio_lsock *ls)
{
	struct vrt_task *waiter;

	pthread_mutex_lock(&ls->mu);
	ls->done = true;
	waiter = take_waiter(ls);
	pthread_mutex_unlock(&ls->mu);
	wake_taken(waiter);
}

void vio__lsock_error(struct vio_lsock *ls, int err)
{
	struct vio_worker *w = ls->home;
	int64_t pause = (int64_t)w->io->cfg.accept_pause_ms * VB_NS_PER_MS;

	switch (err) {
	case EINTR:
	case EAGAIN:
	case ECONNABORTED:
	case EPROTO:
	case EPERM: /* a firewall refused this one */
		ls->resume_at = 0;
		return; /* the next service pass re-arms */
	case EMFILE:
	case ENFILE:
	case ENOBUFS:
	case ENOMEM:
		VIO_STAT_INC(w, accept_pauses);
		vb_log_rl(&accept_rl, LOG_WARNING,
			  "io: accept on port %d: %s; pausing this listener for %u ms",
			  ls->l->port, strerror(err), w->io->cfg.accept_pause_ms);
		break;
	default:
		VIO_STAT_INC(w, accept_errors);
		vb_log_rl(&accept_rl, LOG_ERR, "io: accept on port %d: %s; retrying in %u ms",
			  ls->l->port, strerror(err), w->io->cfg.accept_pause_ms);
		break;
	}
	ls->resume_at = vb_now_ns() + pause;
}

int64_t vio__lsock_service(struct vio_worker *w, int64_t now)
{
	int64_t next = INT64_MAX;

	for (unsigned i = 0; i < w->nlsocks; i++) {
		struct vio_lsock *ls = w->lsocks[i];
		bool ok;

		if (ls->armed || ls->stopping || ls->fd_closed)
			continue;
		if (ls->resume_at > now) {
			if (ls->resume_at < next)
				next = ls->resume_at;
			continue;
		}
		pthread_mutex_lock(&ls->mu);
		ok = !ls->closed && !ls->throttled;
		pthread_mutex_unlock(&ls->mu);
		if (!ok)
			continue;
		if (ls->resume_at)
			VIO_STAT_INC(w, accept_rearms);
		ls->resume_at = 0;
		w->io->be->lsock_arm(w, ls);
	}
	return next;
}
