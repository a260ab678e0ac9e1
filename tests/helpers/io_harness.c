/* SPDX-License-Identifier: MIT */
/*
 * tests/helpers/io_harness.c: see io_harness.h.
 *
 * Ordering: the counters are relaxed atomics (statistics for the test
 * thread, which reads them after the runtime's joins or as progress hints).
 */
#include "config.h"

#include "tests/helpers/io_harness.h"
#include "base/compiler.h"
#include "base/rng.h"
#include "base/time.h"
#include "tests/helpers/test_config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef __has_feature
#define __has_feature(x) 0
#endif

static _Atomic uint64_t task_drops;

/*
 * ThreadSanitizer treats a descriptor like memory: close(fd) on one worker
 * and epoll_ctl(fd) on another are a "race". libev's epoll backend drops a
 * stale registration lazily with epoll_ctl(DEL) when an unwanted event
 * arrives, and recreates its epoll state if that fails because the fd was
 * closed meanwhile by the worker that now runs the connection: benign by
 * design (the kernel orders both). Only that pattern is suppressed.
 */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void)
{
	return "race:epoll_ctl\n";
}

bool ioh_under_tsan(void)
{
#if defined(__SANITIZE_THREAD__) || __has_feature(thread_sanitizer)
	return true;
#else
	return false;
#endif
}

unsigned ioh_scale(void)
{
	const char *s = getenv("VOLTD_STRESS_SCALE");
	long v = s ? strtol(s, NULL, 10) : 1;

	return v < 1 ? 1 : (unsigned)v;
}

const char *ioh_backend_label(enum vio_backend b)
{
	return b == VIO_BACKEND_URING ? "uring" : b == VIO_BACKEND_LIBEV ? "libev" : "auto";
}

enum vio_backend ioh_backend(void)
{
	const char *s = getenv("VOLTD_IO_BACKEND");

	if (s && strcmp(s, "uring") == 0)
		return VIO_BACKEND_URING;
	if (s && strcmp(s, "libev") == 0)
		return VIO_BACKEND_LIBEV;
	return VIO_BACKEND_AUTO;
}

bool ioh_fixed_files_allowed(void)
{
	const char *s = getenv("VOLTD_IO_FIXED_FILES");

	return !(s && strcmp(s, "off") == 0);
}

/* ------------------------------------------------------------ watchdog */

static const char *wd_what = "test";

static void wd_fire(int sig)
{
	char msg[256];
	int n = snprintf(msg, sizeof(msg), "WATCHDOG: %s did not finish in time\n", wd_what);

	(void)sig;
	if (n > 0) {
		ssize_t w = write(STDERR_FILENO, msg, (size_t)n);
		(void)w;
	}
	_exit(1);
}

void ioh_watchdog(unsigned seconds, const char *what)
{
	wd_what = what;
	signal(SIGALRM, wd_fire);
	alarm(seconds);
}

/* ------------------------------------------------------------ bring-up */

/* The harness between ioh_start and ioh_stop (one at a time). */
static struct ioh *live_harness;

void ioh_start(struct ioh *h, unsigned workers, const struct vio_config *vcfg,
	       const struct vrt_config *rcfg)
{
	struct vio_config vc;
	struct vrt_config rc;
	const char *expect = getenv("VOLTD_IO_EXPECT_BACKEND");
	int r;

	signal(SIGPIPE, SIG_IGN);
	if (live_harness) {
		/* A cmocka assertion long-jumped out of the previous case with
		 * its workers still running on that case's stack frames: the
		 * next case would share a process with them (a UBSan report
		 * of a "listener" made of machine code, 2026-11-24). The
		 * previous failure stands; run nothing more. */
		fprintf(stderr, "# the previous case failed with its I/O harness running: "
				"not starting another case next to it\n");
		_exit(1);
	}
	memset(h, 0, sizeof(*h));
	live_harness = h;
	if (vcfg) {
		vc = *vcfg;
	} else {
		tcfg_io(&vc);
		vc.backend = ioh_backend();
	}
	if (!ioh_fixed_files_allowed())
		vc.fixed_files = false; /* the run without registered files */
	r = vio_new(&vc, workers, &h->io);
	if (r < 0) {
		if (vc.backend == VIO_BACKEND_URING) {
			fprintf(stderr, "io_uring unavailable (%s): skipping the uring run\n",
				strerror(-r));
			exit(77);
		}
		fprintf(stderr, "vio_new: %s\n", strerror(-r));
		exit(99);
	}
	fprintf(stderr, "# io: backend=%s (%s)\n", vio_backend_name(h->io),
		vio_backend_reason(h->io));
	if (expect && strcmp(expect, vio_backend_name(h->io)) != 0) {
		fprintf(stderr, "expected backend %s, got %s\n", expect, vio_backend_name(h->io));
		exit(1);
	}
	if (rcfg)
		rc = *rcfg;
	else
		tcfg_rt(&rc);
	rc.workers = workers;
	vio_park_ops(h->io, &rc.park_ops, &rc.park_ctx);
	r = vrt_new(&rc, &h->rt);
	if (r < 0) {
		fprintf(stderr, "vrt_new: %s\n", strerror(-r));
		exit(99);
	}
	h->workers = workers;
}

void ioh_stop(struct ioh *h)
{
	live_harness = NULL;
	vrt_shutdown(h->rt, VRT_SHUTDOWN_DRAIN);
	vrt_free(h->rt);
	vio_free(h->io);
	h->rt = NULL;
	h->io = NULL;
}

/* ------------------------------------------------------------ tasks */

static enum vrt_poll task_poll(struct vrt_task *t)
{
	struct ioh_task *it = vb_container_of(t, struct ioh_task, t);

	return it->fn(it);
}

static void task_drop(struct vrt_task *t)
{
	struct ioh_task *it = vb_container_of(t, struct ioh_task, t);

	if (it->fini)
		it->fini(it);
	free(it);
	atomic_fetch_add_explicit(&task_drops, 1, memory_order_relaxed);
}

static const struct vrt_task_vtable task_vt = { .poll = task_poll, .drop = task_drop };

void *ioh_task_new(size_t size, enum vrt_poll (*fn)(struct ioh_task *),
		   void (*fini)(struct ioh_task *))
{
	struct ioh_task *t = calloc(1, size);

	if (!t) {
		fprintf(stderr, "out of memory\n");
		exit(99);
	}
	vrt_task_init(&t->t, &task_vt);
	t->fn = fn;
	t->fini = fini;
	return t;
}

void ioh_spawn(struct ioh *h, struct ioh_task *t, bool keep)
{
	int r = vrt_spawn(h->rt, &t->t);

	if (r < 0) {
		fprintf(stderr, "vrt_spawn: %s\n", strerror(-r));
		exit(99);
	}
	if (!keep)
		vrt_task_unref(&t->t);
}

uint64_t ioh_drops(void)
{
	return atomic_load_explicit(&task_drops, memory_order_relaxed);
}

struct leave_blocker {
	struct ioh_task base;
	struct ioh_task *caller; /* a reference of ours */
	struct ioh_leave *l;     /* in the caller's memory */
};

/* Wakes the caller from outside the runtime (the injection queue, and a
 * parked worker woken for it) until it ran elsewhere. */
static void *leave_waker(void *arg)
{
	struct leave_blocker *b = arg;
	int64_t t0 = vb_now_ns();

	/* acquire: pairs with the caller's release store of moved. */
	while (!atomic_load_explicit(&b->l->moved, memory_order_acquire) &&
	       vb_now_ns() - t0 < 10000000000LL) {
		vrt_task_wake(&b->caller->t);
		usleep(1000);
	}
	return NULL;
}

static enum vrt_poll leave_blocker_poll(struct ioh_task *self)
{
	struct leave_blocker *b = (struct leave_blocker *)self;
	pthread_t th;

	/* This worker stays in this poll until the caller ran elsewhere. */
	if (pthread_create(&th, NULL, leave_waker, b) != 0) {
		fprintf(stderr, "pthread_create failed\n");
		exit(99);
	}
	pthread_join(th, NULL);
	vrt_task_unref(&b->caller->t);
	return VRT_READY;
}

enum vrt_poll ioh_leave_worker(struct ioh_task *self, struct ioh_leave *l)
{
	struct leave_blocker *b;

	if (l->state == 0) {
		l->state = 1;
		l->home = vrt_worker_id();
		b = ioh_task_new(sizeof(*b), leave_blocker_poll, NULL);
		vrt_task_ref(&self->t);
		b->caller = self;
		b->l = l;
		if (vrt_spawn_detached(vrt_current_rt(), &b->base.t) < 0) {
			fprintf(stderr, "vrt_spawn: refused\n");
			exit(99);
		}
		return VRT_PENDING;
	}
	if (vrt_worker_id() == l->home)
		return VRT_PENDING;
	/* release: pairs with leave_waker's acquire. */
	atomic_store_explicit(&l->moved, 1, memory_order_release);
	return VRT_READY;
}

/* ------------------------------------------------------------ sockets */

int ioh_listen_local(int *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	*port = ntohs(sa.sin_port);
	return fd;
}

int ioh_connect(int port)
{
	struct sockaddr_in sa = {
		.sin_family = AF_INET,
		.sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

int ioh_tcp_pair(int a[2])
{
	int port, lfd = ioh_listen_local(&port), c, s;

	if (lfd < 0)
		return lfd;
	c = ioh_connect(port);
	if (c < 0) {
		close(lfd);
		return c;
	}
	s = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	close(lfd);
	if (s < 0) {
		int e = errno;
		close(c);
		return -e;
	}
	a[0] = s;
	a[1] = c;
	return 0;
}

/* ------------------------------------------------------------ echo server */

enum { EC_RECV, EC_SEND, EC_CLOSE };

struct echo_conn {
	struct ioh_task base;
	struct ioh_echo *e;
	struct vio_conn c;
	struct vio_op tx;   /* lent to c for good */
	struct vio_timer dl; /* c's deadline */
	int state;
	size_t n;
	unsigned msgs;
	bool deadline_armed;
	int peer_port;
	struct ioh_echo_trace tr;
	size_t bufsize;
	struct iovec iov[2];
	char buf[]; /* bufsize bytes */
};

static void spin(unsigned ns)
{
	int64_t end = vb_now_ns() + ns;

	while (vb_now_ns() < end)
		;
}

static void echo_conn_end(struct echo_conn *ec)
{
	if (ec->e->trace && ec->peer_port > 0) {
		ec->tr.used = true;
		ec->e->trace[ec->peer_port] = ec->tr;
	}
	atomic_fetch_add_explicit(&ec->e->closed, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&ec->e->active, 1, memory_order_relaxed);
}

static enum vrt_poll echo_conn_poll(struct ioh_task *t)
{
	struct echo_conn *ec = (struct echo_conn *)t;
	struct ioh_echo *e = ec->e;
	enum vrt_poll p;
	ssize_t r;
	int rc;

	if (vrt_task_is_cancelled(&t->t)) {
		vio_conn_abandon(&ec->c);
		echo_conn_end(ec);
		return VRT_READY;
	}
	if (vrt_worker_id() >= 0)
		ec->tr.workers |= 1u << (vrt_worker_id() & 31);
	for (;;) {
		switch (ec->state) {
		case EC_RECV:
			if (e->idle_deadline_ns > 0 && !ec->deadline_armed) {
				/* A live deadline, re-armed before every receive. */
				if (vio_conn_set_deadline(&ec->c, &ec->dl, vb_now_ns() + e->idle_deadline_ns) < 0) {
					atomic_fetch_add_explicit(&e->errors, 1, memory_order_relaxed);
					ec->state = EC_CLOSE;
					continue;
				}
				ec->deadline_armed = true;
			}
			p = vio_conn_recv(&ec->c, ec->buf, ec->bufsize, &r);
			if (p != VRT_READY)
				return p;
			ec->deadline_armed = false;
			if (r <= 0)
				ec->tr.end = (int32_t)r;
			if (r > 0) {
				ec->tr.in += (uint64_t)r;
				ec->tr.recvs++;
				ec->n = (size_t)r;
				ec->state = EC_SEND;
				if (e->spin_ns)
					spin(e->spin_ns);
				if (e->use_sendv && (ec->msgs++ & 1) && ec->n > 1) {
					ec->iov[0].iov_base = ec->buf;
					ec->iov[0].iov_len = ec->n / 3;
					ec->iov[1].iov_base = ec->buf + ec->n / 3;
					ec->iov[1].iov_len = ec->n - ec->n / 3;
					ec->n = 0; /* marks the vectored send */
				}
				continue;
			}
			if (r == 0) {
				/* Half-close: the peer is done sending; answer EOF. */
				vio_conn_shutdown_write(&ec->c);
			} else if (r == -ECONNRESET || r == -EPIPE) {
				atomic_fetch_add_explicit(&e->resets, 1, memory_order_relaxed);
			} else {
				atomic_fetch_add_explicit(&e->errors, 1, memory_order_relaxed);
			}
			ec->state = EC_CLOSE;
			continue;
		case EC_SEND:
			if (ec->n == 0)
				p = vio_conn_sendv(&ec->c, ec->iov, 2, &r);
			else
				p = vio_conn_send(&ec->c, ec->buf, ec->n, &r);
			if (p != VRT_READY)
				return p;
			if (r < 0) {
				ec->tr.end = (int32_t)r;
				if (r == -ECONNRESET || r == -EPIPE)
					atomic_fetch_add_explicit(&e->resets, 1, memory_order_relaxed);
				else
					atomic_fetch_add_explicit(&e->errors, 1, memory_order_relaxed);
				ec->state = EC_CLOSE;
				continue;
			}
			ec->tr.out += (uint64_t)r;
			ec->state = EC_RECV;
			continue;
		case EC_CLOSE:
			p = vio_conn_close(&ec->c, &rc);
			if (p != VRT_READY)
				return p;
			echo_conn_end(ec);
			return VRT_READY;
		}
	}
}

struct acceptor {
	struct ioh_task base;
	struct ioh_echo *e;
	unsigned idx;
};

static enum vrt_poll acceptor_poll(struct ioh_task *t)
{
	struct acceptor *a = (struct acceptor *)t;
	struct ioh_echo *e = a->e;
	int fd, one = 1;

	for (;;) {
		enum vrt_poll p = vio_accept(e->l, a->idx, &fd);
		struct echo_conn *ec;

		if (p != VRT_READY)
			return p;
		if (fd < 0 || vrt_task_is_cancelled(&t->t)) {
			/* Listener closed and drained. Release: pairs with
			 * ioh_echo_stop's acquire (its counts are final). */
			atomic_fetch_sub_explicit(&e->acceptors, 1, memory_order_release);
			return VRT_READY;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		ec = ioh_task_new(sizeof(*ec) + (e->bufsize ? e->bufsize : 32768), echo_conn_poll, NULL);
		ec->e = e;
		if (e->trace) {
			struct sockaddr_in pa;
			socklen_t pl = sizeof(pa);

			if (getpeername(fd, (struct sockaddr *)&pa, &pl) == 0)
				ec->peer_port = ntohs(pa.sin_port);
		}
		ec->bufsize = e->bufsize ? e->bufsize : 32768;
		vio_conn_init(&ec->c, fd);
		vio_conn_tx_lend(&ec->c, &ec->tx);
		vio_timer_init(&ec->dl);
		atomic_fetch_add_explicit(&e->accepted, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&e->active, 1, memory_order_relaxed);
		ioh_spawn(e->h, &ec->base, false);
	}
}

void ioh_echo_start_on(struct ioh *h, struct ioh_echo *e, struct vio_listener *l)
{
	e->h = h;
	e->l = l;
	e->port = vio_listener_port(l);
	for (unsigned i = 0; i < vio_listener_count(l); i++) {
		struct acceptor *a = ioh_task_new(sizeof(*a), acceptor_poll, NULL);

		a->e = e;
		a->idx = i;
		atomic_fetch_add_explicit(&e->acceptors, 1, memory_order_relaxed);
		ioh_spawn(h, &a->base, false);
	}
}

size_t ioh_echo_conn_size(size_t bufsize)
{
	return sizeof(struct echo_conn) + (bufsize ? bufsize : 32768);
}

int ioh_echo_start(struct ioh *h, struct ioh_echo *e)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct vio_listener *l;
	int r;

	r = vio_listener_new(h->io, (struct sockaddr *)&sa, sizeof(sa), 1024, &l);
	if (r < 0)
		return r;
	ioh_echo_start_on(h, e, l);
	return 0;
}

void ioh_echo_trace_print(const struct ioh_echo *e, int port)
{
	const struct ioh_echo_trace *t;

	if (!e->trace || port <= 0 || port > 65535)
		return;
	t = &e->trace[port];
	if (!t->used) {
		fprintf(stderr, "# server: no record of client port %d (still open, or never accepted)\n",
			port);
		return;
	}
	fprintf(stderr, "# server, client port %d: in %lu out %lu in %u receives, ended by %d (%s), "
			"workers 0x%x\n", port, (unsigned long)t->in, (unsigned long)t->out, t->recvs,
		t->end, t->end ? strerror(-t->end) : "EOF", t->workers);
}

int ioh_echo_stop(struct ioh_echo *e, unsigned timeout_ms)
{
	int64_t end = vb_now_ns() + (int64_t)timeout_ms * VB_NS_PER_MS;

	vio_listener_close(e->l);
	/* The acceptors first: a connection accepted just before the close
	 * (a client that reset at once) is still in the listener's queue,
	 * counted by the I/O layer's accepts but not yet by `accepted`.
	 * Acquire: pairs with the acceptor's release as it ends. */
	while (atomic_load_explicit(&e->acceptors, memory_order_acquire) > 0 ||
	       atomic_load_explicit(&e->active, memory_order_relaxed) > 0) {
		if (vb_now_ns() > end)
			return -ETIMEDOUT;
		usleep(1000);
	}
	return 0;
}

/* ------------------------------------------------------------ client */

struct cconn {
	int fd;
	bool reset;            /* reset after sending `reset_at` bytes */
	size_t len, sent, got, reset_at;
	uint64_t seed;         /* payload byte i = pbyte(seed, i) */
	bool shut;
	unsigned round;
};

/* Payload bytes as a function of their position, so a partial send or a
 * check of the echo needs no stored copy. */
static uint8_t pbyte(uint64_t seed, size_t i)
{
	uint64_t z = seed + (i >> 3) * 0x9E3779B97F4A7C15ull;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z ^= z >> 27;
	return (uint8_t)(z >> ((i & 7) * 8));
}

static size_t pick_len(struct vb_rng *r, const struct ioh_client_opts *o)
{
	uint32_t x = vb_rng_below(r, 1000);

	if (x < o->big_permille)
		return o->max_payload;
	/* Log-uniform over 1 .. max_payload / 8. */
	size_t cap = o->max_payload / 8 > 1 ? o->max_payload / 8 : 1;
	unsigned bits = 0;
	while (((size_t)1 << bits) < cap)
		bits++;
	size_t v = (size_t)1 << vb_rng_below(r, bits + 1);
	v += vb_rng_below(r, (uint32_t)(v < 0xffffffffu ? v : 0xffffffffu));
	return v > cap ? cap : v < 1 ? 1 : v;
}

static int local_port(int fd)
{
	struct sockaddr_in sa;
	socklen_t l = sizeof(sa);

	return getsockname(fd, (struct sockaddr *)&sa, &l) == 0 ? ntohs(sa.sin_port) : 0;
}

static void note_err(struct ioh_client_result *res, const char *fmt, int e)
{
	res->errors++;
	if (!res->first_error[0])
		snprintf(res->first_error, sizeof(res->first_error), fmt, strerror(e));
}

static int cconn_open(struct cconn *c, const struct ioh_client_opts *o, struct vb_rng *r,
		      struct ioh_client_result *res)
{
	int fd = ioh_connect(o->port);

	if (fd < 0) {
		note_err(res, "connect: %s", -fd);
		return -1;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	c->fd = fd;
	c->len = pick_len(r, o);
	c->sent = c->got = 0;
	c->seed = ((uint64_t)vb_rng_next32(r) << 32) | vb_rng_next32(r);
	c->shut = false;
	c->reset = vb_rng_below(r, 1000) < o->reset_permille;
	c->reset_at = c->reset ? vb_rng_below(r, (uint32_t)(c->len < 0xffffffffu ? c->len : 0xffffffffu)) : 0;
	return 0;
}

static void cconn_reset(struct cconn *c)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(c->fd);
	c->fd = -1;
}

/* Returns 1 when the connection finished (closed), 0 to go on. */
static int cconn_step(struct cconn *c, short revents, struct ioh_client_result *res)
{
	uint8_t buf[65536];

	if (revents & POLLOUT && c->sent < c->len) {
		size_t n = c->len - c->sent;

		if (n > sizeof(buf))
			n = sizeof(buf);
		if (c->reset && c->sent + n > c->reset_at)
			n = c->reset_at - c->sent;
		for (size_t i = 0; i < n; i++)
			buf[i] = pbyte(c->seed, c->sent + i);
		ssize_t w = n ? send(c->fd, buf, n, MSG_NOSIGNAL) : 0;
		if (w < 0) {
			if (errno != EAGAIN) {
				note_err(res, "send: %s", errno);
				close(c->fd);
				c->fd = -1;
				return 1;
			}
			w = 0;
		}
		c->sent += (size_t)w;
		res->bytes_sent += (uint64_t)w;
		if (c->reset && c->sent >= c->reset_at) {
			cconn_reset(c);
			res->resets++;
			return 1;
		}
	}
	if (c->sent == c->len && !c->shut) {
		shutdown(c->fd, SHUT_WR);
		c->shut = true;
	}
	if (revents & (POLLIN | POLLHUP | POLLERR)) {
		for (;;) {
			ssize_t r = recv(c->fd, buf, sizeof(buf), 0);

			if (r < 0) {
				if (errno == EAGAIN)
					break;
				note_err(res, "recv: %s", errno);
				if (!res->first_port)
					res->first_port = local_port(c->fd);
				close(c->fd);
				c->fd = -1;
				return 1;
			}
			if (r == 0) {
				if (c->got != c->len) {
					res->mismatches++;
					if (!res->first_error[0])
						snprintf(res->first_error, sizeof(res->first_error),
							 "EOF after %zu of %zu echoed bytes", c->got,
							 c->len);
					if (!res->first_port)
						res->first_port = local_port(c->fd);
				}
				close(c->fd);
				c->fd = -1;
				return 1;
			}
			for (ssize_t i = 0; i < r; i++) {
				if (buf[i] != pbyte(c->seed, c->got + (size_t)i)) {
					res->mismatches++;
					if (!res->first_error[0])
						snprintf(res->first_error, sizeof(res->first_error),
							 "byte %zu of %zu differs", c->got + (size_t)i,
							 c->len);
					close(c->fd);
					c->fd = -1;
					return 1;
				}
			}
			c->got += (size_t)r;
			res->bytes_echoed += (uint64_t)r;
		}
	}
	return 0;
}

void ioh_client_run(const struct ioh_client_opts *o, struct ioh_client_result *res)
{
	struct cconn *cs = calloc(o->conns, sizeof(*cs));
	struct pollfd *pfd = calloc(o->conns, sizeof(*pfd));
	struct vb_rng rng;
	unsigned live = 0;

	memset(res, 0, sizeof(*res));
	if (!cs || !pfd) {
		note_err(res, "calloc: %s", ENOMEM);
		goto out;
	}
	vb_rng_seed(&rng, o->seed);
	for (unsigned i = 0; i < o->conns; i++) {
		cs[i].fd = -1;
		if (cconn_open(&cs[i], o, &rng, res) == 0)
			live++;
	}
	while (live) {
		unsigned n = 0;

		for (unsigned i = 0; i < o->conns; i++) {
			if (cs[i].fd < 0)
				continue;
			pfd[n].fd = cs[i].fd;
			pfd[n].events = POLLIN | (cs[i].sent < cs[i].len ? POLLOUT : 0);
			pfd[n].revents = 0;
			n++;
		}
		if (poll(pfd, n, 1000) < 0 && errno != EINTR) {
			note_err(res, "poll: %s", errno);
			break;
		}
		n = 0;
		for (unsigned i = 0; i < o->conns; i++) {
			struct cconn *c = &cs[i];

			if (c->fd < 0)
				continue;
			if (pfd[n++].revents == 0)
				continue;
			if (!cconn_step(c, pfd[n - 1].revents, res))
				continue;
			res->conns_done++;
			live--;
			if (++c->round < (o->rounds ? o->rounds : 1) &&
			    cconn_open(c, o, &rng, res) == 0)
				live++;
		}
	}
out:
	for (unsigned i = 0; cs && i < o->conns; i++)
		if (cs[i].fd >= 0)
			close(cs[i].fd);
	free(cs);
	free(pfd);
}

struct client_thread {
	pthread_t th;
	struct ioh_client_opts o;
	struct ioh_client_result r;
};

static void *client_main(void *arg)
{
	struct client_thread *ct = arg;

	ioh_client_run(&ct->o, &ct->r);
	return NULL;
}

void ioh_clients(unsigned threads, const struct ioh_client_opts *o, struct ioh_client_result *sum)
{
	struct client_thread *ct = calloc(threads, sizeof(*ct));

	memset(sum, 0, sizeof(*sum));
	for (unsigned i = 0; i < threads; i++) {
		ct[i].o = *o;
		ct[i].o.seed = o->seed + i;
		pthread_create(&ct[i].th, NULL, client_main, &ct[i]);
	}
	for (unsigned i = 0; i < threads; i++) {
		pthread_join(ct[i].th, NULL);
		sum->conns_done += ct[i].r.conns_done;
		sum->resets += ct[i].r.resets;
		sum->bytes_sent += ct[i].r.bytes_sent;
		sum->bytes_echoed += ct[i].r.bytes_echoed;
		sum->mismatches += ct[i].r.mismatches;
		sum->errors += ct[i].r.errors;
		if (!sum->first_error[0] && ct[i].r.first_error[0]) {
			memcpy(sum->first_error, ct[i].r.first_error, sizeof(sum->first_error));
			sum->first_port = ct[i].r.first_port;
		}
	}
	free(ct);
}

/* ------------------------------------------------------ closed-loop client */

struct ppconn {
	int fd;
	size_t sent, got;
	uint64_t done;
	int64_t t0;
	bool want_out;
};

static void pp_fail(struct ioh_pingpong_result *res, const char *what, int e)
{
	res->errors++;
	if (!res->first_error[0])
		snprintf(res->first_error, sizeof(res->first_error), "%s: %s", what, strerror(e));
}

/* Send what is left of the current message. 0, or -1 after an error. */
static int pp_send(struct ppconn *c, const uint8_t *tx, size_t size, struct ioh_pingpong_result *res)
{
	while (c->sent < size) {
		ssize_t w = send(c->fd, tx + c->sent, size - c->sent, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EAGAIN)
				return 0;
			pp_fail(res, "send", errno);
			return -1;
		}
		c->sent += (size_t)w;
	}
	return 0;
}

void ioh_pingpong_run(const struct ioh_pingpong_opts *o, struct ioh_pingpong_result *res)
{
	struct ppconn *cs = calloc(o->conns, sizeof(*cs));
	uint8_t *tx = malloc(o->size), *rx = malloc(65536);
	struct epoll_event evs[256];
	int ep = epoll_create1(EPOLL_CLOEXEC);
	unsigned live = 0;

	memset(res, 0, sizeof(*res));
	if (!cs || !tx || !rx || ep < 0) {
		pp_fail(res, "setup", ep < 0 ? errno : ENOMEM);
		goto out;
	}
	/* Every message of this client carries the same bytes: the echo is
	 * checked with memcmp, cheap enough not to slow a benchmark. */
	for (size_t i = 0; i < o->size; i++)
		tx[i] = pbyte(o->seed, i);
	for (unsigned i = 0; i < o->conns; i++) {
		struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.u32 = i };

		cs[i].fd = ioh_connect(o->port);
		if (cs[i].fd < 0) {
			pp_fail(res, "connect", -cs[i].fd);
			continue;
		}
		fcntl(cs[i].fd, F_SETFL, fcntl(cs[i].fd, F_GETFL) | O_NONBLOCK);
		cs[i].want_out = true;
		epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev);
		live++;
	}
	res->conns_open = live;
	while (o->go && !atomic_load(o->go))
		usleep(100);
	for (unsigned i = 0; i < o->conns; i++)
		cs[i].t0 = vb_now_ns();
	while (live && (!o->until_ns || vb_now_ns() < o->until_ns)) {
		int n = epoll_wait(ep, evs, 256, 100);

		for (int k = 0; k < n; k++) {
			struct ppconn *c = &cs[evs[k].data.u32];
			bool out;

			if (c->fd < 0)
				continue;
			if ((evs[k].events & EPOLLOUT) && pp_send(c, tx, o->size, res) < 0)
				goto bad;
			while (evs[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
				ssize_t r = recv(c->fd, rx, 65536, 0);

				if (r < 0 && errno == EAGAIN)
					break;
				if (r <= 0) {
					pp_fail(res, "recv", r < 0 ? errno : ECONNRESET);
					goto bad;
				}
				if (c->got + (size_t)r > c->sent || memcmp(rx, tx + c->got, (size_t)r) != 0) {
					res->mismatches++;
					if (!res->first_error[0])
						snprintf(res->first_error, sizeof(res->first_error),
							 "echo differs at byte %zu of a %zu-byte message", c->got,
							 o->size);
					goto bad;
				}
				c->got += (size_t)r;
				res->bytes += (uint64_t)r;
				if (c->got < o->size)
					continue;
				/* One message echoed: the next one. */
				int64_t now = vb_now_ns();
				if (o->latency)
					vb_hist_record_owner(o->latency, (uint64_t)(now - c->t0));
				res->messages++;
				c->got = c->sent = 0;
				c->t0 = now;
				if (o->messages && ++c->done == o->messages) {
					close(c->fd);
					c->fd = -1;
					live--;
					break;
				}
				if (pp_send(c, tx, o->size, res) < 0)
					goto bad;
			}
			if (c->fd < 0)
				continue;
			out = c->sent < o->size;
			if (out != c->want_out) {
				struct epoll_event ev = {
					.events = EPOLLIN | (out ? EPOLLOUT : 0),
					.data.u32 = evs[k].data.u32,
				};
				epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
				c->want_out = out;
			}
			continue;
bad:
			close(c->fd);
			c->fd = -1;
			live--;
		}
	}
out:
	for (unsigned i = 0; cs && i < o->conns; i++)
		if (cs[i].fd >= 0)
			close(cs[i].fd);
	if (ep >= 0)
		close(ep);
	free(cs);
	free(tx);
	free(rx);
}
