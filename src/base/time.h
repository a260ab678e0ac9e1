/* SPDX-License-Identifier: MIT */
/*
 * base/time.h: monotonic clock in nanoseconds. Thread-safe, no state.
 */
#ifndef VOLTD_BASE_TIME_H
#define VOLTD_BASE_TIME_H

#include <stdint.h>
#include <time.h>

static inline int64_t vb_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#define VB_NS_PER_MS 1000000LL
#define VB_NS_PER_US 1000LL

#endif
