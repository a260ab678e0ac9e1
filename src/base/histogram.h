/* SPDX-License-Identifier: MIT */
/*
 * base/histogram.h: log-linear histogram of uint64 values (latencies in
 * nanoseconds by convention). Values below 32 have a bucket each; above,
 * every power of two is split into 16 equal sub-buckets, so a bucket is at
 * most 1/16 of its values wide and a quantile is within 6.25 % of the truth.
 * 976 buckets cover the whole uint64 range: recording never clamps or fails.
 *
 * Threading: vb_hist_record may run on any number of threads at once (relaxed
 * atomic read-modify-writes: lock-free). vb_hist_record_owner is the cheaper
 * single-writer form: only one thread may record into that histogram, any
 * thread may read it. vb_hist_snapshot may run at any time, concurrently with
 * writers: it copies each counter at some recent value (not one instant's cut)
 * and derives its count from the buckets it copied, so its quantiles are
 * consistent with themselves. Snapshots are plain memory owned by the caller.
 */
#ifndef VOLTD_BASE_HISTOGRAM_H
#define VOLTD_BASE_HISTOGRAM_H

#include <stdatomic.h>
#include <stdint.h>

#define VB_HIST_SUB_BITS 4
#define VB_HIST_SUB (1u << VB_HIST_SUB_BITS)
#define VB_HIST_BUCKETS ((64 - VB_HIST_SUB_BITS + 1) * VB_HIST_SUB)

/* Exposed for embedding (per-kind, per-worker arrays); fields private. */
struct vb_hist {
	_Atomic uint64_t buckets[VB_HIST_BUCKETS];
	_Atomic uint64_t sum; /* wraps after 584 years of nanoseconds */
	_Atomic uint64_t max;
};

/* A copy a reader owns; fields public, read-only by convention. */
struct vb_hist_snap {
	uint64_t buckets[VB_HIST_BUCKETS];
	uint64_t count; /* sum of buckets[] */
	uint64_t sum;
	uint64_t max;
};

/* Zero a histogram. Not concurrent with writers. */
void vb_hist_init(struct vb_hist *h);

/* Record one value: any thread (atomic). */
void vb_hist_record(struct vb_hist *h, uint64_t v);
/* Record one value: only the histogram's single writer thread. */
void vb_hist_record_owner(struct vb_hist *h, uint64_t v);

/* Copy h into *out (any thread, concurrent with writers). */
void vb_hist_snapshot(const struct vb_hist *h, struct vb_hist_snap *out);
/* acc += a copy of h (any thread, as vb_hist_snapshot): sums several
 * histograms (per worker) into one snapshot without a temporary. */
void vb_hist_snapshot_add(const struct vb_hist *h, struct vb_hist_snap *acc);
/* dst += src (e.g. summing per-worker histograms). */
void vb_hist_snap_merge(struct vb_hist_snap *dst, const struct vb_hist_snap *src);

/* The value at quantile q (0 <= q <= 1; 0.5, 0.9, 0.99, 0.999): the upper
 * edge of the bucket holding the ceil(q * count)-th smallest value, capped at
 * the largest value recorded. 0 when the snapshot is empty. */
uint64_t vb_hist_snap_quantile(const struct vb_hist_snap *s, double q);
/* Mean value (0 when empty). */
uint64_t vb_hist_snap_mean(const struct vb_hist_snap *s);

/* Bucket arithmetic, exposed for tests and renderers (Prometheus buckets). */
unsigned vb_hist_bucket_of(uint64_t v);
uint64_t vb_hist_bucket_low(unsigned idx);  /* smallest value in bucket idx */
uint64_t vb_hist_bucket_high(unsigned idx); /* largest value in bucket idx */

#endif
