/* SPDX-License-Identifier: MIT */
/*
 * tests/modules/crash.c: a module, "crash" 1.0, whose step dies of the
 * signal it is asked for, for the fatal-signal report's tests
 * (tests/unit/test_jobs_crash.c): the report names the kind, this module,
 * its version and its file, then the process dies by that signal. Built as
 * a shared object at check time (tests/modules/local.mk), against
 * <voltd/module.h> alone. Never installed.
 *   GET /crash?sig=segv|bus|ill|fpe|abrt       dies in its step
 *   GET /crash/blocking?sig=...                the same, a blocking kind
 *   GET /crash?sig=none                        answers 200 "alive\n"
 */
#include <voltd/module.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct crash_state {
	char sig[8];
};

static int crash_start(struct voltd_job *job, void *state)
{
	struct crash_state *s = state;
	const char *v;
	size_t len;

	if (voltd->query_param(job, "sig", &v, &len) < 0 || len >= sizeof(s->sig))
		return voltd->respondf(job, 400, "sig: segv, bus, ill, fpe, abrt or none\n");
	memcpy(s->sig, v, len);
	return VOLTD_STEP_MORE;
}

static volatile int zero, one = 1;

/* SIGBUS: a page of a file mapped past its end. */
static void bus(void)
{
	char path[] = "/tmp/crash_bus.XXXXXX";
	int fd = mkstemp(path);

	if (fd < 0)
		abort();
	unlink(path);
	volatile char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		abort();
	p[0] = 1; /* the file is empty */
}

/* Not caught first by UBSan in sanitizer builds (a null store, a division
 * by zero): the point is the signal. */
__attribute__((no_sanitize_undefined)) static int crash_step(struct voltd_job *job, void *state,
							      int64_t deadline_ns)
{
	struct crash_state *s = state;

	(void)deadline_ns;
	if (strcmp(s->sig, "segv") == 0)
		*(volatile int *)(uintptr_t)zero = 1;
	else if (strcmp(s->sig, "bus") == 0)
		bus();
	else if (strcmp(s->sig, "ill") == 0)
		__builtin_trap();
	else if (strcmp(s->sig, "fpe") == 0)
		zero = one / zero; /* both volatile: a real idiv (1 / x alone is a compare) */
	else if (strcmp(s->sig, "abrt") == 0)
		abort();
	return voltd->respondf(job, 200, "alive\n");
}

static const struct voltd_kind kinds[] = {
	{ .name = "crash", .route = "/crash", .methods = "GET", .state_size = sizeof(struct crash_state),
	  .start = crash_start, .step = crash_step, .doc = "dies of the signal asked for" },
	{ .name = "crash_blocking", .route = "/crash/blocking", .methods = "GET", .flags = VOLTD_KIND_BLOCKING,
	  .state_size = sizeof(struct crash_state), .start = crash_start, .step = crash_step,
	  .doc = "the same, on the blocking pool" },
	{ .name = NULL },
};

static const struct voltd_module crash = {
	VOLTD_MODULE_HEAD,
	.name = "crash",
	.version = "1.0",
	.kinds = kinds,
};

VOLTD_MODULE(crash)
