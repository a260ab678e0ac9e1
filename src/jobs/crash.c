/* SPDX-License-Identifier: MIT */
/*
 * jobs/crash.c: the fatal-signal report. A module runs in voltd's process:
 * when one of its callbacks dies of SIGSEGV, SIGBUS, SIGILL, SIGFPE or
 * SIGABRT, the journal should say which module did it before systemd
 * restarts voltd. The handler reads the kind the thread runs (job.c's
 * thread-local, set around every callback), writes one line made of text
 * prepared at load (the kind's crash_text: kind, module, version, file)
 * with a single write(2), puts back the action the signal had before (the
 * default for voltd; a sanitizer's handler in such builds) and lets it
 * act: a fault returns to the faulting instruction, which faults again
 * into that action; a signal sent (abort(3), kill) is raised again, and
 * is delivered as the handler returns. Outside a kind's callback it only
 * puts the old action back, so a crash elsewhere looks as it did.
 *
 * Async-signal-safe: no allocation, no stdio, no locks; the bytes are
 * copied by hand into a buffer on the handler's stack.
 *
 * Threading: vjob_crash_report_install on the main thread before any job
 * runs; the handler on whichever thread the signal hits.
 */
#include "config.h"
#include "jobs/internal.h"
#include "base/compiler.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static const struct {
	int sig;
	const char *name;
} fatal[] = {
	{ SIGSEGV, "SIGSEGV" }, { SIGBUS, "SIGBUS" }, { SIGILL, "SIGILL" },
	{ SIGFPE, "SIGFPE" },   { SIGABRT, "SIGABRT" },
};

static struct sigaction before[VB_ARRAY_SIZE(fatal)];

static size_t put(char *buf, size_t n, size_t cap, const char *s)
{
	while (*s && n < cap)
		buf[n++] = *s++;
	return n;
}

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
	const struct vjob_kind *k = vjob__running();
	size_t i = 0;

	(void)uc;
	while (i < VB_ARRAY_SIZE(fatal) - 1 && fatal[i].sig != sig)
		i++;
	if (k && k->crash_text) {
		int saved = errno;
		char line[1024];
		size_t n = 0;

		/* The level is crit, as vb_log would write it. */
		n = put(line, n, sizeof(line) - 1, vb_log_journal() ? "<2>" : "crit: ");
		n = put(line, n, sizeof(line) - 1, "voltd: fatal signal ");
		n = put(line, n, sizeof(line) - 1, fatal[i].name);
		n = put(line, n, sizeof(line) - 1, k->crash_text);
		line[n++] = '\n';
		ssize_t w = write(STDERR_FILENO, line, n);
		(void)w;
		errno = saved;
	}
	struct sigaction old = before[i];
	if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN)
		old.sa_handler = SIG_DFL; /* an ignored fault would fault for ever */
	sigaction(sig, &old, NULL);
	/* A signal someone sent does not come back by itself: send it again
	 * (blocked in this handler, it is delivered as the handler returns). */
	if (si->si_code <= 0)
		raise(sig);
}

int vjob_crash_report_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fatal;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < VB_ARRAY_SIZE(fatal); i++)
		if (sigaction(fatal[i].sig, &sa, &before[i]) < 0)
			return -errno;
	return 0;
}
