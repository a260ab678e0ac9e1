/* SPDX-License-Identifier: MIT */
/*
 * tests/helpers/test_config.h: the runtime and I/O driver configurations
 * tests and benchmarks start from. rt, chan and io build and test without
 * the daemon layer, so they cannot read voltd.conf's schema
 * (src/voltd/cfg.c, the only place a default is written); these set the
 * same values, and tests/unit/test_cfg checks that they still do (every
 * [scheduler] and [io] key but workers, which is the caller's). Header
 * only: include it once per program.
 */
#ifndef VOLTD_TESTS_HELPERS_TEST_CONFIG_H
#define VOLTD_TESTS_HELPERS_TEST_CONFIG_H

#include "io/io.h"
#include "rt/rt.h"

#include <string.h>
#include <unistd.h>

/* The schema's [scheduler] values; workers = online CPUs (1..256). */
static inline void tcfg_rt(struct vrt_config *c)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	memset(c, 0, sizeof(*c));
	c->workers = n < 1 ? 1 : n > 256 ? 256 : (unsigned)n;
	c->stealing = true;
	c->global_interval_min = 8;
	c->global_interval_max = 255;
	c->global_batch_max = 64;
	c->lifo_slot = true;
	c->lifo_poll_cap = 3;
	c->budget = 128;
	c->park_timeout_ms = 10;
	c->io_poll_interval = 61;
}

/* The schema's [io] values. */
static inline void tcfg_io(struct vio_config *c)
{
	memset(c, 0, sizeof(*c));
	c->backend = VIO_BACKEND_AUTO;
	c->ring_entries = 4096;
	c->recv_buffer_size = 16384;
	c->recv_buffers = 256;
	c->recv_multishot = true;
	c->accept_multishot = true;
	c->accept_pause_ms = 100;
}

#endif
