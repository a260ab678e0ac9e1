/* SPDX-License-Identifier: MIT */
/*
 * base/metric.c: the text form of metric tables for log lines (see
 * metric.h). No state; any thread.
 */
#include "base/metric.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

static void put(char *buf, size_t len, size_t *off, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t len, size_t *off, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*off >= len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *off, len - *off, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	/* Cut: keep *off at the terminating NUL so later calls do nothing. */
	*off = (size_t)n < len - *off ? *off + (size_t)n : len - 1;
}

void vb_metric_format(char *buf, size_t len, size_t *off, const struct vb_metric *t, size_t n,
		      const void *stats)
{
	for (size_t i = 0; i < n; i++)
		put(buf, len, off, "%s%s=%" PRIu64, *off ? " " : "", t[i].name, vb_metric_get(&t[i], stats));
}

void vb_metric_format_group(char *buf, size_t len, size_t *off, const struct vb_metric_group *g,
			    const void *stats)
{
	for (size_t r = 0; r < *g->n_rows; r++)
		for (unsigned i = 0; i < g->n; i++) {
			uint64_t v = vb_metric_group_get(g, r, i, stats);
			if (*g->n_rows == 1)
				put(buf, len, off, "%s%s_%s=%" PRIu64, *off ? " " : "", g->rows[r].name,
				    g->values[i], v);
			else
				put(buf, len, off, "%s%s_%s=%" PRIu64, *off ? " " : "", g->values[i],
				    g->rows[r].name, v);
		}
}
