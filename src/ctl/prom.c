/* SPDX-License-Identifier: MIT */
/*
 * ctl/prom.c: Prometheus text exposition format 0.0.4 of every layer's
 * metric table (the `metrics` command and GET /metrics on
 * control.metrics_listen). Names: voltd_<family>_<name>[_<unit>][_total],
 * base units (nanoseconds become seconds) as the suffix (a row named
 * "<unit>_in" / "<unit>_out" becomes received_<unit> / sent_<unit>; the JSON
 * keys keep the table's name), HELP and TYPE for every family, labels worker
 * / channel / stage / code / kind (each worker's channels: worker and
 * channel), enum gauges (rows with states) as state
 * sets labelled state, histograms as _bucket{le}, _sum, _count; the job
 * kinds' rows labelled module and kind, and the counters modules declare
 * for their kinds as one family voltd_module_counter_total{module, kind,
 * counter}; and the
 * process_* families every Prometheus client library exports, read from
 * /proc. Every counter is cumulative since voltd started (`clear counters`
 * does not touch these). Control thread only.
 */
#include "config.h"
#include "ctl/internal.h"
#include "base/compiler.h"
#include "base/time.h"
#include "jobs/job.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

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
	const char *u = m->unit, *name = m->name;
	size_t ul = strlen(u);
	*to_seconds = strcmp(u, "nanoseconds") == 0;
	if (*to_seconds)
		u = "seconds";
	/* "bytes_in" -> "received_bytes": Prometheus wants the unit last. */
	if (ul && strncmp(name, u, ul) == 0 && (strcmp(name + ul, "_in") == 0 || strcmp(name + ul, "_out") == 0))
		name = strcmp(name + ul, "_in") == 0 ? "received" : "sent";
	snprintf(buf, len, "voltd_%s_%s%s%s%s", prefix, name, *u && !strstr(name, u) ? "_" : "",
		 *u && !strstr(name, u) ? u : "", m->kind == VB_METRIC_COUNTER ? "_total" : "");
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

/* An enum gauge as a state set: name{label,state="s"} 1 for the current
 * state, 0 for the others. */
static void state_set(FILE *fp, const char *name, const struct vb_metric *m, const void *el, const char *label,
		      const char *value, unsigned i)
{
	uint64_t v = vb_metric_get(m, el);
	char lab[96] = "";

	if (label && value)
		snprintf(lab, sizeof(lab), "%s=\"%s\",", label, value);
	else if (label)
		snprintf(lab, sizeof(lab), "%s=\"%u\",", label, i);
	for (uint64_t k = 0; m->states[k]; k++)
		fprintf(fp, "%s{%sstate=\"%s\"} %d\n", name, lab, m->states[k], v == k);
}

/* The process_* families of the Prometheus client libraries, from /proc
 * (a family that cannot be read is left out). */
static void process_metrics(FILE *fp)
{
	long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	char buf[1024];
	FILE *f;

	f = fopen("/proc/self/stat", "re");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = '\0';
	/* "pid (comm) S ...": comm may hold ')', so after the last one; the
	 * fields from there are proc(5)'s 3rd (state) on. */
	char *p = strrchr(buf, ')');
	unsigned long long utime, stime, start, vsize;
	long long rss;
	if (p && tck > 0 && page > 0 &&
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %llu %llu %lld",
		   &utime, &stime, &start, &vsize, &rss) == 5) {
		header(fp, "process_cpu_seconds_total", "user and system CPU time of the process", "counter");
		fprintf(fp, "process_cpu_seconds_total %.2f\n", (double)(utime + stime) / (double)tck);
		header(fp, "process_resident_memory_bytes", "resident set size", "gauge");
		fprintf(fp, "process_resident_memory_bytes %lld\n", rss * page);
		header(fp, "process_virtual_memory_bytes", "virtual memory size", "gauge");
		fprintf(fp, "process_virtual_memory_bytes %llu\n", vsize);
		unsigned long long btime = 0;
		char line[256];
		f = fopen("/proc/stat", "re");
		while (f && fgets(line, sizeof(line), f))
			if (sscanf(line, "btime %llu", &btime) == 1)
				break;
		if (f)
			fclose(f);
		if (btime) {
			header(fp, "process_start_time_seconds", "start time of the process since the Unix epoch",
			       "gauge");
			fprintf(fp, "process_start_time_seconds %.2f\n", (double)btime + (double)start / (double)tck);
		}
	}
	DIR *d = opendir("/proc/self/fd");
	if (d) {
		unsigned long fds = 0;
		for (struct dirent *e; (e = readdir(d));)
			fds += e->d_name[0] != '.';
		closedir(d);
		header(fp, "process_open_fds", "open file descriptors", "gauge");
		fprintf(fp, "process_open_fds %lu\n", fds ? fds - 1 : 0); /* less the one reading the directory */
	}
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		header(fp, "process_max_fds", "the limit on open file descriptors (RLIMIT_NOFILE)", "gauge");
		if (rl.rlim_cur == RLIM_INFINITY)
			fprintf(fp, "process_max_fds +Inf\n");
		else
			fprintf(fp, "process_max_fds %llu\n", (unsigned long long)rl.rlim_cur);
	}
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
			if (t[r].states) {
				state_set(fp, name, &t[r], el, label, values ? values[i] : NULL, i);
				continue;
			}
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

/* Each worker's members of the jobs and replies channels (their sums are
 * voltd_channel_*): voltd_worker_channel_<row>{worker,channel}. */
static void worker_channels(FILE *fp, const struct vsrv_stats *st)
{
	char name[160];
	bool sec;

	for (size_t r = 0; r < vch_metrics_n; r++) {
		const struct vb_metric *m = &vch_metrics[r];

		family_name("worker_channel", m, name, sizeof(name), &sec);
		header(fp, name, m->help, m->kind == VB_METRIC_COUNTER ? "counter" : "gauge");
		for (unsigned w = 0; w < st->n_workers; w++) {
			for (unsigned c = 0; c < 2; c++) {
				fprintf(fp, "%s{worker=\"%u\",channel=\"%s\"}", name, w, c ? "replies" : "jobs");
				value(fp, vb_metric_get(m, c ? &st->worker_channels[w].replies : &st->worker_channels[w].jobs),
				      sec);
			}
		}
	}
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

/* The per-kind table: one family per row, one sample per kind, labelled
 * with the kind's module and the kind. */
static void kind_tables(FILE *fp, const struct vctl_snap *s)
{
	char name[160];
	bool sec;

	for (size_t r = 0; r < vsrv_kind_metrics_n; r++) {
		const struct vb_metric *m = &vsrv_kind_metrics[r];

		family_name("server", m, name, sizeof(name), &sec);
		header(fp, name, m->help, m->kind == VB_METRIC_COUNTER ? "counter" : "gauge");
		for (unsigned i = 0; i < s->srv->n_kinds; i++) {
			fprintf(fp, "%s{module=\"%s\",kind=\"%s\"}", name, s->srv->kinds[i].module,
				s->srv->kinds[i].name);
			value(fp, vb_metric_get(m, &s->srv->kinds[i]), sec);
		}
	}
}

/* The counters modules declare for their kinds (struct voltd_counter),
 * one family: labels module, kind, counter. */
static void module_counters(struct vctl *ctl, FILE *fp, const struct vctl_snap *s)
{
	bool any = false;

	for (unsigned i = 0; i < s->srv->n_kinds; i++) {
		const struct vjob_kind *jk = ctl->srv ? vsrv_kind_job(ctl->srv, i) : NULL;

		for (unsigned c = 0; jk && c < s->srv->kinds[i].n_counters; c++) {
			if (!any)
				header(fp, "voltd_module_counter_total",
				       "a counter a module declared for its kind, added to by voltd->count() "
				       "(its help: voltctl stats kinds, voltctl modules)",
				       "counter");
			any = true;
			fprintf(fp, "voltd_module_counter_total{module=\"%s\",kind=\"%s\",counter=\"%s\"} %" PRIu64 "\n",
				s->srv->kinds[i].module, s->srv->kinds[i].name, vjob_kind_counter_decl(jk, c).name,
				s->srv->kinds[i].counters[c]);
		}
	}
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
	worker_channels(fp, s->srv);
	/* Per job kind (labels module, kind): its counters, its latency
	 * histogram, and its module's own counters (label counter too). */
	kind_tables(fp, s);
	header(fp, "voltd_server_request_duration_seconds",
	       "time from a request's parse to its response sent, by job kind", "histogram");
	for (unsigned i = 0; i < s->srv->n_kinds; i++) {
		snprintf(labels, sizeof(labels), "module=\"%s\",kind=\"%s\"", s->srv->kinds[i].module,
			 s->srv->kinds[i].name);
		histogram_samples(fp, "voltd_server_request_duration_seconds", labels, &s->srv->kinds[i].lat);
	}
	module_counters(ctl, fp, s);
	if (ctl->srv) {
		struct vb_hist_snap *w = malloc(sizeof(*w));
		if (w) {
			vsrv_blocking_wait_hist(ctl->srv, w);
			header(fp, "voltd_server_blocking_queue_wait_seconds",
			       "time a blocking kind's job waited for a blocking pool thread, from its parse",
			       "histogram");
			histogram_samples(fp, "voltd_server_blocking_queue_wait_seconds", "", w);
		}
		free(w);
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
	process_metrics(fp);
}
