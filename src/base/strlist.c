/* SPDX-License-Identifier: MIT */
/*
 * base/strlist.c: see strlist.h. No shared state.
 */
#include "config.h"
#include "base/strlist.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int vb_strlist_vadd(struct vb_strlist *l, const char *fmt, va_list ap)
{
	char *s = NULL;

	if (vasprintf(&s, fmt, ap) < 0 || !s)
		return -ENOMEM;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 8;
		char **m = realloc(l->msg, cap * sizeof(*m));
		if (!m) {
			free(s);
			return -ENOMEM;
		}
		l->msg = m;
		l->cap = cap;
	}
	l->msg[l->n++] = s;
	return 0;
}

int vb_strlist_add(struct vb_strlist *l, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	int rc = vb_strlist_vadd(l, fmt, ap);
	va_end(ap);
	return rc;
}

void vb_strlist_fini(struct vb_strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->msg[i]);
	free(l->msg);
	l->msg = NULL;
	l->n = l->cap = 0;
}
