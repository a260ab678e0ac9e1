/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_jobs_crash.c: the fatal-signal report (jobs/crash.c).
 * A child process loads tests/modules/crash.so, installs the report and
 * runs a job whose step dies of SIGSEGV, SIGBUS, SIGILL, SIGFPE or
 * SIGABRT: its stderr holds exactly one line naming the signal, the kind,
 * the module, its version and its file, and the child dies by that signal
 * (in sanitizer builds, where ASan's own handler takes SIGSEGV, SIGBUS and
 * SIGFPE over after the line, it exits non-zero instead). The same on a
 * blocking pool thread's kind; a job that does not crash writes nothing;
 * a crash outside any kind's callback is left to the old action, with no
 * line. Each case is its own child; the parent is single-threaded.
 */
#include "config.h"
#include "jobs/job.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#if defined(__SANITIZE_ADDRESS__)
#define ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN 1
#endif
#endif
#ifndef ASAN
#define ASAN 0
#endif

static char crash_so[4200];
static const int fatal[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };

/* Run fn in a child whose stderr goes to a pipe: the bytes it wrote go
 * to out, its wait status is returned. */
static int in_child(void (*fn)(const char *), const char *arg, char *out, size_t len)
{
	int p[2], status;
	size_t n = 0;
	ssize_t r;

	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit no_core = { 0, 0 };

		setrlimit(RLIMIT_CORE, &no_core);
		/* cmocka catches these signals around a test: the daemon's
		 * state is their default actions, then the report on top. */
		for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
			signal(fatal[i], SIG_DFL);
		if (vjob_crash_report_install() < 0)
			_exit(4);
		dup2(p[1], STDERR_FILENO);
		close(p[0]);
		close(p[1]);
		fn(arg);
		_exit(0);
	}
	close(p[1]);
	while (n + 1 < len && (r = read(p[0], out + n, len - 1 - n)) > 0)
		n += (size_t)r;
	out[n] = '\0';
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

static void run_kind(const char *kind, const char *sig)
{
	char q[32];
	struct vjob *j;

	snprintf(q, sizeof(q), "sig=%s", sig);
	struct vjob_input in = { .method = "GET", .query = q, .query_len = strlen(q) };
	if (vjob_new(vjob_kind_by_name(kind), &in, &j) < 0)
		_exit(3);
	while (vjob_step(j, 0) != VJOB_DONE)
		;
	vjob_free(j);
}

static void crash_in(const char *sig)
{
	run_kind("crash", sig);
}

static void crash_blocking_in(const char *sig)
{
	vjob_thread_blocking(0);
	run_kind("crash_blocking", sig);
}

static void crash_outside(const char *sig)
{
	(void)sig;
	raise(SIGSEGV);
}

static const struct {
	const char *arg, *name;
	int sig;
	bool asan_takes; /* ASan's handler reports it (and exits 1) after our line */
} sigs[] = {
	{ "segv", "SIGSEGV", SIGSEGV, true }, { "bus", "SIGBUS", SIGBUS, true },
	{ "ill", "SIGILL", SIGILL, false },    { "fpe", "SIGFPE", SIGFPE, true },
	{ "abrt", "SIGABRT", SIGABRT, false },
};

static void expect_death(int status, int sig, bool asan_takes, const char *out)
{
	if (ASAN && asan_takes) {
		if (!(WIFEXITED(status) && WEXITSTATUS(status) != 0) && !(WIFSIGNALED(status) && WTERMSIG(status) == sig))
			fail_msg("status 0x%x, output:\n%s", status, out);
		return;
	}
	if (!WIFSIGNALED(status) || WTERMSIG(status) != sig)
		fail_msg("status 0x%x, want death by signal %d; output:\n%s", status, sig, out);
}

static void test_each_signal_named_then_death(void **state)
{
	char out[8192], want[4600];

	(void)state;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		int st = in_child(crash_in, sigs[i].arg, out, sizeof(out));

		snprintf(want, sizeof(want), "crit: voltd: fatal signal %s in kind crash of module crash 1.0 (%s)\n",
			 sigs[i].name, crash_so);
		/* The report is the first line (a sanitizer's own follows). */
		if (strncmp(out, want, strlen(want)) != 0)
			fail_msg("%s: output:\n%s\nwant first:\n%s", sigs[i].name, out, want);
		if (!ASAN || !sigs[i].asan_takes)
			assert_string_equal(out, want); /* the one line */
		expect_death(st, sigs[i].sig, sigs[i].asan_takes, out);
	}
}

static void test_blocking_kind_named(void **state)
{
	char out[8192], want[4600];

	(void)state;
	int st = in_child(crash_blocking_in, "abrt", out, sizeof(out));
	snprintf(want, sizeof(want),
		 "crit: voltd: fatal signal SIGABRT in kind crash_blocking of module crash 1.0 (%s)\n", crash_so);
	assert_string_equal(out, want);
	expect_death(st, SIGABRT, false, out);
}

static void test_no_crash_no_line(void **state)
{
	char out[8192];

	(void)state;
	int st = in_child(crash_in, "none", out, sizeof(out));
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_string_equal(out, "");
}

static void test_outside_a_kind_old_action(void **state)
{
	char out[8192];

	(void)state;
	int st = in_child(crash_outside, "", out, sizeof(out));
	assert_null(strstr(out, "fatal signal"));
	expect_death(st, SIGSEGV, true, out);
}

int main(void)
{
	const char *b = getenv("VOLTD_BUILDDIR");
	struct vjob_mod *m;
	char err[512];

	snprintf(crash_so, sizeof(crash_so), "%s/tests/modules/crash.so", b ? b : ".");
	vjob_blocking_threads_set(1);
	if (vjob_mod_start(vjob_mod_builtin(), 0, err, sizeof(err)) < 0 ||
	    vjob_mod_open("crash", crash_so, &m, err, sizeof(err)) < 0 || vjob_mod_start(m, 0, err, sizeof(err)) < 0) {
		fprintf(stderr, "test_jobs_crash: %s\n", err);
		return 99;
	}
	vjob_registry_freeze();
	if (!vjob_kind_by_name("crash_blocking")->blocking || vjob_kind_by_name("crash")->blocking) {
		fprintf(stderr, "test_jobs_crash: the kinds' blocking flags\n");
		return 1;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_each_signal_named_then_death),
		cmocka_unit_test(test_blocking_kind_named),
		cmocka_unit_test(test_no_crash_no_line),
		cmocka_unit_test(test_outside_a_kind_old_action),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
