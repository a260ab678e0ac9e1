/* SPDX-License-Identifier: MIT */
/*
 * voltctl/render.c: see render.h.
 */
#include "voltctl/render.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Wider than this and no longer than TRANSPOSE_ROWS: one column per row. */
#define TRANSPOSE_COLS 8
#define TRANSPOSE_ROWS 16
#define CELL 128

/* ------------------------------------------------------------------ cells */

const char *vcli_duration(double s, char *buf, size_t len)
{
	double a = s < 0 ? -s : s;

	if (a == 0)
		snprintf(buf, len, "0");
	else if (a < 1e-6)
		snprintf(buf, len, "%.0f ns", s * 1e9);
	else if (a < 1e-3)
		snprintf(buf, len, "%.3g us", s * 1e6);
	else if (a < 1)
		snprintf(buf, len, "%.3g ms", s * 1e3);
	else
		snprintf(buf, len, "%.3g s", s);
	return buf;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && strcmp(s + a - b, suffix) == 0;
}

const char *vcli_cell(const char *key, const json_t *v, char *buf, size_t len)
{
	const char *k = key ? key : "";
	const char *dot = strrchr(k, '.');

	if (dot)
		k = dot + 1;
	switch (json_typeof(v)) {
	case JSON_INTEGER: {
		json_int_t i = json_integer_value(v);
		if (ends_with(k, "_ns") && i != 0)
			return vcli_duration((double)i / 1e9, buf, len);
		if (ends_with(k, "_seconds") && i != 0)
			return vcli_duration((double)i, buf, len);
		snprintf(buf, len, "%" JSON_INTEGER_FORMAT, i);
		return buf;
	}
	case JSON_REAL:
		if (ends_with(k, "_seconds"))
			return vcli_duration(json_real_value(v), buf, len);
		snprintf(buf, len, "%.6g", json_real_value(v));
		return buf;
	case JSON_STRING:
		snprintf(buf, len, "%s", json_string_value(v));
		return buf;
	case JSON_TRUE:
		return snprintf(buf, len, "yes"), buf;
	case JSON_FALSE:
		return snprintf(buf, len, "no"), buf;
	case JSON_NULL:
		return snprintf(buf, len, "-"), buf;
	case JSON_ARRAY: {
		size_t off = 0, i;
		json_t *e;
		buf[0] = '\0';
		json_array_foreach(v, i, e) {
			char one[CELL];
			vcli_cell(key, e, one, sizeof(one));
			off += (size_t)snprintf(buf + off, off < len ? len - off : 0, "%s%s", i ? ", " : "", one);
			if (off >= len)
				break;
		}
		return buf;
	}
	case JSON_OBJECT: {
		/* An object in a cell (a module's kind's counters) by its name. */
		const json_t *name = json_object_get(v, "name");
		if (json_is_string(name))
			return snprintf(buf, len, "%s", json_string_value(name)), buf;
		return snprintf(buf, len, "{...}"), buf;
	}
	}
	return "";
}

/* ------------------------------------------------------------------ table */

void vcli_table_init(struct vcli_table *t, size_t ncols)
{
	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
}

void vcli_table_row(struct vcli_table *t, const char *const *cells)
{
	char **row;

	if (t->rows == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 16;
		char ***c = realloc(t->cell, cap * sizeof(*c));
		if (!c)
			return;
		t->cell = c;
		t->cap = cap;
	}
	row = calloc(t->ncols, sizeof(*row));
	if (!row)
		return;
	for (size_t i = 0; i < t->ncols; i++)
		row[i] = strdup(cells[i] ? cells[i] : "");
	t->cell[t->rows++] = row;
}

static bool numeric(const char *s)
{
	if (*s == '-' && s[1])
		s++;
	return isdigit((unsigned char)*s) != 0;
}

void vcli_table_print(const struct vcli_table *t, FILE *fp, int indent, bool header)
{
	size_t *w = calloc(t->ncols ? t->ncols : 1, sizeof(*w));
	/* Numbers right-align to the widest number of their column (wn), not
	 * to a long string in it: a key/value block would push them far right. */
	size_t *wn = calloc(t->ncols ? t->ncols : 1, sizeof(*wn));
	/* A header cell aligns as most of its column's cells do. */
	int *nums = calloc(t->ncols ? t->ncols : 1, sizeof(*nums));

	if (!w || !wn || !nums) {
		free(w);
		free(wn);
		free(nums);
		return;
	}
	for (size_t r = header ? 1 : 0; r < t->rows; r++)
		for (size_t c = 0; c < t->ncols; c++)
			if (*t->cell[r][c])
				nums[c] += numeric(t->cell[r][c]) ? 1 : -1;
	for (size_t r = 0; r < t->rows; r++)
		for (size_t c = 0; c < t->ncols; c++) {
			size_t l = strlen(t->cell[r][c]);
			if (l > w[c])
				w[c] = l;
			if (c > 0 && (header && r == 0 ? nums[c] > 0 : numeric(t->cell[r][c])) && l > wn[c])
				wn[c] = l;
		}
	for (size_t r = 0; r < t->rows; r++) {
		fprintf(fp, "%*s", indent, "");
		for (size_t c = 0; c < t->ncols; c++) {
			const char *s = t->cell[r][c];
			bool right = c > 0 && (header && r == 0 ? nums[c] > 0 : numeric(s));
			bool last = c + 1 == t->ncols;
			if (right)
				fprintf(fp, "%*s%*s%s", (int)wn[c], s, last ? 0 : (int)(w[c] - wn[c]), "",
					last ? "" : "  ");
			else
				fprintf(fp, "%-*s%s", last ? 0 : (int)w[c], s, last ? "" : "  ");
		}
		fputc('\n', fp);
		if (header && r == 0) {
			size_t total = 0;
			for (size_t c = 0; c < t->ncols; c++)
				total += w[c] + (c + 1 < t->ncols ? 2 : 0);
			fprintf(fp, "%*s", indent, "");
			for (size_t i = 0; i < total; i++)
				fputc('-', fp);
			fputc('\n', fp);
		}
	}
	free(w);
	free(wn);
	free(nums);
}

void vcli_table_fini(struct vcli_table *t)
{
	for (size_t r = 0; r < t->rows; r++) {
		for (size_t c = 0; c < t->ncols; c++)
			free(t->cell[r][c]);
		free(t->cell[r]);
	}
	free(t->cell);
	memset(t, 0, sizeof(*t));
}

/* ------------------------------------------------------------ flattening */

/* Column names of an object: scalars and arrays of scalars as they are,
 * nested objects as "parent.child". */
struct cols {
	char **name;
	size_t n, cap;
};

static void cols_add(struct cols *c, const char *name)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->name[i], name) == 0)
			return;
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 32;
		char **n = realloc(c->name, cap * sizeof(*n));
		if (!n)
			return;
		c->name = n;
		c->cap = cap;
	}
	c->name[c->n++] = strdup(name);
}

static void cols_fini(struct cols *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->name[i]);
	free(c->name);
}

static void collect(struct cols *c, json_t *o, const char *prefix)
{
	const char *k;
	json_t *v;

	json_object_foreach(o, k, v) {
		char name[256];
		snprintf(name, sizeof(name), "%s%s%s", prefix, *prefix ? "." : "", k);
		if (json_is_object(v))
			collect(c, v, name);
		else
			cols_add(c, name);
	}
}

/* The value at a dotted path inside o (NULL when absent). */
static json_t *at(json_t *o, const char *path)
{
	char buf[256], *save = NULL, *part;

	snprintf(buf, sizeof(buf), "%s", path);
	for (part = strtok_r(buf, ".", &save); part && o; part = strtok_r(NULL, ".", &save))
		o = json_object_get(o, part);
	return o;
}

static bool is_object_array(json_t *v)
{
	size_t i;
	json_t *e;

	if (!json_is_array(v) || json_array_size(v) == 0)
		return false;
	json_array_foreach(v, i, e)
		if (!json_is_object(e))
			return false;
	return true;
}

/* An object whose members are all objects: rows named by their keys. */
static bool is_object_of_objects(json_t *v)
{
	const char *k;
	json_t *e;

	if (!json_is_object(v) || json_object_size(v) == 0)
		return false;
	json_object_foreach(v, k, e)
		if (!json_is_object(e))
			return false;
	return true;
}

/* Rows: (name, object) pairs; names NULL for an array (first column is
 * then the objects' own first member). */
static void print_rows(FILE *fp, int indent, const char *const *names, json_t **objs, size_t n)
{
	struct cols c = { 0 };
	struct vcli_table t;
	size_t extra = names ? 1 : 0;

	for (size_t r = 0; r < n; r++)
		collect(&c, objs[r], "");
	if (c.n + extra > TRANSPOSE_COLS && n <= TRANSPOSE_ROWS) {
		/* One column per row; the first row of cells names them. */
		const char **cells = calloc(n + 1, sizeof(*cells));
		char (*vals)[CELL] = calloc(n + 1, CELL);
		size_t first = 0;

		if (!cells || !vals)
			goto out_t;
		vcli_table_init(&t, n + 1);
		cells[0] = names ? "" : c.name[0];
		for (size_t r = 0; r < n; r++) {
			cells[r + 1] = names ? names[r] : vcli_cell(c.name[0], at(objs[r], c.name[0]),
								   vals[r + 1], CELL);
		}
		vcli_table_row(&t, cells);
		first = names ? 0 : 1;
		for (size_t i = first; i < c.n; i++) {
			cells[0] = c.name[i];
			for (size_t r = 0; r < n; r++) {
				json_t *v = at(objs[r], c.name[i]);
				cells[r + 1] = v ? vcli_cell(c.name[i], v, vals[r + 1], CELL) : "";
			}
			vcli_table_row(&t, cells);
		}
		vcli_table_print(&t, fp, indent, true);
		vcli_table_fini(&t);
out_t:
		free(cells);
		free(vals);
	} else {
		const char **cells = calloc(c.n + extra, sizeof(*cells));
		char (*vals)[CELL] = calloc(c.n + extra, CELL);

		if (!cells || !vals)
			goto out_n;
		vcli_table_init(&t, c.n + extra);
		if (names)
			cells[0] = "name";
		for (size_t i = 0; i < c.n; i++)
			cells[i + extra] = c.name[i];
		vcli_table_row(&t, cells);
		for (size_t r = 0; r < n; r++) {
			if (names)
				cells[0] = names[r];
			for (size_t i = 0; i < c.n; i++) {
				json_t *v = at(objs[r], c.name[i]);
				cells[i + extra] = v ? vcli_cell(c.name[i], v, vals[i + extra], CELL) : "";
			}
			vcli_table_row(&t, cells);
		}
		vcli_table_print(&t, fp, indent, true);
		vcli_table_fini(&t);
out_n:
		free(cells);
		free(vals);
	}
	cols_fini(&c);
}

static void render_object(FILE *fp, json_t *o, const char *path, int indent);

/* Does an array of objects hold objects that hold arrays of objects (the
 * modules, each with its kinds)? Then each is a block of its own. */
static bool is_nested_array(json_t *v)
{
	size_t i;
	json_t *e, *m;
	const char *k;

	json_array_foreach(v, i, e)
		json_object_foreach(e, k, m)
			if (is_object_array(m))
				return true;
	return false;
}

static void render_member(FILE *fp, const char *name, json_t *v, int indent)
{
	size_t n = 0, i;
	json_t **objs;
	const char **names;

	fprintf(fp, "%*s%s\n", indent, "", name);
	if (indent == 0 && is_object_array(v) && is_nested_array(v)) {
		json_t *e;
		json_array_foreach(v, i, e) {
			const json_t *title = json_object_get(e, "name");
			if (i)
				fputc('\n', fp);
			if (json_is_string(title))
				fprintf(fp, "%*s%s\n", indent + 2, "", json_string_value(title));
			else
				fprintf(fp, "%*s%zu\n", indent + 2, "", i);
			render_object(fp, e, name, indent + 4);
		}
	} else if (is_object_array(v)) {
		json_t *e;
		n = json_array_size(v);
		objs = calloc(n, sizeof(*objs));
		if (!objs)
			return;
		json_array_foreach(v, i, e)
			objs[i] = e;
		print_rows(fp, indent + 2, NULL, objs, n);
		free(objs);
	} else if (is_object_of_objects(v)) {
		const char *k;
		json_t *e;
		n = json_object_size(v);
		objs = calloc(n, sizeof(*objs));
		names = calloc(n, sizeof(*names));
		if (objs && names) {
			i = 0;
			json_object_foreach(v, k, e) {
				names[i] = k;
				objs[i++] = e;
			}
			print_rows(fp, indent + 2, names, objs, n);
		}
		free(objs);
		free(names);
	} else {
		render_object(fp, v, name, indent + 2);
	}
}

/* Scalars (and arrays of scalars) first as one key/value table, then each
 * nested object or array of objects under its name. */
static void render_object(FILE *fp, json_t *o, const char *path, int indent)
{
	struct vcli_table t;
	const char *k;
	json_t *v;
	char buf[1024];
	bool any = false;

	(void)path;
	vcli_table_init(&t, 2);
	json_object_foreach(o, k, v) {
		if (json_is_object(v) || is_object_array(v))
			continue;
		if (indent == 0 && (strcmp(k, "schema") == 0 || strcmp(k, "ok") == 0))
			continue;
		const char *cells[2] = { k, vcli_cell(k, v, buf, sizeof(buf)) };
		vcli_table_row(&t, cells);
		any = true;
	}
	if (any)
		vcli_table_print(&t, fp, indent, false);
	vcli_table_fini(&t);
	json_object_foreach(o, k, v) {
		if (json_is_object(v) && json_object_size(v) == 0)
			continue;
		if (json_is_object(v) || is_object_array(v)) {
			if (any || indent == 0)
				fputc('\n', fp);
			render_member(fp, k, v, indent);
			any = true;
		}
	}
}

void vcli_render(FILE *fp, json_t *reply)
{
	render_object(fp, reply, "", 0);
}
