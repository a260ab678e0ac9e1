/* SPDX-License-Identifier: MIT */
/*
 * base/strlist.h: a growing list of malloc'd strings, each built from a
 * printf format: error lists (configuration problems, one per line) and the
 * key lists of a reload. Owned by the caller; not thread-safe (one owner).
 */
#ifndef VOLTD_BASE_STRLIST_H
#define VOLTD_BASE_STRLIST_H

#include <stdarg.h>
#include <stddef.h>

/* Zero-initialise ({ 0 }); public, read-only: msg[0..n) are the strings. */
struct vb_strlist {
	char **msg;
	size_t n, cap;
};

/* Append one formatted string: 0, or -ENOMEM (the list is unchanged). */
int vb_strlist_add(struct vb_strlist *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int vb_strlist_vadd(struct vb_strlist *l, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Free every string and the array; the list is empty again. */
void vb_strlist_fini(struct vb_strlist *l);

#endif
