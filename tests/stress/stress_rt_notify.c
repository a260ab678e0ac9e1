/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/stress_rt_notify.c: wakers fired concurrently with polls.
 * Three plain threads (and the tasks themselves) post events to 32 tasks:
 * add to the task's pending count, then vrt_task_wake. A task's poll takes
 * the pending count, acknowledges it, and keeps running a little while
 * (so wakes land while it is RUNNING or SCHEDULED: the notified path).
 * Wakers keep at most a window of unacknowledged events, so one lost wakeup
 * stops all progress; workers park without timeout, so nothing rescues it
 * and the watchdog fails the test. At the end every event must have been
 * acknowledged exactly once. Threads: 3 wakers, 2 or 3 workers, watchdog,
 * main.
 */
#include "rt/rt.h"
#include "base/compiler.h"
#include "stress_rt_harness.h"

#define NTASKS 32
#define WAKERS 3
#define WINDOW 512

struct ntask {
	struct vrt_task t;
	_Atomic uint64_t pending;
	uint64_t acked;           /* this task's own running total */
	struct vb_rng rng;        /* task-private */
	unsigned idx;
};

static struct ntask *tasks[NTASKS];
static _Atomic uint64_t sent, acked, polls, self_posts;
static _Atomic bool finish, stop_posts;
static _Atomic unsigned posting;
static uint64_t per_waker;

static void spin_ns(int64_t ns)
{
	int64_t t0 = vb_now_ns();

	while (vb_now_ns() - t0 < ns)
		vb_cpu_relax();
}

static void post(struct ntask *x)
{
	atomic_fetch_add_explicit(&sent, 1, memory_order_relaxed);
	/* release: the count is published by the wake's [T1] anyway; release
	 * here keeps the pair obvious to a reader. */
	atomic_fetch_add_explicit(&x->pending, 1, memory_order_release);
	vrt_task_wake(&x->t);
}

static enum vrt_poll nt_poll(struct vrt_task *t)
{
	struct ntask *x = vb_container_of(t, struct ntask, t);
	/* acquire: pairs with post's release */
	uint64_t got = atomic_exchange_explicit(&x->pending, 0, memory_order_acquire);

	atomic_fetch_add_explicit(&polls, 1, memory_order_relaxed);
	if (got) {
		x->acked += got;
		/* release: pairs with main's acquire load of acked. */
		atomic_fetch_add_explicit(&acked, got, memory_order_release);
		sh_progress();
	}
	/* stay RUNNING a little so that wakes hit the notified path */
	spin_ns(vb_rng_below(&x->rng, 2000));
	/* tasks post to each other too (wakes from workers: local schedule) */
	if (vb_rng_below(&x->rng, 16) == 0) {
		/* seq_cst pair with main's stop_posts/posting (Dekker): once main
		 * saw posting == 0 after stop_posts, no task posts any more. */
		/* pairs with main's seq_cst store of stop_posts and load of posting. */
		atomic_fetch_add_explicit(&posting, 1, memory_order_seq_cst);
		if (!atomic_load_explicit(&stop_posts, memory_order_seq_cst)) {
			atomic_fetch_add_explicit(&self_posts, 1, memory_order_relaxed);
			post(tasks[vb_rng_below(&x->rng, NTASKS)]);
		}
		/* pairs with main's seq_cst load of posting (the Dekker pair above). */
		atomic_fetch_sub_explicit(&posting, 1, memory_order_seq_cst);
	}
	/* acquire: pairs with main's release store of finish and post()'s release add to pending. */
	if (atomic_load_explicit(&finish, memory_order_acquire) &&
	    atomic_load_explicit(&x->pending, memory_order_acquire) == 0)
		return VRT_READY;
	return vb_rng_below(&x->rng, 8) == 0 ? VRT_YIELD : VRT_PENDING;
}

static const struct vrt_task_vtable nt_vt = { .poll = nt_poll, .drop = NULL };

static void *waker_main(void *arg)
{
	struct vb_rng rng;

	vb_rng_seed(&rng, sh_seed + (uintptr_t)arg);
	for (uint64_t i = 0; i < per_waker; i++) {
		/* bounded window: a lost wakeup stops this loop (watchdog) */
		while (atomic_load_explicit(&sent, memory_order_relaxed) -
		       atomic_load_explicit(&acked, memory_order_relaxed) > WINDOW)
			sched_yield();
		post(tasks[vb_rng_below(&rng, NTASKS)]);
	}
	return NULL;
}

static void dump(void)
{
	fprintf(stderr, "stress_rt_notify: sent %" PRIu64 " acked %" PRIu64 " polls %" PRIu64 "\n",
		atomic_load(&sent), atomic_load(&acked), atomic_load(&polls));
	for (unsigned i = 0; i < NTASKS; i++)
		if (atomic_load(&tasks[i]->pending))
			fprintf(stderr, "stress_rt_notify:  task %u pending %" PRIu64 " complete %d\n", i,
				atomic_load(&tasks[i]->pending), vrt_task_is_complete(&tasks[i]->t));
}

int main(void)
{
	pthread_t th[WAKERS];

	sh_init("stress_rt_notify", 5.0, 150.0);
	sh_dump_extra = dump;
	per_waker = sh_size(150000);
	for (unsigned i = 0; i < NTASKS; i++) {
		tasks[i] = malloc(sizeof(struct ntask));
		SH_CHECK(tasks[i], "out of memory");
	}
	for (unsigned workers = 2; workers <= 3; workers++) {
		struct vrt *rt = sh_rt_new(workers, true, NULL);
		int64_t t0 = vb_now_ns();
		uint64_t total = 0;

		atomic_store(&sent, 0);
		atomic_store(&acked, 0);
		atomic_store(&polls, 0);
		atomic_store(&self_posts, 0);
		atomic_store(&finish, false);
		atomic_store(&stop_posts, false);
		for (unsigned i = 0; i < NTASKS; i++) {
			struct ntask *x = tasks[i];
			vrt_task_init(&x->t, &nt_vt);
			atomic_init(&x->pending, 0);
			x->acked = 0;
			x->idx = i;
			vb_rng_seed(&x->rng, sh_seed * 31 + i);
		}
		/* all initialised before the first poll can post to a peer */
		for (unsigned i = 0; i < NTASKS; i++)
			SH_CHECK(vrt_spawn(rt, &tasks[i]->t) == 0, "spawn refused");
		for (unsigned i = 0; i < WAKERS; i++)
			pthread_create(&th[i], NULL, waker_main, (void *)(uintptr_t)(i + 1));
		for (unsigned i = 0; i < WAKERS; i++)
			pthread_join(th[i], NULL);
		/* seq_cst: pairs with the tasks' posting/stop_posts accesses (Dekker). */
		atomic_store_explicit(&stop_posts, true, memory_order_seq_cst);
		while (atomic_load_explicit(&posting, memory_order_seq_cst) != 0)
			sched_yield();
		/* every event posted must be acknowledged, unprompted */
		while (atomic_load(&acked) != atomic_load(&sent))
			usleep(100);
		/* release: pairs with the tasks' acquire load of finish; they then
		 * also see that no more posts come */
		atomic_store_explicit(&finish, true, memory_order_release);
		for (unsigned i = 0; i < NTASKS; i++)
			vrt_task_wake(&tasks[i]->t);
		for (unsigned i = 0; i < NTASKS; i++) {
			vrt_task_join_wait(&tasks[i]->t);
			total += tasks[i]->acked;
		}
		SH_CHECK(total == atomic_load(&sent), "acknowledged %" PRIu64 " of %" PRIu64 " events",
			 total, atomic_load(&sent));
		printf("# %u workers: %" PRIu64 " events (%" PRIu64 " from tasks) in %" PRIu64
		       " polls, %.2f s\n", workers, total, atomic_load(&self_posts), atomic_load(&polls),
		       (double)(vb_now_ns() - t0) / 1e9);
		sh_rt_free(rt, VRT_SHUTDOWN_DRAIN);
		for (unsigned i = 0; i < NTASKS; i++)
			vrt_task_unref(&tasks[i]->t); /* static-lifetime tasks: drop is NULL */
	}
	sh_done();
	for (unsigned i = 0; i < NTASKS; i++)
		free(tasks[i]);
	return 0;
}
