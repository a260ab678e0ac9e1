/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/stress_rt_idle.c: idle -> burst -> idle, thousands of times
 * (3,000 x VOLTD_STRESS_SCALE cycles). Each cycle
 * waits until every worker is parked, then makes work appear in one of the
 * ways work appears: remote spawns from the main thread, remote spawns from
 * two other threads at once, wakes of parked (pending) tasks from other
 * threads, or one task that fans out into local spawns. Workers park without
 * a timeout, so a lost wakeup never ends: any task not run within a second
 * fails the test (and the watchdog catches a hang anywhere else). A third
 * pass runs 2 workers with the gather rule holding every wake-up it may
 * hold (the monitor's verdict forced: only the owed wake-up of a sibling
 * parked with no bound remains): held wake-ups must strand nothing.
 * Threads: main, 2 helpers, 2 or 3 workers, watchdog (and the monitor).
 */
#include "rt/rt.h"
#include "rt/internal.h" /* vrt__test_spreading */
#include "base/compiler.h"
#include "stress_rt_harness.h"

#define SLEEPERS 64
#define HELPERS 2

struct itask {
	struct vrt_task t;
	int64_t t_req;           /* when the work was requested */
	_Atomic bool flag;       /* sleepers: set before a wake */
	uint32_t fan;            /* fan-out: local spawns to make */
	bool sleeper;
};

static struct vrt *rt;
static _Atomic uint64_t n_done, n_dropped, n_created;
static _Atomic int64_t max_lat;
static struct itask *sleepers[SLEEPERS];

static void note_run(int64_t t_req)
{
	int64_t lat = vb_now_ns() - t_req, m = atomic_load_explicit(&max_lat, memory_order_relaxed);

	while (lat > m && !atomic_compare_exchange_weak_explicit(&max_lat, &m, lat,
			memory_order_relaxed, memory_order_relaxed))
		;
	/* release: pairs with the main thread's acquire load of n_done. */
	atomic_fetch_add_explicit(&n_done, 1, memory_order_release);
	sh_progress();
}

static void it_drop(struct vrt_task *t)
{
	atomic_fetch_add_explicit(&n_dropped, 1, memory_order_relaxed);
	free(vb_container_of(t, struct itask, t));
}

static enum vrt_poll it_poll(struct vrt_task *t);
static const struct vrt_task_vtable it_vt = { .poll = it_poll, .drop = it_drop };

static struct itask *it_new(void)
{
	struct itask *x = calloc(1, sizeof(*x));

	SH_CHECK(x, "out of memory");
	atomic_fetch_add_explicit(&n_created, 1, memory_order_relaxed);
	vrt_task_init(&x->t, &it_vt);
	x->t_req = vb_now_ns();
	return x;
}

static enum vrt_poll it_poll(struct vrt_task *t)
{
	struct itask *x = vb_container_of(t, struct itask, t);

	if (x->sleeper) {
		if (vrt_task_is_cancelled(t))
			return VRT_READY;
		/* acquire: pairs with the waker's release store of the flag */
		if (atomic_exchange_explicit(&x->flag, false, memory_order_acquire))
			note_run(x->t_req);
		return VRT_PENDING;
	}
	for (uint32_t i = 0; i < x->fan; i++) {
		struct itask *c = it_new();
		c->t_req = x->t_req;
		SH_CHECK(vrt_spawn(vrt_current_rt(), &c->t) == 0, "local spawn refused");
		vrt_task_unref(&c->t);
	}
	note_run(x->t_req);
	return VRT_READY;
}

/* ------------------------------------------------------------- bursts */

enum burst { B_REMOTE, B_REMOTE_2THREADS, B_WAKE, B_FANOUT, B_KINDS };

static void spawn_remote(unsigned k)
{
	for (unsigned i = 0; i < k; i++) {
		struct itask *x = it_new();
		SH_CHECK(vrt_spawn(rt, &x->t) == 0, "remote spawn refused");
		vrt_task_unref(&x->t);
	}
}

static void wake_sleepers(unsigned first, unsigned k)
{
	for (unsigned i = 0; i < k; i++) {
		struct itask *s = sleepers[(first + i) % SLEEPERS];
		s->t_req = vb_now_ns();
		/* release: publishes t_req; pairs with the poll's acquire */
		atomic_store_explicit(&s->flag, true, memory_order_release);
		vrt_task_wake(&s->t);
	}
}

struct helper {
	pthread_t th;
	struct vb_event go, done;
	enum burst kind;
	unsigned k, first;
	bool quit;
};
static struct helper helpers[HELPERS];

static void *helper_main(void *arg)
{
	struct helper *h = arg;

	for (;;) {
		vb_event_wait(&h->go, -1);
		if (h->quit)
			return NULL;
		if (h->kind == B_WAKE)
			wake_sleepers(h->first, h->k);
		else
			spawn_remote(h->k);
		vb_event_set(&h->done);
	}
}

static void wait_parked(unsigned workers)
{
	struct vrt_stats s;
	int64_t t0 = vb_now_ns();

	do {
		vrt_stats_snapshot(rt, &s, NULL, 0);
		if (s.parked == workers)
			return;
		usleep(20);
	} while (vb_now_ns() - t0 < 20 * 1000000LL);
}

static void run_cycles(unsigned workers, uint64_t cycles, struct vb_rng *rng, uint64_t *kinds)
{
	for (uint64_t c = 0; c < cycles; c++) {
		enum burst kind = (enum burst)vb_rng_below(rng, B_KINDS);
		unsigned k = 1 + vb_rng_below(rng, vb_rng_below(rng, 4) ? 8 : 300);
		uint64_t expect = atomic_load(&n_done);
		int64_t t0;

		wait_parked(workers);
		kinds[kind]++;
		switch (kind) {
		case B_REMOTE:
			spawn_remote(k);
			expect += k;
			break;
		case B_REMOTE_2THREADS:
		case B_WAKE:
			if (kind == B_WAKE && k > SLEEPERS / HELPERS)
				k = SLEEPERS / HELPERS;
			for (unsigned h = 0; h < HELPERS; h++) {
				helpers[h].kind = kind;
				helpers[h].k = k;
				helpers[h].first = (unsigned)c * 7 + h * (SLEEPERS / HELPERS);
				vb_event_set(&helpers[h].go);
			}
			for (unsigned h = 0; h < HELPERS; h++)
				vb_event_wait(&helpers[h].done, -1);
			expect += (uint64_t)k * HELPERS;
			break;
		case B_FANOUT: {
			struct itask *x = it_new();
			x->fan = k;
			SH_CHECK(vrt_spawn(rt, &x->t) == 0, "remote spawn refused");
			vrt_task_unref(&x->t);
			expect += 1 + k;
			break;
		}
		default:
			break;
		}
		t0 = vb_now_ns();
		/* acquire: pairs with note_run's release increment */
		while (atomic_load_explicit(&n_done, memory_order_acquire) < expect) {
			if (vb_now_ns() - t0 > 1000000000LL)
				sh_fail("cycle %" PRIu64 " (burst kind %d, k=%u): %" PRIu64
					" task(s) not run within a second: lost wakeup",
					c, kind, k, expect - atomic_load(&n_done));
			sched_yield();
		}
		SH_CHECK(atomic_load(&n_done) == expect, "more tasks ran than were made");
	}
}

static void tweak_gather(struct vrt_config *c)
{
	c->gather = true;
	c->stall_warn_ms = 20; /* the gather rule's monitor */
	/* relaxed: read by the monitor thread, which starts after this. */
	atomic_store_explicit(&vrt__test_spreading, 0, memory_order_relaxed);
}

int main(void)
{
	struct vb_rng rng;
	uint64_t cycles, kinds[B_KINDS] = { 0 };
	int64_t t0;

	sh_init("stress_rt_idle", 5.0, 150.0);
	vb_rng_seed(&rng, sh_seed);
	cycles = sh_size(3000);
	for (unsigned h = 0; h < HELPERS; h++) {
		vb_event_init(&helpers[h].go);
		vb_event_init(&helpers[h].done);
		pthread_create(&helpers[h].th, NULL, helper_main, &helpers[h]);
	}
	for (unsigned pass = 0; pass < 3; pass++) {
		unsigned workers = pass == 1 ? 3 : 2;

		rt = sh_rt_new(workers, true, pass == 2 ? tweak_gather : NULL);
		for (unsigned i = 0; i < SLEEPERS; i++) {
			sleepers[i] = it_new();
			sleepers[i]->sleeper = true;
			SH_CHECK(vrt_spawn(rt, &sleepers[i]->t) == 0, "spawn refused");
		}
		/* each sleeper was polled once and is now pending */
		wait_parked(workers);
		t0 = vb_now_ns();
		run_cycles(workers, workers == 2 ? cycles : cycles / 2, &rng, kinds);
		printf("# %u workers%s: %" PRIu64 " cycles in %.2f s, max run latency %.3f ms"
		       " (remote %" PRIu64 ", remote x2 %" PRIu64 ", wake %" PRIu64 ", fan-out %" PRIu64 ")\n",
		       workers, pass == 2 ? ", gather holding" : "", workers == 2 ? cycles : cycles / 2,
		       (double)(vb_now_ns() - t0) / 1e9,
		       (double)atomic_load(&max_lat) / 1e6, kinds[0], kinds[1], kinds[2], kinds[3]);
		for (unsigned i = 0; i < SLEEPERS; i++) {
			vrt_task_cancel(&sleepers[i]->t);
			vrt_task_join_wait(&sleepers[i]->t);
			vrt_task_unref(&sleepers[i]->t);
		}
		sh_rt_free(rt, VRT_SHUTDOWN_DRAIN);
		atomic_store(&vrt__test_spreading, -1);
		/* every task made so far was freed exactly once */
		SH_CHECK(atomic_load(&n_dropped) == atomic_load(&n_created),
			 "dropped %" PRIu64 " of %" PRIu64, atomic_load(&n_dropped), atomic_load(&n_created));
	}
	for (unsigned h = 0; h < HELPERS; h++) {
		helpers[h].quit = true;
		vb_event_set(&helpers[h].go);
		pthread_join(helpers[h].th, NULL);
	}
	sh_done();
	return 0;
}
