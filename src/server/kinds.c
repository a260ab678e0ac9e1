/* SPDX-License-Identifier: MIT */
/*
 * server/kinds.c: what the server counts per job kind beyond its latency:
 * the jobs made, every callback of the kind that ran (start, each step)
 * timed by the thread that ran it, the time inside them and the longest,
 * the overruns (a callback longer than [modules] overrun_factor x [jobs]
 * slice_us, for kinds that are not blocking), and the optional quarantine:
 * quarantine_overruns overruns of one kind within quarantine_window_ms
 * make the kind's requests answered 503 with Retry-After (counted) until
 * `voltctl clear quarantine` or a reload. A callback cannot be stopped: the
 * quarantine protects the other kinds from the next ones, and the overrun
 * that tripped it is logged with the kind, its module and version. Also
 * the module's own counters of each kind (voltd->count(), kept per thread
 * by the jobs layer) into the snapshot.
 *
 * Threading: vsrv__kind_slice on the thread that ran the callback (a
 * worker, or a blocking pool thread); the snapshot, clears and the
 * quarantine's release on any thread.
 *
 * Ordering: relaxed everywhere. The step counters are statistics, each
 * summed on its own (a snapshot may see a slice counted before its time);
 * the longest callback is kept with a CAS on the block's max (a clear
 * racing with a step may keep that step's time); the quarantine is a
 * switch and a window of counts that publish no memory: a request that
 * reads the switch a moment late is served (or refused) as of a moment
 * earlier, and two overruns racing over a window's end may count one in
 * the wrong window.
 */
#include "config.h"
#include "server/internal.h"
#include "base/time.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static_assert(VSRV_KIND_COUNTERS == VOLTD_COUNTERS_MAX, "the kind's counters in a snapshot");

/* Overruns are logged at most this often (every kind together). */
static struct vb_ratelimit overrun_rl = VB_RATELIMIT_INIT(10000, 3);

static size_t round_line(size_t n)
{
	return (n + VB_CACHELINE - 1) / VB_CACHELINE * VB_CACHELINE;
}

int vsrv__kinds_init(struct vsrv *srv)
{
	size_t nk = vjob_kind_count() ? vjob_kind_count() : 1;
	size_t steps = round_line(nk * sizeof(struct vsrv_kstep));

	for (unsigned w = 0; w <= srv->nworkers; w++) {
		srv->ws[w].steps = aligned_alloc(VB_CACHELINE, steps);
		if (!srv->ws[w].steps)
			return -ENOMEM;
		memset(srv->ws[w].steps, 0, steps);
	}
	srv->quar = aligned_alloc(VB_CACHELINE, nk * sizeof(*srv->quar));
	if (!srv->quar)
		return -ENOMEM;
	memset(srv->quar, 0, nk * sizeof(*srv->quar));
	return 0;
}

void vsrv__kinds_free(struct vsrv *srv)
{
	for (unsigned w = 0; srv->ws && w <= srv->nworkers; w++)
		free(srv->ws[w].steps);
	free(srv->quar);
}

static void quarantine_count(struct vsrv *srv, const struct vjob_kind *k, unsigned limit)
{
	struct vsrv_quarantine *q = &srv->quar[k->index];
	int64_t now = vb_now_ns();
	int64_t window = (int64_t)vsrv__live(srv, quarantine_window_ms) * VB_NS_PER_MS;
	/* Relaxed throughout: see the Ordering block. */
	int64_t start = atomic_load_explicit(&q->window_start, memory_order_relaxed);

	if ((start == 0 || now - start >= window) &&
	    atomic_compare_exchange_strong_explicit(&q->window_start, &start, now, memory_order_relaxed,
						    memory_order_relaxed))
		atomic_store_explicit(&q->overruns, 0, memory_order_relaxed);
	uint32_t n = atomic_fetch_add_explicit(&q->overruns, 1, memory_order_relaxed) + 1;
	if (n >= limit && !atomic_exchange_explicit(&q->on, true, memory_order_relaxed))
		vb_warn("jobs: kind %s quarantined: %u steps over overrun_factor x slice_us within %u ms; "
			"its requests are answered 503 until `voltctl clear quarantine` or a reload",
			k->label, n, vsrv__live(srv, quarantine_window_ms));
}

void vsrv__kind_slice(struct vsrv *srv, const struct vjob_kind *k, int64_t ns)
{
	struct vsrv_kstep *st = &vsrv__ws(srv)->steps[k->index];
	uint64_t v = ns > 0 ? (uint64_t)ns : 0;

	/* Relaxed: statistics (see the Ordering block). */
	atomic_fetch_add_explicit(&st->slices, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&st->slice_ns, v, memory_order_relaxed);
	uint64_t max = atomic_load_explicit(&st->max_ns, memory_order_relaxed);
	while (v > max && !atomic_compare_exchange_weak_explicit(&st->max_ns, &max, v, memory_order_relaxed,
								 memory_order_relaxed))
		;
	/* A blocking kind's steps may take as long as they need: that is
	 * what its threads are for. */
	if (k->blocking)
		return;
	uint64_t limit = (uint64_t)vsrv__live(srv, overrun_factor) * srv->jcfg.slice_us * 1000u;
	if (!limit || v <= limit)
		return;
	atomic_fetch_add_explicit(&st->overruns, 1, memory_order_relaxed);
	vb_log_rl(&overrun_rl, LOG_WARNING,
		  "jobs: a step of kind %s ran %" PRIu64 " us, over overrun_factor x slice_us (%" PRIu64 " us)",
		  k->label, v / 1000, limit / 1000);
	unsigned q = vsrv__live(srv, quarantine_overruns);
	if (q)
		quarantine_count(srv, k, q);
}

void vsrv_kinds_clear_max(struct vsrv *srv)
{
	for (unsigned w = 0; w <= srv->nworkers; w++)
		for (size_t k = 0; k < vjob_kind_count(); k++)
			/* Relaxed: see the Ordering block. */
			atomic_store_explicit(&srv->ws[w].steps[k].max_ns, 0, memory_order_relaxed);
}

unsigned vsrv_quarantine_clear(struct vsrv *srv)
{
	unsigned n = 0;

	for (size_t k = 0; k < vjob_kind_count(); k++) {
		struct vsrv_quarantine *q = &srv->quar[k];

		/* Relaxed: see the Ordering block. */
		atomic_store_explicit(&q->overruns, 0, memory_order_relaxed);
		atomic_store_explicit(&q->window_start, 0, memory_order_relaxed);
		if (atomic_exchange_explicit(&q->on, false, memory_order_relaxed)) {
			vb_notice("jobs: kind %s serves again (quarantine cleared)", vjob_kind_at(k)->label);
			n++;
		}
	}
	return n;
}

const struct vjob_kind *vsrv_kind_job(const struct vsrv *srv, unsigned k)
{
	return k >= VSRV_ROUTES && k < srv->kind_other ? vjob_kind_at(k - VSRV_ROUTES) : NULL;
}

void vsrv__kinds_snapshot(struct vsrv *srv, struct vsrv_stats *out)
{
	for (unsigned r = 0; r < out->n_kinds; r++) {
		struct vsrv_kind_stats *ks = &out->kinds[r];
		const struct vjob_kind *k = vsrv_kind_job(srv, r);

		ks->jobs = ks->slices = ks->slice_ns = ks->slice_overruns = ks->slice_max_ns = 0;
		ks->quarantined = ks->quarantine_refused = 0;
		ks->n_counters = 0;
		ks->module = k ? vjob_mod_name(k->mod) : "voltd";
		if (!k)
			continue;
		for (unsigned w = 0; w <= srv->nworkers; w++) {
			const struct vsrv_kstep *st = &srv->ws[w].steps[k->index];
			/* Relaxed: statistics. */
			uint64_t max = atomic_load_explicit(&st->max_ns, memory_order_relaxed);

			ks->jobs += atomic_load_explicit(&st->jobs, memory_order_relaxed);
			ks->slices += atomic_load_explicit(&st->slices, memory_order_relaxed);
			ks->slice_ns += atomic_load_explicit(&st->slice_ns, memory_order_relaxed);
			ks->slice_overruns += atomic_load_explicit(&st->overruns, memory_order_relaxed);
			ks->quarantine_refused += atomic_load_explicit(&st->refused, memory_order_relaxed);
			if (max > ks->slice_max_ns)
				ks->slice_max_ns = max;
		}
		ks->quarantined = atomic_load_explicit(&srv->quar[k->index].on, memory_order_relaxed);
		ks->n_counters = vjob_kind_counter_count(k);
		for (unsigned c = 0; c < ks->n_counters && c < VSRV_KIND_COUNTERS; c++)
			ks->counters[c] = vjob_kind_counter(k, c);
	}
}
