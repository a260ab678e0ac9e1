/* SPDX-License-Identifier: MIT */
/*
 * base/query.h: reading parameters from a request's query string
 * ("n=1000&alg=sha256", without the '?'). Pure functions over the bytes given:
 * no allocation, no state, any thread. Values are not percent-decoded: a
 * strict reader (vb_query_u64) rejects anything but plain digits.
 * In base (not http) because the job kinds read their parameters with it
 * and src/jobs may use only base and io (doc/layers.txt).
 */
#ifndef VOLTD_BASE_QUERY_H
#define VOLTD_BASE_QUERY_H

#include <stddef.h>
#include <stdint.h>

/* Find the first parameter called `name` (compared byte for byte). Returns
 * 1 and sets *val / *val_len (raw, possibly empty; "k" alone has an empty
 * value), or 0 when absent. */
int vb_query_get(const char *q, size_t qlen, const char *name, const char **val,
		    size_t *val_len);

/* How many parameters are called `name`. */
size_t vb_query_count(const char *q, size_t qlen, const char *name);

/* Parameter `name` as a strict unsigned decimal: one or more ASCII digits,
 * nothing else (no sign, space, '+', percent-escape), no overflow.
 * Returns 0 and sets *out, -ENOENT when absent, -EINVAL when empty, not
 * decimal or given more than once, -ERANGE above UINT64_MAX. */
int vb_query_u64(const char *q, size_t qlen, const char *name, uint64_t *out);

/* Strict decimal of a whole string (the rule above): 0, -EINVAL, -ERANGE. */
int vb_parse_u64(const char *s, size_t n, uint64_t *out);

#endif
