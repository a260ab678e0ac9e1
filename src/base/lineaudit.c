/* SPDX-License-Identifier: MIT */
/*
 * base/lineaudit.c: the per-thread blocks of the shared-line audit and their
 * sum (see lineaudit.h).
 *
 * Ordering: a block's counters have one writer (its thread) and any number
 * of readers (vb_line_audit_sum): relaxed, they are statistics and publish
 * nothing. The list of blocks grows under `blocks_mu` (a new block is
 * linked with every counter already 0), and the sum walks it under the same
 * mutex; blocks are never freed.
 */
#include "base/lineaudit.h"

#include <pthread.h>
#include <stdlib.h>

const char *const vb_line_site_names[VB_LINE_N] = {
#define VB_LINE_NAME(name) #name,
	VB_LINE_SITES(VB_LINE_NAME)
#undef VB_LINE_NAME
};

bool vb_line_audit_enabled(void)
{
#ifdef VOLTD_LINE_AUDIT
	return true;
#else
	return false;
#endif
}

#ifdef VOLTD_LINE_AUDIT
struct vb_line_block {
	_Atomic uint64_t n[VB_LINE_N];
	struct vb_line_block *next;   /* under blocks_mu */
};

static pthread_mutex_t blocks_mu = PTHREAD_MUTEX_INITIALIZER;
static struct vb_line_block *blocks;
__thread struct vb_line_block *vb__line_mine;

void vb__line_count(struct vb_line_block *b, enum vb_line_site site)
{
	if (__builtin_expect(!b, 0)) {
		b = calloc(1, sizeof(*b));
		if (!b)
			return;   /* an audit build without memory: the count is lost */
		pthread_mutex_lock(&blocks_mu);
		b->next = blocks;
		blocks = b;
		pthread_mutex_unlock(&blocks_mu);
		vb__line_mine = b;
	}
	/* Relaxed, load + store: this thread is the block's only writer. */
	atomic_store_explicit(&b->n[site], atomic_load_explicit(&b->n[site], memory_order_relaxed) + 1,
			      memory_order_relaxed);
}
#endif

void vb_line_audit_sum(uint64_t out[VB_LINE_N])
{
	for (unsigned i = 0; i < VB_LINE_N; i++)
		out[i] = 0;
#ifdef VOLTD_LINE_AUDIT
	pthread_mutex_lock(&blocks_mu);
	for (struct vb_line_block *b = blocks; b; b = b->next)
		for (unsigned i = 0; i < VB_LINE_N; i++)
			/* Relaxed: a snapshot of statistics. */
			out[i] += atomic_load_explicit(&b->n[i], memory_order_relaxed);
	pthread_mutex_unlock(&blocks_mu);
#endif
}
