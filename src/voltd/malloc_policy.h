/* SPDX-License-Identifier: MIT */
/*
 * voltd/malloc_policy.h: the process's malloc policy, which belongs to the daemon
 * (the layers below only allocate): a fixed mmap threshold set before any
 * thread starts, and a trim of malloc's free pages from the main loop's
 * tick once the server has freed something.
 *
 * Threading: vd_mem_policy before any thread; vd_mem_trim on the main
 * thread only (the struct is its own).
 */
#ifndef VOLTD_VOLTD_MALLOC_POLICY_H
#define VOLTD_VOLTD_MALLOC_POLICY_H

#include <stdint.h>

struct vsrv;

struct vd_trim {
	uint64_t mark;    /* vsrv_freed_mark at the last look */
	int64_t next_ns;  /* the next look, CLOCK_MONOTONIC */
};

/* Bodies of 64 KiB and more are mmap'd (so freeing one returns it to the
 * system), and the arenas trim above 1 MiB of free top. */
void vd_mem_policy(void);
/* Called every tick: at most once a second, malloc_trim(0) when the server
 * freed something since the last look. */
void vd_mem_trim(struct vd_trim *t, struct vsrv *srv, int64_t now_ns);

#endif
