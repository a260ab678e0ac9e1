/* SPDX-License-Identifier: MIT */
/*
 * base/histogram.c: see histogram.h.
 *
 * Ordering: every shared variable (buckets[], sum, max) is a statistics
 * counter. Writers: any recording thread (vb_hist_record: atomic RMW) or the
 * single owner (vb_hist_record_owner: load + store). Readers: snapshot, any
 * thread. No data is published through these counters and no reader acts on
 * one counter's value to read another, so there is no happens-before edge to
 * establish: every access is relaxed. The cost is that a snapshot taken
 * during recording may see a value in `sum` whose bucket it has not seen yet
 * (or the reverse); it derives `count` from the buckets it copied so its
 * quantiles stay self-consistent.
 */
#include "base/histogram.h"

#include <string.h>

unsigned vb_hist_bucket_of(uint64_t v)
{
	if (v < 2 * VB_HIST_SUB)
		return (unsigned)v;
	unsigned msb = 63u - (unsigned)__builtin_clzll(v);
	unsigned shift = msb - VB_HIST_SUB_BITS;
	/* (v >> shift) is in [SUB, 2 SUB): its low bits pick the sub-bucket. */
	return (shift + 1) * VB_HIST_SUB + (unsigned)(v >> shift) - VB_HIST_SUB;
}

uint64_t vb_hist_bucket_low(unsigned idx)
{
	if (idx < 2 * VB_HIST_SUB)
		return idx;
	unsigned shift = idx / VB_HIST_SUB - 1;
	uint64_t sub = idx % VB_HIST_SUB;
	return (VB_HIST_SUB + sub) << shift;
}

uint64_t vb_hist_bucket_high(unsigned idx)
{
	if (idx < 2 * VB_HIST_SUB)
		return idx;
	if (idx == VB_HIST_BUCKETS - 1)
		return UINT64_MAX;
	unsigned shift = idx / VB_HIST_SUB - 1;
	return vb_hist_bucket_low(idx) + (((uint64_t)1 << shift) - 1);
}

void vb_hist_init(struct vb_hist *h)
{
	for (unsigned i = 0; i < VB_HIST_BUCKETS; i++)
		atomic_init(&h->buckets[i], 0);
	atomic_init(&h->sum, 0);
	atomic_init(&h->max, 0);
}

void vb_hist_record(struct vb_hist *h, uint64_t v)
{
	/* Relaxed: statistics only (see Ordering). */
	atomic_fetch_add_explicit(&h->buckets[vb_hist_bucket_of(v)], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum, v, memory_order_relaxed);
	/* Relaxed CAS max: lock-free; a failed CAS means another recorder raised
	 * max (or a spurious failure), and the loop ends once max >= v. */
	uint64_t cur = atomic_load_explicit(&h->max, memory_order_relaxed);
	while (v > cur &&
	       !atomic_compare_exchange_weak_explicit(&h->max, &cur, v, memory_order_relaxed,
						      memory_order_relaxed))
		;
}

void vb_hist_record_owner(struct vb_hist *h, uint64_t v)
{
	/* Single writer: load + store cannot lose an update; relaxed because
	 * readers only sample statistics (see Ordering). */
	_Atomic uint64_t *b = &h->buckets[vb_hist_bucket_of(v)];
	atomic_store_explicit(b, atomic_load_explicit(b, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	atomic_store_explicit(&h->sum, atomic_load_explicit(&h->sum, memory_order_relaxed) + v,
			      memory_order_relaxed);
	if (v > atomic_load_explicit(&h->max, memory_order_relaxed))
		atomic_store_explicit(&h->max, v, memory_order_relaxed);
}

void vb_hist_snapshot(const struct vb_hist *h, struct vb_hist_snap *out)
{
	uint64_t count = 0;
	/* Relaxed loads: a sample of statistics counters (see Ordering). The
	 * casts drop const because clang < 15 rejects atomic loads through a
	 * const pointer; nothing is written. */
	for (unsigned i = 0; i < VB_HIST_BUCKETS; i++) {
		uint64_t c = atomic_load_explicit((_Atomic uint64_t *)&h->buckets[i],
						  memory_order_relaxed);
		out->buckets[i] = c;
		count += c;
	}
	out->count = count;
	out->sum = atomic_load_explicit((_Atomic uint64_t *)&h->sum, memory_order_relaxed);
	out->max = atomic_load_explicit((_Atomic uint64_t *)&h->max, memory_order_relaxed);
}

void vb_hist_snapshot_add(const struct vb_hist *h, struct vb_hist_snap *acc)
{
	uint64_t max;

	/* Relaxed loads, const dropped: as in vb_hist_snapshot. */
	for (unsigned i = 0; i < VB_HIST_BUCKETS; i++) {
		uint64_t c = atomic_load_explicit((_Atomic uint64_t *)&h->buckets[i],
						  memory_order_relaxed);
		acc->buckets[i] += c;
		acc->count += c;
	}
	acc->sum += atomic_load_explicit((_Atomic uint64_t *)&h->sum, memory_order_relaxed);
	max = atomic_load_explicit((_Atomic uint64_t *)&h->max, memory_order_relaxed);
	if (max > acc->max)
		acc->max = max;
}

void vb_hist_snap_merge(struct vb_hist_snap *dst, const struct vb_hist_snap *src)
{
	for (unsigned i = 0; i < VB_HIST_BUCKETS; i++)
		dst->buckets[i] += src->buckets[i];
	dst->count += src->count;
	dst->sum += src->sum;
	if (src->max > dst->max)
		dst->max = src->max;
}

uint64_t vb_hist_snap_quantile(const struct vb_hist_snap *s, double q)
{
	if (s->count == 0)
		return 0;
	if (q < 0)
		q = 0;
	if (q > 1)
		q = 1;
	/* rank = ceil(q * count), at least 1; computed in double, which is exact
	 * for counts below 2^53. */
	double r = q * (double)s->count;
	uint64_t rank = (uint64_t)r;
	if ((double)rank < r)
		rank++;
	if (rank == 0)
		rank = 1;
	uint64_t seen = 0;
	for (unsigned i = 0; i < VB_HIST_BUCKETS; i++) {
		seen += s->buckets[i];
		if (seen >= rank) {
			uint64_t hi = vb_hist_bucket_high(i);
			/* max may lag the buckets in a concurrent snapshot: only
			 * cap when it is inside this bucket or above it. */
			if (s->max >= vb_hist_bucket_low(i) && s->max < hi)
				hi = s->max;
			return hi;
		}
	}
	return s->max;
}

uint64_t vb_hist_snap_mean(const struct vb_hist_snap *s)
{
	return s->count ? s->sum / s->count : 0;
}
