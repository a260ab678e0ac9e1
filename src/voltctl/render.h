/* SPDX-License-Identifier: MIT */
/*
 * voltctl/render.h: replies as human-readable text, generically, so that a
 * field the daemon adds shows up without a voltctl change: scalars as
 * key/value tables, arrays of objects and objects of objects (channels,
 * job kinds) as tables (transposed when they are wide and short: one column
 * per worker), nested objects flattened to dotted names; a reply's
 * array of objects whose objects hold arrays of objects (the modules, each
 * with its kinds) one block per object, titled by its "name"; an object in
 * a cell by its "name". Durations (*_seconds, *_ns) print with a unit. Also the small text table that
 * `top` draws with. Single-threaded.
 */
#ifndef VOLTD_VOLTCTL_RENDER_H
#define VOLTD_VOLTCTL_RENDER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

/* Render an ok reply, without its "schema" and "ok" members. */
void vcli_render(FILE *fp, json_t *reply);

/* One value as a table cell ("12", "4.5 ms", "yes"); `key` picks the
 * unit. Returns buf. */
const char *vcli_cell(const char *key, const json_t *v, char *buf, size_t len);

/* A duration in seconds as "4.5 ms" / "812 us" / "2.01 s". */
const char *vcli_duration(double s, char *buf, size_t len);

/* A text table: add cells row by row, then print with aligned columns
 * (numbers right-aligned). Owns copies of the strings. */
struct vcli_table {
	char ***cell;      /* rows of ncols strings */
	size_t rows, cap;
	size_t ncols;
};
void vcli_table_init(struct vcli_table *t, size_t ncols);
/* Append a row of ncols cells (NULL cells print as ""). */
void vcli_table_row(struct vcli_table *t, const char *const *cells);
/* Print each line with `indent` spaces before it; row 0 is a header when
 * `header` (underlined with dashes). One line per row, into fp. */
void vcli_table_print(const struct vcli_table *t, FILE *fp, int indent, bool header);
void vcli_table_fini(struct vcli_table *t);

#endif
