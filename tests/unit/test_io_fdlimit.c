/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_io_fdlimit.c: accept under fd exhaustion. An echo server
 * runs in a child process whose RLIMIT_NOFILE leaves room for only a few
 * connections; the parent keeps some connections open, floods the
 * listener, checks that the kept connections are still served while the
 * listener is paused (EMFILE, logged rate-limited), then lets the flood go
 * and checks that a new connection is served again. Run once per backend.
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
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/helpers/io_harness.h"
#include "base/time.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accept_under_emfile),
	};

	ioh_watchdog(90, "test_io_fdlimit");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
