/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/stress_rt_drain.c: DRAIN's quiescence decision against a
 * driver that hands a worker a task while that worker is counted idle
 * (issue 13, defect 6). Park ops stand in for the I/O driver: whenever a
 * worker's park ends (unpark or its 1 ms timeout) during the drain's second
 * pass, it wakes the round's "I/O" task, as a completion reaped in the park
 * would. The runtime must poll that task before the drain ends: a task
 * queued when the workers exit would be completed without its poll. Rounds
 * of runtime + one task + DRAIN (400 x VOLTD_STRESS_SCALE, 2 workers).
 * Threads: main, 2 workers, watchdog.
 */
#include "rt/internal.h"
#include "stress_rt_harness.h"

struct dtask {
	struct vrt_task t;
	_Atomic int fired;        /* the "driver" woke it (owned by the park op) */
	_Atomic int polled_fired; /* it ran after that wake */
	_Atomic int polls;
};

static struct vrt *_Atomic cur_rt;
static struct dtask *_Atomic cur_task;
static struct vb_event evs[2];
static _Atomic uint64_t n_fired, n_dropped_unpolled;

static enum vrt_poll d_poll(struct vrt_task *t)
{
	struct dtask *x = vb_container_of(t, struct dtask, t);

	atomic_fetch_add(&x->polls, 1);
	/* Cancellation is ignored: the task waits for its "I/O". */
	if (atomic_load(&x->fired)) {
		atomic_store(&x->polled_fired, 1);
		return VRT_READY;
	}
	return VRT_PENDING;
}

static void d_drop(struct vrt_task *t)
{
	struct dtask *x = vb_container_of(t, struct dtask, t);

	if (atomic_load(&x->fired) && !atomic_load(&x->polled_fired))
		atomic_fetch_add(&n_dropped_unpolled, 1);
	free(x);
}

static const struct vrt_task_vtable d_vt = { .poll = d_poll, .drop = d_drop };

/* The "completion": during the second pass, on the worker's own thread,
 * inside its park. */
static void maybe_fire(void)
{
	struct vrt *rt = atomic_load(&cur_rt);
	struct dtask *x = atomic_load(&cur_task);

	/* [W10] acquire: pairs with the release store of drain_cancelled in
	 * src/rt/worker.c's drain_idle (the deciding worker of the drain). */
	if (!rt || !x || !atomic_load_explicit(&rt->drain_cancelled, memory_order_acquire))
		return;
	if (atomic_exchange(&x->fired, 1))
		return;
	atomic_fetch_add(&n_fired, 1);
	vrt_task_wake(&x->t);
}

static void d_park(void *ctx, unsigned w, int64_t timeout_ns)
{
	(void)ctx;
	vb_event_wait(&evs[w], timeout_ns);
	maybe_fire();
}

static void d_unpark(void *ctx, unsigned w)
{
	(void)ctx;
	vb_event_set(&evs[w]);
}

static const struct vrt_park_ops d_ops = { .park = d_park, .unpark = d_unpark };

int main(void)
{
	uint64_t rounds;

	sh_init("stress_rt_drain", 10, 60);
	rounds = sh_size(400);
	for (uint64_t r = 0; r < rounds; r++) {
		struct vrt_config c;
		struct vrt *rt;
		struct dtask *x = calloc(1, sizeof(*x));

		SH_CHECK(x, "out of memory");
		vb_event_init(&evs[0]);
		vb_event_init(&evs[1]);
		tcfg_rt(&c);
		c.workers = 2;
		c.park_timeout_ms = 1;
		c.park_ops = &d_ops;
		SH_CHECK(vrt_new(&c, &rt) == 0, "vrt_new");
		atomic_store(&sh_rt, rt);
		vrt_task_init(&x->t, &d_vt);
		/* Our handle keeps the task alive while park ops may fire it. */
		SH_CHECK(vrt_spawn(rt, &x->t) == 0, "spawn");
		while (atomic_load(&x->polls) == 0)
			usleep(50);
		atomic_store(&cur_task, x);
		atomic_store(&cur_rt, rt);
		vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
		atomic_store(&cur_rt, NULL);
		atomic_store(&cur_task, NULL);
		atomic_store(&sh_rt, NULL);
		vrt_task_unref(&x->t);
		vrt_free(rt);
		sh_progress();
		SH_CHECK(atomic_load(&n_dropped_unpolled) == 0,
			 "round %" PRIu64 ": a task woken by the driver during the drain was "
			 "completed without being polled", r);
	}
	printf("# %" PRIu64 " rounds, the driver woke the task in %" PRIu64 "\n", rounds,
	       atomic_load(&n_fired));
	SH_CHECK(atomic_load(&n_fired) > 0, "the driver never fired: the test tests nothing");
	sh_done();
	return 0;
}
