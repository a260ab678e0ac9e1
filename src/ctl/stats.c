/* SPDX-License-Identifier: MIT */
/*
 * ctl/stats.c: the statistics snapshot of every layer and its JSON form
 * (`stats`, `hist`, `clear counters`), and the control plane's own counter
 * table (from VCTL_METRICS, ctl.h) with vctl_stats_get. Every counter and
 * gauge is rendered by iterating the layers' metric tables
 * (base/metric.h): this file names no counter. Control thread only (the
 * snapshot buffers are its own), except vctl_stats_get (any thread:
 * relaxed loads, see internal.h).
 *
 * `clear counters` keeps a baseline snapshot; `stats` shows counters minus
 * the baseline (gauges as they are). Prometheus output (prom.c) stays
 * cumulative since start, as Prometheus requires.
 */
#include "config.h"
#include "ctl/internal.h"
#include "base/compiler.h"
#include "base/time.h"
#include "io/io.h"
#include "jobs/job.h"
#include "rt/rt.h"
#include "server/server.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const vctl__stats_sections[] = {
	"build", "io", "runtime", "workers", "server", "channels", "worker_channels", "kinds", "control",
	"config", NULL,
};

/* The control plane's own counters (ctl.h): section "control", voltd_control_*. */
#define ROW(...) VB_METRIC_ROW(struct vctl_stats, __VA_ARGS__)
const struct vb_metric vctl_metrics[] = { VCTL_METRICS(ROW) };
const size_t vctl_metrics_n = VB_ARRAY_SIZE(vctl_metrics);
#undef ROW

void vctl_stats_get(struct vctl *ctl, struct vctl_stats *out)
{
	/* Relaxed: single-writer statistics (internal.h). */
#define COPY(field, kind, ...) \
	VB_METRIC_IF_SLOT(kind, out->field = atomic_load_explicit(&ctl->counters.field, memory_order_relaxed);)
	VCTL_METRICS(COPY)
#undef COPY
}

/* The daemon's reloads (ctl.h): section "config", voltd_config_*. */
#define ROW(...) VB_METRIC_ROW(struct vctl_reload_stats, __VA_ARGS__)
const struct vb_metric vctl_reload_metrics[] = { VCTL_RELOAD_METRICS(ROW) };
const size_t vctl_reload_metrics_n = VB_ARRAY_SIZE(vctl_reload_metrics);
#undef ROW
static const struct vb_metric reload_result_row[] = {
	{ "reloads", VB_METRIC_COUNTER, "", "configuration reloads (SIGHUP, systemctl reload, voltctl reload) by result", 0, NULL },
};
static const size_t reload_result_rows = 1;
static const char *const reload_results[VCTL_RELOAD_RESULTS] = { "ok", "refused" };
const struct vb_metric_group vctl_reload_groups[] = {
	{ reload_result_row, &reload_result_rows, offsetof(struct vctl_reload_stats, reloads), sizeof(uint64_t),
	  "result", reload_results, VCTL_RELOAD_RESULTS },
};
const size_t vctl_reload_groups_n = sizeof(vctl_reload_groups) / sizeof(vctl_reload_groups[0]);

int vctl__snap_take(struct vctl *ctl, struct vctl_snap *s)
{
	if (!s->srv) {
		s->srv = vsrv_stats_new(ctl->srv);
		if (!s->srv)
			return -ENOMEM;
	}
	s->n_workers = vrt_stats_snapshot(ctl->rt, &s->rt, s->workers, VCTL_MAX_WORKERS);
	if (s->n_workers > VCTL_MAX_WORKERS)
		s->n_workers = VCTL_MAX_WORKERS;
	s->n_io = ctl->io ? vio_stats_snapshot(ctl->io, s->io, VCTL_MAX_WORKERS) : 0;
	if (s->n_io > VCTL_MAX_WORKERS)
		s->n_io = VCTL_MAX_WORKERS;
	vsrv_stats_snapshot(ctl->srv, s->srv);
	vctl_stats_get(ctl, &s->ctl);
	memset(&s->reload, 0, sizeof(s->reload));
	s->reload_error[0] = '\0';
	if (ctl->hooks.reload_stats)
		ctl->hooks.reload_stats(ctl->hooks.ctx, &s->reload, s->reload_error, sizeof(s->reload_error));
	return 0;
}

void vctl__snap_fini(struct vctl_snap *s)
{
	free(s->srv);
	s->srv = NULL;
}

/* The JSON key of a metric: its name, with a short unit suffix unless the
 * name already says it ("busy_ns", "bytes_in"). */
static void json_key(const struct vb_metric *m, char *buf, size_t len)
{
	const char *u = m->unit;
	if (!*u || strstr(m->name, u)) {
		snprintf(buf, len, "%s", m->name);
		return;
	}
	snprintf(buf, len, "%s_%s", m->name, strcmp(u, "nanoseconds") == 0 ? "ns" : u);
}

/* Add a table's rows to obj; counters minus base (when base is given). */
static void put_table(json_t *obj, const struct vb_metric *t, size_t n, const void *stats, const void *base)
{
	char key[96];

	for (size_t i = 0; i < n; i++) {
		uint64_t v = vb_metric_get(&t[i], stats);
		if (base && t[i].kind == VB_METRIC_COUNTER)
			v -= vb_metric_get(&t[i], base);
		json_key(&t[i], key, sizeof(key));
		json_object_set_new(obj, key, json_integer((json_int_t)v));
	}
}

static json_t *section_build(struct vctl *ctl)
{
	const struct vctl_hooks *h = &ctl->hooks;
	return json_pack("{s:s, s:s, s:f}", "version", h->version ? h->version : PACKAGE_VERSION, "features",
			 h->features ? h->features : "", "uptime_seconds",
			 (double)(vb_now_ns() - ctl->start_ns) / 1e9);
}

static json_t *section_io(struct vctl *ctl, const struct vctl_snap *s, const struct vctl_snap *b)
{
	const struct vctl_hooks *h = &ctl->hooks;
	json_t *o = json_pack("{s:s, s:s}", "backend", h->backend ? h->backend : "", "reason",
			      h->backend_reason ? h->backend_reason : "");
	json_t *a = json_array();
	for (unsigned i = 0; i < s->n_io; i++) {
		json_t *w = json_pack("{s:i}", "worker", (json_int_t)i);
		put_table(w, vio_worker_metrics, vio_worker_metrics_n, &s->io[i],
			  b && i < b->n_io ? &b->io[i] : NULL);
		json_array_append_new(a, w);
	}
	json_object_set_new(o, "workers", a);
	return o;
}

static json_t *section_runtime(const struct vctl_snap *s, const struct vctl_snap *b)
{
	json_t *o = json_object();
	put_table(o, vrt_metrics, vrt_metrics_n, &s->rt, b ? &b->rt : NULL);
	return o;
}

static json_t *section_workers(struct vctl *ctl, const struct vctl_snap *s, const struct vctl_snap *b)
{
	json_t *a = json_array();
	for (unsigned i = 0; i < s->n_workers; i++) {
		const char *task = NULL, *label = NULL;
		json_t *w = json_pack("{s:i}", "worker", (json_int_t)i);
		put_table(w, vrt_worker_metrics, vrt_worker_metrics_n, &s->workers[i],
			  b && i < b->n_workers ? &b->workers[i] : NULL);
		/* The names of the enum gauges, and what runs there now. */
		json_object_set_new(w, "state_name",
				    json_string(vrt_worker_state_name((enum vrt_worker_state)s->workers[i].state)));
		json_object_set_new(w, "stall_name",
				    json_string(vrt_stall_kind_name((enum vrt_stall_kind)s->workers[i].stall)));
		vrt_worker_task(ctl->rt, i, &task, &label);
		json_object_set_new(w, "task", task ? json_string(task) : json_null());
		json_object_set_new(w, "task_label", label ? json_string(label) : json_null());
		json_array_append_new(a, w);
	}
	return a;
}

/* A labelled family of the server: one-row families become an object of
 * their row's name keyed by label value ("responses": {"2xx": N}); tables
 * become one object per value (channels). */
static void put_group(json_t *obj, const struct vb_metric_group *g, const void *stats, const void *base)
{
	char key[96];

	if (*g->n_rows == 1) {
		json_t *o = json_object();
		for (unsigned i = 0; i < g->n; i++) {
			uint64_t v = vb_metric_group_get(g, 0, i, stats);
			if (base && g->rows[0].kind == VB_METRIC_COUNTER)
				v -= vb_metric_group_get(g, 0, i, base);
			json_object_set_new(o, g->values[i], json_integer((json_int_t)v));
		}
		json_key(&g->rows[0], key, sizeof(key));
		json_object_set_new(obj, key, o);
		return;
	}
	for (unsigned i = 0; i < g->n; i++) {
		json_t *o = json_object();
		for (size_t r = 0; r < *g->n_rows; r++) {
			uint64_t v = vb_metric_group_get(g, r, i, stats);
			if (base && g->rows[r].kind == VB_METRIC_COUNTER)
				v -= vb_metric_group_get(g, r, i, base);
			json_key(&g->rows[r], key, sizeof(key));
			json_object_set_new(o, key, json_integer((json_int_t)v));
		}
		json_object_set_new(obj, g->values[i], o);
	}
}

static json_t *section_server(const struct vctl_snap *s, const struct vctl_snap *b, bool tables)
{
	json_t *o = json_object();
	if (!tables)
		put_table(o, vsrv_metrics, vsrv_metrics_n, s->srv, b ? b->srv : NULL);
	for (size_t g = 0; g < vsrv_metric_groups_n; g++)
		if ((*vsrv_metric_groups[g].n_rows > 1) == tables)
			put_group(o, &vsrv_metric_groups[g], s->srv, b ? b->srv : NULL);
	return o;
}

/* Each worker's members of the jobs and replies channels (whose sums are
 * the section "channels"): one object per worker and channel. */
static json_t *section_worker_channels(const struct vctl_snap *s, const struct vctl_snap *b)
{
	json_t *a = json_array();

	for (unsigned w = 0; w < s->srv->n_workers; w++) {
		const struct vsrv_worker_channels *wc = &s->srv->worker_channels[w];
		const struct vsrv_worker_channels *bc = b && w < b->srv->n_workers ? &b->srv->worker_channels[w] : NULL;

		for (unsigned c = 0; c < 2; c++) {
			json_t *o = json_pack("{s:i, s:s}", "worker", (json_int_t)w, "channel", c ? "replies" : "jobs");
			put_table(o, vch_metrics, vch_metrics_n, c ? &wc->replies : &wc->jobs,
				  bc ? (c ? &bc->replies : &bc->jobs) : NULL);
			json_array_append_new(a, o);
		}
	}
	return a;
}

/* The histogram of kind i, minus the baseline's (clear counters). */
static void kind_hist(const struct vctl_snap *s, const struct vctl_snap *b, unsigned i, struct vb_hist_snap *out)
{
	*out = s->srv->kinds[i].lat;
	if (!b || i >= b->srv->n_kinds)
		return;
	const struct vb_hist_snap *h = &b->srv->kinds[i].lat;
	out->count = 0;
	for (unsigned k = 0; k < VB_HIST_BUCKETS; k++) {
		out->buckets[k] -= out->buckets[k] >= h->buckets[k] ? h->buckets[k] : out->buckets[k];
		out->count += out->buckets[k];
	}
	out->sum -= out->sum >= h->sum ? h->sum : out->sum;
}

static json_t *hist_summary(const struct vb_hist_snap *h)
{
	return json_pack("{s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "count", (json_int_t)h->count,
			 "sum_seconds", (double)h->sum / 1e9, "mean_seconds", (double)vb_hist_snap_mean(h) / 1e9,
			 "p50_seconds", (double)vb_hist_snap_quantile(h, 0.5) / 1e9, "p90_seconds",
			 (double)vb_hist_snap_quantile(h, 0.9) / 1e9, "p99_seconds",
			 (double)vb_hist_snap_quantile(h, 0.99) / 1e9, "p999_seconds",
			 (double)vb_hist_snap_quantile(h, 0.999) / 1e9, "max_seconds", (double)h->max / 1e9);
}

/* A module's own counters of kind i (voltd->count()), by name, minus the
 * baseline's (clear counters). */
static json_t *kind_counters(struct vctl *ctl, const struct vctl_snap *s, const struct vctl_snap *b, unsigned i)
{
	const struct vsrv_kind_stats *k = &s->srv->kinds[i];
	const struct vjob_kind *jk = vsrv_kind_job(ctl->srv, i);
	json_t *o = json_object();

	for (unsigned c = 0; jk && c < k->n_counters; c++) {
		uint64_t v = k->counters[c];
		if (b && i < b->srv->n_kinds && c < b->srv->kinds[i].n_counters)
			v -= b->srv->kinds[i].counters[c];
		json_object_set_new(o, vjob_kind_counter_decl(jk, c).name, json_integer((json_int_t)v));
	}
	return o;
}

static json_t *section_kinds(struct vctl *ctl, const struct vctl_snap *s, const struct vctl_snap *b,
			     struct vb_hist_snap *tmp)
{
	json_t *o = json_object();
	for (unsigned i = 0; i < s->srv->n_kinds; i++) {
		const struct vsrv_kind_stats *k = &s->srv->kinds[i];
		json_t *ko = json_pack("{s:s}", "module", k->module);
		put_table(ko, vsrv_kind_metrics, vsrv_kind_metrics_n, k,
			  b && i < b->srv->n_kinds ? &b->srv->kinds[i] : NULL);
		kind_hist(s, b, i, tmp);
		json_object_set_new(ko, "latency", hist_summary(tmp));
		if (k->n_counters)
			json_object_set_new(ko, "counters", kind_counters(ctl, s, b, i));
		json_object_set_new(o, k->name, ko);
	}
	return o;
}

static json_t *section_control(const struct vctl_snap *s, const struct vctl_snap *b)
{
	json_t *o = json_object();
	put_table(o, vctl_metrics, vctl_metrics_n, &s->ctl, b ? &b->ctl : NULL);
	return o;
}

static json_t *section_config(const struct vctl_snap *s, const struct vctl_snap *b)
{
	json_t *o = json_object();
	put_table(o, vctl_reload_metrics, vctl_reload_metrics_n, &s->reload, b ? &b->reload : NULL);
	for (size_t g = 0; g < vctl_reload_groups_n; g++)
		put_group(o, &vctl_reload_groups[g], &s->reload, b ? &b->reload : NULL);
	json_object_set_new(o, "last_reload_error", *s->reload_error ? json_string(s->reload_error) : json_null());
	return o;
}

int vctl__stats_json(struct vctl *ctl, const char *section, json_t *reply)
{
	struct vctl_snap *s = &ctl->snap;
	const struct vctl_snap *b = ctl->have_base ? &ctl->base : NULL;
	struct vb_hist_snap *tmp;
	bool all = !section;

	if (section) {
		bool known = false;
		for (unsigned i = 0; vctl__stats_sections[i] && !known; i++)
			known = strcmp(vctl__stats_sections[i], section) == 0;
		if (!known)
			return -ENOENT;
	}
	tmp = malloc(sizeof(*tmp));
	if (!tmp || vctl__snap_take(ctl, s) < 0) {
		free(tmp);
		return -ENOMEM;
	}
#define WANT(name) (all || strcmp(section, name) == 0)
	json_object_set_new(reply, "cleared", json_boolean(b != NULL));
	/* Unix seconds: when this snapshot and the `clear counters` one were taken. */
	json_object_set_new(reply, "time", json_integer((json_int_t)time(NULL)));
	if (b)
		json_object_set_new(reply, "cleared_at", json_integer((json_int_t)ctl->cleared_at));
	if (WANT("build"))
		json_object_set_new(reply, "build", section_build(ctl));
	if (WANT("io"))
		json_object_set_new(reply, "io", section_io(ctl, s, b));
	if (WANT("runtime"))
		json_object_set_new(reply, "runtime", section_runtime(s, b));
	if (WANT("workers"))
		json_object_set_new(reply, "workers", section_workers(ctl, s, b));
	if (WANT("server"))
		json_object_set_new(reply, "server", section_server(s, b, false));
	if (WANT("channels"))
		json_object_set_new(reply, "channels", section_server(s, b, true));
	if (WANT("worker_channels"))
		json_object_set_new(reply, "worker_channels", section_worker_channels(s, b));
	if (WANT("kinds"))
		json_object_set_new(reply, "kinds", section_kinds(ctl, s, b, tmp));
	if (WANT("control"))
		json_object_set_new(reply, "control", section_control(s, b));
	if (WANT("config"))
		json_object_set_new(reply, "config", section_config(s, b));
#undef WANT
	free(tmp);
	return 0;
}

static void put_hist(json_t *reply, const char *name, const struct vb_hist_snap *h)
{
	json_t *buckets = json_array();
	for (unsigned k = 0; k < VB_HIST_BUCKETS; k++)
		if (h->buckets[k])
			json_array_append_new(buckets, json_pack("{s:f, s:I}", "le_seconds",
								 (double)vb_hist_bucket_high(k) / 1e9, "count",
								 (json_int_t)h->buckets[k]));
	json_object_set_new(reply, "name", json_string(name));
	json_object_set_new(reply, "unit", json_string("seconds"));
	json_object_set_new(reply, "summary", hist_summary(h));
	json_object_set_new(reply, "buckets", buckets);
}

int vctl__hist_json(struct vctl *ctl, const char *name, int worker, json_t *reply)
{
	struct vctl_snap *s = &ctl->snap;
	const struct vctl_snap *b = ctl->have_base ? &ctl->base : NULL;
	struct vb_hist_snap *h = malloc(sizeof(*h));
	int rc = -ENOENT;

	if (!h || vctl__snap_take(ctl, s) < 0) {
		free(h);
		return -ENOMEM;
	}
	/* The runtime's sampled histograms: all workers merged, or one. */
	if (strcmp(name, "sched") == 0 || strcmp(name, "poll") == 0) {
		enum vrt_hist_kind k = name[0] == 's' ? VRT_HIST_SCHED : VRT_HIST_POLL;
		rc = vrt_hist_snapshot(ctl->rt, k, worker, h);
		if (rc == 0) {
			put_hist(reply, name, h);
			json_object_set_new(reply, "worker", worker < 0 ? json_null() : json_integer(worker));
			json_object_set_new(reply, "sampled_one_in", json_integer(VRT_HIST_SAMPLE_EVERY));
		}
		goto out;
	}
	/* The I/O driver's (io_uring): all workers merged, or one. */
	for (unsigned k = 0; ctl->io && k < VIO_HIST_N; k++) {
		if (strcmp(name, vio_hist_name((enum vio_hist_kind)k)) != 0)
			continue;
		rc = vio_hist_snapshot(ctl->io, (enum vio_hist_kind)k, worker, h);
		if (rc == 0) {
			put_hist(reply, name, h);
			json_object_set_new(reply, "worker", worker < 0 ? json_null() : json_integer(worker));
		}
		goto out;
	}
	/* The jobs' waits for a blocking pool thread. */
	if (strcmp(name, "blocking_wait") == 0 && worker < 0) {
		vsrv_blocking_wait_hist(ctl->srv, h);
		put_hist(reply, name, h);
		rc = 0;
		goto out;
	}
	for (unsigned i = 0; i < s->srv->n_kinds && worker < 0; i++) {
		if (strcmp(s->srv->kinds[i].name, name) != 0)
			continue;
		kind_hist(s, b, i, h);
		put_hist(reply, name, h);
		rc = 0;
		break;
	}
out:
	free(h);
	return rc;
}

void vctl__stats_clear(struct vctl *ctl)
{
	/* The longest-callback gauges start again too (kinds.c). */
	if (ctl->srv)
		vsrv_kinds_clear_max(ctl->srv);
	if (vctl__snap_take(ctl, &ctl->base) == 0) {
		ctl->have_base = true;
		ctl->cleared_at = time(NULL);
	}
}
