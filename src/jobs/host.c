/* SPDX-License-Identifier: MIT */
/*
 * jobs/host.c: the host table of <voltd/module.h>: every call a module (the
 * built-in one included) makes into voltd. The request calls read the views
 * the job was made from; the response calls build the job's result (status,
 * header fields encoded as they will be sent, body taken as the module
 * says); the rest reads the clock, the module's keys and data, the threads,
 * and counts and logs.
 *
 * Threading: "job" calls are made from the job's callbacks, on the thread
 * running it (one at a time); key_int, thread_index, count and log from any
 * thread (their shared state is atomics and the log's queue, log.c).
 */
#include "config.h"
#include "jobs/internal.h"
#include "base/query.h"
#include "base/time.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ request */

static const char *h_method(const struct voltd_job *j)
{
	return vjob__of_const(j)->method;
}

static const char *h_path(const struct voltd_job *j, size_t *len)
{
	const struct vjob *job = vjob__of_const(j);

	*len = job->path_len;
	return job->path;
}

static const char *h_query(const struct voltd_job *j, size_t *len)
{
	const struct vjob *job = vjob__of_const(j);

	*len = job->query_len;
	return job->query;
}

static int h_query_param(const struct voltd_job *j, const char *name, const char **val, size_t *len)
{
	const struct vjob *job = vjob__of_const(j);

	return vb_query_get(job->query, job->query_len, name, val, len) ? 0 : -ENOENT;
}

static int h_query_u64(const struct voltd_job *j, const char *name, uint64_t *out)
{
	const struct vjob *job = vjob__of_const(j);

	return vb_query_u64(job->query, job->query_len, name, out);
}

static char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c + ('a' - 'A')) : c;
}

static bool same_name(const char *a, const char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (lower(a[i]) != lower(b[i]))
			return false;
	return true;
}

/* The field line at off (of the request's "name:value\n" lines): name and
 * value spans; returns the next line's offset. */
static size_t field_at(const struct vjob *job, size_t off, const char **name, size_t *nlen,
		       const char **val, size_t *vlen)
{
	const char *l = job->fields + off, *end = job->fields + job->fields_len;
	const char *colon = memchr(l, ':', (size_t)(end - l));
	const char *nl = memchr(colon, '\n', (size_t)(end - colon));

	*name = l;
	*nlen = (size_t)(colon - l);
	*val = colon + 1;
	*vlen = (size_t)(nl - colon - 1);
	return (size_t)(nl + 1 - job->fields);
}

static const char *h_header(const struct voltd_job *j, const char *name, size_t *len)
{
	const struct vjob *job = vjob__of_const(j);
	size_t want = strlen(name), off = 0;

	for (uint32_t i = 0; i < job->n_fields; i++) {
		const char *n, *v;
		size_t nl, vl;

		off = field_at(job, off, &n, &nl, &v, &vl);
		if (nl == want && same_name(n, name, nl)) {
			*len = vl;
			return v;
		}
	}
	*len = 0;
	return NULL;
}

static int h_header_at(const struct voltd_job *j, size_t i, const char **name, size_t *name_len,
		       const char **val, size_t *val_len)
{
	/* The cursor makes a walk in order linear: only the cursor changes
	 * (the job is its caller's, one thread at a time). */
	struct vjob *job = (struct vjob *)vjob__of_const(j);

	if (i >= job->n_fields)
		return -ENOENT;
	if (i < job->hcur_i) {
		job->hcur_i = 0;
		job->hcur_off = 0;
	}
	while (job->hcur_i < i) {
		const char *n, *v;
		size_t nl, vl;

		job->hcur_off = (uint32_t)field_at(job, job->hcur_off, &n, &nl, &v, &vl);
		job->hcur_i++;
	}
	field_at(job, job->hcur_off, name, name_len, val, val_len);
	return 0;
}

static const uint8_t *h_body(const struct voltd_job *j, size_t *len)
{
	const struct vjob *job = vjob__of_const(j);

	*len = job->in_body ? job->in_len : 0;
	return job->in_len ? job->in_body : NULL;
}

static void *h_body_take(struct voltd_job *j, size_t *len)
{
	struct vjob *job = vjob__of(j);
	uint8_t *b = job->in_body;

	*len = b ? job->in_len : 0;
	job->in_body = NULL;
	job->in_len = 0;
	if (b && !*len) {
		free(b);
		b = NULL;
	}
	return b;
}

/* ----------------------------------------------------------- response */

/* Response calls are for start and step, before the job is done. */
static bool may_respond(const struct vjob *job)
{
	return !job->done && !job->in_fini;
}

static int h_set_status(struct voltd_job *j, int status)
{
	struct vjob *job = vjob__of(j);

	if (!may_respond(job) || status < 200 || status > 599)
		return -EINVAL;
	job->res.status = status;
	return 0;
}

/* tchar of RFC 9110 5.6.2. */
static bool is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* A field voltd writes itself (framing, hop by hop, its own): refused. */
static bool voltds_field(const char *name, size_t n)
{
#define OWN(s) { s, sizeof(s) - 1 }
	static const struct {
		const char *name;
		size_t len;
	} own[] = { OWN("date"), OWN("server"), OWN("content-length"), OWN("transfer-encoding"),
		    OWN("connection"), OWN("keep-alive"), OWN("upgrade"), OWN("te"), OWN("trailer") };
#undef OWN

	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (own[i].len == n && same_name(name, own[i].name, n))
			return true;
	return n >= 6 && same_name(name, "proxy-", 6);
}

/* Room for `more` bytes of header lines (and the final "\r\n"). */
static int hdrs_room(struct vjob *job, size_t more)
{
	size_t need = job->res.hdrs_len + more + 2;
	char *h;

	if (need <= job->hdrs_cap)
		return 0;
	size_t cap = job->hdrs_cap * 2 > need ? job->hdrs_cap * 2 : need;
	if (cap > VOLTD_HEADERS_MAX + 2)
		cap = VOLTD_HEADERS_MAX + 2;
	if (job->hdrs_heap) {
		h = realloc(job->hdrs_heap, cap);
	} else {
		h = malloc(cap);
		if (h)
			memcpy(h, job->res.hdrs, job->res.hdrs_len);
	}
	if (!h)
		return -ENOMEM;
	job->hdrs_heap = h;
	job->res.hdrs = h;
	job->hdrs_cap = (uint32_t)cap;
	return 0;
}

/* Remove the lines named `name` (Content-Type: one per response). */
static void hdrs_remove(struct vjob *job, const char *name, size_t n)
{
	char *h = (char *)job->res.hdrs;
	size_t off = 0;

	while (off < job->res.hdrs_len) {
		char *l = h + off;
		char *end = memchr(l, '\n', job->res.hdrs_len - off) + 1;
		size_t ll = (size_t)(end - l);

		if (ll > n && l[n] == ':' && same_name(l, name, n)) {
			memmove(l, end, job->res.hdrs_len - off - ll);
			job->res.hdrs_len -= ll;
		} else {
			off += ll;
		}
	}
}

/* Append "name: value\r\n"; name already checked. */
static int hdrs_add(struct vjob *job, const char *name, size_t n, const char *value)
{
	size_t vl = 0;

	for (const unsigned char *v = (const unsigned char *)value; *v; v++, vl++)
		if ((*v < 0x20 && *v != '\t') || *v == 0x7f)
			return -EINVAL;
	bool ctype = n == 12 && same_name(name, "content-type", 12);
	if (ctype)
		hdrs_remove(job, name, n);
	size_t line = n + 2 + vl + 2;
	if (job->res.hdrs_len + line > VOLTD_HEADERS_MAX)
		return -E2BIG;
	int rc = hdrs_room(job, line);
	if (rc < 0)
		return rc;
	char *at = (char *)job->res.hdrs + job->res.hdrs_len;
	memcpy(at, name, n);
	memcpy(at + n, ": ", 2);
	memcpy(at + n + 2, value, vl);
	memcpy(at + n + 2 + vl, "\r\n", 2);
	job->res.hdrs_len += line;
	return 0;
}

static int h_set_header(struct voltd_job *j, const char *name, const char *value)
{
	struct vjob *job = vjob__of(j);
	size_t n = 0;

	if (!may_respond(job) || !name || !value)
		return -EINVAL;
	for (; name[n]; n++)
		if (!is_tchar((unsigned char)name[n]))
			return -EINVAL;
	if (!n || voltds_field(name, n))
		return -EINVAL;
	return hdrs_add(job, name, n, value);
}

/* The body becomes b (len bytes), freed with the job when owned. */
static void body_set(struct vjob *job, const void *b, size_t len, bool owned)
{
	if (job->body_owned && job->res.body != b)
		free((void *)job->res.body);
	job->res.body = b;
	job->res.body_len = len;
	job->body_owned = owned;
}

static int h_set_body(struct voltd_job *j, const void *data, size_t len, uint32_t how)
{
	struct vjob *job = vjob__of(j);

	if (!may_respond(job) || (!data && len) || how > VOLTD_BODY_MALLOC) {
		if (how == VOLTD_BODY_MALLOC && data != job->res.body)
			free((void *)data);
		return -EINVAL;
	}
	switch (how) {
	case VOLTD_BODY_STATIC:
		body_set(job, data, len, false);
		return 0;
	case VOLTD_BODY_MALLOC:
		body_set(job, data, len, data != NULL);
		return 0;
	default:
		break;
	}
	/* COPY: the job's own text when short (no allocation), else a copy. */
	if (data == job->text || data == job->res.body) {
		/* already the job's (body_alloc's buffer): nothing to copy */
		body_set(job, data, len, job->body_owned && data == job->res.body);
		return 0;
	}
	if (len <= sizeof(job->text)) {
		if (len)
			memcpy(job->text, data, len);
		body_set(job, job->text, len, false);
		return 0;
	}
	void *copy = malloc(len);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, data, len);
	body_set(job, copy, len, true);
	return 0;
}

static void *h_body_alloc(struct voltd_job *j, size_t len)
{
	struct vjob *job = vjob__of(j);
	void *b;

	if (!may_respond(job))
		return NULL;
	if (len <= sizeof(job->text)) {
		body_set(job, job->text, len, false);
		return job->text;
	}
	if (!(b = malloc(len)))
		return NULL;
	body_set(job, b, len, true);
	return b;
}

static int h_respond(struct voltd_job *j, int status, const char *content_type, const void *data,
		     size_t len, uint32_t how)
{
	struct vjob *job = vjob__of(j);
	int rc = h_set_status(j, status);

	if (!rc && content_type)
		rc = hdrs_add(job, "Content-Type", 12, content_type);
	if (rc < 0) {
		if (how == VOLTD_BODY_MALLOC && data != job->res.body)
			free((void *)data);
		return rc;
	}
	rc = h_set_body(j, data, len, how);
	return rc < 0 ? rc : VOLTD_STEP_DONE;
}

static int h_respondf(struct voltd_job *j, int status, const char *fmt, ...)
{
	va_list ap;
	int rc = h_set_status(j, status);

	if (rc < 0)
		return rc;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	/* One more byte for vsnprintf's NUL: the body is n bytes. */
	char *s = h_body_alloc(j, (size_t)n + 1);
	if (!s)
		return -ENOMEM;
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	vjob__of(j)->res.body_len = (size_t)n;
	rc = hdrs_add(vjob__of(j), "Content-Type", 12, "text/plain");
	return rc < 0 ? rc : VOLTD_STEP_DONE;
}

/* -------------------------------------------------------------- time */

static int64_t h_now_ns(void)
{
	return vb_now_ns();
}

static void h_sleep_until(struct voltd_job *j, int64_t wake_ns)
{
	vjob__of(j)->wake_ns = wake_ns;
}

/* ------------------------------------------------------------ module */

static struct voltd_mod *h_mod_of(const struct voltd_job *j)
{
	return (struct voltd_mod *)vjob__of_const(j)->kind->mod;
}

static void *h_mod_data(const struct voltd_mod *m)
{
	return vjob__mod_of_const(m)->data;
}

static int64_t h_key_int(const struct voltd_mod *mod, uint32_t key)
{
	const struct vjob_mod *m = vjob__mod_of_const(mod);

	if (key >= m->n_keys || m->keys[key].def.type == VOLTD_KEY_STRING)
		return 0;
	/* Relaxed: a value on its own (struct vjob_key). */
	return atomic_load_explicit(&m->keys[key].ival, memory_order_relaxed);
}

static const char *h_key_str(const struct voltd_mod *mod, uint32_t key)
{
	const struct vjob_mod *m = vjob__mod_of_const(mod);

	if (key >= m->n_keys || m->keys[key].def.type != VOLTD_KEY_STRING)
		return NULL;
	return m->keys[key].sval;
}

static void h_count(struct voltd_job *j, uint32_t counter, uint64_t n)
{
	vjob__count(vjob__of(j)->kind, counter, n);
}

static unsigned h_thread_index(void)
{
	return vjob__thread_index();
}

static unsigned h_thread_count(void)
{
	return vjob__thread_count();
}

static void h_log(const struct voltd_mod *mod, int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vjob__log(vjob__mod_of_const(mod), level, fmt, ap);
	va_end(ap);
}

const struct voltd_host vjob__host = {
	.size = sizeof(struct voltd_host),
	.abi_major = VOLTD_MODULE_ABI_MAJOR,
	.abi_minor = VOLTD_MODULE_ABI_MINOR,
	.version = PACKAGE_VERSION,
	.method = h_method,
	.path = h_path,
	.query = h_query,
	.query_param = h_query_param,
	.query_u64 = h_query_u64,
	.header = h_header,
	.header_at = h_header_at,
	.body = h_body,
	.body_take = h_body_take,
	.set_status = h_set_status,
	.set_header = h_set_header,
	.set_body = h_set_body,
	.body_alloc = h_body_alloc,
	.respond = h_respond,
	.respondf = h_respondf,
	.now_ns = h_now_ns,
	.sleep_until = h_sleep_until,
	.mod_of = h_mod_of,
	.mod_data = h_mod_data,
	.key_int = h_key_int,
	.key_str = h_key_str,
	.count = h_count,
	.thread_index = h_thread_index,
	.thread_count = h_thread_count,
	.log = h_log,
};
