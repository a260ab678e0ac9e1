/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_io_features.c: backend=auto on a kernel that lacks an
 * io_uring feature the backend relies on (simulated with the test hook
 * vio__uring_hide_features, which hides the bit from the probe and from
 * liburing): the driver must choose libev and say why, backend=uring must
 * fail, and a runtime whose workers park with timeouts must work. Without
 * the probe's check, hiding IORING_FEAT_EXT_ARG makes liburing queue its own
 * timeout request at the first timed park, whose completion reached
 * cqe_dispatch and aborted (issue 13, defect 8).
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include <linux/io_uring.h>
#include <unistd.h>

#include "tests/helpers/io_harness.h"
#include "tests/helpers/test_config.h"
#include "io/internal.h"
#include "base/time.h"

#define SLEEPERS 8
#define ROUNDS 5

struct sleeper {
	struct ioh_task base;
	struct vio_timer tm;
	int round;
	int64_t until;
	_Atomic int *done;
};

static enum vrt_poll sleeper_poll(struct ioh_task *self)
{
	struct sleeper *s = (struct sleeper *)self;

	while (s->round < ROUNDS) {
		if (!s->until)
			s->until = vb_now_ns() + 3 * VB_NS_PER_MS;
		if (vio_sleep_until(&s->tm, s->until) != VRT_READY)
			return VRT_PENDING;
		s->until = 0;
		s->round++;
	}
	/* relaxed: read after the runtime's drain shutdown joined the workers. */
	atomic_fetch_add_explicit(s->done, 1, memory_order_relaxed);
	return VRT_READY;
}

static bool uring_usable(void)
{
	struct vio_config c;
	struct vio *io;

	vio__uring_hide_features = 0;
	tcfg_io(&c);
	c.backend = VIO_BACKEND_URING;
	if (vio_new(&c, 1, &io) < 0)
		return false;
	vio_free(io);
	return true;
}

static void check_hidden(uint32_t feature, const char *name)
{
	struct vio_config c;
	struct vio *io;
	struct ioh h;
	_Atomic int done = 0;
	char be[256];

	if (!uring_usable())
		skip();
	vio__uring_hide_features = feature;
	tcfg_io(&c);
	c.backend = VIO_BACKEND_AUTO;
	ioh_start(&h, 2, &c, NULL);
	for (int i = 0; i < SLEEPERS; i++) {
		struct sleeper *s = ioh_task_new(sizeof(*s), sleeper_poll, NULL);

		vio_timer_init(&s->tm);
		s->done = &done;
		ioh_spawn(&h, &s->base, false);
	}
	for (int64_t end = vb_now_ns() + 10000 * VB_NS_PER_MS;
	     atomic_load(&done) < SLEEPERS && vb_now_ns() < end;)
		usleep(1000);
	assert_int_equal(atomic_load(&done), SLEEPERS);
	snprintf(be, sizeof(be), "%s: %s", vio_backend_name(h.io), vio_backend_reason(h.io));
	ioh_stop(&h);
	assert_true(strncmp(be, "libev: ", 7) == 0);
	assert_non_null(strstr(be, name));
	c.backend = VIO_BACKEND_URING;
	assert_int_equal(vio_new(&c, 1, &io), -EOPNOTSUPP);
	vio__uring_hide_features = 0;
}

static void test_no_ext_arg(void **state)
{
	(void)state;
	check_hidden(IORING_FEAT_EXT_ARG, "EXT_ARG");
}

static void test_no_nodrop(void **state)
{
	(void)state;
	check_hidden(IORING_FEAT_NODROP, "NODROP");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_ext_arg),
		cmocka_unit_test(test_no_nodrop),
	};

	ioh_watchdog(60, "test_io_features");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
