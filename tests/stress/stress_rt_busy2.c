/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/stress_rt_busy2.c: Tokio's spawn_many_remote_busy2 scenario
 * (benches/rt_multi_threaded.rs), which never finishes on Tokio 1.24: two
 * chains of tasks, each of which stalls 10 us and spawns its successor
 * locally (into the LIFO slot), keep both workers busy forever; meanwhile
 * the main thread remote-spawns 1,000 empty tasks and waits for each. The
 * LIFO poll cap (and the global-interval check) must get those remote tasks
 * run. Checked with lifo_poll_cap 1, 3 and 16 and with the LIFO slot off;
 * the LIFO slot must really be used (lifo_polls > 0). Threads: main, 2
 * workers, watchdog.
 */
#include "rt/rt.h"
#include "base/compiler.h"
#include "stress_rt_harness.h"

#include <sched.h>

#define REMOTE 1000

struct btask {
	struct vrt_task t;
	_Atomic bool *flag;
	bool chain;
};

static _Atomic uint64_t n_dropped, n_made;

static void bt_drop(struct vrt_task *t)
{
	atomic_fetch_add_explicit(&n_dropped, 1, memory_order_relaxed);
	free(vb_container_of(t, struct btask, t));
}

static enum vrt_poll bt_poll(struct vrt_task *t);
static const struct vrt_task_vtable bt_vt = { .poll = bt_poll, .drop = bt_drop };

static struct btask *bt_new(_Atomic bool *flag, bool chain)
{
	struct btask *b = malloc(sizeof(*b));

	SH_CHECK(b, "out of memory");
	atomic_fetch_add_explicit(&n_made, 1, memory_order_relaxed);
	vrt_task_init(&b->t, &bt_vt);
	b->flag = flag;
	b->chain = chain;
	return b;
}

static void stall(void)
{
	int64_t t0 = vb_now_ns();

	while (vb_now_ns() - t0 < 10000)
		sched_yield();
}

static enum vrt_poll bt_poll(struct vrt_task *t)
{
	struct btask *b = vb_container_of(t, struct btask, t);

	if (b->chain && atomic_load_explicit(b->flag, memory_order_relaxed)) {
		stall();
		struct btask *next = bt_new(b->flag, true);
		SH_CHECK(vrt_spawn(vrt_current_rt(), &next->t) == 0, "local spawn refused");
		vrt_task_unref(&next->t);
	}
	sh_progress();
	return VRT_READY;
}

static unsigned cap_arg;
static bool lifo_arg;

static void tweak(struct vrt_config *c)
{
	c->lifo_poll_cap = cap_arg;
	c->lifo_slot = lifo_arg;
}

static void run(unsigned cap, bool lifo, unsigned reps)
{
	_Atomic bool flag = true;
	struct vrt_task *h[REMOTE];
	struct vrt_worker_stats ws[2];
	uint64_t lifo_polls = 0;
	struct vrt *rt;
	int64_t t0;

	cap_arg = cap;
	lifo_arg = lifo;
	rt = sh_rt_new(2, false, tweak);
	for (unsigned i = 0; i < 2; i++) {
		struct btask *b = bt_new(&flag, true);
		SH_CHECK(vrt_spawn(rt, &b->t) == 0, "spawn refused");
		vrt_task_unref(&b->t);
	}
	t0 = vb_now_ns();
	for (unsigned r = 0; r < reps; r++) {
		for (unsigned i = 0; i < REMOTE; i++) {
			struct btask *b = bt_new(&flag, false);
			SH_CHECK(vrt_spawn(rt, &b->t) == 0, "spawn refused");
			h[i] = &b->t;
		}
		for (unsigned i = 0; i < REMOTE; i++) {
			vrt_task_join_wait(h[i]);
			vrt_task_unref(h[i]);
		}
	}
	vrt_stats_snapshot(rt, NULL, ws, 2);
	lifo_polls = ws[0].lifo_polls + ws[1].lifo_polls;
	printf("# lifo_slot=%s lifo_poll_cap=%u: %u x %u remote tasks in %.3f s; lifo polls %" PRIu64
	       ", chain polls %" PRIu64 "\n", lifo ? "on" : "off", cap, reps, REMOTE,
	       (double)(vb_now_ns() - t0) / 1e9, lifo_polls, ws[0].polls + ws[1].polls);
	if (lifo)
		SH_CHECK(lifo_polls > 0, "the LIFO slot was never used");
	else
		SH_CHECK(lifo_polls == 0, "LIFO polls with the slot off");
	atomic_store(&flag, false);
	sh_rt_free(rt, VRT_SHUTDOWN_DRAIN);
}

int main(void)
{
	unsigned reps;

	sh_init("stress_rt_busy2", 10.0, 120.0);
	reps = (unsigned)sh_size(8);
	run(3, true, reps);
	run(1, true, reps);
	run(16, true, reps);
	run(3, false, reps);
	SH_CHECK(atomic_load(&n_dropped) == atomic_load(&n_made), "dropped %" PRIu64 " of %" PRIu64,
		 atomic_load(&n_dropped), atomic_load(&n_made));
	sh_done();
	return 0;
}
