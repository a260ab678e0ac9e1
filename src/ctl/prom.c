/* SPDX-License-Identifier: MIT */
/*
 * ctl/prom.c: Prometheus text exposition format 0.0.4 of every layer's
 * metric table (the `metrics` command and GET /metrics on
 * control.metrics_listen). Names: voltd_<family>_<name>[_<unit>][_total],
 * base units (nanoseconds become seconds), HELP and TYPE for every family,
 * labels worker / channel / stage / code / kind, histograms as _bucket{le},
 * _sum, _count. Every counter is cumulative since voltd started (`clear
 * counters` does not touch these). Control thread only.
 */
#include "config.h"
#include "ctl/internal.h"
#include "base/compiler.h"
#include "base/time.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Histogram bucket bounds (seconds) offered to Prometheus: the log-linear
 * buckets are summed up to each bound (a bound inside a bucket counts the
 * bucket when its upper edge is <= the bound: within 6.25 %). */
static const double le_bounds[] = {
	1e-6, 5e-6, 10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3,
	10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5, 5, 10,
};

/* One family's name from a metric row: prefix, name, unit, _total. */
static void family_name(const char *prefix, const struct vb_metric *m, char *buf, size_t len, bool *to_seconds)
{
	const char *u = m->unit;
	*to_seconds = strcmp(u, "nanoseconds") == 0;
	if (*to_seconds)
		u = "seconds";
	snprintf(buf, len, "voltd_%s_%s%s%s%s", prefix, m->name, *u && !strstr(m->name, u) ? "_" : "",
		 *u && !strstr(m->name, u) ? u : "", m->kind == VB_METRIC_COUNTER ? "_total" : "");
}

static void header(FILE *fp, const char *name, const char *help, const char *type)
{
	fprintf(fp, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void value(FILE *fp, uint64_t v, bool to_seconds)
{
	if (to_seconds)
		fprintf(fp, " %.9g\n", (double)v / 1e9);
	else
		fprintf(fp, " %" PRIu64 "\n", v);
}

/* A table over `n` elements spaced `stride` apart, element i labelled
 * label="values[i]" (or label="i" when values is NULL; no label when label
 * is NULL and n is 1). */
static void table(FILE *fp, const char *prefix, const struct vb_metric *t, size_t rows, const void *base,
		  size_t stride, unsigned n, const char *label, const char *const *values)
{
	char name[160];
	bool sec;

	for (size_t r = 0; r < rows; r++) {
		family_name(prefix, &t[r], name, sizeof(name), &sec);
		header(fp, name, t[r].help, t[r].kind == VB_METRIC_COUNTER ? "counter" : "gauge");
		for (unsigned i = 0; i < n; i++) {
			const void *el = (const char *)base + (size_t)i * stride;
			if (!label)
				fputs(name, fp);
			else if (values)
				fprintf(fp, "%s{%s=\"%s\"}", name, label, values[i]);
			else
				fprintf(fp, "%s{%s=\"%u\"}", name, label, i);
			value(fp, vb_metric_get(&t[r], el), sec);
		}
	}
}

static void group(FILE *fp, const char *prefix, const struct vb_metric_group *g, const void *stats)
{
	table(fp, prefix, g->rows, *g->n_rows, (const char *)stats + g->offset, g->stride, g->n, g->label,
	      g->values);
}

static void histogram_samples(FILE *fp, const char *name, const char *labels, const struct vb_hist_snap *h)
{
	unsigned k = 0;
	uint64_t cum = 0;

	for (size_t b = 0; b < VB_ARRAY_SIZE(le_bounds); b++) {
		uint64_t bound_ns = (uint64_t)(le_bounds[b] * 1e9 + 0.5);
		while (k < VB_HIST_BUCKETS && vb_hist_bucket_high(k) <= bound_ns)
			cum += h->buckets[k++];
		fprintf(fp, "%s_bucket{%s%sle=\"%g\"} %" PRIu64 "\n", name, labels, *labels ? "," : "", le_bounds[b],
			cum);
	}
	fprintf(fp, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, labels, *labels ? "," : "", h->count);
	fprintf(fp, "%s_sum%s%s%s %.9g\n", name, *labels ? "{" : "", labels, *labels ? "}" : "",
		(double)h->sum / 1e9);
	fprintf(fp, "%s_count%s%s%s %" PRIu64 "\n", name, *labels ? "{" : "", labels, *labels ? "}" : "",
		h->count);
}

void vctl__prom_write(struct vctl *ctl, FILE *fp)
{
	struct vctl_snap *s = &ctl->snap;
	const struct vctl_hooks *h = &ctl->hooks;
	char labels[96];

	if (vctl__snap_take(ctl, s) < 0)
		return;
	header(fp, "voltd_build_info", "voltd's version and I/O backend (always 1)", "gauge");
	fprintf(fp, "voltd_build_info{version=\"%s\",backend=\"%s\"} 1\n", h->version ? h->version : PACKAGE_VERSION,
		h->backend ? h->backend : "");
	header(fp, "voltd_uptime_seconds", "seconds since voltd started", "gauge");
	fprintf(fp, "voltd_uptime_seconds %.3f\n", (double)(vb_now_ns() - ctl->start_ns) / 1e9);

	table(fp, "runtime", vrt_metrics, vrt_metrics_n, &s->rt, 0, 1, NULL, NULL);
	table(fp, "worker", vrt_worker_metrics, vrt_worker_metrics_n, s->workers, sizeof(s->workers[0]),
	      s->n_workers, "worker", NULL);
	table(fp, "io", vio_worker_metrics, vio_worker_metrics_n, s->io, sizeof(s->io[0]), s->n_io, "worker", NULL);
	table(fp, "config", vctl_reload_metrics, vctl_reload_metrics_n, &s->reload, 0, 1, NULL, NULL);
	for (size_t g = 0; g < vctl_reload_groups_n; g++)
		group(fp, "config", &vctl_reload_groups[g], &s->reload);
	table(fp, "server", vsrv_metrics, vsrv_metrics_n, s->srv, 0, 1, NULL, NULL);
	for (size_t g = 0; g < vsrv_metric_groups_n; g++) {
		const struct vb_metric_group *gr = &vsrv_metric_groups[g];
		group(fp, *gr->n_rows > 1 ? gr->label : "server", gr, s->srv);
	}
	/* Per job kind: its counters, then its latency histogram. */
	const char *kind_names[VSRV_KINDS_MAX];
	for (unsigned i = 0; i < s->srv->n_kinds; i++)
		kind_names[i] = s->srv->kinds[i].name;
	table(fp, "server", vsrv_kind_metrics, vsrv_kind_metrics_n, s->srv->kinds, sizeof(s->srv->kinds[0]),
	      s->srv->n_kinds, "kind", kind_names);
	header(fp, "voltd_server_request_duration_seconds",
	       "time from a request's parse to its response sent, by job kind", "histogram");
	for (unsigned i = 0; i < s->srv->n_kinds; i++) {
		snprintf(labels, sizeof(labels), "kind=\"%s\"", kind_names[i]);
		histogram_samples(fp, "voltd_server_request_duration_seconds", labels, &s->srv->kinds[i].lat);
	}
	/* The runtime's sampled histograms, all workers merged. */
	struct vb_hist_snap *hs = malloc(sizeof(*hs));
	if (hs && vrt_hist_snapshot(ctl->rt, VRT_HIST_SCHED, VRT_HIST_ALL, hs) == 0) {
		header(fp, "voltd_runtime_schedule_latency_seconds",
		       "time from a task becoming runnable to the start of its poll (sampled: 1 in 64)", "histogram");
		histogram_samples(fp, "voltd_runtime_schedule_latency_seconds", "", hs);
	}
	if (hs && vrt_hist_snapshot(ctl->rt, VRT_HIST_POLL, VRT_HIST_ALL, hs) == 0) {
		header(fp, "voltd_runtime_poll_duration_seconds", "time one poll of a task takes (sampled: 1 in 64)",
		       "histogram");
		histogram_samples(fp, "voltd_runtime_poll_duration_seconds", "", hs);
	}
	free(hs);
	table(fp, "control", vctl_metrics, vctl_metrics_n, &s->ctl, 0, 1, NULL, NULL);
}
