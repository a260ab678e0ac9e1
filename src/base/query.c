/* SPDX-License-Identifier: MIT */
/*
 * base/query.c: see query.h. Stateless.
 */
#include "base/query.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

/* Walk "k=v&k=v" for parameters called `name`: with count NULL, stop at the
 * first and return true with its value; otherwise count them all. */
static bool each_param(const char *q, size_t qlen, const char *name, const char **val,
		       size_t *val_len, size_t *count)
{
	size_t nlen = strlen(name);
	const char *end = q + qlen;
	while (q < end) {
		const char *amp = memchr(q, '&', (size_t)(end - q));
		const char *pe = amp ? amp : end;
		const char *eq = memchr(q, '=', (size_t)(pe - q));
		const char *ke = eq ? eq : pe;
		if ((size_t)(ke - q) == nlen && memcmp(q, name, nlen) == 0) {
			if (count) {
				(*count)++;
			} else {
				*val = eq ? eq + 1 : pe;
				*val_len = (size_t)(pe - *val);
				return true;
			}
		}
		q = amp ? amp + 1 : end;
	}
	return false;
}

int vb_query_get(const char *q, size_t qlen, const char *name, const char **val,
		    size_t *val_len)
{
	return each_param(q, qlen, name, val, val_len, NULL) ? 1 : 0;
}

size_t vb_query_count(const char *q, size_t qlen, const char *name)
{
	size_t n = 0;
	each_param(q, qlen, name, NULL, NULL, &n);
	return n;
}

int vb_parse_u64(const char *s, size_t n, uint64_t *out)
{
	if (n == 0)
		return -EINVAL;
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			goto range;
		v = v * 10 + d;
	}
	*out = v;
	return 0;

range:
	/* Still report EINVAL for junk after an overflowing prefix. */
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
	return -ERANGE;
}

int vb_query_u64(const char *q, size_t qlen, const char *name, uint64_t *out)
{
	const char *v;
	size_t vlen;
	if (!vb_query_get(q, qlen, name, &v, &vlen))
		return -ENOENT;
	if (vb_query_count(q, qlen, name) > 1)
		return -EINVAL;
	return vb_parse_u64(v, vlen, out);
}
