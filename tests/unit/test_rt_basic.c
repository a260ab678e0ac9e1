/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_rt_basic.c: the runtime's task API end to end on a real
 * 2..3-worker runtime: spawn (remote, local), join (thread, task), wake while
 * running (notified), yield, budget, cancel, oneshot both ways, shutdown in
 * both modes with pending tasks (nothing leaked: drop counts), spawn after
 * shutdown, stats, tunables, idle CPU. Threads: the test thread plus workers.
 */
#include "rt/rt.h"
#include "base/compiler.h"
#include "base/futex.h"
#include "base/time.h"
#include "tests/helpers/test_config.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

struct tt;
typedef enum vrt_poll tt_fn(struct tt *);

struct tt {
	struct vrt_task t;
	tt_fn *fn;
	struct vrt *rt;
	_Atomic int *drops;
	_Atomic int polls;
	_Atomic int counter;
	int n;
	struct vrt_task *other;
	struct vrt_oneshot *os_in, *os_out;
	uint64_t val;
};

static enum vrt_poll tt_poll(struct vrt_task *t)
{
	struct tt *x = vb_container_of(t, struct tt, t);

	atomic_fetch_add_explicit(&x->polls, 1, memory_order_relaxed);
	return x->fn(x);
}

static void tt_drop(struct vrt_task *t)
{
	struct tt *x = vb_container_of(t, struct tt, t);

	if (x->drops)
		atomic_fetch_add(x->drops, 1);
	free(x);
}

static const struct vrt_task_vtable tt_vt = { .poll = tt_poll, .drop = tt_drop };

static struct tt *tt_new(tt_fn *fn, _Atomic int *drops)
{
	struct tt *x = calloc(1, sizeof(*x));

	assert_non_null(x);
	vrt_task_init(&x->t, &tt_vt);
	x->fn = fn;
	x->drops = drops;
	return x;
}

static struct vrt *mkrt(unsigned workers)
{
	struct vrt_config c;
	struct vrt *rt;

	tcfg_rt(&c);
	c.workers = workers;
	assert_int_equal(vrt_new(&c, &rt), 0);
	return rt;
}


/* The runtime drops its reference just after waking joiners: wait for it. */
static void wait_drops(_Atomic int *drops, int n)
{
	int64_t t0 = vb_now_ns();

	while (atomic_load(drops) < n) {
		assert_true(vb_now_ns() - t0 < 5 * 1000000000LL);
		usleep(100);
	}
	assert_int_equal(atomic_load(drops), n);
}

/* ------------------------------------------------------------------------ */
static _Atomic int g_ran;

static enum vrt_poll fn_count(struct tt *x)
{
	(void)x;
	atomic_fetch_add(&g_ran, 1);
	return VRT_READY;
}

static void test_spawn_remote_join(void **st)
{
	struct vrt *rt = mkrt(2);
	_Atomic int drops = 0;
	struct tt *ts[200];

	(void)st;
	atomic_store(&g_ran, 0);
	for (int i = 0; i < 200; i++) {
		ts[i] = tt_new(fn_count, &drops);
		assert_int_equal(vrt_spawn(rt, &ts[i]->t), 0);
	}
	for (int i = 0; i < 200; i++) {
		vrt_task_join_wait(&ts[i]->t);
		assert_true(vrt_task_is_complete(&ts[i]->t));
		vrt_task_unref(&ts[i]->t);
	}
	assert_int_equal(atomic_load(&g_ran), 200);
	wait_drops(&drops, 200);
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	vrt_free(rt);
}

/* A tree of local spawns: each task spawns two children until depth 0. */
static _Atomic int g_drops_tree;
static enum vrt_poll fn_tree(struct tt *x)
{
	atomic_fetch_add(&g_ran, 1);
	if (x->n > 0) {
		for (int i = 0; i < 2; i++) {
			struct tt *c = tt_new(fn_tree, &g_drops_tree);
			c->n = x->n - 1;
			assert_int_equal(vrt_worker_id() >= 0, 1);
			assert_ptr_equal(vrt_current(), &x->t);
			assert_int_equal(vrt_spawn(vrt_current_rt(), &c->t), 0);
			vrt_task_unref(&c->t); /* detached */
		}
	}
	return VRT_READY;
}

static void test_spawn_local_tree(void **st)
{
	struct vrt *rt = mkrt(3);
	struct tt *root = tt_new(fn_tree, &g_drops_tree);
	struct vrt_stats s;
	int64_t t0;

	(void)st;
	atomic_store(&g_ran, 0);
	atomic_store(&g_drops_tree, 0);
	root->n = 12; /* 8191 tasks */
	assert_int_equal(vrt_spawn(rt, &root->t), 0);
	vrt_task_unref(&root->t);
	t0 = vb_now_ns();
	while (atomic_load(&g_drops_tree) < 8191) {
		assert_true(vb_now_ns() - t0 < 10 * 1000000000LL);
		usleep(1000);
	}
	assert_int_equal(atomic_load(&g_ran), 8191);
	vrt_stats_snapshot(rt, &s, NULL, 0);
	assert_int_equal(s.spawned_local, 8190);
	assert_int_equal(s.spawned_remote, 1);
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	vrt_free(rt);
	assert_int_equal(atomic_load(&g_drops_tree), 8191);
}

/* Pending until `counter` reaches n; the test thread wakes it n times,
 * some of them while it runs (notified path). */
static enum vrt_poll fn_until(struct tt *x)
{
	if (atomic_load(&x->counter) >= x->n)
		return VRT_READY;
	return VRT_PENDING;
}

static void test_wake_notified(void **st)
{
	struct vrt *rt = mkrt(2);
	_Atomic int drops = 0;
	struct tt *x = tt_new(fn_until, &drops);

	(void)st;
	x->n = 20000;
	assert_int_equal(vrt_spawn(rt, &x->t), 0);
	while (atomic_load(&x->polls) < 1)
		usleep(100);
	for (int i = 0; i < x->n; i++) {
		atomic_fetch_add(&x->counter, 1);
		vrt_task_wake(&x->t);
	}
	vrt_task_join_wait(&x->t);
	assert_true(atomic_load(&x->polls) >= 2);
	vrt_task_unref(&x->t);
	wait_drops(&drops, 1);
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	vrt_free(rt);
}

/* Yields n times, then done. */
static enum vrt_poll fn_yield(struct tt *x)
{
	if (atomic_fetch_add(&x->counter, 1) + 1 >= x->n)
		return VRT_READY;
	return VRT_YIELD;
}

static void test_yield(void **st)
{
	struct vrt *rt = mkrt(2);
	_Atomic int drops = 0;
	struct tt *ts[10];

	(void)st;
	for (int i = 0; i < 10; i++) {
		ts[i] = tt_new(fn_yield, &drops);
		ts[i]->n = 1000;
		assert_int_equal(vrt_spawn(rt, &ts[i]->t), 0);
	}
	for (int i = 0; i < 10; i++) {
		vrt_task_join_wait(&ts[i]->t);
		assert_int_equal(atomic_load(&ts[i]->polls), 1000);
		vrt_task_unref(&ts[i]->t);
	}
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	vrt_free(rt);
	assert_int_equal(atomic_load(&drops), 10);
}

/* Consumes budget until refused, `n` polls in a row. */
static enum vrt_poll fn_budget(struct tt *x)
{
	int ops = 0;

	while (vrt_budget_consume())
		ops++;
	x->val = (uint64_t)ops;
	if (atomic_fetch_add(&x->counter, 1) + 1 >= x->n)
		return VRT_READY;
	return VRT_YIELD;
}

static void test_budget(void **st)
{
	struct vrt *rt = mkrt(2);
	struct tt *x = tt_new(fn_budget, NULL);
	struct vrt_worker_stats ws[2];
	uint64_t yields = 0;

	(void)st;
	assert_true(vrt_budget_consume()); /* outside a worker */
	assert_int_equal(vrt_set_budget(rt, 0), -EINVAL);
	assert_int_equal(vrt_set_budget(rt, 5000), -EINVAL);
	assert_int_equal(vrt_set_budget(rt, 7), 0);
	usleep(30000); /* parked workers reload tunables on their timeout tick */
	x->n = 50;
	assert_int_equal(vrt_spawn(rt, &x->t), 0);
	vrt_task_join_wait(&x->t);
	assert_int_equal(x->val, 7);
	vrt_stats_snapshot(rt, NULL, ws, 2);
	for (int i = 0; i < 2; i++)
		yields += ws[i].budget_yields;
	assert_int_equal(yields, 49);
	vrt_task_unref(&x->t);
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	vrt_free(rt);
}

/* Pending forever unless cancelled. */
static enum vrt_poll fn_forever(struct tt *x)
{
	(void)x;
	if (vrt_task_is_cancelled(vrt_current()))
		return VRT_READY;
	return VRT_PENDING;
}

static void test_cancel(void **st)
{
	struct vrt *rt = mkrt(2);
	_Atomic int drops = 0;
	struct tt *x = tt_new(fn_forever, &drops);

	(void)st;
	assert_int_equal(vrt_spawn(rt, &x->t), 0);
	while (atomic_load(&x->polls) < 1)
		usleep(100);
	usleep(2000);
	assert_false(vrt_task_is_complete(&x->t));
	vrt_task_cancel(&x->t);
	vrt_task_join_wait(&x->t);
	assert_true(vrt_task_is_cancelled(&x->t));
	vrt_task_unref(&x->t);
	wait_drops(&drops, 1);
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	vrt_free(rt);
}

/* Task side of the oneshot test: waits for os_in, sends value+1 on os_out. */
static enum vrt_poll fn_echo(struct tt *x)
{
	uint64_t v;

	if (!vrt_oneshot_poll(x->os_in, &v))
		return VRT_PENDING;
	vrt_oneshot_send(x->os_out, v + 1);
	return VRT_READY;
}

static void test_oneshot(void **st)
{
	struct vrt *rt = mkrt(2);
	_Atomic int drops = 0;

	(void)st;
	for (int i = 0; i < 300; i++) {
		struct vrt_oneshot a, b;
		struct tt *x = tt_new(fn_echo, &drops);

		vrt_oneshot_init(&a);
		vrt_oneshot_init(&b);
		x->os_in = &a;
		x->os_out = &b;
		assert_int_equal(vrt_spawn(rt, &x->t), 0);
		if (i & 1)
			usleep(10);
		vrt_oneshot_send(&a, (uint64_t)i);
		assert_int_equal(vrt_oneshot_wait(&b), (uint64_t)i + 1);
		vrt_task_join_wait(&x->t);
		vrt_task_unref(&x->t);
	}
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	vrt_free(rt);
	assert_int_equal(atomic_load(&drops), 300);
}

/* Joins `other` from a task, then READY. */
static enum vrt_poll fn_joiner(struct tt *x)
{
	if (!vrt_task_join_poll(x->other))
		return VRT_PENDING;
	assert_true(vrt_task_is_complete(x->other));
	x->val = 1;
	return VRT_READY;
}

static void test_join_task(void **st)
{
	struct vrt *rt = mkrt(2);
	_Atomic int drops = 0;

	(void)st;
	for (int i = 0; i < 200; i++) {
		struct tt *target = tt_new(fn_until, &drops);
		struct tt *j = tt_new(fn_joiner, &drops);

		target->n = 1;
		j->other = &target->t;
		assert_int_equal(vrt_spawn(rt, &target->t), 0);
		assert_int_equal(vrt_spawn(rt, &j->t), 0);
		if (i & 1)
			usleep(20);
		atomic_store(&target->counter, 1);
		vrt_task_wake(&target->t);
		vrt_task_join_wait(&j->t);
		assert_int_equal(j->val, 1);
		vrt_task_unref(&j->t);
		vrt_task_unref(&target->t);
	}
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	vrt_free(rt);
	assert_int_equal(atomic_load(&drops), 400);
}

/* Shutdown with pending tasks: DROP completes them unpolled-again; DRAIN
 * cancels them and lets them finish. Either way every task is freed and a
 * thread joined on it returns. */
static void shutdown_case(enum vrt_shutdown_mode mode)
{
	struct vrt *rt = mkrt(2);
	_Atomic int drops = 0;
	struct tt *keep = tt_new(fn_forever, &drops);

	assert_int_equal(vrt_spawn(rt, &keep->t), 0);
	for (int i = 0; i < 100; i++) {
		struct tt *x = tt_new(fn_forever, &drops);
		assert_int_equal(vrt_spawn(rt, &x->t), 0);
		vrt_task_unref(&x->t);
	}
	for (int i = 0; i < 100; i++) {
		struct tt *x = tt_new(fn_yield, &drops);
		x->n = 100;
		assert_int_equal(vrt_spawn(rt, &x->t), 0);
		vrt_task_unref(&x->t);
	}
	vrt_shutdown(rt, mode);
	vrt_task_join_wait(&keep->t);
	assert_true(vrt_task_is_complete(&keep->t));
	assert_int_equal(atomic_load(&drops), 200);
	{
		struct tt *late = tt_new(fn_count, &drops);
		assert_int_equal(vrt_spawn(rt, &late->t), -ESHUTDOWN);
		vrt_task_unref(&late->t);
		assert_int_equal(atomic_load(&drops), 201);
	}
	vrt_task_unref(&keep->t);
	assert_int_equal(atomic_load(&drops), 202);
	vrt_free(rt);
}

static void test_shutdown_drop(void **st)
{
	(void)st;
	shutdown_case(VRT_SHUTDOWN_DROP);
}

static void test_shutdown_drain(void **st)
{
	(void)st;
	shutdown_case(VRT_SHUTDOWN_DRAIN);
}

/* A batch taken from the injection queue by a worker that then runs a long
 * task must not wait for that task: the rest of the batch is stealable
 * (issue 13, defect 5). Two holders occupy both workers while a blocker and
 * 63 light tasks are spawned remotely (all into the injection queue); once
 * released, the worker that takes the blocker's batch spins in the blocker
 * until every light task ran (at most 3 s): the other worker must run them
 * all, including those in the blocker's batch. */
enum { IB_LIGHT = 63 };
static _Atomic int ib_release, ib_running, ib_light_done;

static enum vrt_poll fn_ib_holder(struct tt *x)
{
	int64_t end = vb_now_ns() + 5000 * VB_NS_PER_MS;

	(void)x;
	atomic_fetch_add(&ib_running, 1);
	while (!atomic_load(&ib_release) && vb_now_ns() < end)
		vb_cpu_relax();
	return VRT_READY;
}

static enum vrt_poll fn_ib_light(struct tt *x)
{
	(void)x;
	atomic_fetch_add(&ib_light_done, 1);
	return VRT_READY;
}

static enum vrt_poll fn_ib_blocker(struct tt *x)
{
	int64_t end = vb_now_ns() + 3000 * VB_NS_PER_MS;

	while (atomic_load(&ib_light_done) < IB_LIGHT && vb_now_ns() < end)
		vb_cpu_relax();
	x->val = (uint64_t)atomic_load(&ib_light_done);
	return VRT_READY;
}

static void test_inject_batch_stealable(void **st)
{
	static _Atomic int drops; /* static: tasks may outlive a failed assert */
	bool ran = false;

	(void)st;
	for (int attempt = 0; attempt < 20 && !ran; attempt++) {
		struct vrt *rt = mkrt(2);
		struct tt *h[2], *b;
		int64_t end = vb_now_ns() + 500 * VB_NS_PER_MS;

		atomic_store(&ib_release, 0);
		atomic_store(&ib_running, 0);
		atomic_store(&ib_light_done, 0);
		for (int i = 0; i < 2; i++) {
			h[i] = tt_new(fn_ib_holder, &drops);
			assert_int_equal(vrt_spawn_detached(rt, &h[i]->t), 0);
		}
		/* Both holders running: one per worker. If one worker took
		 * both, try again. */
		while (atomic_load(&ib_running) < 2 && vb_now_ns() < end)
			usleep(100);
		if (atomic_load(&ib_running) == 2) {
			ran = true;
			b = tt_new(fn_ib_blocker, &drops);
			assert_int_equal(vrt_spawn(rt, &b->t), 0);
			for (int i = 0; i < IB_LIGHT; i++)
				assert_int_equal(vrt_spawn_detached(rt, &tt_new(fn_ib_light, &drops)->t), 0);
			atomic_store(&ib_release, 1);
			vrt_task_join_wait(&b->t);
			assert_int_equal(b->val, IB_LIGHT);
			vrt_task_unref(&b->t);
		}
		atomic_store(&ib_release, 1);
		vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
		vrt_free(rt);
	}
	assert_true(ran);
}

static void test_config_and_tunables(void **st)
{
	struct vrt_config c;
	struct vrt *rt;

	(void)st;
	tcfg_rt(&c);
	c.workers = 0;
	assert_int_equal(vrt_new(&c, &rt), -EINVAL);
	tcfg_rt(&c);
	c.global_interval_min = 100;
	c.global_interval_max = 50;
	assert_int_equal(vrt_new(&c, &rt), -EINVAL);
	rt = mkrt(1);
	assert_int_equal(vrt_set_global_interval(rt, 0, 10), -EINVAL);
	assert_int_equal(vrt_set_global_interval(rt, 4, 256), -EINVAL);
	assert_int_equal(vrt_set_global_interval(rt, 4, 8), 0);
	assert_int_equal(vrt_set_lifo_poll_cap(rt, 0), -EINVAL);
	assert_int_equal(vrt_set_lifo_poll_cap(rt, 17), -EINVAL);
	assert_int_equal(vrt_set_lifo_poll_cap(rt, 1), 0);
	assert_int_equal(vrt_set_stealing(rt, false), 0);
	assert_null(vrt_current());
	assert_null(vrt_current_rt());
	assert_int_equal(vrt_worker_id(), -1);
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	vrt_free(rt);
}

/* An idle runtime only wakes for the park timeout: little CPU. */
static void test_idle_cpu(void **st)
{
	struct vrt *rt = mkrt(2);
	struct rusage a, b;
	struct vrt_worker_stats ws[2];
	int64_t cpu_us;

	(void)st;
	usleep(50000);
	getrusage(RUSAGE_SELF, &a);
	usleep(500000);
	getrusage(RUSAGE_SELF, &b);
	cpu_us = (b.ru_utime.tv_sec - a.ru_utime.tv_sec) * 1000000 + (b.ru_utime.tv_usec - a.ru_utime.tv_usec)
		+ (b.ru_stime.tv_sec - a.ru_stime.tv_sec) * 1000000 + (b.ru_stime.tv_usec - a.ru_stime.tv_usec);
	vrt_stats_snapshot(rt, NULL, ws, 2);
	/* 2 workers x 50 timeouts in 0.5 s: the parks are counted and
	 * bounded; the CPU they cost is a figure (bench/bounds). */
	print_message("bound: test_rt_basic idle_cpu_us_per_500ms %lld < 100000\n", (long long)cpu_us);
	assert_true(ws[0].parks + ws[1].parks < 400);
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	vrt_free(rt);
}

/*
 * The park rule: a task queued on a ring whose owner is busy is not lost
 * to a sibling that parked before it was queued. The spinner waits until
 * its sibling is parked, then queues one task on its ring (a local push of
 * one task wakes nobody) and spins on without yielding: the sibling's park
 * is bounded (park_timeout) while the spinner is awake, so the sibling
 * wakes, steals the task and runs it while the spinner still spins. A park
 * without a bound (the decision taken while every ring was empty) would
 * leave the task behind the spin. No stall monitor here.
 */
static struct vrt *g_prt;
static _Atomic int g_stolen_on = -1;

static enum vrt_poll fn_mark_worker(struct tt *x)
{
	(void)x;
	atomic_store(&g_stolen_on, vrt_worker_id());
	return VRT_READY;
}

static enum vrt_poll fn_spin_with_queued(struct tt *x)
{
	struct vrt_worker_stats ws[2];
	int self = vrt_worker_id(), other = 1 - self;
	struct tt *t, *d;
	int64_t end = vb_now_ns() + 5 * 1000000000LL;
	uint64_t parks0;

	vrt_stats_snapshot(g_prt, NULL, ws, 2);
	parks0 = ws[other].parks;
	do { /* the sibling parks again, after we woke (bounded: 5 s) */
		vrt_stats_snapshot(g_prt, NULL, ws, 2);
	} while ((ws[other].state != VRT_WS_PARKED || ws[other].parks == parks0) &&
		 vb_now_ns() < end);
	x->n = ws[other].state == VRT_WS_PARKED && ws[other].parks != parks0;
	t = tt_new(fn_mark_worker, NULL);
	d = tt_new(fn_count, NULL);
	/* t to the LIFO slot, then to the ring when d takes the slot. */
	assert_int_equal(vrt_spawn_detached(g_prt, &t->t), 0);
	assert_int_equal(vrt_spawn_detached(g_prt, &d->t), 0);
	while (atomic_load(&g_stolen_on) < 0 && vb_now_ns() < end)
		;
	atomic_store(&x->counter, self);
	return VRT_READY;
}

static void test_park_bounded_while_sibling_awake(void **st)
{
	struct vrt_config c;
	struct tt *x;

	(void)st;
	tcfg_rt(&c);
	c.workers = 2;
	c.park_timeout_ms = 1;
	assert_int_equal(vrt_new(&c, &g_prt), 0);
	usleep(20000); /* both workers parked */
	x = tt_new(fn_spin_with_queued, NULL);
	assert_int_equal(vrt_spawn(g_prt, &x->t), 0);
	vrt_task_join_wait(&x->t);
	assert_int_equal(x->n, 1); /* the sibling was parked when the task was queued */
	/* the task ran on the sibling, during the spin */
	assert_int_equal(atomic_load(&g_stolen_on), 1 - atomic_load(&x->counter));
	vrt_task_unref(&x->t);
	vrt_shutdown(g_prt, VRT_SHUTDOWN_DRAIN);
	vrt_free(g_prt);
}

/* The park/unpark seam: hooks run on each worker, poll() runs while busy
 * and before parking and may wake tasks, a failing worker_start fails
 * vrt_new. */
struct hooks {
	_Atomic int starts, stops, polls, parks, unparks;
	int fail_worker;             /* worker_start fails here (-1: never) */
	struct tt *_Atomic to_wake;  /* poll() wakes this task once */
	struct vb_event ev[4];
};

static int h_start(void *ctx, unsigned w)
{
	struct hooks *h = ctx;

	atomic_fetch_add(&h->starts, 1);
	assert_int_equal(vrt_worker_id(), (int)w);
	return (int)w == h->fail_worker ? -EMFILE : 0;
}

static void h_stop(void *ctx, unsigned w)
{
	struct hooks *h = ctx;

	assert_int_equal(vrt_worker_id(), (int)w);
	atomic_fetch_add(&h->stops, 1);
}

static void h_park(void *ctx, unsigned w, int64_t timeout_ns)
{
	struct hooks *h = ctx;

	atomic_fetch_add(&h->parks, 1);
	vb_event_wait(&h->ev[w], timeout_ns);
}

static void h_unpark(void *ctx, unsigned w)
{
	struct hooks *h = ctx;

	atomic_fetch_add(&h->unparks, 1);
	vb_event_set(&h->ev[w]);
}

static void h_poll(void *ctx, unsigned w)
{
	struct hooks *h = ctx;
	struct tt *x = atomic_exchange(&h->to_wake, NULL);

	assert_int_equal(vrt_worker_id(), (int)w);
	atomic_fetch_add(&h->polls, 1);
	if (x) {
		/* like an I/O completion: wake from inside the driver */
		atomic_store(&x->counter, 1);
		vrt_task_wake(&x->t);
	}
}

static const struct vrt_park_ops hook_ops = { h_start, h_stop, h_park, h_unpark, h_poll, NULL, NULL };

static void test_park_ops(void **st)
{
	struct hooks h;
	struct vrt_config c;
	struct vrt *rt;
	_Atomic int drops = 0;

	(void)st;
	memset(&h, 0, sizeof(h));
	for (int i = 0; i < 4; i++)
		vb_event_init(&h.ev[i]);
	tcfg_rt(&c);
	c.workers = 3;
	c.park_ops = &hook_ops;
	c.park_ctx = &h;
	c.io_poll_interval = 1;
	h.fail_worker = 1;
	assert_int_equal(vrt_new(&c, &rt), -EMFILE);
	assert_int_equal(atomic_load(&h.starts), 3);
	assert_int_equal(atomic_load(&h.stops), 2); /* the workers that started */

	memset(&h, 0, sizeof(h));
	for (int i = 0; i < 4; i++)
		vb_event_init(&h.ev[i]);
	h.fail_worker = -1;
	assert_int_equal(vrt_new(&c, &rt), 0);
	assert_int_equal(atomic_load(&h.starts), 3);
	{
		struct tt *x = tt_new(fn_until, &drops);
		x->n = 1;
		assert_int_equal(vrt_spawn(rt, &x->t), 0);
		while (atomic_load(&x->polls) < 1)
			usleep(100);
		/* the next poll() hook (at the latest before a park) wakes it;
		 * like a driver with an event, end the parks (an idle worker's
		 * park has no timeout) */
		atomic_store(&h.to_wake, x);
		for (int i = 0; i < 3; i++)
			vb_event_set(&h.ev[i]);
		vrt_task_join_wait(&x->t);
		assert_null(atomic_load(&h.to_wake));
		vrt_task_unref(&x->t);
	}
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	assert_int_equal(atomic_load(&h.stops), 3);
	assert_true(atomic_load(&h.polls) > 0);
	assert_true(atomic_load(&h.parks) > 0);
	assert_true(atomic_load(&h.unparks) >= 3); /* at least shutdown's */
	vrt_free(rt);
	assert_int_equal(atomic_load(&drops), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spawn_remote_join),
		cmocka_unit_test(test_spawn_local_tree),
		cmocka_unit_test(test_wake_notified),
		cmocka_unit_test(test_yield),
		cmocka_unit_test(test_budget),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_oneshot),
		cmocka_unit_test(test_join_task),
		cmocka_unit_test(test_shutdown_drop),
		cmocka_unit_test(test_shutdown_drain),
		cmocka_unit_test(test_inject_batch_stealable),
		cmocka_unit_test(test_config_and_tunables),
		cmocka_unit_test(test_idle_cpu),
		cmocka_unit_test(test_park_bounded_while_sibling_awake),
		cmocka_unit_test(test_park_ops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
