/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/stress_rt_search.c: the searching/parking machinery and the
 * live tunables.
 *  1. stealing = off: a local fan-out that fills and overflows the ring runs
 *     completely and no steal counter moves; vrt_set_stealing(on) while
 *     running then does lead to steals.
 *  2. 5 and 8 workers under bursts while a sampler thread reads the searching
 *     count (it must never exceed ceil(n / 2)) and another thread keeps
 *     changing the live tunables (interval, LIFO cap, budget, stealing).
 *  3. 70 workers (the parked bitmap needs two words): bursts run completely,
 *     every worker parks when idle, and workers above 63 get woken.
 * Workers park without timeout (lost wakeups hang; the watchdog fails).
 * Threads: main, sampler, tuner, workers, watchdog.
 */
#include "rt/rt.h"
#include "base/compiler.h"
#include "stress_rt_harness.h"

#include <sched.h>

struct stask {
	struct vrt_task t;
	uint32_t fan;
	uint32_t spin_ns;
};

static _Atomic uint64_t n_done, n_made, n_dropped;

static void s_drop(struct vrt_task *t)
{
	atomic_fetch_add_explicit(&n_dropped, 1, memory_order_relaxed);
	free(vb_container_of(t, struct stask, t));
}

static enum vrt_poll s_poll(struct vrt_task *t);
static const struct vrt_task_vtable s_vt = { .poll = s_poll, .drop = s_drop };

static struct stask *s_new(uint32_t fan, uint32_t spin_ns)
{
	struct stask *x = malloc(sizeof(*x));

	SH_CHECK(x, "out of memory");
	atomic_fetch_add_explicit(&n_made, 1, memory_order_relaxed);
	vrt_task_init(&x->t, &s_vt);
	x->fan = fan;
	x->spin_ns = spin_ns;
	return x;
}

static enum vrt_poll s_poll(struct vrt_task *t)
{
	struct stask *x = vb_container_of(t, struct stask, t);
	int64_t t0 = vb_now_ns();

	while (vb_now_ns() - t0 < x->spin_ns)
		vb_cpu_relax();
	for (uint32_t i = 0; i < x->fan; i++) {
		struct stask *c = s_new(0, x->spin_ns);
		SH_CHECK(vrt_spawn(vrt_current_rt(), &c->t) == 0, "local spawn refused");
		vrt_task_unref(&c->t);
	}
	/* release: pairs with wait_done's acquire */
	atomic_fetch_add_explicit(&n_done, 1, memory_order_release);
	sh_progress();
	return VRT_READY;
}

static void spawn(struct vrt *rt, uint32_t fan, uint32_t spin_ns)
{
	struct stask *x = s_new(fan, spin_ns);

	SH_CHECK(vrt_spawn(rt, &x->t) == 0, "spawn refused");
	vrt_task_unref(&x->t);
}

static void wait_done(void)
{
	/* acquire: pairs with s_poll's release */
	while (atomic_load_explicit(&n_done, memory_order_acquire) != atomic_load(&n_made))
		sched_yield();
}

static void sum_steals(struct vrt *rt, unsigned n, uint64_t *ops, uint64_t *stolen, uint64_t *from)
{
	struct vrt_worker_stats ws[256];

	vrt_stats_snapshot(rt, NULL, ws, n);
	*ops = *stolen = *from = 0;
	for (unsigned i = 0; i < n; i++) {
		*ops += ws[i].steal_ops;
		*stolen += ws[i].tasks_stolen;
		*from += ws[i].tasks_stolen_from;
	}
}

/* ------------------------------------------------------- 1. stealing off */

static void tweak_nosteal(struct vrt_config *c)
{
	c->stealing = false;
}

static void test_nosteal(void)
{
	struct vrt *rt = sh_rt_new(2, true, tweak_nosteal);
	uint64_t ops, stolen, from, rounds = sh_size(40);

	for (uint64_t r = 0; r < rounds; r++) {
		spawn(rt, 2000, 0);   /* ring overflows into the injection queue */
		spawn(rt, 300, 200);  /* slower tasks: the other worker would steal */
		wait_done();
	}
	sum_steals(rt, 2, &ops, &stolen, &from);
	SH_CHECK(ops == 0 && stolen == 0 && from == 0, "stealing=off but steals %" PRIu64 "/%" PRIu64
		 "/%" PRIu64, ops, stolen, from);
	printf("# stealing=off: %" PRIu64 " rounds, no steals\n", rounds);
	/* live switch: steals start */
	SH_CHECK(vrt_set_stealing(rt, true) == 0, "vrt_set_stealing");
	int64_t t0 = vb_now_ns();
	do {
		spawn(rt, 300, 2000);
		wait_done();
		sum_steals(rt, 2, &ops, &stolen, &from);
		SH_CHECK(vb_now_ns() - t0 < 20 * 1000000000LL, "no steal 20 s after stealing=on");
	} while (ops == 0);
	SH_CHECK(stolen == from, "tasks stolen %" PRIu64 " != stolen from %" PRIu64, stolen, from);
	printf("# stealing=on (live): %" PRIu64 " steal ops, %" PRIu64 " tasks\n", ops, stolen);
	sh_rt_free(rt, VRT_SHUTDOWN_DRAIN);
}

/* ------------------------------------------ 2. searching cap, tunables */

static _Atomic bool sampling;
static _Atomic uint32_t max_searching;

struct sampler_arg {
	struct vrt *rt;
	unsigned workers;
};

static void *sampler_main(void *arg)
{
	struct sampler_arg *a = arg;
	unsigned cap = (a->workers + 1) / 2;

	while (atomic_load_explicit(&sampling, memory_order_relaxed)) {
		struct vrt_stats s;
		vrt_stats_snapshot(a->rt, &s, NULL, 0);
		SH_CHECK(s.searching <= cap, "%" PRIu64 " searching workers of %u (cap %u)", s.searching,
			 a->workers, cap);
		if (s.searching > atomic_load(&max_searching))
			atomic_store(&max_searching, (uint32_t)s.searching);
		SH_CHECK(s.parked <= a->workers, "%" PRIu64 " parked of %u", s.parked, a->workers);
	}
	return NULL;
}

static void *tuner_main(void *arg)
{
	struct sampler_arg *a = arg;
	struct vb_rng rng;

	vb_rng_seed(&rng, sh_seed ^ 0x55);
	while (atomic_load_explicit(&sampling, memory_order_relaxed)) {
		unsigned lo = 1 + vb_rng_below(&rng, 60);
		SH_CHECK(vrt_set_global_interval(a->rt, lo, lo + vb_rng_below(&rng, 100)) == 0, "gi");
		SH_CHECK(vrt_set_lifo_poll_cap(a->rt, 1 + vb_rng_below(&rng, 16)) == 0, "cap");
		SH_CHECK(vrt_set_budget(a->rt, 1 + vb_rng_below(&rng, 4096)) == 0, "budget");
		SH_CHECK(vrt_set_stealing(a->rt, vb_rng_below(&rng, 4) != 0) == 0, "stealing");
		usleep(200);
	}
	vrt_set_stealing(a->rt, true);
	return NULL;
}

static void test_search_cap(unsigned workers)
{
	struct vrt *rt = sh_rt_new(workers, true, NULL);
	struct sampler_arg a = { rt, workers };
	struct vb_rng rng;
	pthread_t sampler, tuner;
	uint64_t rounds = sh_size(300);
	struct vrt_worker_stats ws[256];
	uint64_t trans = 0;

	vb_rng_seed(&rng, sh_seed + workers);
	atomic_store(&sampling, true);
	atomic_store(&max_searching, 0);
	pthread_create(&sampler, NULL, sampler_main, &a);
	pthread_create(&tuner, NULL, tuner_main, &a);
	for (uint64_t r = 0; r < rounds; r++) {
		unsigned k = 1 + vb_rng_below(&rng, 40);
		for (unsigned i = 0; i < k; i++)
			spawn(rt, vb_rng_below(&rng, 3) ? 0 : vb_rng_below(&rng, 600), vb_rng_below(&rng, 3000));
		wait_done();
		if (r % 16 == 0)
			usleep(300); /* let them park: idle -> burst transitions */
	}
	atomic_store(&sampling, false);
	pthread_join(sampler, NULL);
	pthread_join(tuner, NULL);
	vrt_stats_snapshot(rt, NULL, ws, workers);
	for (unsigned i = 0; i < workers; i++)
		trans += ws[i].searching_transitions;
	printf("# %u workers: %" PRIu64 " rounds, max searching seen %u (cap %u), %" PRIu64
	       " searching transitions\n", workers, rounds, atomic_load(&max_searching),
	       (workers + 1) / 2, trans);
	SH_CHECK(trans > 0, "no worker ever searched");
	sh_rt_free(rt, VRT_SHUTDOWN_DRAIN);
}

/* --------------------------------------------------- 3. many workers */

static void test_many_workers(void)
{
	const unsigned n = 70;
	struct vrt *rt = sh_rt_new(n, true, NULL);
	struct vrt_worker_stats ws[70];
	struct vrt_stats s;
	uint64_t high = 0, rounds = sh_size(12);
	int64_t t0;

	for (uint64_t r = 0; r < rounds; r++) {
		/* wait until all 70 are parked */
		t0 = vb_now_ns();
		do {
			vrt_stats_snapshot(rt, &s, NULL, 0);
			SH_CHECK(vb_now_ns() - t0 < 10 * 1000000000LL, "only %" PRIu64 " of %u parked", s.parked, n);
			usleep(200);
		} while (s.parked != n);
		for (unsigned i = 0; i < 64; i++)
			spawn(rt, 50, 20000); /* ~3,000 x 20 us: every worker gets woken */
		wait_done();
	}
	vrt_stats_snapshot(rt, &s, ws, n);
	for (unsigned i = 64; i < n; i++)
		high += ws[i].polls;
	printf("# %u workers: %" PRIu64 " rounds; polls by workers 64..69: %" PRIu64 "\n", n, rounds, high);
	SH_CHECK(high > 0, "workers above 63 never ran a task");
	sh_rt_free(rt, VRT_SHUTDOWN_DRAIN);
}

int main(void)
{
	sh_init("stress_rt_search", 10.0, 200.0);
	test_nosteal();
	test_search_cap(5);
	test_search_cap(8);
	test_many_workers();
	SH_CHECK(atomic_load(&n_dropped) == atomic_load(&n_made), "dropped %" PRIu64 " of %" PRIu64,
		 atomic_load(&n_dropped), atomic_load(&n_made));
	sh_done();
	return 0;
}
