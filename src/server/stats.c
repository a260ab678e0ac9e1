/* SPDX-License-Identifier: MIT */
/*
 * server/stats.c: the server's statistics: a response counted as it goes
 * out (vsrv__count_response: its status class and its row's latency), the
 * metric tables the renderers walk (the rows of VSRV_METRICS, the labelled
 * groups, the per-kind rows), the snapshot that sums the per-worker blocks
 * into struct vsrv_stats, and the shutdown's log lines. A new labelled
 * family lands here: its group row, its counters in VSRV_GROUP_COUNTERS
 * (internal.h) and the offset table below.
 *
 * Threading: vsrv__count_response on the thread that sends (a worker's own
 * block, or the shared last block off the workers); the snapshot and the
 * log on any thread.
 *
 * Ordering: everything here is relaxed. The counters are statistics, each
 * read on its own (a snapshot is not one instant's cut); conns_open and
 * paused_n (accept.c orders them for the pause, not for this), the
 * budget's counts and the status bits are read as gauges.
 */
#include "config.h"
#include "server/internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vsrv__count_response(struct vsrv *srv, unsigned kind, int status, int64_t t0, int64_t now)
{
	struct vsrv_wstats *ws = vsrv__ws(srv);
	unsigned cls = (unsigned)status / 100;
	uint64_t lat = now > t0 ? (uint64_t)(now - t0) : 0;

	if (cls < 1 || cls > 5)
		cls = 5;
	/* Relaxed: statistics. */
	atomic_fetch_add_explicit(&ws->c[VSRV_C_resp_1xx + cls - 1], 1, memory_order_relaxed);
	if (kind >= srv->n_kinds)
		kind = srv->kind_other;
	if (ws == &srv->ws[srv->nworkers])
		vb_hist_record(&ws->lat[kind], lat);        /* shared block: atomic */
	else
		vb_hist_record_owner(&ws->lat[kind], lat);  /* this worker's block */
}

#define ROW(...) VB_METRIC_ROW(struct vsrv_stats, __VA_ARGS__)
const struct vb_metric vsrv_metrics[] = { VSRV_METRICS(ROW) };
const size_t vsrv_metrics_n = VB_ARRAY_SIZE(vsrv_metrics);
#undef ROW

static const struct vb_metric responses_row[] = {
	{ "responses", VB_METRIC_COUNTER, "", "responses sent, by status class", 0, NULL },
};
static const struct vb_metric in_flight_row[] = {
	{ "in_flight", VB_METRIC_GAUGE, "", "requests in this stage now", 0, NULL },
};
#ifdef VOLTD_LINE_AUDIT
static const struct vb_metric line_writes_row[] = {
	{ "line_writes", VB_METRIC_COUNTER, "",
	  "writes to cache lines that several workers write, by site (--enable-line-audit builds)", 0, NULL },
};
#endif
static const size_t one_row = 1;
static const char *const code_values[] = { "1xx", "2xx", "3xx", "4xx", "5xx" };
static const char *const stage_values[] = {
	[VSRV_STAGE_PARSE] = "parse", [VSRV_STAGE_EXEC] = "exec",
	[VSRV_STAGE_WRITE] = "write", [VSRV_STAGE_SEND] = "send",
};
static const char *const channel_values[] = { "jobs", "replies", "blocking" };
static_assert(offsetof(struct vsrv_stats, replies) ==
	      offsetof(struct vsrv_stats, jobs) + sizeof(struct vch_stats) &&
	      offsetof(struct vsrv_stats, blocking) ==
	      offsetof(struct vsrv_stats, replies) + sizeof(struct vch_stats),
	      "the channel family walks jobs, replies, blocking with one stride");

const struct vb_metric_group vsrv_metric_groups[] = {
	{ responses_row, &one_row, offsetof(struct vsrv_stats, responses[1]), sizeof(uint64_t),
	  "code", code_values, VB_ARRAY_SIZE(code_values) },
	{ in_flight_row, &one_row, offsetof(struct vsrv_stats, in_flight), sizeof(uint64_t),
	  "stage", stage_values, VSRV_STAGES },
	{ vch_metrics, &vch_metrics_n, offsetof(struct vsrv_stats, jobs), sizeof(struct vch_stats),
	  "channel", channel_values, VB_ARRAY_SIZE(channel_values) },
#ifdef VOLTD_LINE_AUDIT
	{ line_writes_row, &one_row, offsetof(struct vsrv_stats, line_writes), sizeof(uint64_t),
	  "site", vb_line_site_names, VB_LINE_N },
#endif
};
const size_t vsrv_metric_groups_n = VB_ARRAY_SIZE(vsrv_metric_groups);

#define ROW(...) VB_METRIC_ROW(struct vsrv_kind_stats, __VA_ARGS__)
const struct vb_metric vsrv_kind_metrics[] = { VSRV_KIND_METRICS(ROW) };
const size_t vsrv_kind_metrics_n = VB_ARRAY_SIZE(vsrv_kind_metrics);
#undef ROW

/* Where each internal counter lands in struct vsrv_stats. */
static const size_t counter_offset[VSRV_C_COUNT] = {
#define VSRV_C_OFFSET(field, kind, ...) \
	VB_METRIC_IF_SLOT(kind, [VSRV_C_##field] = offsetof(struct vsrv_stats, field),)
	VSRV_METRICS(VSRV_C_OFFSET)
#undef VSRV_C_OFFSET
#define VSRV_C_OFFSET(name, field) [VSRV_C_##name] = offsetof(struct vsrv_stats, field),
	VSRV_GROUP_COUNTERS(VSRV_C_OFFSET)
#undef VSRV_C_OFFSET
};

void vsrv_stats_snapshot(struct vsrv *srv, struct vsrv_stats *out)
{
	uint64_t sum[VSRV_C_COUNT] = { 0 };
	struct vb_hist_snap *tmp = malloc(sizeof(*tmp));

	/* Not the counters: an unwritten one must show (test_metric). */
	out->responses[0] = 0;
	struct vsrv_kind_stats *kinds = out->kinds;
	unsigned cap = out->kinds_cap;
	struct vsrv_worker_channels *wch = out->worker_channels;
	unsigned wcap = out->workers_cap;
	memset((char *)out + offsetof(struct vsrv_stats, n_kinds), 0,
	       sizeof(*out) - offsetof(struct vsrv_stats, n_kinds));
	out->kinds = kinds;
	out->kinds_cap = cap;
	memset(kinds, 0, cap * sizeof(*kinds));
	out->worker_channels = wch;
	out->workers_cap = wcap;
	for (unsigned w = 0; w <= srv->nworkers; w++)
		for (unsigned i = 0; i < VSRV_C_COUNT; i++)
			/* Relaxed: statistics. */
			sum[i] += atomic_load_explicit(&srv->ws[w].c[i], memory_order_relaxed);
	for (unsigned i = 0; i < VSRV_C_COUNT; i++)
		memcpy((char *)out + counter_offset[i], &sum[i], sizeof(sum[i]));
	out->conns_open = atomic_load_explicit(&srv->conns_open, memory_order_relaxed);
	out->accept_paused = atomic_load_explicit(&srv->paused_n, memory_order_relaxed) > 0;
	vch_set_stats_get(srv->jobs, &out->jobs);
	vch_set_stats_get(srv->replies, &out->replies);
	out->n_workers = srv->nworkers < out->workers_cap ? srv->nworkers : out->workers_cap;
	for (unsigned w = 0; w < out->n_workers; w++) {
		vch_stats_get(vch_set_member(srv->jobs, w), &out->worker_channels[w].jobs);
		vch_stats_get(vch_set_member(srv->replies, w), &out->worker_channels[w].replies);
	}
	vb_line_audit_sum(out->line_writes);
	out->n_kinds = srv->n_kinds < cap ? srv->n_kinds : cap;
	for (unsigned k = 0; k < out->n_kinds; k++) {
		struct vsrv_kind_stats *ks = &out->kinds[k];

		ks->name = vsrv_kind_name(srv, k);
		for (unsigned w = 0; w <= srv->nworkers; w++) {
			if (!tmp) {
				vb_hist_snapshot(&srv->ws[w].lat[k], &ks->lat);
				break; /* no memory: one worker's view */
			}
			vb_hist_snapshot(&srv->ws[w].lat[k], tmp);
			vb_hist_snap_merge(&ks->lat, tmp);
		}
		ks->count = ks->lat.count;
	}
	vsrv__kinds_snapshot(srv, out);
	vsrv__pool_stats(srv, out);
	out->stopping = vsrv_draining(srv);
	out->draining = out->stopping || !vsrv_ready(srv);
	out->lane_waiting = vsrv__lane_waiting(srv);
	/* Relaxed: a gauge. */
	int64_t held = atomic_load_explicit(&srv->inflight, memory_order_relaxed);
	int64_t copies = atomic_load_explicit(&srv->copies, memory_order_relaxed);
	out->inflight_bytes = held > 0 ? (uint64_t)held : 0;
	out->inflight_copies_bytes = copies > 0 ? (uint64_t)copies : 0;
	out->inflight_bytes += out->inflight_copies_bytes;
	vsrv__admit_stats(srv, out);
	free(tmp);
}

struct vsrv_stats *vsrv_stats_new(const struct vsrv *srv)
{
	size_t kinds = srv->n_kinds * sizeof(struct vsrv_kind_stats);
	struct vsrv_stats *s;

	kinds = (kinds + alignof(struct vsrv_worker_channels) - 1) / alignof(struct vsrv_worker_channels) *
		alignof(struct vsrv_worker_channels);
	s = calloc(1, sizeof(*s) + kinds + srv->nworkers * sizeof(*s->worker_channels));
	if (s) {
		s->kinds = (struct vsrv_kind_stats *)(s + 1);
		s->kinds_cap = srv->n_kinds;
		s->worker_channels = (struct vsrv_worker_channels *)((char *)s->kinds + kinds);
		s->workers_cap = srv->nworkers;
	}
	return s;
}

const char *vsrv_kind_name(const struct vsrv *srv, unsigned k)
{
	return k < VSRV_ROUTES ? vsrv__route_name(k)
	       : k == srv->kind_other ? "other" : vjob_kind_at(k - VSRV_ROUTES)->name;
}

void vsrv_stats_log(struct vsrv *srv)
{
	struct vsrv_stats *s = vsrv_stats_new(srv);
	char line[4096];
	size_t off = 0;

	if (!s)
		return;
	vsrv_stats_snapshot(srv, s);
	line[0] = '\0';
	vb_metric_format(line, sizeof(line), &off, vsrv_metrics, vsrv_metrics_n, s);
	for (size_t g = 0; g < vsrv_metric_groups_n; g++)
		vb_metric_format_group(line, sizeof(line), &off, &vsrv_metric_groups[g], s);
	vb_notice("server stats: %s", line);
	for (unsigned k = 0; k < s->n_kinds; k++) {
		const struct vsrv_kind_stats *ks = &s->kinds[k];
		const struct vb_hist_snap *h = &ks->lat;
		const struct vjob_kind *jk = vsrv_kind_job(srv, k);

		if (!ks->count && !ks->jobs)
			continue;
		/* Then its callbacks and its module's counters (kinds.c). */
		off = 0;
		line[0] = '\0';
		for (unsigned c = 0; jk && c < ks->n_counters && off < sizeof(line); c++)
			off += (size_t)snprintf(line + off, sizeof(line) - off, " %s=%" PRIu64,
						vjob_kind_counter_decl(jk, c).name, ks->counters[c]);
		vb_notice("server kind %s: count=%" PRIu64 " p50_us=%" PRIu64 " p90_us=%" PRIu64
			  " p99_us=%" PRIu64 " p999_us=%" PRIu64 " module=%s jobs=%" PRIu64 " slices=%" PRIu64
			  " slice_overruns=%" PRIu64 " slice_max_us=%" PRIu64 "%s",
			  ks->name, ks->count, vb_hist_snap_quantile(h, 0.5) / 1000,
			  vb_hist_snap_quantile(h, 0.9) / 1000, vb_hist_snap_quantile(h, 0.99) / 1000,
			  vb_hist_snap_quantile(h, 0.999) / 1000, ks->module, ks->jobs, ks->slices, ks->slice_overruns,
			  ks->slice_max_ns / 1000, line);
	}
	free(s);
}
