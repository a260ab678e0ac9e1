/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_metric.c: every metric table of every layer (base/metric.h):
 * each row's offset lies inside its stats struct and is aligned; names are
 * snake_case, carry no unit suffix and are unique (within a table, and among
 * the families a renderer puts under one prefix); units and kinds are known;
 * every uint64_t field of a stats struct has exactly one row (so a field
 * added without its row fails here); the log-line formatter writes what the
 * tables say and never overflows its buffer. No cmocka: runs everywhere.
 */
#include "base/metric.h"
#include "chan/chan.h"
#include "ctl/ctl.h"
#include "io/io.h"
#include "rt/rt.h"
#include "server/server.h"

#include <inttypes.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(void)
{
	check_complete("vrt_worker_metrics", vrt_worker_metrics, vrt_worker_metrics_n,
		       sizeof(struct vrt_worker_stats));
	check_complete("vrt_metrics", vrt_metrics, vrt_metrics_n, sizeof(struct vrt_stats));
	check_complete("vch_metrics", vch_metrics, vch_metrics_n, sizeof(struct vch_stats));
	check_complete("vio_worker_metrics", vio_worker_metrics, vio_worker_metrics_n,
		       sizeof(struct vio_worker_stats));
	check_server();
	check_reload();
	check_format();
	if (failures) {
		fprintf(stderr, "test_metric: %d failures\n", failures);
		return 1;
	}
	printf("test_metric: every table checked\n");
	return 0;
}
