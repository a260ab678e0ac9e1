/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_histogram.c: base/histogram: bucket arithmetic over the
 * whole uint64 range, quantiles against a sorted model on random data, the
 * single-writer and atomic recorders, merging, and two threads recording
 * into one histogram (nothing lost). Single-threaded except the last test.
 */
#include "base/histogram.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

static uint64_t seed;

static uint64_t next_rand(uint64_t *s)
{
	/* splitmix64: independent of the code under test */
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static void test_buckets_tile_the_range(void **state)
{
	(void)state;
	assert_int_equal(vb_hist_bucket_low(0), 0);
	for (unsigned i = 0; i < VB_HIST_BUCKETS; i++) {
		uint64_t lo = vb_hist_bucket_low(i), hi = vb_hist_bucket_high(i);
		assert_true(lo <= hi);
		assert_int_equal(vb_hist_bucket_of(lo), i);
		assert_int_equal(vb_hist_bucket_of(hi), i);
		if (i + 1 < VB_HIST_BUCKETS)
			assert_true(hi + 1 == vb_hist_bucket_low(i + 1));
		/* width <= 1/16 of the bucket's smallest value (or 1) */
		if (lo >= 32)
			assert_true(hi - lo + 1 <= lo / 16);
		else
			assert_true(hi == lo);
	}
	assert_true(vb_hist_bucket_high(VB_HIST_BUCKETS - 1) == UINT64_MAX);
	assert_int_equal(vb_hist_bucket_of(UINT64_MAX), VB_HIST_BUCKETS - 1);
	uint64_t s = seed;
	for (int i = 0; i < 100000; i++) {
		uint64_t v = next_rand(&s) >> (next_rand(&s) % 64);
		unsigned b = vb_hist_bucket_of(v);
		assert_true(b < VB_HIST_BUCKETS);
		assert_true(vb_hist_bucket_low(b) <= v && v <= vb_hist_bucket_high(b));
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void test_quantiles_match_model(void **state)
{
	(void)state;
	static struct vb_hist h;
	static struct vb_hist_snap snap;
	enum { N = 20000 };
	static uint64_t vals[N];
	static const double qs[] = { 0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0 };
	uint64_t s = seed ^ 1;
	for (int round = 0; round < 20; round++) {
		vb_hist_init(&h);
		int n = 1 + (int)(next_rand(&s) % N);
		uint64_t sum = 0;
		for (int i = 0; i < n; i++) {
			/* log-uniform latencies from 1 ns to ~1 s, as a server sees */
			uint64_t v = next_rand(&s) % ((uint64_t)1 << (1 + next_rand(&s) % 30));
			vals[i] = v;
			sum += v;
			if (round % 2)
				vb_hist_record(&h, v);
			else
				vb_hist_record_owner(&h, v);
		}
		qsort(vals, (size_t)n, sizeof(vals[0]), cmp_u64);
		vb_hist_snapshot(&h, &snap);
		assert_int_equal(snap.count, (uint64_t)n);
		assert_int_equal(snap.sum, sum);
		assert_int_equal(snap.max, vals[n - 1]);
		assert_int_equal(vb_hist_snap_mean(&snap), sum / (uint64_t)n);
		for (size_t k = 0; k < sizeof(qs) / sizeof(qs[0]); k++) {
			uint64_t rank = (uint64_t)(qs[k] * n);
			if ((double)rank < qs[k] * n)
				rank++;
			if (rank == 0)
				rank = 1;
			uint64_t truth = vals[rank - 1];
			uint64_t est = vb_hist_snap_quantile(&snap, qs[k]);
			/* an upper edge: never below the truth, at most one bucket above */
			assert_true(est >= truth);
			assert_true(est - truth <= truth / 16);
			assert_true(est <= snap.max);
		}
	}
}

static void test_empty_and_merge(void **state)
{
	(void)state;
	static struct vb_hist a, b;
	static struct vb_hist_snap sa, sb;
	vb_hist_init(&a);
	vb_hist_init(&b);
	vb_hist_snapshot(&a, &sa);
	assert_int_equal(sa.count, 0);
	assert_int_equal(vb_hist_snap_quantile(&sa, 0.99), 0);
	assert_int_equal(vb_hist_snap_mean(&sa), 0);
	for (uint64_t v = 1; v <= 100; v++)
		vb_hist_record(&a, v * 1000);
	for (uint64_t v = 1; v <= 100; v++)
		vb_hist_record(&b, 1000000 + v);
	vb_hist_snapshot(&a, &sa);
	vb_hist_snapshot(&b, &sb);
	assert_true(vb_hist_snap_quantile(&sa, 0.5) >= 50000);
	assert_true(vb_hist_snap_quantile(&sa, 0.5) <= 50000 + 50000 / 16);
	vb_hist_snap_merge(&sa, &sb);
	{ /* summing the histograms gives the merge of their snapshots */
		static struct vb_hist_snap acc;

		memset(&acc, 0, sizeof(acc));
		vb_hist_snapshot_add(&a, &acc);
		vb_hist_snapshot_add(&b, &acc);
		assert_memory_equal(&acc, &sa, sizeof(acc));
	}
	assert_int_equal(sa.count, 200);
	assert_int_equal(sa.max, 1000100);
	/* the 101st value of 200 is the smallest of b's */
	uint64_t p = vb_hist_snap_quantile(&sa, 0.5025);
	assert_true(p >= 1000001 && p <= 1000001 + 1000001 / 16);
	assert_true(vb_hist_snap_quantile(&sa, 0.5) <= 100000 + 100000 / 16);
	/* extreme values land in range */
	vb_hist_record(&a, UINT64_MAX);
	vb_hist_record(&a, 0);
	vb_hist_snapshot(&a, &sa);
	assert_int_equal(sa.max, UINT64_MAX);
	assert_int_equal(vb_hist_snap_quantile(&sa, 1.0), UINT64_MAX);
	assert_int_equal(vb_hist_snap_quantile(&sa, 0.0), 0);
}

enum { PER_THREAD = 200000 };
static struct vb_hist shared;

static void *recorder(void *arg)
{
	uint64_t s = seed + (uintptr_t)arg;
	for (int i = 0; i < PER_THREAD; i++)
		vb_hist_record(&shared, next_rand(&s) % 1000000);
	return NULL;
}

static void test_concurrent_record(void **state)
{
	(void)state;
	static struct vb_hist_snap snap;
	vb_hist_init(&shared);
	pthread_t t[2];
	for (uintptr_t i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, recorder, (void *)(i + 1)), 0);
	/* a reader snapshots while they record: counts only grow */
	uint64_t last = 0;
	for (int i = 0; i < 50; i++) {
		vb_hist_snapshot(&shared, &snap);
		assert_true(snap.count >= last);
		last = snap.count;
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	vb_hist_snapshot(&shared, &snap);
	assert_int_equal(snap.count, 2 * PER_THREAD);
	assert_true(snap.max < 1000000);
}

int main(void)
{
	const char *env = getenv("VOLTD_TEST_SEED");
	seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
	printf("# seed %llu (set VOLTD_TEST_SEED to repeat)\n", (unsigned long long)seed);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buckets_tile_the_range),
		cmocka_unit_test(test_quantiles_match_model),
		cmocka_unit_test(test_empty_and_merge),
		cmocka_unit_test(test_concurrent_record),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
