/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_rt_math.c: the scheduler's arithmetic: EWMA (alpha 0.1),
 * the adaptive global interval clamp(1 ms / avg, min, max), xorshift +
 * Lemire reduction range and rough uniformity, state-word field helpers and
 * the idle word packing. Single-threaded, pure functions.
 */
#include "rt/internal.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <cmocka.h>

static void test_ewma(void **st)
{
	(void)st;
	assert_true(fabs(vrt__ewma(100.0, 200.0) - 110.0) < 1e-9);
	assert_true(fabs(vrt__ewma(100.0, 0.0) - 90.0) < 1e-9);
	assert_true(fabs(vrt__ewma(50.0, 50.0) - 50.0) < 1e-9);
	/* converges to a constant input; after n steps the gap is 0.9^n */
	double a = 0.0;
	for (int i = 0; i < 50; i++)
		a = vrt__ewma(a, 1000.0);
	assert_true(fabs(a - 1000.0 * (1.0 - pow(0.9, 50))) < 1e-6);
}

static void test_interval(void **st)
{
	(void)st;
	/* 1 ms / avg */
	assert_int_equal(vrt__global_interval(20000.0, 1, 255), 50);
	assert_int_equal(vrt__global_interval(1e6, 1, 255), 1);
	assert_int_equal(vrt__global_interval(4000.0, 1, 255), 250);
	/* clamped */
	assert_int_equal(vrt__global_interval(100.0, 8, 61), 61);
	assert_int_equal(vrt__global_interval(1e7, 8, 61), 8);
	assert_int_equal(vrt__global_interval(0.0, 8, 61), 61);
	assert_int_equal(vrt__global_interval(-5.0, 8, 61), 61);
	for (double avg = 1.0; avg < 1e8; avg *= 1.37) {
		unsigned v = vrt__global_interval(avg, 4, 200);
		assert_true(v >= 4 && v <= 200);
		if (1e6 / avg >= 4 && 1e6 / avg <= 200)
			assert_int_equal(v, (unsigned)(1e6 / avg));
	}
}

static void test_lemire(void **st)
{
	struct vb_rng r;
	unsigned seed = (unsigned)time(NULL);

	(void)st;
	printf("# seed %u\n", seed);
	vb_rng_seed(&r, seed);
	for (uint32_t n = 1; n < 300; n++)
		for (int i = 0; i < 200; i++)
			assert_true(vb_rng_below(&r, n) < n);
	assert_int_equal(vb_rng_below(&r, 1), 0);
	for (int i = 0; i < 1000; i++)
		assert_true(vb_rng_below(&r, UINT32_MAX) < UINT32_MAX);
	/* every value of a small range shows up, roughly uniformly */
	unsigned hist[7] = { 0 };
	for (int i = 0; i < 70000; i++)
		hist[vb_rng_below(&r, 7)]++;
	for (int i = 0; i < 7; i++)
		assert_true(hist[i] > 9000 && hist[i] < 11000);
	/* distinct seeds give distinct streams; the state never sticks at 0 */
	struct vb_rng a, b;
	vb_rng_seed(&a, 1);
	vb_rng_seed(&b, 2);
	assert_true(vb_rng_next32(&a) != vb_rng_next32(&b) || vb_rng_next32(&a) != vb_rng_next32(&b));
	vb_rng_seed(&a, (uint64_t)-0x9E3779B97F4A7C15ll);
	assert_true(a.s != 0);
}

static void test_words(void **st)
{
	(void)st;
	uint64_t s = VRT_ST_SCHEDULED | VRT_ST_NOTIFIED | 3 * VRT_ST_REF_ONE;
	assert_int_equal(vrt__st_refs(s), 3);
	assert_int_equal(s & VRT_ST_LIFE, VRT_ST_SCHEDULED);
	/* flags do not overlap each other, the lifecycle or the count */
	uint64_t flags[] = { VRT_ST_NOTIFIED, VRT_ST_CANCELLED, VRT_ST_JOIN, VRT_ST_NEW };
	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(flags[i] & VRT_ST_LIFE, 0);
		assert_true(flags[i] < VRT_ST_REF_ONE);
		for (unsigned j = i + 1; j < 4; j++)
			assert_int_equal(flags[i] & flags[j], 0);
	}
	uint64_t idle = 3 * VRT_IDLE_SEARCH_ONE + 5 * VRT_IDLE_PARK_ONE;
	assert_int_equal(vrt__idle_searching(idle), 3);
	assert_int_equal(vrt__idle_parked(idle), 5);
	/* one RMW moves a worker from parked to searching */
	idle += VRT_IDLE_SEARCH_ONE - VRT_IDLE_PARK_ONE;
	assert_int_equal(vrt__idle_searching(idle), 4);
	assert_int_equal(vrt__idle_parked(idle), 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ewma),
		cmocka_unit_test(test_interval),
		cmocka_unit_test(test_lemire),
		cmocka_unit_test(test_words),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
