/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_rt_wsq.c: the WorkStealQueue and the injection queue
 * against a trivial model (arrays) on random operation sequences: push (with
 * overflow of 128 + 1 to the injection queue), pop, steal-into both ways,
 * injection batch pops; with indices starting at 0 and just below 2^32 (the
 * wrap). Plus the packed head helpers, steal-half counts, the "steal in
 * flight" overflow rule and RETRY while a steal copies. Single-threaded.
 */
#include "rt/internal.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#define NTASK 8192

static struct vrt_task tasks[NTASK];

static unsigned idx(const struct vrt_task *t)
{
	return (unsigned)(t - tasks);
}

/* Model: a plain FIFO of task indices. */
struct model {
	unsigned v[NTASK * 4];
	unsigned head, tail;
};
static unsigned m_len(const struct model *m) { return m->tail - m->head; }
static void m_push(struct model *m, unsigned x) { m->v[m->tail++] = x; }
static unsigned m_pop(struct model *m) { return m->v[m->head++]; }

static struct vrt_wsq *new_wsq(uint32_t start)
{
	struct vrt_wsq *q = aligned_alloc(VB_CACHELINE, sizeof(*q));

	assert_non_null(q);
	vrt__wsq_init(q, start);
	return q;
}

static unsigned g_overflows, g_steals, g_batches;

static void test_pack(void **st)
{
	(void)st;
	uint64_t h = vrt__wsq_pack(0xFFFFFFF0u, 0x00000005u);
	assert_int_equal(vrt__wsq_steal_of(h), 0xFFFFFFF0u);
	assert_int_equal(vrt__wsq_real_of(h), 0x00000005u);
	h = vrt__wsq_pack(0, UINT32_MAX);
	assert_int_equal(vrt__wsq_steal_of(h), 0);
	assert_int_equal(vrt__wsq_real_of(h), UINT32_MAX);
	assert_int_equal(h, UINT64_C(0x00000000FFFFFFFF));
	assert_int_equal(vrt__wsq_pack(1, 2), UINT64_C(0x0000000100000002));
}

static void test_steal_count(void **st)
{
	(void)st;
	assert_int_equal(vrt__wsq_steal_count(0), 0);
	assert_int_equal(vrt__wsq_steal_count(1), 1);
	assert_int_equal(vrt__wsq_steal_count(2), 1);
	assert_int_equal(vrt__wsq_steal_count(3), 2);
	assert_int_equal(vrt__wsq_steal_count(255), 128);
	assert_int_equal(vrt__wsq_steal_count(256), 128);
	for (uint32_t a = 1; a <= 256; a++) {
		uint32_t n = vrt__wsq_steal_count(a);
		assert_true(n >= 1 && n <= 128);
		assert_true(n == (a + 1) / 2 || n == 128);
	}
}

/* One random run: owner queue a, stealer queue b (whose owner is "us" too
 * when we pop from it), injection queue inj; checked against models. */
static void run_model(uint32_t start_a, uint32_t start_b, unsigned seed, unsigned steps)
{
	struct vrt_wsq *a = new_wsq(start_a), *b = new_wsq(start_b);
	struct vrt_inject inj;
	static struct model ma, mb, mi;
	unsigned next = 0, done = 0;
	struct vb_rng rng;
	static bool seen[NTASK];

	memset(&ma, 0, sizeof(ma));
	memset(&mb, 0, sizeof(mb));
	memset(&mi, 0, sizeof(mi));
	memset(seen, 0, sizeof(seen));
	assert_int_equal(vrt__inject_init(&inj), 0);
	vb_rng_seed(&rng, seed);

	for (unsigned step = 0; step < steps; step++) {
		unsigned op = vb_rng_below(&rng, 100);

		if (op < 45 && next < NTASK) {
			/* push a burst, sometimes long enough to overflow */
			unsigned k = 1 + vb_rng_below(&rng, op < 5 ? 300 : 8);
			for (unsigned i = 0; i < k && next < NTASK; i++) {
				struct vrt_task *t = &tasks[next];
				struct vrt_wsq_push_res r = vrt__wsq_push(a, t, &inj);
				if (m_len(&ma) < VRT_WSQ_CAP) {
					assert_int_equal(r.overflowed, 0);
					m_push(&ma, next);
				} else {
					/* 128 oldest + the new task, in order */
					assert_int_equal(r.overflowed, VRT_WSQ_HALF + 1);
					assert_false(r.to_inject_only);
					g_overflows++;
					for (unsigned j = 0; j < VRT_WSQ_HALF; j++)
						m_push(&mi, m_pop(&ma));
					m_push(&mi, next);
				}
				assert_false(r.dropped);
				next++;
			}
		} else if (op < 65) {
			struct vrt_task *t = vrt__wsq_pop(a);
			if (m_len(&ma) == 0) {
				assert_null(t);
			} else {
				assert_non_null(t);
				assert_int_equal(idx(t), m_pop(&ma));
				assert_false(seen[idx(t)]);
				seen[idx(t)] = true;
				done++;
			}
		} else if (op < 80) {
			/* steal a -> b (or b -> a, to exercise both rings) */
			bool ab = op < 75;
			struct vrt_wsq *src = ab ? a : b, *dst = ab ? b : a;
			struct model *ms = ab ? &ma : &mb, *md = ab ? &mb : &ma;
			struct vrt_task *t = NULL;
			uint32_t n = 0;
			enum vrt_steal r = vrt__wsq_steal_into(src, dst, &t, &n);
			if (m_len(md) > VRT_WSQ_HALF || m_len(ms) == 0) {
				assert_int_equal(r, VRT_STEAL_EMPTY);
				assert_int_equal(n, 0);
			} else {
				uint32_t want = vrt__wsq_steal_count(m_len(ms));
				assert_int_equal(r, VRT_STEAL_OK);
				assert_int_equal(n, want);
				g_steals += want > 1;
				for (uint32_t j = 0; j + 1 < want; j++)
					m_push(md, m_pop(ms));
				assert_int_equal(idx(t), m_pop(ms));
				assert_false(seen[idx(t)]);
				seen[idx(t)] = true;
				done++;
			}
		} else if (op < 90) {
			struct vrt_task *t = vrt__wsq_pop(b);
			if (m_len(&mb) == 0) {
				assert_null(t);
			} else {
				assert_non_null(t);
				assert_int_equal(idx(t), m_pop(&mb));
				assert_false(seen[idx(t)]);
				seen[idx(t)] = true;
				done++;
			}
		} else {
			struct vrt_task *out[128];
			unsigned max = 1 + vb_rng_below(&rng, 128);
			unsigned share = 1 + vb_rng_below(&rng, 4);
			unsigned want = vrt__inject_batch_size(m_len(&mi), share, max);
			unsigned n = vrt__inject_pop_batch(&inj, out, max, share);
			assert_int_equal(n, want);
			g_batches += n > 1;
			for (unsigned j = 0; j < n; j++) {
				assert_int_equal(idx(out[j]), m_pop(&mi));
				assert_false(seen[idx(out[j])]);
				seen[idx(out[j])] = true;
				done++;
			}
		}
		assert_int_equal(vrt__wsq_len(a), m_len(&ma));
		assert_int_equal(vrt__wsq_len(b), m_len(&mb));
		assert_int_equal(vrt__inject_len(&inj), m_len(&mi));
	}
	/* drain everything: every task exactly once */
	for (struct vrt_task *t; (t = vrt__wsq_pop(a)) != NULL; done++) {
		assert_int_equal(idx(t), m_pop(&ma));
		assert_false(seen[idx(t)]);
		seen[idx(t)] = true;
	}
	for (struct vrt_task *t; (t = vrt__wsq_pop(b)) != NULL; done++) {
		assert_int_equal(idx(t), m_pop(&mb));
		assert_false(seen[idx(t)]);
		seen[idx(t)] = true;
	}
	for (struct vrt_task *t = vrt__inject_close(&inj); t; t = t->next, done++) {
		assert_int_equal(idx(t), m_pop(&mi));
		assert_false(seen[idx(t)]);
		seen[idx(t)] = true;
	}
	assert_int_equal(done, next);
	vrt__inject_fini(&inj);
	free(a);
	free(b);
}

static unsigned g_seed;

static void test_model_zero(void **st)
{
	(void)st;
	g_overflows = g_steals = g_batches = 0;
	for (unsigned r = 0; r < 40; r++)
		run_model(0, 0, g_seed + r, 3000);
	/* the sequences really exercised overflow, multi-task steals, batches */
	assert_true(g_overflows > 10 && g_steals > 100 && g_batches > 100);
}

static void test_model_wrap(void **st)
{
	(void)st;
	/* indices cross 2^32 during the run */
	for (unsigned r = 0; r < 40; r++) {
		uint32_t sa = UINT32_MAX - (r * 37u % 600u);
		uint32_t sb = UINT32_MAX - (r * 91u % 300u);
		run_model(sa, sb, g_seed + 1000 + r, 3000);
	}
	printf("# overflows %u, multi-steals %u, batches %u\n", g_overflows, g_steals, g_batches);
}

/* Overflow while a steal is in flight: only the new task goes out, and a
 * second stealer gets RETRY, not EMPTY. */
static void test_overflow_in_flight(void **st)
{
	(void)st;
	for (int w = 0; w < 2; w++) {
		uint32_t start = w ? UINT32_MAX - 100 : 7;
		struct vrt_wsq *a = new_wsq(start), *c = new_wsq(0);
		struct vrt_inject inj;
		struct vrt_task *t;
		uint32_t n;

		assert_int_equal(vrt__inject_init(&inj), 0);
		for (unsigned i = 0; i < VRT_WSQ_CAP; i++)
			assert_int_equal(vrt__wsq_push(a, &tasks[i], &inj).overflowed, 0);
		/* Simulate phase 1 of a steal of 10 (claimed, not yet released). */
		uint64_t h = atomic_load(&a->head);
		uint32_t real = vrt__wsq_real_of(h);
		atomic_store(&a->head, vrt__wsq_pack(real, real + 10));
		assert_int_equal(vrt__wsq_len(a), VRT_WSQ_CAP - 10);
		/* Full (counting the slots being copied): overflow of one. */
		struct vrt_wsq_push_res r = vrt__wsq_push(a, &tasks[1000], &inj);
		assert_int_equal(r.overflowed, 1);
		assert_true(r.to_inject_only);
		assert_int_equal(vrt__inject_len(&inj), 1);
		/* Another stealer must not read that as empty. */
		assert_int_equal(vrt__wsq_steal_into(a, c, &t, &n), VRT_STEAL_RETRY);
		/* The owner can still pop while the steal copies. */
		t = vrt__wsq_pop(a);
		assert_ptr_equal(t, &tasks[10]);
		h = atomic_load(&a->head);
		assert_int_equal(vrt__wsq_steal_of(h), real);
		assert_int_equal(vrt__wsq_real_of(h), real + 11);
		/* Phase 3 (release): steal_head catches up with real_head. */
		atomic_store(&a->head, vrt__wsq_pack(real + 11, real + 11));
		/* Room again. */
		r = vrt__wsq_push(a, &tasks[1001], &inj);
		assert_int_equal(r.overflowed, 0);
		/* Full again, nothing in flight: 128 + 1 go out in one batch. */
		for (unsigned i = 0; i < 10; i++)
			assert_int_equal(vrt__wsq_push(a, &tasks[1100 + i], &inj).overflowed, 0);
		assert_int_equal(vrt__wsq_len(a), VRT_WSQ_CAP);
		r = vrt__wsq_push(a, &tasks[2000], &inj);
		assert_int_equal(r.overflowed, VRT_WSQ_HALF + 1);
		assert_int_equal(vrt__inject_len(&inj), 1 + VRT_WSQ_HALF + 1);
		assert_int_equal(vrt__wsq_len(a), VRT_WSQ_CAP - VRT_WSQ_HALF);
		/* the oldest remaining is task 11 + 128 */
		t = vrt__wsq_pop(a);
		assert_ptr_equal(t, &tasks[11 + VRT_WSQ_HALF]);
		/* injection order: 1000, then 11..138, then 2000 */
		t = vrt__inject_close(&inj);
		assert_ptr_equal(t, &tasks[1000]);
		t = t->next;
		for (unsigned i = 0; i < VRT_WSQ_HALF; i++, t = t->next)
			assert_ptr_equal(t, &tasks[11 + i]);
		assert_ptr_equal(t, &tasks[2000]);
		assert_null(t->next);
		vrt__inject_fini(&inj);
		free(a);
		free(c);
	}
}

/* A steal takes at most 128, and a stealer whose ring is over half full
 * takes nothing. */
static void test_steal_limits(void **st)
{
	(void)st;
	struct vrt_wsq *a = new_wsq(UINT32_MAX - 3), *b = new_wsq(UINT32_MAX);
	struct vrt_inject inj;
	struct vrt_task *t;
	uint32_t n;

	assert_int_equal(vrt__inject_init(&inj), 0);
	for (unsigned i = 0; i < 256; i++)
		vrt__wsq_push(a, &tasks[i], &inj);
	assert_int_equal(vrt__wsq_steal_into(a, b, &t, &n), VRT_STEAL_OK);
	assert_int_equal(n, 128);
	assert_ptr_equal(t, &tasks[127]);
	assert_int_equal(vrt__wsq_len(b), 127);
	assert_int_equal(vrt__wsq_len(a), 128);
	assert_int_equal(vrt__wsq_steal_into(a, b, &t, &n), VRT_STEAL_OK);
	assert_int_equal(n, 64);
	assert_int_equal(vrt__wsq_len(b), 127 + 63);
	/* b is now more than half full: it may not steal */
	assert_int_equal(vrt__wsq_steal_into(a, b, &t, &n), VRT_STEAL_EMPTY);
	assert_int_equal(atomic_load(&a->stolen_from), 192);
	vrt__inject_fini(&inj);
	free(a);
	free(b);
}

/* Group marks: FIFO order and exact batch sizes whatever the mix of single
 * and batch pushes and partial pops, also past VRT_INJ_MARKS groups. */
static void test_inject_groups(void **st)
{
	struct vrt_inject inj;
	struct vrt_task *out[128];
	unsigned next_out = 0, n;

	(void)st;
	assert_int_equal(vrt__inject_init(&inj), 0);
	for (unsigned i = 0; i < 100; i++)
		assert_true(vrt__inject_push_batch(&inj, &tasks[i], &tasks[i], 1));
	unsigned ks[] = { 40, 5, 20, 1, 16, 17 };
	for (unsigned j = 0; j < 6; j++) {
		n = vrt__inject_pop_batch(&inj, out, ks[j], 1);
		assert_int_equal(n, ks[j]);
		for (unsigned i = 0; i < n; i++)
			assert_ptr_equal(out[i], &tasks[next_out++]);
	}
	/* a linked batch of 129 after the 1 left */
	for (unsigned i = 100; i < 229; i++)
		tasks[i].next = i + 1 < 229 ? &tasks[i + 1] : NULL;
	assert_true(vrt__inject_push_batch(&inj, &tasks[100], &tasks[228], 129));
	assert_int_equal(vrt__inject_len(&inj), 1 + 129);
	while ((n = vrt__inject_pop_batch(&inj, out, 23, 2)) != 0)
		for (unsigned i = 0; i < n; i++)
			assert_ptr_equal(out[i], &tasks[next_out++]);
	assert_int_equal(next_out, 229);
	assert_int_equal(vrt__inject_len(&inj), 0);
	/* 512 groups, more than the 256 marks: the rest is walked */
	for (unsigned i = 0; i < NTASK; i++)
		assert_true(vrt__inject_push_batch(&inj, &tasks[i], &tasks[i], 1));
	for (unsigned total = 0; total < NTASK; total += n) {
		n = vrt__inject_pop_batch(&inj, out, 1 + (total % 128), 1);
		assert_int_equal(n, total + 1 + (total % 128) > NTASK ? NTASK - total : 1 + (total % 128));
		for (unsigned i = 0; i < n; i++)
			assert_ptr_equal(out[i], &tasks[total + i]);
	}
	assert_int_equal(vrt__inject_len(&inj), 0);
	vrt__inject_fini(&inj);
}

static void test_batch_size(void **st)
{
	(void)st;
	assert_int_equal(vrt__inject_batch_size(0, 2, 64), 0);
	assert_int_equal(vrt__inject_batch_size(1, 2, 64), 1);
	assert_int_equal(vrt__inject_batch_size(3, 2, 64), 3);
	assert_int_equal(vrt__inject_batch_size(10, 2, 64), 5);
	assert_int_equal(vrt__inject_batch_size(10, 8, 64), 4);   /* floor of 4 */
	assert_int_equal(vrt__inject_batch_size(1000, 2, 64), 64); /* cap */
	assert_int_equal(vrt__inject_batch_size(1000, 2, 2), 2);   /* cap below 4 */
	assert_int_equal(vrt__inject_batch_size(7, 0, 64), 7);
	for (uint64_t len = 0; len < 600; len++)
		for (unsigned share = 1; share <= 8; share++)
			for (unsigned max = 1; max <= 128; max += 9) {
				unsigned b = vrt__inject_batch_size(len, share, max);
				assert_true(b <= max && b <= len);
				if (len >= 4 && max >= 4)
					assert_true(b >= 4);
			}
}

int main(void)
{
	const char *s = getenv("VOLTD_TEST_SEED");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pack),
		cmocka_unit_test(test_steal_count),
		cmocka_unit_test(test_batch_size),
		cmocka_unit_test(test_inject_groups),
		cmocka_unit_test(test_steal_limits),
		cmocka_unit_test(test_overflow_in_flight),
		cmocka_unit_test(test_model_zero),
		cmocka_unit_test(test_model_wrap),
	};

	g_seed = s ? (unsigned)strtoul(s, NULL, 0) : (unsigned)time(NULL);
	printf("# seed %u (VOLTD_TEST_SEED=%u to repeat)\n", g_seed, g_seed);
	for (unsigned i = 0; i < NTASK; i++)
		vrt_task_init(&tasks[i], NULL);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
