/* SPDX-License-Identifier: MIT */
/*
 * base/lineaudit.h: the shared-line audit. In a build configured with
 * --enable-line-audit (VOLTD_LINE_AUDIT), every write to a cache line that
 * several workers write (a channel's head or tail, a waiter queue, the
 * server's connection count, the idle word of the runtime, ...) counts one
 * at its site; the sums, divided by the requests served, show how many such
 * writes a request costs, a figure that does not depend on how many cores
 * run it. Without the option VB_LINE_WRITE is nothing and the sums read 0.
 *
 * Threading: each thread counts into a block of its own (allocated on its
 * first count, kept until exit so a finished thread's counts stay in the
 * sums), with relaxed load + store, not RMW: one writer per block. Any
 * thread may sum the blocks at any time (relaxed loads; a snapshot).
 *
 * Adding a site: one line in VB_LINE_SITES (its name is the label value
 * `site` of the server's line_writes family), VB_LINE_WRITE(name) at the
 * write. The chan sites of a channel set's member count only the writes
 * made off the member's own worker (chan/internal.h, VCH_LINE_WRITE): a
 * worker's writes to its own member stay in its core's cache. Sites whose name ends in _read count reads of another side's hot
 * lines (they take the line shared, so the next write there pays too).
 */
#ifndef VOLTD_BASE_LINEAUDIT_H
#define VOLTD_BASE_LINEAUDIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define VB_LINE_SITES(X) \
	X(chan_tail)        /* a channel's tail word: a send's claim CAS (also lost), close */ \
	X(chan_head)        /* a channel's head word: a receive's claim CAS (also lost) */ \
	X(chan_slot)        /* a channel slot: the value and stamp a send / receive writes */ \
	X(chan_waiters)     /* a side's has_waiters word: register, claim, withdraw */ \
	X(chan_waitq_lock)  /* a side's waiter list, under its mutex */ \
	X(chan_wake)        /* a waiter's state written by the waker of the other side */ \
	X(chan_stats)       /* a side's statistics line: an empty / full event, a wait, a hint */ \
	X(chan_help)        /* a channel set's help mask: a member asks for help, or is found empty */ \
	X(srv_inflight)     /* srv->inflight, the body budget */ \
	X(srv_conns)        /* srv->conns_open / conns_alive: an accept, a close, a drop */ \
	X(srv_paused)       /* srv->paused_n and an acceptor's paused flag */ \
	X(srv_registry)     /* the connection registry, under reg_mu */ \
	X(srv_pool)         /* the connection pool, under pool_mu */ \
	X(srv_ready_read)   /* /readyz: the jobs channel's head and tail read (vch_len) */ \
	X(rt_idle)          /* rt->idle, the searching / parked word */ \
	X(rt_steal)         /* a victim's queue head and stolen_from, written by a stealer */ \
	X(rt_inject)        /* the injection queue, under its mutex (push, pop) */ \
	X(io_bufret)        /* a provided buffer pushed back to its owner by another worker */ \
	X(io_mailbox)       /* an operation posted to another worker's mailbox */

enum vb_line_site {
#define VB_LINE_ENUM(name) VB_LINE_##name,
	VB_LINE_SITES(VB_LINE_ENUM)
#undef VB_LINE_ENUM
	VB_LINE_N
};

/* The sites' names, in enum order (the `site` label values). */
extern const char *const vb_line_site_names[VB_LINE_N];

/* True in a --enable-line-audit build. */
bool vb_line_audit_enabled(void);

/* out[i]: writes counted at site i by every thread so far (0 without the
 * audit). */
void vb_line_audit_sum(uint64_t out[VB_LINE_N]);

#ifdef VOLTD_LINE_AUDIT
struct vb_line_block;
extern __thread struct vb_line_block *vb__line_mine;
void vb__line_count(struct vb_line_block *b, enum vb_line_site site);
#define VB_LINE_WRITE(name) vb__line_count(vb__line_mine, VB_LINE_##name)
#else
#define VB_LINE_WRITE(name) ((void)0)
#endif

#endif
