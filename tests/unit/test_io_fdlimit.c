/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_io_fdlimit.c: accept under fd exhaustion. An echo server
 * runs in a child process whose RLIMIT_NOFILE leaves room for only a few
 * connections; the parent keeps some connections open, floods the
 * listener, checks that the kept connections are still served while the
 * listener is paused (EMFILE, logged rate-limited), then lets the flood go
 * and checks that a new connection is served again. Run once per backend.
 *
 * Two cases check that a listener comes back on an idle worker (review
 * N1): an accept that ends in the poll before a park (a one-shot accept,
 * or EMFILE) must be re-armed or timed by the park itself; before the fix
 * the worker slept without a bound and the listener stayed dead.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/internal.h" /* vio__test_completions_pending */
#include "tests/helpers/io_harness.h"
#include "base/time.h"
#include "base/compiler.h"
#include "tests/helpers/test_config.h"

#define ROOM 8      /* connections the server can hold */
#define KEEP 4      /* kept open through the flood */
#define FLOOD 64

/* An fd limit that leaves exactly `room` free descriptor numbers below
 * it (new fds take the lowest free number; inherited high fds stay). */
static int limit_with_room(int room)
{
	int fd = 0;

	for (;; fd++) {
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF && --room == 0)
			return fd + 1;
	}
}

static int count_open_fds(void)
{
	int n = 0;

	for (int fd = 0; fd < 4096; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			n++;
	return n;
}

/* The server: exits 0 when it paused at least once and saw no errors.
 * io_uring captures RLIMIT_NOFILE when an accept is submitted, so the
 * limit is lowered before the server starts: a dry run measures how many
 * descriptors the server itself needs. */
static void server(int wfd, int rfd)
{
	struct ioh h;
	struct ioh_echo e;
	struct vio_worker_stats ws[2];
	struct rlimit rl;
	uint64_t pauses = 0;
	int base, need;
	char c;

	ioh_watchdog(60, "fdlimit server");
	base = count_open_fds();
	ioh_start(&h, 2, NULL, NULL);
	memset(&e, 0, sizeof(e));
	if (ioh_echo_start(&h, &e) < 0)
		_exit(99);
	need = count_open_fds() - base;
	ioh_echo_stop(&e, 1000);
	ioh_stop(&h);

	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = (rlim_t)limit_with_room(need + ROOM);
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		_exit(99);
	fprintf(stderr, "# server: needs %d fds, RLIMIT_NOFILE %lu\n", need,
		(unsigned long)rl.rlim_cur);
	ioh_start(&h, 2, NULL, NULL);
	memset(&e, 0, sizeof(e));
	if (ioh_echo_start(&h, &e) < 0)
		_exit(99);
	if (write(wfd, &e.port, sizeof(e.port)) != sizeof(e.port))
		_exit(99);
	while (read(rfd, &c, 1) > 0) /* until the parent is done */
		;
	if (ioh_echo_stop(&e, 5000) < 0) {
		fprintf(stderr, "server: %ld connections still active\n", (long)e.active);
		_exit(1);
	}
	vio_stats_snapshot(h.io, ws, 2);
	pauses = ws[0].accept_pauses + ws[1].accept_pauses;
	fprintf(stderr, "# server: accepted %lu, accept pauses %lu, errors %lu\n",
		(unsigned long)e.accepted, (unsigned long)pauses, (unsigned long)e.errors);
	ioh_stop(&h);
	_exit(pauses >= 1 && e.errors == 0 ? 0 : 1);
}

static bool echo_once(int fd, char c, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char r;

	if (send(fd, &c, 1, MSG_NOSIGNAL) != 1)
		return false;
	return poll(&p, 1, timeout_ms) == 1 && recv(fd, &r, 1, 0) == 1 && r == c;
}

static int connect_nb(int port)
{
	struct sockaddr_in sa = {
		.sin_family = AF_INET,
		.sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 &&
	    errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

static void test_accept_under_emfile(void **state)
{
	int up[2], down[2], port, st;
	int keep[KEEP], flood[FLOOD], fresh;
	pid_t pid;
	int64_t t0;

	(void)state;
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		server(up[1], down[0]);
	}
	close(up[1]);
	close(down[0]);
	assert_int_equal(read(up[0], &port, sizeof(port)), (ssize_t)sizeof(port));

	for (int i = 0; i < KEEP; i++) {
		keep[i] = ioh_connect(port);
		assert_true(keep[i] >= 0);
		assert_true(echo_once(keep[i], 'k', 2000));
	}
	for (int i = 0; i < FLOOD; i++) {
		flood[i] = connect_nb(port);
		assert_true(flood[i] >= 0);
	}
	usleep(100 * 1000);
	for (int i = 0; i < FLOOD; i++)
		send(flood[i], "f", 1, MSG_NOSIGNAL); /* some will never be accepted */
	/* The kept connections are served while the listener is paused. */
	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < KEEP; i++)
			assert_true(echo_once(keep[i], (char)('a' + round), 2000));
		usleep(10 * 1000);
	}
	for (int i = 0; i < FLOOD; i++)
		close(flood[i]);
	/* Served again once the flood is gone. */
	t0 = vb_now_ns();
	fresh = ioh_connect(port);
	assert_true(fresh >= 0);
	assert_true(echo_once(fresh, 'n', 3000));
	print_message("# new connection served %.1f ms after the flood left\n",
		      (double)(vb_now_ns() - t0) / 1e6);
	close(fresh);
	for (int i = 0; i < KEEP; i++)
		close(keep[i]);
	close(down[1]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	close(up[0]);
}

/* A task that spins `ms` in one poll, so that a connection arrives while
 * its worker runs it and the accept's completion is reaped by the poll
 * that follows (after the driver's service pass), not by the park. The
 * spin goes on until the kernel holds that completion for the worker
 * (io_uring's deferred task work, a hang guard of 10 s): when it came
 * only after the spin, the park's own wait collected it and the service
 * pass after the park re-armed the listener, and the test passed without
 * the park's re-arm it is about (half the runs). */
struct spinner {
	struct ioh_task base;
	unsigned ms;
	_Atomic int phase; /* 1: spinning, 2: done */
};

static enum vrt_poll spinner_poll(struct ioh_task *t)
{
	struct spinner *s = (struct spinner *)t;
	int64_t start = vb_now_ns(), end = start + (int64_t)s->ms * VB_NS_PER_MS;

	atomic_store(&s->phase, 1);
	while (vb_now_ns() < end ||
	       (!vio__test_completions_pending() && vb_now_ns() - start < 10000 * VB_NS_PER_MS))
		;
	atomic_store(&s->phase, 2);
	return VRT_READY;
}

/* Until the (only) worker is seen PARKED in one park 20 ms apart: what it
 * queued (the listener's accept) is in the kernel, since the park's wait
 * submits it. Otherwise the accept went in with the flush after the spin,
 * its completion was reaped by a poll with a service pass after it, and
 * the test passed without the park's re-arm. */
static void wait_parked(struct ioh *h)
{
	struct vrt_worker_stats ws;
	int64_t t0 = vb_now_ns();
	uint64_t parks;

	for (;;) {
		vrt_stats_snapshot(h->rt, NULL, &ws, 1);
		parks = ws.parks;
		if (ws.state == VRT_WS_PARKED) {
			usleep(20000);
			vrt_stats_snapshot(h->rt, NULL, &ws, 1);
			if (ws.state == VRT_WS_PARKED && ws.parks == parks)
				return;
		}
		assert_true(vb_now_ns() - t0 < 20000 * VB_NS_PER_MS);
		usleep(1000);
	}
}

static void spin_while(struct ioh *h, unsigned ms, void (*during)(void *), void *arg)
{
	struct spinner *s = ioh_task_new(sizeof(*s), spinner_poll, NULL);

	s->ms = ms;
	wait_parked(h);
	ioh_spawn(h, &s->base, true);
	while (atomic_load(&s->phase) == 0)
		usleep(1000);
	during(arg);
	while (atomic_load(&s->phase) != 2)
		usleep(1000);
	vrt_task_unref(&s->base.t);
	usleep(50 * 1000); /* the worker polls, then parks */
}

static uint64_t accepts_of(struct ioh *h)
{
	struct vio_worker_stats ws;

	vio_stats_snapshot(h->io, &ws, 1);
	return ws.accepts;
}

/* Waits up to `ms` for the listener's accept count to reach n. */
static bool accepts_reach(struct ioh *h, uint64_t n, unsigned ms)
{
	int64_t end = vb_now_ns() + (int64_t)ms * VB_NS_PER_MS;

	while (accepts_of(h) < n) {
		if (vb_now_ns() > end)
			return false;
		usleep(1000);
	}
	return true;
}

static void connect_into(void *arg)
{
	int *a = arg; /* a[0]: port in, a[1]: fd out */

	a[1] = ioh_connect(a[0]);
}

/* One worker, one-shot accept, nobody waiting on the listener: the first
 * connection arrives during a long poll, so its accept completes in the
 * poll before the park. A second connection must still be accepted while
 * the worker has nothing else to do. */
static void test_oneshot_accept_idle_worker(void **state)
{
	struct vio_config c;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct vio_listener *l;
	struct ioh h;
	int a[2], second;

	(void)state;
	tcfg_io(&c);
	c.backend = ioh_backend();
	c.accept_multishot = false;
	ioh_start(&h, 1, &c, NULL);
	assert_int_equal(vio_listener_new(h.io, (struct sockaddr *)&sa, sizeof(sa), 64, &l), 0);
	a[0] = vio_listener_port(l);
	assert_true(accepts_reach(&h, 0, 0));
	spin_while(&h, 300, connect_into, a);
	assert_true(a[1] >= 0);
	assert_true(accepts_reach(&h, 1, 10000));
	second = ioh_connect(a[0]);
	assert_true(second >= 0);
	/* Nothing wakes the worker but its own bound: the re-armed accept. */
	assert_true(accepts_reach(&h, 2, 10000));
	close(a[1]);
	close(second);
	vio_listener_close(l);
	ioh_stop(&h);
}

struct emfile_ctx {
	int port, client;
	int dups[4096];
	int ndups;
};

static void connect_at_emfile(void *arg)
{
	struct emfile_ctx *x = arg;

	/* Take every free descriptor but one, which the client socket
	 * takes: the server's accept then fails with EMFILE. */
	while (x->ndups < (int)VB_ARRAY_SIZE(x->dups)) {
		int fd = dup(0);

		if (fd < 0)
			break;
		x->dups[x->ndups++] = fd;
	}
	assert_true(x->ndups > 0 && x->ndups < (int)VB_ARRAY_SIZE(x->dups));
	close(x->dups[--x->ndups]);
	x->client = ioh_connect(x->port);
}

/* One worker: the accept fails with EMFILE in the poll before a park.
 * Once descriptors are free again the connection must be served within
 * the listener's pause, although nothing else happens on the worker. */
static void test_emfile_idle_worker(void **state)
{
	struct emfile_ctx *x = calloc(1, sizeof(*x));
	struct vio_worker_stats ws;
	struct rlimit rl, low;
	struct ioh h;
	struct ioh_echo e;

	(void)state;
	assert_non_null(x);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	low = rl;
	low.rlim_cur = 256; /* io_uring reads the limit when the accept is issued */
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	ioh_start(&h, 1, NULL, NULL);
	memset(&e, 0, sizeof(e));
	assert_int_equal(ioh_echo_start(&h, &e), 0);
	x->port = e.port;
	spin_while(&h, 300, connect_at_emfile, x);
	assert_true(x->client >= 0);
	vio_stats_snapshot(h.io, &ws, 1);
	assert_int_equal(ws.accepts, 0);
	while (x->ndups > 0)
		close(x->dups[--x->ndups]);
	/* The pause (100 ms here) ends; the listener is armed again and the
	 * connection in the backlog is served. */
	assert_true(echo_once(x->client, 'x', 10000));
	vio_stats_snapshot(h.io, &ws, 1);
	print_message("# accept pauses %lu, re-arms %lu\n", (unsigned long)ws.accept_pauses,
		      (unsigned long)ws.accept_rearms);
	assert_true(ws.accept_pauses >= 1);
	close(x->client);
	assert_int_equal(ioh_echo_stop(&e, 5000), 0);
	ioh_stop(&h);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	free(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accept_under_emfile),
		cmocka_unit_test(test_oneshot_accept_idle_worker),
		cmocka_unit_test(test_emfile_idle_worker),
	};

	ioh_watchdog(90, "test_io_fdlimit");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
