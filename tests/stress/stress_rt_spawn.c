/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/stress_rt_spawn.c: a million tasks (VOLTD_STRESS_SCALE x
 * 1,000,000), spawned mixed remote and local:
 * three plain threads remote-spawn roots, each root covers a block of 64
 * task ids and splits it into a binary tree of local spawns. Some tasks
 * yield before finishing, some wake themselves during their poll (the
 * notified path). Every task must run its body exactly once and be dropped
 * exactly once; nothing may be left alive. Workers park without timeout
 * (a lost wakeup hangs and the watchdog fails the test). Threads: 3 spawners,
 * 2 workers, watchdog, main.
 */
#include "rt/rt.h"
#include "base/compiler.h"
#include "stress_rt_harness.h"

#define BLOCK 64
#define SPAWNERS 3

struct stask {
	struct vrt_task t;
	uint32_t lo, hi;   /* ids [lo, hi): runs lo, spawns the rest */
	uint8_t mode;      /* 0 plain, 1 yield once, 2 self-wake once */
	uint8_t step;
};

static uint32_t ntotal;
static _Atomic uint8_t *ran;
static _Atomic uint64_t n_ran, n_dropped;
static struct vrt *rt;

static void st_drop(struct vrt_task *t)
{
	atomic_fetch_add_explicit(&n_dropped, 1, memory_order_relaxed);
	free(vb_container_of(t, struct stask, t));
}

static enum vrt_poll st_poll(struct vrt_task *t);
static const struct vrt_task_vtable st_vt = { .poll = st_poll, .drop = st_drop };

static struct stask *st_new(uint32_t lo, uint32_t hi)
{
	struct stask *s = malloc(sizeof(*s));

	SH_CHECK(s, "out of memory");
	vrt_task_init(&s->t, &st_vt);
	s->lo = lo;
	s->hi = hi;
	s->mode = (uint8_t)((lo * 2654435761u) >> 29) % 8; /* 0..7 */
	s->mode = s->mode == 1 ? 1 : s->mode == 2 ? 2 : 0;
	s->step = 0;
	return s;
}

static enum vrt_poll st_poll(struct vrt_task *t)
{
	struct stask *s = vb_container_of(t, struct stask, t);

	if (s->mode == 1 && s->step == 0) {
		s->step = 1;
		return VRT_YIELD;
	}
	if (s->mode == 2 && s->step == 0) {
		s->step = 1;
		vrt_task_wake(t); /* running: sets NOTIFIED, polled again */
		return VRT_PENDING;
	}
	uint8_t prev = atomic_fetch_add_explicit(&ran[s->lo], 1, memory_order_relaxed);
	SH_CHECK(prev == 0, "task %u ran twice", s->lo);
	/* children: split [lo+1, hi) in two, spawned locally */
	uint32_t a = s->lo + 1, mid = a + (s->hi - a) / 2;
	if (a < mid) {
		struct stask *c = st_new(a, mid);
		SH_CHECK(vrt_spawn(vrt_current_rt(), &c->t) == 0, "local spawn refused");
		vrt_task_unref(&c->t);
	}
	if (mid < s->hi) {
		struct stask *c = st_new(mid, s->hi);
		SH_CHECK(vrt_spawn(vrt_current_rt(), &c->t) == 0, "local spawn refused");
		vrt_task_unref(&c->t);
	}
	atomic_fetch_add_explicit(&n_ran, 1, memory_order_relaxed);
	sh_progress();
	return VRT_READY;
}

static void *spawner_main(void *arg)
{
	unsigned me = (unsigned)(uintptr_t)arg;
	uint32_t nblocks = (ntotal + BLOCK - 1) / BLOCK;

	for (uint32_t b = me; b < nblocks; b += SPAWNERS) {
		uint32_t lo = b * BLOCK, hi = lo + BLOCK > ntotal ? ntotal : lo + BLOCK;
		struct stask *s = st_new(lo, hi);
		SH_CHECK(vrt_spawn(rt, &s->t) == 0, "remote spawn refused");
		vrt_task_unref(&s->t);
	}
	return NULL;
}

static void dump(void)
{
	fprintf(stderr, "stress_rt_spawn: ran %" PRIu64 " dropped %" PRIu64 " of %u\n",
		atomic_load(&n_ran), atomic_load(&n_dropped), ntotal);
}

int main(void)
{
	pthread_t th[SPAWNERS];
	struct vrt_stats s;
	int64_t t0;

	sh_init("stress_rt_spawn", 5.0, 120.0);
	sh_dump_extra = dump;
	ntotal = (uint32_t)sh_size(1000000);
	ran = calloc(ntotal, 1);
	SH_CHECK(ran, "out of memory");
	rt = sh_rt_new(2, true, NULL);
	t0 = vb_now_ns();
	for (unsigned i = 0; i < SPAWNERS; i++)
		pthread_create(&th[i], NULL, spawner_main, (void *)(uintptr_t)i);
	for (unsigned i = 0; i < SPAWNERS; i++)
		pthread_join(th[i], NULL);
	while (atomic_load(&n_dropped) < ntotal)
		usleep(1000);
	vrt_stats_snapshot(rt, &s, NULL, 0);
	printf("# %u tasks in %.3f s; spawned local %" PRIu64 " remote %" PRIu64 "\n", ntotal,
	       (double)(vb_now_ns() - t0) / 1e9, s.spawned_local, s.spawned_remote);
	SH_CHECK(s.spawned_local + s.spawned_remote == ntotal, "spawn counters %" PRIu64 " + %" PRIu64,
		 s.spawned_local, s.spawned_remote);
	sh_rt_free(rt, VRT_SHUTDOWN_DRAIN);
	SH_CHECK(atomic_load(&n_ran) == ntotal, "ran %" PRIu64 " of %u", atomic_load(&n_ran), ntotal);
	SH_CHECK(atomic_load(&n_dropped) == ntotal, "dropped %" PRIu64, atomic_load(&n_dropped));
	for (uint32_t i = 0; i < ntotal; i++)
		SH_CHECK(atomic_load_explicit(&ran[i], memory_order_relaxed) == 1, "task %u ran %u times", i, ran[i]);
	sh_done();
	free((void *)ran);
	return 0;
}
