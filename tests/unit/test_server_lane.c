/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_server_lane.c: the heavy lane's turn rule
 * (src/server/lane.c, "Turns"), by its arithmetic: a runner takes its
 * next slice at once (no yield) while jobs wait in the lane, it has run
 * fewer than VSRV_LANE_TURN_MAX slices in this poll and either the lane
 * is behind (its first job has waited stages.heavy_wait_ms) or its share
 * of its worker's time lately is below stages.heavy_share while no other
 * runner is idle (a job then waits for its spread); with nothing waiting,
 * only while the runtime finds its CPUs saturated, below its
 * share and for fewer than VSRV_LANE_SATURATED_TURN slices. Clock
 * values are given, not read: nothing here depends on the machine's
 * speed. That verdict (vsrv__lane_saturated) is read from a real runtime
 * whose monitor's measurement is forced. The
 * FIFO order and the placement on an idle worker's runner are tested on a
 * real voltd (tests/integration/test_lane.py, tests/stress/stress_blocking).
 */
#include "config.h"
#include "server/internal.h"
#include "rt/internal.h" /* vrt__test_spreading */
#include "base/time.h"
#include "tests/helpers/test_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#define US 1000LL
/* Past VSRV_LANE_TAU_NS after 0: the first slice starts a new window. */
#define START (10 * VB_NS_PER_MS)

static struct vsrv *srv;
static struct vsrv_exec x;
static bool saturated; /* the runtime's verdict handed to the rule */

static int setup(void **state)
{
	(void)state;
	srv = calloc(1, sizeof(*srv));
	assert_non_null(srv);
	atomic_store(&srv->live.heavy_share, 80);
	memset(&x, 0, sizeof(x));
	x.lane_w = 0;
	saturated = false;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(srv);
	return 0;
}

/* n slices of `ran` us, each `gap` us after the last one ended. */
static int64_t run_slices(int64_t t, unsigned n, int64_t ran, int64_t gap)
{
	for (unsigned i = 0; i < n; i++) {
		t += (gap + ran) * US;
		vsrv__lane_account(&x, t, ran * US);
	}
	return t;
}

static enum vsrv_lane_next more_at(int64_t now)
{
	unsigned turn = 0;

	return vsrv__lane_more(srv, &x, now, saturated, &turn);
}

static enum vsrv_lane_next more(void)
{
	return more_at(x.sh_t);
}

/* The slices a runner takes in a row after this one, each for `why`: the
 * length of its turn, less one (the share is not updated here: no slice
 * accounted). */
static unsigned in_a_row(enum vsrv_lane_next why)
{
	unsigned turn = 0, taken = 0;
	enum vsrv_lane_next n;

	while ((n = vsrv__lane_more(srv, &x, x.sh_t, saturated, &turn)) != VSRV_LANE_YIELD) {
		assert_int_equal(n, why);
		taken++;
	}
	return taken;
}

static void test_nothing_waiting_always_yields(void **state)
{
	(void)state;
	/* The runner had 1 slice in 10: far below its share, but nothing
	 * waits in the lane: light work comes first. */
	run_slices(START, 20, 50, 450);
	atomic_store(&srv->lane.waiting, 0);
	assert_int_equal(more(), VSRV_LANE_YIELD);
}

static void test_below_its_share_with_jobs_waiting_goes_on(void **state)
{
	(void)state;
	/* Light work took two thirds of the worker: 50 us slices, 100 us
	 * between. With a job waiting, the runner takes its next slice. */
	run_slices(START, 40, 50, 100);
	atomic_store(&srv->lane.waiting, 1);
	assert_int_equal(more(), VSRV_LANE_TURN);
}

static void test_at_its_share_yields(void **state)
{
	(void)state;
	/* Slices back to back (nothing else ran): its share is all of the
	 * worker, above 80 %: it yields, and light work that came runs. */
	int64_t t = run_slices(START, 400, 50, 0);
	atomic_store(&srv->lane.waiting, 3);
	assert_int_equal(more(), VSRV_LANE_YIELD);
	/* 50 us slices, 10 us between, long enough to forget the above:
	 * 83 %, still above 80 %. */
	run_slices(t, 400, 50, 10);
	assert_int_equal(more(), VSRV_LANE_YIELD);
	/* The share is the setting (live): at 90 % the runner goes on. */
	atomic_store(&srv->live.heavy_share, 90);
	assert_int_equal(more(), VSRV_LANE_TURN);
}

static void test_a_job_waiting_for_its_spread_yields(void **state)
{
	(void)state;
	/* As above (below its share, a job waiting), but another worker's
	 * runner is idle and the job has waited less than heavy_spread_us:
	 * it waits for its spread, not for want of runners, and the light
	 * work beside this runner comes first. */
	run_slices(START, 40, 50, 100);
	atomic_store(&srv->live.heavy_spread_us, 1000);
	atomic_store(&srv->lane.waiting, 1);
	atomic_store(&srv->lane.head_t, x.sh_t - 100 * US);
	atomic_store(&srv->lane.idle_n, 1);
	assert_int_equal(more(), VSRV_LANE_YIELD);
	/* No runner idle: the share rule again. */
	atomic_store(&srv->lane.idle_n, 0);
	assert_int_equal(more(), VSRV_LANE_TURN);
}

static void test_a_turn_ends_after_its_bound(void **state)
{
	(void)state;
	run_slices(START, 40, 50, 200);
	atomic_store(&srv->lane.waiting, 1);
	/* Only the bound ends the turn. */
	assert_int_equal(in_a_row(VSRV_LANE_TURN), VSRV_LANE_TURN_MAX - 1);
}

static void test_saturated_a_lone_job_takes_a_short_turn(void **state)
{
	(void)state;
	/* Nothing waits in the lane; light work took two thirds of the
	 * worker. While the runtime does not find its CPUs saturated (they
	 * have room), light work comes first after every slice. */
	run_slices(START, 40, 50, 100);
	atomic_store(&srv->lane.waiting, 0);
	assert_int_equal(more(), VSRV_LANE_YIELD);
	/* While they are, the runner goes on, VSRV_LANE_SATURATED_TURN
	 * slices in a row at most. */
	saturated = true;
	assert_int_equal(in_a_row(VSRV_LANE_RUN), VSRV_LANE_SATURATED_TURN - 1);
}

static void test_saturated_at_its_share_yields(void **state)
{
	(void)state;
	/* Slices back to back: above its share, saturated or not, a lone
	 * job yields to the light work beside it. */
	run_slices(START, 400, 50, 0);
	atomic_store(&srv->lane.waiting, 0);
	saturated = true;
	assert_int_equal(more(), VSRV_LANE_YIELD);
	/* Jobs waiting, saturated, below its share: the longer turn of the
	 * waiting rule, not the short one. */
	run_slices(x.sh_t + VSRV_LANE_TAU_NS, 40, 50, 100);
	atomic_store(&srv->lane.waiting, 1);
	assert_int_equal(in_a_row(VSRV_LANE_TURN), VSRV_LANE_TURN_MAX - 1);
}

static void test_an_old_share_is_forgotten(void **state)
{
	(void)state;
	/* Back to back for a while (share 100 %), then, after a pause longer
	 * than the decay (VSRV_LANE_TAU_NS), one slice in five: the runner is
	 * below its share again, whatever came before. */
	int64_t t = run_slices(START, 400, 50, 0);
	t += VSRV_LANE_TAU_NS;
	run_slices(t, 20, 50, 200);
	atomic_store(&srv->lane.waiting, 1);
	assert_int_equal(more(), VSRV_LANE_TURN);
}

static void test_behind_goes_on_whatever_its_share(void **state)
{
	(void)state;
	/* Slices back to back: above its share (as above), so it yields
	 * while the job at the lane's head, in at `in`, is young. */
	int64_t t = run_slices(START, 400, 50, 0);
	int64_t in = t - 2 * VB_NS_PER_MS;

	atomic_store(&srv->lane.waiting, 1);
	atomic_store(&srv->lane.head_t, in);
	atomic_store(&srv->live.heavy_wait_ms, 3);
	assert_int_equal(VSRV_LANE_YIELD, more_at(in + 3 * VB_NS_PER_MS - 1));
	/* Once it has waited heavy_wait_ms the lane is behind: the runner
	 * takes its next slice at once, up to the bound of a turn. */
	assert_int_equal(VSRV_LANE_TURN, more_at(in + 3 * VB_NS_PER_MS));
	/* 0: no such bound, the share alone decides. */
	atomic_store(&srv->live.heavy_wait_ms, 0);
	assert_int_equal(VSRV_LANE_YIELD, more_at(in + 3 * VB_NS_PER_MS));
	/* Nothing waiting: never. */
	atomic_store(&srv->live.heavy_wait_ms, 3);
	atomic_store(&srv->lane.waiting, 0);
	atomic_store(&srv->lane.head_t, 0);
	assert_int_equal(VSRV_LANE_YIELD, more_at(in + 3 * VB_NS_PER_MS));
}

/* The verdict the runner is handed, from a real runtime (two workers, the
 * gather rule on, its monitor's measurement forced to "saturated"): yes
 * while a sibling can take the light work queued behind a run, no with
 * stealing off, with one worker, with the gather rule off (live). */
static void test_saturated_needs_a_sibling_that_can_take_work(void **state)
{
	(void)state;
	struct vrt_config c;
	struct vrt *rt;
	int64_t t0;

	tcfg_rt(&c);
	c.workers = 2;
	c.gather = true;
	c.stall_warn_ms = 20; /* the monitor: a tick every 10 ms */
	/* relaxed: read by the monitor thread at its next tick. */
	atomic_store_explicit(&vrt__test_spreading, 1, memory_order_relaxed);
	assert_int_equal(vrt_new(&c, &rt), 0);
	srv->rt = rt;
	srv->nworkers = 2;
	t0 = vb_now_ns();
	while (!vrt_saturated(rt)) {
		assert_true(vb_now_ns() - t0 < 30000 * VB_NS_PER_MS);
		usleep(1000);
	}
	assert_true(vsrv__lane_saturated(srv));
	assert_int_equal(vrt_set_stealing(rt, false), 0);
	assert_false(vsrv__lane_saturated(srv));
	assert_int_equal(vrt_set_stealing(rt, true), 0);
	assert_true(vsrv__lane_saturated(srv));
	srv->nworkers = 1;
	assert_false(vsrv__lane_saturated(srv));
	srv->nworkers = 2;
	assert_int_equal(vrt_set_gather(rt, false), 0);
	assert_false(vsrv__lane_saturated(srv));
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	vrt_free(rt);
	atomic_store(&vrt__test_spreading, -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_nothing_waiting_always_yields, setup, teardown),
		cmocka_unit_test_setup_teardown(test_below_its_share_with_jobs_waiting_goes_on, setup, teardown),
		cmocka_unit_test_setup_teardown(test_at_its_share_yields, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_job_waiting_for_its_spread_yields, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_turn_ends_after_its_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_saturated_a_lone_job_takes_a_short_turn, setup, teardown),
		cmocka_unit_test_setup_teardown(test_saturated_at_its_share_yields, setup, teardown),
		cmocka_unit_test_setup_teardown(test_an_old_share_is_forgotten, setup, teardown),
		cmocka_unit_test_setup_teardown(test_behind_goes_on_whatever_its_share, setup, teardown),
		cmocka_unit_test_setup_teardown(test_saturated_needs_a_sibling_that_can_take_work, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
