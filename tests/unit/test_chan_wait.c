/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_chan_wait.c: the waiting paths, one scenario at a time.
 * Threads: a blocked receiver / sender is woken by the other side; close
 * wakes every blocked thread; timed waits; long gaps stop the spinning. Tasks (a 1-worker runtime, so the
 * order of polls is known): a pending receiver / sender is woken; several
 * waiters (fast slot, then list) each get one value; receivers are woken
 * newest first, senders oldest first; cancel removes the
 * waiter and drops the channel's task reference; a wakeup that reaches a task
 * which is then cancelled passes to the next waiter; close wakes pending
 * tasks; the budget makes operations return YIELD. Task memory is freed by
 * drop() as soon as the task completes, so ASan catches a waker that touches
 * a waiter after waking it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/time.h"
#include "chan/internal.h"
#include "rt/rt.h"
#include "tests/helpers/test_config.h"

#define WAIT_LIMIT_NS (10 * 1000 * VB_NS_PER_MS)

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Wait (bounded) until the channel counted `n` waits on the given side. */
static void wait_for_waits(struct vch *ch, bool send_side, uint64_t n)
{
	int64_t end = vb_now_ns() + WAIT_LIMIT_NS;
	struct vch_stats st;

	for (;;) {
		vch_stats_get(ch, &st);
		if ((send_side ? st.send_waits : st.recv_waits) >= n)
			return;
		if (vb_now_ns() > end)
			fail_msg("waiters never registered (want %llu)", (unsigned long long)n);
		sleep_ms(1);
	}
}

/* ------------------------------------------------------------ threads */

struct thr {
	pthread_t tid;
	struct vch *ch;
	bool send;
	uint64_t value;
	int64_t timeout_ns;
	enum vch_status r;
};

static void *thr_main(void *arg)
{
	struct thr *t = arg;

	if (t->send)
		t->r = vch_send_timed(t->ch, t->value, t->timeout_ns);
	else
		t->r = vch_recv_timed(t->ch, &t->value, t->timeout_ns);
	return NULL;
}

static void thr_start(struct thr *t, struct vch *ch, bool send, uint64_t value, int64_t timeout)
{
	memset(t, 0, sizeof(*t));
	t->ch = ch;
	t->send = send;
	t->value = value;
	t->timeout_ns = timeout;
	assert_int_equal(pthread_create(&t->tid, NULL, thr_main, t), 0);
}

static void test_thread_recv_woken(void **state)
{
	struct vch *ch;
	struct thr t;

	assert_int_equal(vch_new(4, &ch), 0);
	thr_start(&t, ch, false, 0, -1);
	wait_for_waits(ch, false, 1);   /* it is asleep on its futex */
	assert_int_equal(vch_send(ch, 42), VCH_OK);
	pthread_join(t.tid, NULL);
	assert_int_equal(t.r, VCH_OK);
	assert_int_equal(t.value, 42);
	assert_int_equal(atomic_load(&ch->recvq.has_waiters), 0);
	vch_free(ch);
}

static void test_thread_send_woken(void **state)
{
	struct vch *ch;
	struct thr t;
	uint64_t x;

	assert_int_equal(vch_new(1, &ch), 0);
	assert_int_equal(vch_send(ch, 1), VCH_OK);
	thr_start(&t, ch, true, 2, -1);
	wait_for_waits(ch, true, 1);
	assert_int_equal(vch_recv(ch, &x), VCH_OK);
	assert_int_equal(x, 1);
	pthread_join(t.tid, NULL);
	assert_int_equal(t.r, VCH_OK);
	assert_int_equal(vch_recv(ch, &x), VCH_OK);
	assert_int_equal(x, 2);
	vch_free(ch);
}

/* A receiver that keeps waiting long (each value comes >= 10 ms after it
 * fell asleep) feeds its side's gap estimate through the real blocking
 * path, and after a few such gaps the side no longer spins at all: the
 * bound is 0 (chan.c "blocking"). Load only makes the gaps longer. */
static void test_thread_long_gaps_stop_spinning(void **state)
{
	struct vch *ch;
	struct thr t;
	unsigned n;

	assert_int_equal(vch_new(4, &ch), 0);
	assert_int_equal(vch__spin_bound(atomic_load(&ch->recv_stats.gap_avg), vch__spin_budget), 128);
	for (n = 1; n <= 8; n++) {
		thr_start(&t, ch, false, 0, -1);
		wait_for_waits(ch, false, n);   /* asleep on its futex */
		sleep_ms(10);
		assert_int_equal(vch_send(ch, n), VCH_OK);
		pthread_join(t.tid, NULL);
		assert_int_equal(t.r, VCH_OK);
		assert_int_equal(t.value, n);
		if (vch__spin_bound(atomic_load(&ch->recv_stats.gap_avg), vch__spin_budget) == 0)
			break;
	}
	/* 1/8 of the way to the clamp per gap: the fourth long gap does it. */
	assert_int_equal(n, 4);
	/* The send side never waited: its estimate is untouched. */
	assert_int_equal(atomic_load(&ch->send_stats.gap_avg), vch__gap_init);
	vch_free(ch);
}

/* Three sleepers per side (fast slot + list), then close wakes them all. */
static void test_thread_close_wakes_all(void **state)
{
	struct vch *empty, *full;
	struct thr r[3], s[3];

	assert_int_equal(vch_new(2, &empty), 0);
	assert_int_equal(vch_new(2, &full), 0);
	assert_int_equal(vch_send(full, 1), VCH_OK);
	assert_int_equal(vch_send(full, 2), VCH_OK);
	for (int i = 0; i < 3; i++) {
		thr_start(&r[i], empty, false, 0, -1);
		thr_start(&s[i], full, true, 10 + i, -1);
	}
	wait_for_waits(empty, false, 3);
	wait_for_waits(full, true, 3);
	sleep_ms(5);
	assert_int_equal(atomic_load(&empty->recvq.has_waiters), VCH_WQ_LIST);
	vch_close(empty);
	vch_close(full);
	for (int i = 0; i < 3; i++) {
		pthread_join(r[i].tid, NULL);
		pthread_join(s[i].tid, NULL);
		assert_int_equal(r[i].r, VCH_CLOSED);
		assert_int_equal(s[i].r, VCH_CLOSED);
	}
	assert_int_equal(vch_len(full), 2);   /* still drainable */
	vch_free(empty);
	vch_free(full);
}

/* Several blocked receivers, then as many sends: each gets exactly one. */
static void test_thread_many_receivers(void **state)
{
	struct vch *ch;
	struct thr r[4];
	uint64_t seen = 0;

	assert_int_equal(vch_new(8, &ch), 0);
	for (int i = 0; i < 4; i++)
		thr_start(&r[i], ch, false, 0, -1);
	wait_for_waits(ch, false, 4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(vch_send(ch, 1u << i), VCH_OK);
	for (int i = 0; i < 4; i++) {
		pthread_join(r[i].tid, NULL);
		assert_int_equal(r[i].r, VCH_OK);
		seen |= r[i].value;
	}
	assert_int_equal(seen, 0xf);
	assert_int_equal(atomic_load(&ch->recvq.has_waiters), 0);
	vch_free(ch);
}

static void test_thread_timed(void **state)
{
	struct vch *ch;
	struct thr t;

	assert_int_equal(vch_new(2, &ch), 0);
	thr_start(&t, ch, false, 0, 5000 * VB_NS_PER_MS);
	wait_for_waits(ch, false, 1);
	assert_int_equal(vch_send(ch, 9), VCH_OK);
	pthread_join(t.tid, NULL);
	assert_int_equal(t.r, VCH_OK);
	assert_int_equal(t.value, 9);
	/* Nobody sends: it times out and leaves no waiter behind. */
	thr_start(&t, ch, false, 0, 30 * VB_NS_PER_MS);
	pthread_join(t.tid, NULL);
	assert_int_equal(t.r, VCH_TIMEDOUT);
	assert_int_equal(atomic_load(&ch->recvq.has_waiters), 0);
	vch_free(ch);
}

/* -------------------------------------------------------------- tasks */

static struct vrt *rt;

struct ctask {
	struct vrt_task task;
	struct vch *ch;
	struct vch_waiter w;
	bool send;
	unsigned ops;             /* operations to perform */
	uint64_t value;           /* send: first value; recv: last value */
	uint64_t sum;
	unsigned done, yields, polls;
	enum vch_status last;
	_Atomic int *freed;       /* set by drop */
};

static void ctask_drop(struct vrt_task *t)
{
	struct ctask *c = vb_container_of(t, struct ctask, task);

	if (c->freed)
		atomic_fetch_add(c->freed, 1);
	/* Poison before freeing, so a late waker touching it trips ASan or
	 * at least reads garbage. */
	memset(c, 0xa5, sizeof(*c));
	free(c);
}

static enum vrt_poll ctask_poll(struct vrt_task *t)
{
	struct ctask *c = vb_container_of(t, struct ctask, task);

	c->polls++;
	if (vrt_task_is_cancelled(t)) {
		vch_waiter_cancel(&c->w);
		c->last = VCH_CLOSED;
		return VRT_READY;
	}
	while (c->done < c->ops) {
		uint64_t v = c->value + c->done;
		enum vch_status r = c->send ? vch_send_poll(c->ch, &c->w, v)
					    : vch_recv_poll(c->ch, &c->w, &v);
		c->last = r;
		if (r == VCH_PENDING)
			return VRT_PENDING;
		if (r == VCH_YIELD) {
			c->yields++;
			return VRT_YIELD;
		}
		if (r != VCH_OK)
			return VRT_READY;
		if (!c->send) {
			c->value = v;
			c->sum += v;
		}
		c->done++;
	}
	return VRT_READY;
}

static const struct vrt_task_vtable ctask_vt = { .poll = ctask_poll, .drop = ctask_drop };

/* Spawn a task; the caller keeps the handle reference. */
static struct ctask *ctask_spawn(struct vch *ch, bool send, unsigned ops, uint64_t value,
				 _Atomic int *freed)
{
	struct ctask *c = calloc(1, sizeof(*c));

	assert_non_null(c);
	c->ch = ch;
	c->send = send;
	c->ops = ops;
	c->value = value;
	c->freed = freed;
	vch_waiter_init(&c->w);
	vrt_task_init(&c->task, &ctask_vt);
	assert_int_equal(vrt_spawn(rt, &c->task), 0);
	return c;
}

static void ctask_finish(struct ctask *c)
{
	vrt_task_join_wait(&c->task);
	vrt_task_unref(&c->task);
}

/* A task that occupies the only worker until released. */
struct blocker {
	struct vrt_task task;
	_Atomic int go, running;
};

static enum vrt_poll blocker_poll(struct vrt_task *t)
{
	struct blocker *b = vb_container_of(t, struct blocker, task);
	int64_t end = vb_now_ns() + WAIT_LIMIT_NS;

	atomic_store(&b->running, 1);
	while (!atomic_load(&b->go) && vb_now_ns() < end)
		sched_yield();
	return VRT_READY;
}

static const struct vrt_task_vtable blocker_vt = { .poll = blocker_poll };

static void blocker_start(struct blocker *b)
{
	int64_t end = vb_now_ns() + WAIT_LIMIT_NS;

	memset(b, 0, sizeof(*b));
	vrt_task_init(&b->task, &blocker_vt);
	assert_int_equal(vrt_spawn(rt, &b->task), 0);
	while (!atomic_load(&b->running))
		if (vb_now_ns() > end)
			fail_msg("blocker never ran");
}

static void blocker_stop(struct blocker *b)
{
	atomic_store(&b->go, 1);
	vrt_task_join_wait(&b->task);
	vrt_task_unref(&b->task);
}

static int rt_setup(void **state)
{
	struct vrt_config cfg;

	tcfg_rt(&cfg);
	cfg.workers = 1;
	return vrt_new(&cfg, &rt);
}

static int rt_teardown(void **state)
{
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	vrt_free(rt);
	rt = NULL;
	return 0;
}

/* The runtime drops its own reference just after completion: wait for
 * the expected number of drops (bounded). */
static void wait_freed(_Atomic int *freed, int n)
{
	int64_t end = vb_now_ns() + WAIT_LIMIT_NS;

	while (atomic_load(freed) < n) {
		if (vb_now_ns() > end)
			fail_msg("only %d of %d tasks dropped: a reference leaked", atomic_load(freed), n);
		sleep_ms(1);
	}
	assert_int_equal(atomic_load(freed), n);
}

static void test_task_recv_woken(void **state)
{
	struct vch *ch;
	_Atomic int freed = 0;
	struct ctask *c;

	assert_int_equal(vch_new(4, &ch), 0);
	c = ctask_spawn(ch, false, 1, 0, &freed);
	wait_for_waits(ch, false, 1);
	assert_int_equal(vch_send(ch, 77), VCH_OK);
	vrt_task_join_wait(&c->task);
	assert_int_equal(c->last, VCH_OK);
	assert_int_equal(c->value, 77);
	assert_int_equal(atomic_load(&ch->recvq.has_waiters), 0);
	/* The task's one registration is one empty event and one wait (one
	 * counter write, both fields), nothing on the send side. */
	struct vch_stats st;
	vch_stats_get(ch, &st);
	assert_int_equal(st.empty_events, 1);
	assert_int_equal(st.recv_waits, 1);
	assert_int_equal(st.full_events, 0);
	assert_int_equal(st.send_waits, 0);
	vrt_task_unref(&c->task);
	wait_freed(&freed, 1);
	vch_free(ch);
}

static void test_task_send_woken(void **state)
{
	struct vch *ch;
	_Atomic int freed = 0;
	struct ctask *c;
	uint64_t x;

	assert_int_equal(vch_new(1, &ch), 0);
	assert_int_equal(vch_send(ch, 5), VCH_OK);
	c = ctask_spawn(ch, true, 3, 100, &freed);
	wait_for_waits(ch, true, 1);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(vch_recv(ch, &x), VCH_OK);
		assert_int_equal(x, i == 0 ? 5 : 100 + (uint64_t)i - 1);
	}
	ctask_finish(c);
	wait_freed(&freed, 1);
	vch_free(ch);
}

/* Three pending receivers (fast slot, then a list), three values. */
static void test_task_many_waiters(void **state)
{
	struct vch *ch;
	_Atomic int freed = 0;
	struct ctask *c[3];
	uint64_t sum = 0;

	assert_int_equal(vch_new(4, &ch), 0);
	for (int i = 0; i < 3; i++)
		c[i] = ctask_spawn(ch, false, 1, 0, &freed);
	wait_for_waits(ch, false, 3);
	assert_int_equal(atomic_load(&ch->recvq.has_waiters), VCH_WQ_LIST);
	for (int i = 0; i < 3; i++)
		assert_int_equal(vch_send(ch, 10u << i), VCH_OK);
	for (int i = 0; i < 3; i++) {
		vrt_task_join_wait(&c[i]->task);
		assert_int_equal(c[i]->last, VCH_OK);
		sum += c[i]->value;
		vrt_task_unref(&c[i]->task);
	}
	assert_int_equal(sum, 10 + 20 + 40);
	wait_freed(&freed, 3);
	assert_int_equal(atomic_load(&ch->recvq.has_waiters), 0);
	vch_free(ch);
}

/* Cancel a pending task: its waiter leaves the queue and the channel lets
 * go of the task (drop runs once the handle goes too). */
static void test_task_cancel(void **state)
{
	struct vch *ch;
	_Atomic int freed = 0;
	struct ctask *c[2];

	assert_int_equal(vch_new(2, &ch), 0);
	c[0] = ctask_spawn(ch, false, 1, 0, &freed);
	c[1] = ctask_spawn(ch, false, 1, 0, &freed);
	wait_for_waits(ch, false, 2);
	vrt_task_cancel(&c[0]->task);
	vrt_task_join_wait(&c[0]->task);
	assert_int_equal(c[0]->done, 0);
	vrt_task_unref(&c[0]->task);
	wait_freed(&freed, 1);
	assert_int_equal(vch_send(ch, 3), VCH_OK);
	vrt_task_join_wait(&c[1]->task);
	assert_int_equal(c[1]->value, 3);
	vrt_task_unref(&c[1]->task);
	assert_int_equal(vch_len(ch), 0);
	assert_int_equal(atomic_load(&ch->recvq.has_waiters), 0);
	vch_free(ch);
}

/* A wakeup reaches task A, which is cancelled before it can use it: the
 * wakeup passes to B, so the value is not stranded. The only worker is held
 * by a blocker while the wakeup and the cancel happen. A registers last, so
 * the wakeup is its (receivers are woken newest first). */
static void test_task_cancel_forwards_wakeup(void **state)
{
	struct vch *ch;
	_Atomic int freed = 0;
	struct ctask *a, *b;
	struct blocker blk;

	assert_int_equal(vch_new(2, &ch), 0);
	b = ctask_spawn(ch, false, 1, 0, &freed);
	wait_for_waits(ch, false, 1);
	a = ctask_spawn(ch, false, 1, 0, &freed);
	wait_for_waits(ch, false, 2);
	blocker_start(&blk);
	assert_int_equal(vch_send(ch, 8), VCH_OK);   /* claims and wakes A */
	assert_int_equal(atomic_load(&a->w.state), VCH_W_NOTIFIED);
	assert_int_equal(atomic_load(&b->w.state), VCH_W_WAITING);
	vrt_task_cancel(&a->task);
	blocker_stop(&blk);
	vrt_task_join_wait(&a->task);
	vrt_task_join_wait(&b->task);
	assert_int_equal(a->done, 0);
	assert_int_equal(b->done, 1);
	assert_int_equal(b->value, 8);
	vrt_task_unref(&a->task);
	vrt_task_unref(&b->task);
	wait_freed(&freed, 2);
	assert_int_equal(atomic_load(&ch->recvq.has_waiters), 0);
	vch_free(ch);
}

/* Receivers are woken newest first (the warm task), senders oldest first
 * (none waits for ever): three of each registered in turn, one value (one
 * free slot) each time, seen from the waiters' states while the only
 * worker is held, so nobody runs in between. */
static void test_task_wake_order(void **state)
{
	struct vch *empty, *full;
	_Atomic int freed = 0;
	struct ctask *r[3], *s[3];
	struct blocker blk;
	uint64_t x;

	assert_int_equal(vch_new(4, &empty), 0);
	assert_int_equal(vch_new(3, &full), 0);
	for (uint64_t i = 0; i < 3; i++)
		assert_int_equal(vch_send(full, i), VCH_OK);
	for (int i = 0; i < 3; i++) {
		r[i] = ctask_spawn(empty, false, 1, 0, &freed);
		wait_for_waits(empty, false, (uint64_t)i + 1);
		s[i] = ctask_spawn(full, true, 1, 50 + (uint64_t)i, &freed);
		wait_for_waits(full, true, (uint64_t)i + 1);
	}
	blocker_start(&blk);
	for (int k = 0; k < 3; k++) {
		assert_int_equal(vch_try_send(empty, 10 + (uint64_t)k), VCH_OK);
		assert_int_equal(vch_try_recv(full, &x), VCH_OK);
		for (int i = 0; i < 3; i++) {
			assert_int_equal(atomic_load(&r[i]->w.state), i >= 2 - k ? VCH_W_NOTIFIED : VCH_W_WAITING);
			assert_int_equal(atomic_load(&s[i]->w.state), i <= k ? VCH_W_NOTIFIED : VCH_W_WAITING);
		}
	}
	blocker_stop(&blk);
	for (int i = 0; i < 3; i++) {
		vrt_task_join_wait(&r[i]->task);
		vrt_task_join_wait(&s[i]->task);
		assert_int_equal(r[i]->done, 1);
		assert_int_equal(s[i]->done, 1);
		vrt_task_unref(&r[i]->task);
		vrt_task_unref(&s[i]->task);
	}
	wait_freed(&freed, 6);
	vch_free(empty);
	vch_free(full);
}

static void test_task_close_wakes(void **state)
{
	struct vch *empty, *full;
	_Atomic int freed = 0;
	struct ctask *r[2], *s[2];

	assert_int_equal(vch_new(1, &empty), 0);
	assert_int_equal(vch_new(1, &full), 0);
	assert_int_equal(vch_send(full, 1), VCH_OK);
	for (int i = 0; i < 2; i++) {
		r[i] = ctask_spawn(empty, false, 1, 0, &freed);
		s[i] = ctask_spawn(full, true, 1, 50, &freed);
	}
	wait_for_waits(empty, false, 2);
	wait_for_waits(full, true, 2);
	vch_close(empty);
	vch_close(full);
	for (int i = 0; i < 2; i++) {
		vrt_task_join_wait(&r[i]->task);
		vrt_task_join_wait(&s[i]->task);
		assert_int_equal(r[i]->last, VCH_CLOSED);
		assert_int_equal(s[i]->last, VCH_CLOSED);
		vrt_task_unref(&r[i]->task);
		vrt_task_unref(&s[i]->task);
	}
	wait_freed(&freed, 4);
	vch_free(empty);
	vch_free(full);
}

/* Budget 4: a task sending 100 values on a roomy channel yields on the way. */
static void test_task_budget(void **state)
{
	struct vch *ch;
	_Atomic int freed = 0;
	struct ctask *c;
	uint64_t x;

	assert_int_equal(vrt_set_budget(rt, 4), 0);
	assert_int_equal(vch_new(128, &ch), 0);
	c = ctask_spawn(ch, true, 100, 0, &freed);
	vrt_task_join_wait(&c->task);
	assert_int_equal(c->done, 100);
	assert_true(c->yields >= 100 / 4 - 1);
	assert_true(c->polls >= 100 / 4);
	vrt_task_unref(&c->task);
	/* `freed` lives on this stack: the drop must have run before we return. */
	wait_freed(&freed, 1);
	for (uint64_t i = 0; i < 100; i++) {
		assert_int_equal(vch_try_recv(ch, &x), VCH_OK);
		assert_int_equal(x, i);
	}
	vrt_set_budget(rt, 128);
	vch_free(ch);
}

int main(void)
{
	const struct CMUnitTest threads[] = {
		cmocka_unit_test(test_thread_recv_woken),
		cmocka_unit_test(test_thread_send_woken),
		cmocka_unit_test(test_thread_close_wakes_all),
		cmocka_unit_test(test_thread_many_receivers),
		cmocka_unit_test(test_thread_timed),
		cmocka_unit_test(test_thread_long_gaps_stop_spinning),
	};
	const struct CMUnitTest tasks[] = {
		cmocka_unit_test(test_task_recv_woken),
		cmocka_unit_test(test_task_send_woken),
		cmocka_unit_test(test_task_many_waiters),
		cmocka_unit_test(test_task_cancel),
		cmocka_unit_test(test_task_cancel_forwards_wakeup),
		cmocka_unit_test(test_task_wake_order),
		cmocka_unit_test(test_task_close_wakes),
		cmocka_unit_test(test_task_budget),
	};
	int fails;

	alarm(120);   /* watchdog: a lost wakeup hangs a join; fail instead */
	fails = cmocka_run_group_tests_name("threads", threads, NULL, NULL);

	fails += cmocka_run_group_tests_name("tasks", tasks, rt_setup, rt_teardown);
	return fails ? 1 : 0;
}
