/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/stress_rt_harness.h: shared by the stress_rt_* programs (a
 * header of static functions, one copy per program): the seed (VOLTD_TEST_SEED or
 * the clock, always printed), the size multiplier VOLTD_STRESS_SCALE, a
 * watchdog thread that fails the test (exit 1, after printing the runtime's
 * state) when the progress counter stops moving or the deadline passes, and
 * park ops that ignore the park timeout, so that a lost wakeup is a hang the
 * watchdog reports instead of a 10 ms hiccup the timeout hides.
 * Threading: sh_progress() from any thread; the rest from the main thread.
 */
#ifndef VOLTD_TESTS_STRESS_RT_HARNESS_H
#define VOLTD_TESTS_STRESS_RT_HARNESS_H

#include "rt/rt.h"
#include "base/futex.h"
#include "base/rng.h"
#include "base/time.h"
#include "tests/helpers/test_config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* not every program uses every helper */
#define SH_FN static __attribute__((unused))

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SH_SANITIZED 1
#else
#define SH_SANITIZED 0
#endif

static const char *sh_name = "stress";
static uint64_t sh_seed;
static unsigned sh_scale = 1;
static _Atomic uint64_t sh_prog;
static struct vrt *_Atomic sh_rt;         /* runtime to dump on failure */
static void (*sh_dump_extra)(void);      /* test-specific state */
static int64_t sh_stall_ns, sh_deadline_ns;
static struct vb_event sh_wd_stop;
static pthread_t sh_wd;

static void sh_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

SH_FN void sh_dump_rt(void)
{
	struct vrt *rt = atomic_load(&sh_rt);
	struct vrt_worker_stats ws[256];
	struct vrt_stats s;
	char line[1024];
	size_t off = 0;
	unsigned n;

	if (!rt)
		return;
	n = vrt_stats_snapshot(rt, &s, ws, 256);
	line[0] = '\0';
	vb_metric_format(line, sizeof(line), &off, vrt_metrics, vrt_metrics_n, &s);
	fprintf(stderr, "%s: rt: %s\n", sh_name, line);
	for (unsigned i = 0; i < n && i < 256; i++) {
		off = 0;
		line[0] = '\0';
		vb_metric_format(line, sizeof(line), &off, vrt_worker_metrics, vrt_worker_metrics_n, &ws[i]);
		fprintf(stderr, "%s:  w%u %s\n", sh_name, i, line);
	}
}

SH_FN void sh_fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: FAIL (seed %" PRIu64 ", VOLTD_TEST_SEED=%" PRIu64 " to repeat): ", sh_name,
		sh_seed, sh_seed);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	if (sh_dump_extra)
		sh_dump_extra();
	sh_dump_rt();
	fflush(stderr);
	_exit(1);
}

#define SH_CHECK(cond, ...) do { if (!(cond)) sh_fail(__VA_ARGS__); } while (0)

static inline void sh_progress(void)
{
	/* relaxed: the watchdog only needs to see the count move eventually. */
	atomic_fetch_add_explicit(&sh_prog, 1, memory_order_relaxed);
}

SH_FN void *sh_watchdog(void *arg)
{
	uint64_t last = UINT64_MAX;
	int64_t last_change = vb_now_ns(), start = last_change;

	(void)arg;
	for (;;) {
		if (vb_event_wait(&sh_wd_stop, 20 * 1000000LL) == 0)
			return NULL;
		uint64_t p = atomic_load_explicit(&sh_prog, memory_order_relaxed);
		int64_t now = vb_now_ns();
		if (p != last) {
			last = p;
			last_change = now;
		} else if (now - last_change > sh_stall_ns) {
			sh_fail("watchdog: no progress for %.3f s (progress count %" PRIu64 ")",
				(double)(now - last_change) / 1e9, p);
		}
		if (now - start > sh_deadline_ns)
			sh_fail("watchdog: still running after %.0f s", (double)sh_deadline_ns / 1e9);
	}
}

/* Reads VOLTD_TEST_SEED / VOLTD_STRESS_SCALE, prints them, starts the watchdog. */
SH_FN void sh_init(const char *name, double stall_s, double deadline_s)
{
	const char *s = getenv("VOLTD_TEST_SEED"), *sc = getenv("VOLTD_STRESS_SCALE");

	sh_name = name;
	sh_seed = s ? strtoull(s, NULL, 0) : (uint64_t)vb_now_ns() ^ ((uint64_t)getpid() << 32);
	if (sc && atoi(sc) > 0)
		sh_scale = (unsigned)atoi(sc);
	printf("# %s: seed %" PRIu64 " (VOLTD_TEST_SEED to repeat), VOLTD_STRESS_SCALE=%u%s\n", name,
	       sh_seed, sh_scale, SH_SANITIZED ? ", sanitizer build" : "");
	fflush(stdout);
	sh_stall_ns = (int64_t)(stall_s * 1e9);
	sh_deadline_ns = (int64_t)(deadline_s * 1e9 * sh_scale);
	vb_event_init(&sh_wd_stop);
	if (pthread_create(&sh_wd, NULL, sh_watchdog, NULL))
		sh_fail("pthread_create");
}

SH_FN void sh_done(void)
{
	vb_event_set(&sh_wd_stop);
	pthread_join(sh_wd, NULL);
}

/* Base count scaled by VOLTD_STRESS_SCALE (the same in sanitizer builds:
 * the default sizes take seconds there too). */
SH_FN uint64_t sh_size(uint64_t base)
{
	uint64_t n = base * sh_scale;

	return n ? n : 1;
}

/* ------------------------------------------------ park ops: no timeout */

struct sh_park {
	struct vb_event ev[256];
	_Atomic uint64_t parks;
};

SH_FN void sh_park_park(void *ctx, unsigned w, int64_t timeout_ns)
{
	struct sh_park *p = ctx;

	(void)timeout_ns; /* ignored on purpose: only unpark ends a park */
	atomic_fetch_add_explicit(&p->parks, 1, memory_order_relaxed);
	vb_event_wait(&p->ev[w], -1);
}

SH_FN void sh_park_unpark(void *ctx, unsigned w)
{
	struct sh_park *p = ctx;

	vb_event_set(&p->ev[w]);
}

static const struct vrt_park_ops sh_park_ops = {
	.park = sh_park_park,
	.unpark = sh_park_unpark,
};

static struct sh_park sh_park_ctx;

/* A runtime with `workers` workers; strict = parks without timeout. */
SH_FN struct vrt *sh_rt_new(unsigned workers, bool strict, void (*tweak)(struct vrt_config *))
{
	struct vrt_config c;
	struct vrt *rt;
	int err;

	tcfg_rt(&c);
	c.workers = workers;
	if (strict) {
		for (unsigned i = 0; i < 256; i++)
			vb_event_init(&sh_park_ctx.ev[i]);
		c.park_ops = &sh_park_ops;
		c.park_ctx = &sh_park_ctx;
	}
	if (tweak)
		tweak(&c);
	err = vrt_new(&c, &rt);
	if (err)
		sh_fail("vrt_new: %s", strerror(-err));
	atomic_store(&sh_rt, rt);
	return rt;
}

SH_FN void sh_rt_free(struct vrt *rt, enum vrt_shutdown_mode mode)
{
	vrt_shutdown(rt, mode);
	atomic_store(&sh_rt, NULL);
	vrt_free(rt);
}

#endif
