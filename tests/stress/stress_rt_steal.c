/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/stress_rt_steal.c: the WorkStealQueue under real concurrency.
 * One owner pushes (overflowing into an injection queue when full) and pops;
 * 1, 2 and then 3 stealer threads steal half of it into their own rings (and
 * from each other), pop what they took, and also drain the injection queue.
 * Every item must come out exactly once; RETRY must never be mistaken for
 * EMPTY (a stealer that saw only EMPTY from a ring that was not empty would
 * still be caught by the final count). Indices start near 2^32 so the run
 * crosses the wrap. Threads: owner, stealers, watchdog, main.
 */
#include "rt/internal.h"
#include "stress_rt_harness.h"

#define MAX_STEALERS 3

struct item {
	struct vrt_task t; /* the queue holds task pointers */
	uint32_t id;
};

static struct item *items;
static _Atomic uint8_t *seen;
static uint32_t nitems;
static struct vrt_wsq *rings[1 + MAX_STEALERS];
static struct vrt_inject inj;
static _Atomic bool owner_done;
static _Atomic uint64_t n_taken, n_retry, n_ok, n_overflow;
static unsigned nstealers;
static pthread_barrier_t start;

static void take(struct vrt_task *t)
{
	struct item *it = vb_container_of(t, struct item, t);
	uint8_t prev = atomic_fetch_add_explicit(&seen[it->id], 1, memory_order_relaxed);

	SH_CHECK(prev == 0, "item %u taken twice", it->id);
	atomic_fetch_add_explicit(&n_taken, 1, memory_order_relaxed);
	sh_progress();
}

static void *owner_main(void *arg)
{
	struct vb_rng rng;

	(void)arg;
	vb_rng_seed(&rng, sh_seed);
	pthread_barrier_wait(&start);
	for (uint32_t i = 0; i < nitems;) {
		/* bursts of pushes, with pops in between; sometimes long bursts
		 * that fill the ring and overflow */
		unsigned burst = 1 + vb_rng_below(&rng, vb_rng_below(&rng, 16) == 0 ? 400 : 12);
		for (unsigned k = 0; k < burst && i < nitems; k++, i++) {
			struct vrt_wsq_push_res r = vrt__wsq_push(rings[0], &items[i].t, &inj);
			if (r.overflowed)
				atomic_fetch_add_explicit(&n_overflow, 1, memory_order_relaxed);
			SH_CHECK(!r.dropped, "push dropped");
		}
		/* leave the stealers a moment with a non-empty ring */
		int64_t t0 = vb_now_ns(), d = vb_rng_below(&rng, 3000);
		while (vb_now_ns() - t0 < d)
			vb_cpu_relax();
		unsigned pops = vb_rng_below(&rng, 8);
		for (unsigned k = 0; k < pops; k++) {
			struct vrt_task *t = vrt__wsq_pop(rings[0]);
			if (!t)
				break;
			take(t);
		}
	}
	/* release: the stealers' acquire load sees every push above. */
	/* pairs with the acquire load of owner_done in stealer(). */
	atomic_store_explicit(&owner_done, true, memory_order_release);
	for (struct vrt_task *t; (t = vrt__wsq_pop(rings[0])) != NULL;)
		take(t);
	return NULL;
}

static void *stealer_main(void *arg)
{
	unsigned me = (unsigned)(uintptr_t)arg;
	struct vb_rng rng;
	struct vrt_task *batch[32];

	vb_rng_seed(&rng, sh_seed + me);
	pthread_barrier_wait(&start);
	for (;;) {
		/* acquire: pairs with the owner's release store of owner_done. */
		bool done = atomic_load_explicit(&owner_done, memory_order_acquire);
		bool any = false, retry = false;
		/* victims: the owner mostly, other stealers sometimes */
		unsigned v = vb_rng_below(&rng, 4) ? 0 : vb_rng_below(&rng, nstealers + 1);
		if (v != me) {
			struct vrt_task *t;
			uint32_t n;
			switch (vrt__wsq_steal_into(rings[v], rings[me], &t, &n)) {
			case VRT_STEAL_OK:
				atomic_fetch_add_explicit(&n_ok, 1, memory_order_relaxed);
				SH_CHECK(n >= 1 && n <= VRT_WSQ_HALF, "steal count %u", n);
				take(t);
				any = true;
				break;
			case VRT_STEAL_RETRY:
				atomic_fetch_add_explicit(&n_retry, 1, memory_order_relaxed);
				retry = true;
				break;
			case VRT_STEAL_EMPTY:
				break;
			}
		}
		/* pop part of what we hold (others may steal the rest from us) */
		unsigned k = vb_rng_below(&rng, 6);
		for (struct vrt_task *t; k-- && (t = vrt__wsq_pop(rings[me])) != NULL; any = true)
			take(t);
		unsigned n = vrt__inject_pop_batch(&inj, batch, 32, nstealers);
		for (unsigned i = 0; i < n; i++)
			take(batch[i]);
		any |= n > 0;
		if (done && !any && !retry) {
			/* nothing new arrives: empty our ring and leave */
			for (struct vrt_task *t; (t = vrt__wsq_pop(rings[me])) != NULL;)
				take(t);
			if (vrt__inject_len(&inj) == 0)
				break;
		}
		if (!any && vb_rng_below(&rng, 8) == 0)
			sched_yield();
	}
	return NULL;
}

static void run(unsigned stealers, uint32_t start_index)
{
	pthread_t owner, th[MAX_STEALERS];

	nstealers = stealers;
	for (unsigned i = 0; i <= stealers; i++)
		vrt__wsq_init(rings[i], start_index - 1000 * i);
	SH_CHECK(vrt__inject_init(&inj) == 0, "inject init");
	for (uint32_t i = 0; i < nitems; i++)
		atomic_store_explicit(&seen[i], 0, memory_order_relaxed);
	atomic_store(&owner_done, false);
	atomic_store(&n_taken, 0);
	pthread_barrier_init(&start, NULL, stealers + 1);
	pthread_create(&owner, NULL, owner_main, NULL);
	for (unsigned i = 0; i < stealers; i++)
		pthread_create(&th[i], NULL, stealer_main, (void *)(uintptr_t)(i + 1));
	pthread_join(owner, NULL);
	for (unsigned i = 0; i < stealers; i++)
		pthread_join(th[i], NULL);
	/* the rings of stealers that left early may hold items: drain all */
	for (unsigned i = 0; i <= stealers; i++)
		for (struct vrt_task *t; (t = vrt__wsq_pop(rings[i])) != NULL;)
			take(t);
	for (struct vrt_task *t = vrt__inject_close(&inj); t; t = t->next)
		take(t);
	vrt__inject_fini(&inj);
	pthread_barrier_destroy(&start);
	for (uint32_t i = 0; i < nitems; i++)
		SH_CHECK(atomic_load_explicit(&seen[i], memory_order_relaxed) == 1,
			 "item %u seen %u times (%u stealers)", i, seen[i], stealers);
	SH_CHECK(atomic_load(&n_taken) == nitems, "taken %" PRIu64 " of %u", atomic_load(&n_taken), nitems);
}

int main(void)
{
	sh_init("stress_rt_steal", 5.0, 120.0);
	nitems = (uint32_t)sh_size(200000);
	items = calloc(nitems, sizeof(*items));
	seen = calloc(nitems, sizeof(*seen));
	SH_CHECK(items && seen, "out of memory");
	for (uint32_t i = 0; i < nitems; i++) {
		vrt_task_init(&items[i].t, NULL);
		items[i].id = i;
	}
	for (unsigned i = 0; i < 1 + MAX_STEALERS; i++) {
		rings[i] = aligned_alloc(VB_CACHELINE, sizeof(*rings[i]));
		SH_CHECK(rings[i], "out of memory");
	}
	for (unsigned s = 1; s <= MAX_STEALERS; s++) {
		run(s, s == 2 ? UINT32_MAX - 5000 : 0);
		printf("# %u stealer(s): %u items exactly once; steals ok=%" PRIu64 " retry=%" PRIu64
		       " overflows=%" PRIu64 "\n", s, nitems, atomic_load(&n_ok), atomic_load(&n_retry),
		       atomic_load(&n_overflow));
	}
	SH_CHECK(atomic_load(&n_ok) > 0, "no steal ever succeeded");
	sh_done();
	for (unsigned i = 0; i < 1 + MAX_STEALERS; i++)
		free(rings[i]);
	free(items);
	free((void *)seen);
	return 0;
}
