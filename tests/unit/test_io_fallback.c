/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_io_fallback.c: the real fallback. Under
 * tests/helpers/no_uring (a seccomp filter making io_uring_setup fail with
 * EPERM, as container runtimes do) the driver with backend=auto must pick
 * libev and say why, backend=uring must fail cleanly, and the echo and
 * timer tests (run with backend=auto) must pass through it.
 *
 * Modes: no argument: the test; "--check-blocked" / "--check-driver": run
 * under no_uring by the test itself.
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
#include <limits.h>
#include <linux/io_uring.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/io.h"
#include "tests/helpers/test_config.h"

static char builddir[PATH_MAX];
static char self[PATH_MAX];

static void find_paths(void)
{
	const char *b = getenv("VOLTD_BUILDDIR");
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0) {
		fprintf(stderr, "readlink /proc/self/exe: %s\n", strerror(errno));
		exit(99);
	}
	self[n] = '\0';
	if (b) {
		snprintf(builddir, sizeof(builddir), "%s", b);
	} else {
		/* .../tests/unit/<exe> -> ... (libtool-free automake layout) */
		snprintf(builddir, sizeof(builddir), "%s", self);
		for (int i = 0; i < 3; i++) {
			char *slash = strrchr(builddir, '/');
			if (slash)
				*slash = '\0';
		}
	}
}

/* Run argv under no_uring with extra environment; returns the exit code. */
static int run(const char *const *argv, const char *const *env)
{
	char helper[PATH_MAX + 32];
	const char *args[16];
	pid_t pid;
	int st, n = 0;

	snprintf(helper, sizeof(helper), "%s/tests/helpers/no_uring", builddir);
	args[n++] = helper;
	while (*argv && n < 15)
		args[n++] = *argv++;
	args[n] = NULL;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		for (; env && *env; env += 2)
			setenv(env[0], env[1], 1);
		execv(helper, (char *const *)args);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int check_blocked(void)
{
	struct io_uring_params p;
	long r;

	memset(&p, 0, sizeof(p));
	r = syscall(__NR_io_uring_setup, 8, &p);
	if (r >= 0) {
		close((int)r);
		fprintf(stderr, "io_uring_setup succeeded under no_uring\n");
		return 1;
	}
	return errno == EPERM ? 0 : 1;
}

static int check_driver(void)
{
	struct vio_config c;
	struct vio *io;
	int r;

	tcfg_io(&c);
	c.backend = VIO_BACKEND_URING;
	r = vio_new(&c, 2, &io);
	if (r != -EPERM) {
		fprintf(stderr, "backend=uring: expected -EPERM, got %d\n", r);
		return 1;
	}
	c.backend = VIO_BACKEND_AUTO;
	r = vio_new(&c, 2, &io);
	if (r < 0) {
		fprintf(stderr, "backend=auto: %s\n", strerror(-r));
		return 1;
	}
	printf("# io: backend=%s (%s)\n", vio_backend_name(io), vio_backend_reason(io));
	r = strcmp(vio_backend_name(io), "libev") != 0 ||
	    strstr(vio_backend_reason(io), "Operation not permitted") == NULL;
	vio_free(io);
	return r;
}

static void test_filter_blocks_io_uring(void **state)
{
	const char *argv[] = { self, "--check-blocked", NULL };
	int rc = run(argv, NULL);

	(void)state;
	if (rc == 99)
		skip(); /* seccomp filters not allowed here */
	assert_int_equal(rc, 0);
}

static void test_driver_falls_back(void **state)
{
	const char *argv[] = { self, "--check-driver", NULL };

	(void)state;
	assert_int_equal(run(argv, NULL), 0);
}

static void run_auto_test(const char *name)
{
	char path[PATH_MAX + 64];
	const char *argv[] = { path, NULL };
	const char *env[] = { "VOLTD_IO_BACKEND", "auto", "VOLTD_IO_EXPECT_BACKEND", "libev", NULL };

	snprintf(path, sizeof(path), "%s/tests/unit/%s", builddir, name);
	assert_int_equal(access(path, X_OK), 0);
	assert_int_equal(run(argv, env), 0);
}

static void test_echo_through_fallback(void **state)
{
	(void)state;
	run_auto_test("test_io_echo");
}

static void test_timers_through_fallback(void **state)
{
	(void)state;
	run_auto_test("test_io_timer");
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_filter_blocks_io_uring),
		cmocka_unit_test(test_driver_falls_back),
		cmocka_unit_test(test_echo_through_fallback),
		cmocka_unit_test(test_timers_through_fallback),
	};

	if (argc > 1 && strcmp(argv[1], "--check-blocked") == 0)
		return check_blocked();
	if (argc > 1 && strcmp(argv[1], "--check-driver") == 0)
		return check_driver();
	find_paths();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
