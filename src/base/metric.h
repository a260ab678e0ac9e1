/* SPDX-License-Identifier: MIT */
/*
 * base/metric.h: counters and gauges declared as tables. Each layer declares
 * the uint64_t fields of its stats struct once, next to that struct (e.g.
 * vrt_worker_metrics for struct vrt_worker_stats): name, kind, unit, help and
 * the field's offset. Everything that prints counters (the shutdown log line,
 * the control socket's JSON and Prometheus renderers) iterates these tables,
 * so adding a counter is one row. tests/unit/test_metric.c checks every table.
 *
 * Naming: `name` is snake_case, without a layer prefix and without a unit
 * suffix ("polls", "bytes_in"); the unit is its own column. A Prometheus
 * renderer builds voltd_<table>_<name>[_<unit>][_total] (the unit is left out
 * when the name already contains it as a word, e.g. "bytes_in").
 *
 * Tables are constant data: any thread may read them. The stats structs they
 * describe are plain snapshots owned by the caller.
 */
#ifndef VOLTD_BASE_METRIC_H
#define VOLTD_BASE_METRIC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum vb_metric_kind { VB_METRIC_COUNTER, VB_METRIC_GAUGE };

/* One row: a uint64_t field of a stats struct. Public, read-only. */
struct vb_metric {
	const char *name;   /* snake_case, no prefix, no unit suffix: "polls", "bytes_in" */
	enum vb_metric_kind kind;
	const char *unit;   /* "" for a plain count, else a base unit: "bytes", "seconds", "nanoseconds" */
	const char *help;   /* one line */
	size_t offset;      /* of a uint64_t field in the layer's stats struct */
	/* A gauge holding an enum: the names of its values 0, 1, ...,
	 * NULL-terminated (Prometheus renders a state set: one series per
	 * state, 1 for the current one); NULL for a plain number. */
	const char *const *states;
};

/* A row whose name is the field's name. */
#define VB_METRIC(type, field, kind, unit, help) { #field, kind, unit, help, offsetof(type, field), NULL }
/* A row named differently from its field (e.g. a field carrying a unit suffix). */
#define VB_METRIC_AS(type, field, name, kind, unit, help) { name, kind, unit, help, offsetof(type, field), NULL }
/* A gauge whose value is an enum named by states[] (NULL-terminated). */
#define VB_METRIC_STATES(type, field, states, help) \
	{ #field, VB_METRIC_GAUGE, "", help, offsetof(type, field), states }

static inline uint64_t vb_metric_get(const struct vb_metric *m, const void *stats)
{
	uint64_t v;

	memcpy(&v, (const char *)stats + m->offset, sizeof(v));
	return v;
}

/*
 * A labelled family: a table applied to `n` equally spaced elements inside a
 * stats struct, element i labelled `label`="values[i]". Covers arrays of one
 * value (server responses by status class: rows = one row at offset 0,
 * stride sizeof(uint64_t), label "code") and arrays of nested stats structs
 * (the server's two channels: rows = vch_metrics, stride sizeof(struct
 * vch_stats), label "channel"). Element i of row r is the uint64_t at
 * offset + i * stride + rows[r].offset. Public, read-only.
 */
struct vb_metric_group {
	const struct vb_metric *rows;
	const size_t *n_rows;          /* a pointer: table sizes are extern consts */
	size_t offset;                 /* of element 0 in the outer stats struct */
	size_t stride;                 /* bytes between elements */
	const char *label;             /* "code", "stage", "channel" */
	const char *const *values;     /* n label values */
	unsigned n;
};

static inline uint64_t vb_metric_group_get(const struct vb_metric_group *g, size_t row, unsigned i,
					   const void *stats)
{
	return vb_metric_get(&g->rows[row], (const char *)stats + g->offset + (size_t)i * g->stride);
}

/*
 * Append "name=value" pairs (space separated) of a table to buf at *off,
 * keeping buf NUL-terminated and never writing past len (the text is cut
 * when it does not fit). For log lines. A group of one row writes
 * "name_value=N" ("responses_2xx=5", "in_flight_parse=0"); a group of a
 * nested table writes "value_name=N" ("jobs_send_waits=0").
 */
void vb_metric_format(char *buf, size_t len, size_t *off, const struct vb_metric *t, size_t n,
		      const void *stats);
void vb_metric_format_group(char *buf, size_t len, size_t *off, const struct vb_metric_group *g,
			    const void *stats);

#endif
