/* SPDX-License-Identifier: MIT */
/*
 * server/admit.h: admission by measured delay, stages.on_full = codel
 * (admit.c). The exec tasks report how long each job waited in `jobs`
 * (vsrv__admit_sample); the connections ask, before they queue a job,
 * whether it should be refused with a 503 (vsrv__admit_refuses). Private
 * to src/server; both calls are made only in codel mode.
 *
 * Threading: any worker, any time between vsrv_new and vsrv_free; the
 * state is a handful of relaxed atomics (see admit.c's Ordering block).
 */
#ifndef VOLTD_SERVER_ADMIT_H
#define VOLTD_SERVER_ADMIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/compiler.h"

struct vch;
struct vsrv;
struct vsrv_stats;

/* Embedded in struct vsrv (zeroed by vsrv_new: the first job taken closes
 * an empty interval, not overloaded); private to admit.c. One for `jobs`,
 * one for the blocking pool's queue. */
struct vsrv_admit {
	/* Written by exec tasks as they take jobs (codel only). */
	vb_cacheline_aligned _Atomic int64_t interval_end; /* the current interval ends (ns) */
	_Atomic int64_t min_wait;     /* least wait seen in the current interval (ns) */
	_Atomic int64_t standing;     /* least wait of the last interval that ended (ns) */
	_Atomic bool overloaded;      /* see admit.c */
	_Atomic uint64_t shed_at_close; /* delay_shed when the last interval closed */
	/* Read by every job's dispatch in codel mode, written only when it
	 * changes: a line of its own. */
	vb_cacheline_aligned _Atomic bool refusing;
};

/* codel: should the job a connection is about to queue be refused (503)?
 * Only while the delay stands above its target and `jobs` is not empty. */
bool vsrv__admit_refuses(struct vsrv *srv);
/* codel: an exec task took a job that waited waited_ns in `jobs`; now is
 * the exec's clock (vb_now_ns). True: the job waited too long in an
 * overloaded queue; answer it 503 without running it. */
bool vsrv__admit_sample(struct vsrv *srv, int64_t waited_ns, int64_t now);
/* The same for another queue with its own state `a` (the blocking pool's:
 * admission to queue ch, samples from the threads that take from it). */
bool vsrv__admit_refuses_on(struct vsrv *srv, struct vsrv_admit *a, struct vch *ch);
bool vsrv__admit_sample_on(struct vsrv *srv, struct vsrv_admit *a, int64_t waited_ns, int64_t now);
/* The gauges queue_delay and delay_overload into a snapshot. */
void vsrv__admit_stats(struct vsrv *srv, struct vsrv_stats *out);

#endif
