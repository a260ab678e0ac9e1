/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_metric.c: every metric table of every layer (base/metric.h):
 * each row's offset lies inside its stats struct and is aligned; names are
 * snake_case, carry no unit suffix and are unique (within a table, and among
 * the families a renderer puts under one prefix); units and kinds are known;
 * every uint64_t field of a stats struct has exactly one row (so a field
 * added without its row fails here); every row is written by its layer's
 * snapshot (each snapshot is taken into memory filled with a poison value
 * from a real runtime, I/O driver, server and control socket: a row whose
 * value nobody copies fails here instead of reading 0 forever); the
 * log-line formatter writes what the tables say and never overflows its
 * buffer. No cmocka: runs everywhere.
 */
#include "base/metric.h"
#include "chan/chan.h"
#include "ctl/ctl.h"
#include "io/io.h"
#include "rt/rt.h"
#include "server/server.h"
#include "voltd/cfg.h"

#include <inttypes.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;

#define CHECK(cond, ...) \
	do { \
		if (!(cond)) { \
			failures++; \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
		} \
	} while (0)

static const char *const units[] = { "", "bytes", "seconds", "nanoseconds" };
/* Suffixes a name must not end with: the unit belongs in its own column. */
static const char *const unit_words[] = { "_bytes", "_seconds", "_nanoseconds", "_ns", "_us", "_ms", "_s",
					  "_total" };

static bool ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && strcmp(s + a - b, suf) == 0;
}

static void check_name(const char *table, const char *name)
{
	bool ok = name && *name && name[0] >= 'a' && name[0] <= 'z' && !ends_with(name, "_");
	for (const char *p = name; ok && *p; p++)
		ok = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || (*p == '_' && p[1] != '_');
	CHECK(ok, "%s: '%s' is not snake_case", table, name ? name : "(null)");
	for (size_t i = 0; ok && i < sizeof(unit_words) / sizeof(unit_words[0]); i++)
		CHECK(!ends_with(name, unit_words[i]), "%s: '%s' ends with a unit suffix (%s)", table, name,
		      unit_words[i]);
}

/* Rows of one table: names, kinds, units, help, offsets inside `size`.
 * Marks the 8-byte words the rows cover in `cover` (may be NULL). */
static void check_table(const char *table, const struct vb_metric *t, size_t n, size_t size,
			unsigned char *cover)
{
	CHECK(n > 0, "%s: empty", table);
	for (size_t i = 0; i < n; i++) {
		const struct vb_metric *m = &t[i];

		check_name(table, m->name);
		CHECK(m->kind == VB_METRIC_COUNTER || m->kind == VB_METRIC_GAUGE, "%s.%s: bad kind", table,
		      m->name);
		bool unit_ok = false;
		for (size_t u = 0; m->unit && u < sizeof(units) / sizeof(units[0]); u++)
			unit_ok |= strcmp(m->unit, units[u]) == 0;
		CHECK(unit_ok, "%s.%s: unit '%s' is not a base unit", table, m->name, m->unit ? m->unit : "(null)");
		CHECK(m->help && *m->help && !strchr(m->help, '\n'), "%s.%s: help must be one line", table,
		      m->name);
		CHECK(m->offset + sizeof(uint64_t) <= size, "%s.%s: offset %zu outside the struct (%zu bytes)",
		      table, m->name, m->offset, size);
		CHECK(m->offset % alignof(uint64_t) == 0, "%s.%s: offset %zu not aligned", table, m->name,
		      m->offset);
		for (size_t j = 0; j < i; j++) {
			CHECK(strcmp(t[j].name, m->name) != 0, "%s: name '%s' twice", table, m->name);
			CHECK(t[j].offset != m->offset, "%s: '%s' and '%s' describe the same field", table,
			      t[j].name, m->name);
		}
		if (cover && m->offset + sizeof(uint64_t) <= size)
			cover[m->offset / sizeof(uint64_t)]++;
	}
}

/* A struct made only of uint64_t fields: each has exactly one row. */
static void check_complete(const char *table, const struct vb_metric *t, size_t n, size_t size)
{
	unsigned char cover[64] = { 0 };

	CHECK(size % sizeof(uint64_t) == 0 && size / sizeof(uint64_t) <= sizeof(cover), "%s: size", table);
	check_table(table, t, n, size, cover);
	for (size_t w = 0; w < size / sizeof(uint64_t); w++)
		CHECK(cover[w] == 1, "%s: the field at offset %zu has %u rows (want 1)", table,
		      w * sizeof(uint64_t), cover[w]);
}

static void check_server(void)
{
	/* The words before n_kinds are the uint64_t fields; responses[0] is unused. */
	enum { WORDS = offsetof(struct vsrv_stats, n_kinds) / sizeof(uint64_t) };
	unsigned char cover[WORDS] = { 0 };
	const char *names[128];
	size_t n_names = 0;

	check_table("vsrv_metrics", vsrv_metrics, vsrv_metrics_n, sizeof(struct vsrv_stats), cover);
	for (size_t i = 0; i < vsrv_metrics_n; i++)
		names[n_names++] = vsrv_metrics[i].name;
	for (size_t g = 0; g < vsrv_metric_groups_n; g++) {
		const struct vb_metric_group *gr = &vsrv_metric_groups[g];
		size_t last = gr->offset + (gr->n - 1) * gr->stride;

		check_name("vsrv_metric_groups", gr->label);
		CHECK(gr->n > 0 && gr->values, "group %s: no values", gr->label);
		for (unsigned i = 0; i < gr->n; i++) {
			CHECK(gr->values[i] && *gr->values[i], "group %s: value %u missing", gr->label, i);
			for (unsigned j = 0; j < i; j++)
				CHECK(strcmp(gr->values[i], gr->values[j]) != 0, "group %s: value '%s' twice",
				      gr->label, gr->values[i]);
		}
		/* The rows of element 0 and of the last element lie inside vsrv_stats. */
		for (size_t r = 0; r < *gr->n_rows; r++) {
			CHECK(last + gr->rows[r].offset + sizeof(uint64_t) <= sizeof(struct vsrv_stats),
			      "group %s: row %s of the last element is outside vsrv_stats", gr->label,
			      gr->rows[r].name);
			for (unsigned i = 0; i < gr->n; i++) {
				size_t o = gr->offset + i * gr->stride + gr->rows[r].offset;
				if (o / sizeof(uint64_t) < WORDS)
					cover[o / sizeof(uint64_t)]++;
			}
		}
		check_table(gr->label, gr->rows, *gr->n_rows, gr->stride, NULL);
		/* One-row families sit beside the scalars: their names must differ. */
		if (*gr->n_rows == 1)
			names[n_names++] = gr->rows[0].name;
	}
	for (size_t i = 0; i < vsrv_kind_metrics_n; i++)
		names[n_names++] = vsrv_kind_metrics[i].name;
	for (size_t i = 0; i < n_names; i++)
		for (size_t j = 0; j < i; j++)
			CHECK(strcmp(names[i], names[j]) != 0, "server: name '%s' used twice", names[i]);
	check_table("vsrv_kind_metrics", vsrv_kind_metrics, vsrv_kind_metrics_n, sizeof(struct vsrv_kind_stats),
		    NULL);
	for (size_t w = 0; w < WORDS; w++) {
		unsigned want = w * sizeof(uint64_t) == offsetof(struct vsrv_stats, responses[0]) ? 0 : 1;
		CHECK(cover[w] == want, "vsrv_stats: the field at offset %zu has %u rows (want %u)",
		      w * sizeof(uint64_t), cover[w], want);
	}
}

/* The daemon's reload counters (ctl.h): the gauge's table and the family by
 * result cover struct vctl_reload_stats exactly once. */
static void check_reload(void)
{
	unsigned char cover[sizeof(struct vctl_reload_stats) / sizeof(uint64_t)] = { 0 };

	check_table("vctl_reload_metrics", vctl_reload_metrics, vctl_reload_metrics_n,
		    sizeof(struct vctl_reload_stats), cover);
	for (size_t g = 0; g < vctl_reload_groups_n; g++) {
		const struct vb_metric_group *gr = &vctl_reload_groups[g];
		check_name("vctl_reload_groups", gr->label);
		check_table("vctl_reload_groups", gr->rows, *gr->n_rows, sizeof(struct vctl_reload_stats), NULL);
		for (unsigned i = 0; i < gr->n; i++)
			for (size_t r = 0; r < *gr->n_rows; r++) {
				size_t o = gr->offset + i * gr->stride + gr->rows[r].offset;
				CHECK(o + sizeof(uint64_t) <= sizeof(struct vctl_reload_stats),
				      "group %s: element %u outside the struct", gr->label, i);
				if (o + sizeof(uint64_t) <= sizeof(struct vctl_reload_stats))
					cover[o / sizeof(uint64_t)]++;
			}
	}
	for (size_t w = 0; w < sizeof(cover); w++)
		CHECK(cover[w] == 1, "vctl_reload_stats: the field at offset %zu has %u rows (want 1)",
		      w * sizeof(uint64_t), cover[w]);
}

static void check_format(void)
{
	struct vch_stats st = { .capacity = 8, .len = 3, .sends = 12345678901234ull, .closed = 1 };
	char buf[512], small[24];
	size_t off = 0;

	buf[0] = '\0';
	vb_metric_format(buf, sizeof(buf), &off, vch_metrics, vch_metrics_n, &st);
	CHECK(strncmp(buf, "capacity=8 len=3 sends=12345678901234 recvs=0 ", 46) == 0, "format: '%s'", buf);
	CHECK(ends_with(buf, " closed=1"), "format: '%s'", buf);
	CHECK(off == strlen(buf), "format: off %zu, strlen %zu", off, strlen(buf));

	/* Cut at the buffer's end, NUL-terminated, and later calls add nothing. */
	memset(small, 'x', sizeof(small));
	off = 0;
	small[0] = '\0';
	vb_metric_format(small, sizeof(small), &off, vch_metrics, vch_metrics_n, &st);
	vb_metric_format(small, sizeof(small), &off, vch_metrics, vch_metrics_n, &st);
	CHECK(memchr(small, '\0', sizeof(small)) != NULL && strlen(small) == sizeof(small) - 1,
	      "cut: '%.*s'", (int)sizeof(small), small);
	CHECK(strncmp(small, "capacity=8 len=3 sends=", 23) == 0, "cut: '%s'", small);

	/* Groups: one-row families "name_value", nested tables "value_name". */
	struct vsrv_stats *s = calloc(1, sizeof(*s));
	CHECK(s != NULL, "calloc");
	if (!s)
		return;
	s->responses[2] = 7;
	s->in_flight[VSRV_STAGE_WRITE] = 2;
	s->replies.send_waits = 9;
	off = 0;
	buf[0] = '\0';
	for (size_t g = 0; g < vsrv_metric_groups_n; g++)
		vb_metric_format_group(buf, sizeof(buf), &off, &vsrv_metric_groups[g], s);
	CHECK(strstr(buf, "responses_1xx=0 responses_2xx=7 ") != NULL, "group: '%s'", buf);
	CHECK(strstr(buf, "in_flight_write=2") != NULL, "group: '%s'", buf);
	CHECK(strstr(buf, "replies_send_waits=9") != NULL && strstr(buf, "jobs_send_waits=0") != NULL,
	      "group: '%s'", buf);
	free(s);
}

/* ------------------------------------------------ every row is written */

#define POISON 0xa5a5a5a5a5a5a5a5ull

/* Each row of t read from stats, which the snapshot wrote over POISON. */
static void check_written(const char *table, const struct vb_metric *t, size_t n, const void *stats)
{
	for (size_t i = 0; i < n; i++)
		CHECK(vb_metric_get(&t[i], stats) != POISON,
		      "%s.%s: the snapshot left it unwritten (a row without a copy)", table, t[i].name);
}

static void check_written_group(const struct vb_metric_group *g, const void *stats)
{
	for (size_t r = 0; r < *g->n_rows; r++)
		for (unsigned i = 0; i < g->n; i++)
			CHECK(vb_metric_group_get(g, r, i, stats) != POISON,
			      "group %s=%s: row %s left unwritten by the snapshot (a row without a copy)",
			      g->label, g->values[i], g->rows[r].name);
}

/* The daemon's pieces, made as main makes them (1 worker, libev so that it
 * runs where io_uring cannot; nothing started but the runtime's workers),
 * each snapshot taken over poison. */
static void check_snapshots(void)
{
	static const char conf_fmt[] = "[scheduler]\nworkers = 1\n[io]\nbackend = libev\n"
				       "[server]\nlisten = 127.0.0.1:0\n[control]\nsocket = %s\n";
	struct vcfg cfg;
	struct vb_strlist err = { 0 };
	char dir[64], path[100], conf[256];
	const char *tmp = getenv("TMPDIR");
	struct vio *io = NULL;
	struct vrt *rt = NULL;
	struct vsrv *srv = NULL;
	struct vctl *ctl = NULL;
	struct vctl_config cc;
	const char *why = "";

	snprintf(dir, sizeof(dir), "%s/voltd-test-metric.XXXXXX", tmp && strlen(tmp) < 30 ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp %s", dir);
		return;
	}
	snprintf(path, sizeof(path), "%s/control.sock", dir);
	snprintf(conf, sizeof(conf), conf_fmt, path);
	vcfg_defaults(&cfg);
	CHECK(vcfg_load_string(&cfg, "test_metric.conf", conf, &err) == 0, "config: %s",
	      err.n ? err.msg[0] : "?");
	vb_strlist_fini(&err);
	vcfg_resolve(&cfg);
	CHECK(vio_new(&cfg.io, cfg.scheduler.workers, &io) == 0, "vio_new");
	if (!io)
		goto out_dir;
	vio_park_ops(io, &cfg.scheduler.park_ops, &cfg.scheduler.park_ctx);
	CHECK(vrt_new(&cfg.scheduler, &rt) == 0, "vrt_new");
	if (!rt)
		goto out_io;
	CHECK(vsrv_new(&cfg.server, rt, io, &srv) == 0, "vsrv_new");
	memset(&cc, 0, sizeof(cc));
	cc.path = path;
	cc.mode = 0600;
	cc.group = cc.operator_group = "";
	cc.max_clients = 4;
	cc.fd = -1;
	CHECK(vctl_new(&cc, &ctl, &why) == 0, "vctl_new: %s", why);

	struct vrt_stats rs;
	struct vrt_worker_stats ws;
	memset(&rs, 0xa5, sizeof(rs));
	memset(&ws, 0xa5, sizeof(ws));
	CHECK(vrt_stats_snapshot(rt, &rs, &ws, 1) == 1, "vrt_stats_snapshot");
	check_written("vrt_metrics", vrt_metrics, vrt_metrics_n, &rs);
	check_written("vrt_worker_metrics", vrt_worker_metrics, vrt_worker_metrics_n, &ws);

	struct vio_worker_stats is;
	memset(&is, 0xa5, sizeof(is));
	CHECK(vio_stats_snapshot(io, &is, 1) == 1, "vio_stats_snapshot");
	check_written("vio_worker_metrics", vio_worker_metrics, vio_worker_metrics_n, &is);

	struct vch *ch = NULL;
	struct vch_stats cs;
	CHECK(vch_new(4, &ch) == 0, "vch_new");
	if (ch) {
		memset(&cs, 0xa5, sizeof(cs));
		vch_stats_get(ch, &cs);
		check_written("vch_metrics", vch_metrics, vch_metrics_n, &cs);
		vch_free(ch);
	}

	struct vsrv_stats *ss = srv ? vsrv_stats_new(srv) : NULL;
	CHECK(!srv || ss != NULL, "vsrv_stats_new");
	if (srv && ss) {
		/* garbage everywhere but where the kinds are */
		memset(ss, 0xa5, offsetof(struct vsrv_stats, n_kinds));
		memset(ss->kinds, 0xa5, ss->kinds_cap * sizeof(*ss->kinds));
		vsrv_stats_snapshot(srv, ss);
		check_written("vsrv_metrics", vsrv_metrics, vsrv_metrics_n, ss);
		for (size_t g = 0; g < vsrv_metric_groups_n; g++)
			check_written_group(&vsrv_metric_groups[g], ss);
		CHECK(ss->n_kinds > 0 && ss->n_kinds == ss->kinds_cap, "n_kinds %u of %u", ss->n_kinds,
		      ss->kinds_cap);
		for (unsigned k = 0; k < ss->n_kinds; k++)
			check_written("vsrv_kind_metrics", vsrv_kind_metrics, vsrv_kind_metrics_n, &ss->kinds[k]);
	}
	free(ss);

	struct vctl_stats ts;
	if (ctl) {
		memset(&ts, 0xa5, sizeof(ts));
		vctl_stats_get(ctl, &ts);
		check_written("vctl_metrics", vctl_metrics, vctl_metrics_n, &ts);
	}

	vctl_free(ctl);
	if (srv)
		vsrv_stop(srv);
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	vsrv_free(srv);
	vrt_free(rt);
out_io:
	vio_free(io);
out_dir:
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	check_complete("vrt_worker_metrics", vrt_worker_metrics, vrt_worker_metrics_n,
		       sizeof(struct vrt_worker_stats));
	check_complete("vrt_metrics", vrt_metrics, vrt_metrics_n, sizeof(struct vrt_stats));
	check_complete("vch_metrics", vch_metrics, vch_metrics_n, sizeof(struct vch_stats));
	check_complete("vio_worker_metrics", vio_worker_metrics, vio_worker_metrics_n,
		       sizeof(struct vio_worker_stats));
	check_complete("vctl_metrics", vctl_metrics, vctl_metrics_n, sizeof(struct vctl_stats));
	check_server();
	check_reload();
	check_format();
	check_snapshots();
	if (failures) {
		fprintf(stderr, "test_metric: %d failures\n", failures);
		return 1;
	}
	printf("test_metric: every table checked\n");
	return 0;
}
