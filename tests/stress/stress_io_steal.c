/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/stress_io_steal.c: work stealing while connections are
 * active. Echo connection tasks burn CPU on every message, so the worker
 * whose completions wake them falls behind and the others steal them; a
 * stolen task's next operation goes to its new worker's ring (or loop).
 * Checks: every echoed byte is right and every connection is closed on both
 * sides. Whether tasks were stolen (runtime stats) and connection
 * operations moved between workers (driver stats) depends on how the
 * machine schedules the threads, so the counts are reported ("bound:"
 * lines for bench/bounds), not asserted; the run is repeated, up to 5
 * times, until both were seen.
 * Sizes scale with VOLTD_STRESS_SCALE; the seed is printed
 * (VOLTD_TEST_SEED reproduces a run's payloads). Backend: uring, libev or
 * auto from VOLTD_IO_BACKEND (src/io/local.mk runs it once per backend).
 * Exit 0 / 1 / 77.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/io_harness.h"
#include "base/time.h"

int main(void)
{
	struct ioh h;
	struct ioh_echo e;
	struct ioh_client_opts o;
	struct ioh_client_result res;
	struct vrt_worker_stats rws[3];
	struct vio_worker_stats vws[3];
	unsigned scale = ioh_scale(), tsan = ioh_under_tsan();
	const char *s = getenv("VOLTD_TEST_SEED");
	uint64_t stolen = 0, migrations = 0;
	int64_t t0;
	int ok = 1;

	ioh_watchdog(tsan ? 600 : 120, "stress_io_steal");
	ioh_start(&h, 3, NULL, NULL);
	memset(&e, 0, sizeof(e));
	e.spin_ns = 30000; /* 30 us of work per message */
	e.use_sendv = true;
	if (ioh_echo_start(&h, &e) < 0) {
		fprintf(stderr, "echo server: cannot listen\n");
		return 99;
	}
	memset(&o, 0, sizeof(o));
	o.port = e.port;
	o.conns = (tsan ? 16 : 64) * scale;
	o.rounds = 4;
	o.max_payload = 256u << 10;
	o.big_permille = 10;
	o.reset_permille = 20;
	o.seed = s ? strtoull(s, NULL, 0) : (uint64_t)vb_now_ns();
	printf("stress_io_steal: seed %lu, 3 workers, 3 client threads x %u connections x %u rounds\n",
	       (unsigned long)o.seed, o.conns, o.rounds);
	/* Movement is statistical: a fast run may steal only tasks that do no
	 * I/O afterwards (seen with libev, whose operations mostly complete at
	 * once). Run again, up to 5 times, until both kinds were seen; the
	 * counters are cumulative. */
	for (int attempt = 1; attempt <= 5 && ok && (stolen == 0 || migrations == 0); attempt++) {
		o.seed += (uint64_t)attempt - 1;
		t0 = vb_now_ns();
		ioh_clients(3, &o, &res);
		printf("  attempt %d: %lu connections in %.2f s, %lu bytes echoed, %lu resets\n", attempt,
		       (unsigned long)res.conns_done, (double)(vb_now_ns() - t0) / 1e9,
		       (unsigned long)res.bytes_echoed, (unsigned long)res.resets);
		if (res.mismatches || res.errors || res.conns_done != 3ull * o.conns * o.rounds) {
			printf("FAIL: %lu mismatches, %lu errors (%s)\n", (unsigned long)res.mismatches,
			       (unsigned long)res.errors, res.first_error);
			ok = 0;
		}
		vrt_stats_snapshot(h.rt, NULL, rws, 3);
		vio_stats_snapshot(h.io, vws, 3);
		stolen = migrations = 0;
		for (int i = 0; i < 3; i++) {
			printf("  worker %d: polls %lu, stolen %lu, steal ops %lu; io completed %lu, "
			       "migrations %lu\n", i, (unsigned long)rws[i].polls,
			       (unsigned long)rws[i].tasks_stolen, (unsigned long)rws[i].steal_ops,
			       (unsigned long)vws[i].completed, (unsigned long)vws[i].migrations);
			stolen += rws[i].tasks_stolen;
			migrations += vws[i].migrations;
		}
	}
	if (ioh_echo_stop(&e, 10000) < 0) {
		printf("FAIL: %ld connections still active\n", (long)e.active);
		ok = 0;
	}
	if (e.errors || e.closed != e.accepted) {
		printf("FAIL: server errors %lu, accepted %lu closed %lu\n",
		       (unsigned long)e.errors, (unsigned long)e.accepted, (unsigned long)e.closed);
		ok = 0;
	}
	printf("bound: stress_io_steal tasks_stolen %lu >= 1\n", (unsigned long)stolen);
	printf("bound: stress_io_steal migrations %lu >= 1\n", (unsigned long)migrations);
	ioh_stop(&h);
	printf("%s\n", ok ? "PASS" : "FAIL");
	return ok ? 0 : 1;
}
