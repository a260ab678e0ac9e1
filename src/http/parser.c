/* SPDX-License-Identifier: MIT */
/*
 * http/parser.c: see parser.h. Single-threaded per parser; no shared state.
 *
 * How llhttp is driven: it is a push parser that never buffers, so every
 * execute call consumes all it is given unless a callback pauses it. We pause
 * it at three points so that each call covers exactly one part of a message:
 * at the end of the head (on_headers_complete), at the last chunk (where the
 * trailer section starts) and at the end of the message. Head and trailer
 * bytes are then counted exactly: in those parts a call is given at most the
 * bytes left under max_header_bytes, so a head that does not end within them
 * is over the limit. Head bytes are also scanned for obs-fold (a line
 * starting with SP or HTAB), which llhttp 8 accepts: a fold is caught before
 * llhttp is given its first byte, so the outcome never depends on how the
 * stream was split into reads. Head bytes are also scanned for HTAB inside
 * field values, which become SP before llhttp sees them: optional
 * whitespace is SP and HTAB (RFC 9110 5.5), but llhttp 8 takes only SP
 * after a value ("chunked<TAB>" would be an invalid Transfer-Encoding,
 * "close<TAB>" no close at all). A value's own HTAB is whitespace to every
 * field we interpret, and the others are dropped.
 *
 * Known llhttp 8.1 limit: a chunk with two extensions that both have values
 * ("1;a=b;c=d") is rejected as a bad chunk size (400); one valued extension,
 * or several without values, pass. Clients practically never send them.
 */
#include "http/parser.h"
#include "base/compiler.h"

#include <llhttp.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum pstate {
	ST_HEAD,    /* before or inside a request head */
	ST_BODY,    /* head done, body (or chunks) arriving */
	ST_TRAILER, /* after the last chunk: trailer fields */
	ST_CLOSED,  /* a request said close: parse nothing more */
	ST_ERROR,   /* sticky */
};

enum field_id { F_NONE = 0, F_HOST, F_TE, F_EXPECT };

/* Where the HTAB scan (see the top) is in the head or trailer section. */
enum hscan {
	HS_LINE0 = 0, /* the request line */
	HS_BOL,       /* at the start of a field line (or the empty line) */
	HS_CR,        /* CR at the start of a line */
	HS_NAME,      /* in a field name */
	HS_VALUE,     /* in a field value: HTAB becomes SP */
	HS_DONE,      /* the section has ended: scan nothing until reset */
};

struct vhttp_parser {
	llhttp_t ll;
	struct vhttp_limits lim;

	/* Input: unparsed bytes are in[in_off, in_len). */
	char *in;
	size_t in_cap, in_off, in_len;

	enum pstate st;
	bool in_message;   /* on_message_begin seen, message not complete */
	bool url_done;     /* the request-target is complete */
	bool resume;       /* paused: execute once more even with no bytes */
	bool last_lf;      /* obs-fold scan: previous head byte was LF */
	uint8_t hscan;     /* enum hscan: HTAB scan state */
	size_t head_bytes; /* bytes of this head (or trailer section) so far */
	uint64_t ext_bytes;/* chunk-extension bytes of this message */

	/* Head scratch: the target, then the header fields as the request
	 * keeps them (parser.h: "name:value\n" each), the Host value one of
	 * them. What it holds is never longer than the head on the wire (a
	 * field loses its CR and blanks), so its capacity, max_header_bytes,
	 * bounds it. */
	char *hb;
	size_t hb_len, hb_cap;
	size_t url_len;
	size_t host_off, host_len;
	bool host_seen;
	char field[24];
	size_t field_len; /* > sizeof(field): a name we do not interpret */
	enum field_id field_id;
	size_t value_off;
	bool value_begun;  /* a byte of the value other than a blank was kept */
	uint32_t n_fields;
	char version[8];
	size_t version_len;
	bool te_seen, expect_continue;

	/* The request being built (owned until handed out). */
	struct vhttp_request *req;
	size_t body_cap;
	/* A request's memory given back (vhttp_request_release), for the
	 * next one: kept across vhttp_parser_reset. */
	struct vhttp_request *spare;

	/* Set by callbacks for next(). */
	enum vhttp_event ev;
	int err_status;
	const char *err_reason;
};

static const size_t MIN_BODY_ALLOC = 4096;

void vhttp_limits_default(struct vhttp_limits *l)
{
	*l = (struct vhttp_limits){ 0 };
	l->max_header_bytes = VHTTP_DEFAULT_MAX_HEADER_BYTES;
	l->max_body_bytes = VHTTP_DEFAULT_MAX_BODY_BYTES;
	l->read_buf_bytes = VHTTP_DEFAULT_READ_BUF;
}

/* ------------------------------------------------------------- helpers */

static struct vhttp_parser *P(llhttp_t *ll)
{
	return ll->data;
}

/* Fail the current execute call with an HTTP status; llhttp returns
 * HPE_USER and next() reports err_status. */
static int fail(struct vhttp_parser *p, int status, const char *reason)
{
	p->err_status = status;
	p->err_reason = reason;
	return HPE_USER;
}

static int hb_append(struct vhttp_parser *p, const char *at, size_t n)
{
	/* Cannot overflow while head bytes are bounded by the same limit;
	 * checked anyway because the bound is an argument, not an invariant
	 * the compiler sees. */
	if (n > p->hb_cap - p->hb_len)
		return fail(p, 431, "request header fields too large");
	memcpy(p->hb + p->hb_len, at, n);
	p->hb_len += n;
	return 0;
}

static char lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? (char)(c + ('a' - 'A')) : c;
}

static bool eq_nocase(const char *a, size_t alen, const char *lit)
{
	size_t n = strlen(lit);
	if (alen != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (lower(a[i]) != lit[i])
			return false;
	return true;
}

static bool is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* Trim optional whitespace around [*s, *s + *n). */
static void trim_ows(const char **s, size_t *n)
{
	while (*n && is_ows((*s)[0])) {
		(*s)++;
		(*n)--;
	}
	while (*n && is_ows((*s)[*n - 1]))
		(*n)--;
}

static enum vhttp_method method_of(uint8_t m)
{
	switch (m) {
	case HTTP_GET: return VHTTP_M_GET;
	case HTTP_HEAD: return VHTTP_M_HEAD;
	case HTTP_POST: return VHTTP_M_POST;
	case HTTP_PUT: return VHTTP_M_PUT;
	case HTTP_DELETE: return VHTTP_M_DELETE;
	case HTTP_OPTIONS: return VHTTP_M_OPTIONS;
	case HTTP_PATCH: return VHTTP_M_PATCH;
	case HTTP_TRACE: return VHTTP_M_TRACE;
	default: return VHTTP_M_OTHER;
	}
}

/* Split the target into path and query (see parser.h). */
static void split_target(struct vhttp_request *r)
{
	const char *t = r->target, *end = t + r->target_len;
	const char *path = t;
	if (r->target_len && t[0] != '/' && !(r->target_len == 1 && t[0] == '*')) {
		/* absolute-form: scheme "://" authority [path] */
		for (const char *s = t; s + 3 <= end; s++) {
			if (s[0] == ':' && s[1] == '/' && s[2] == '/') {
				path = s + 3;
				break;
			}
		}
		while (path < end && *path != '/' && *path != '?' && *path != '#')
			path++;
	}
	const char *q = path;
	while (q < end && *q != '?' && *q != '#')
		q++;
	if (q == path && (q == end || *q != '/')) {
		/* no path in an absolute-form target: it means "/" */
		r->path = "/";
		r->path_len = 1;
	} else {
		r->path = path;
		r->path_len = (size_t)(q - path);
	}
	if (q < end && *q == '?') {
		const char *qe = q + 1;
		while (qe < end && *qe != '#')
			qe++;
		r->query = q + 1;
		r->query_len = (size_t)(qe - (q + 1));
	} else {
		r->query = "";
		r->query_len = 0;
	}
}

/* ----------------------------------------------------------- callbacks */

static int on_message_begin(llhttp_t *ll)
{
	struct vhttp_parser *p = P(ll);
	p->in_message = true;
	p->url_done = false;
	p->hb_len = 0;
	p->url_len = 0;
	p->host_seen = false;
	p->host_len = 0;
	p->field_len = 0;
	p->field_id = F_NONE;
	p->n_fields = 0;
	p->version_len = 0;
	p->te_seen = false;
	p->expect_continue = false;
	p->ext_bytes = 0;
	return 0;
}

static int on_url(llhttp_t *ll, const char *at, size_t n)
{
	return hb_append(P(ll), at, n);
}

static int on_url_complete(llhttp_t *ll)
{
	struct vhttp_parser *p = P(ll);
	p->url_done = true;
	p->url_len = p->hb_len;
	return 0;
}

static int on_version(llhttp_t *ll, const char *at, size_t n)
{
	struct vhttp_parser *p = P(ll);
	size_t room = sizeof(p->version) - p->version_len;
	memcpy(p->version + p->version_len, at, n < room ? n : room);
	p->version_len += n < room ? n : room;
	return 0;
}

static int on_version_complete(llhttp_t *ll)
{
	/* llhttp accepts 0.9, 1.0, 1.1 and 2.0 here; we speak 1.0 and 1.1. */
	if (ll->http_major != 1 || ll->http_minor > 1)
		return fail(P(ll), 505, "HTTP version not supported");
	return 0;
}

/* Trailer fields are parsed and dropped: only the head's are kept. */
static int on_header_field(llhttp_t *ll, const char *at, size_t n)
{
	struct vhttp_parser *p = P(ll);
	if (p->field_len + n <= sizeof(p->field))
		memcpy(p->field + p->field_len, at, n);
	p->field_len += n;
	return p->st == ST_TRAILER ? 0 : hb_append(p, at, n);
}

static int on_header_field_complete(llhttp_t *ll)
{
	struct vhttp_parser *p = P(ll);
	const char *f = p->field;
	size_t n = p->field_len;
	p->field_id = F_NONE;
	/* A field name is a token, one byte at least (RFC 9110 5.1); llhttp 8
	 * lets a line starting with ':' through. */
	if (n == 0)
		return fail(p, 400, "empty header field name");
	if (p->st == ST_TRAILER || n > sizeof(p->field))
		;
	else if (eq_nocase(f, n, "host"))
		p->field_id = F_HOST;
	else if (eq_nocase(f, n, "transfer-encoding"))
		p->field_id = F_TE;
	else if (eq_nocase(f, n, "expect"))
		p->field_id = F_EXPECT;
	p->field_len = 0;
	if (p->st == ST_TRAILER)
		return 0;
	p->value_begun = false;
	int rc = hb_append(p, ":", 1);
	p->value_off = p->hb_len;
	return rc;
}

static int on_header_value(llhttp_t *ll, const char *at, size_t n)
{
	struct vhttp_parser *p = P(ll);
	if (p->st == ST_TRAILER)
		return 0;
	/* Leading blanks are dropped (llhttp may hand them over), however
	 * the value is split between calls. */
	while (!p->value_begun && n && is_ows(*at)) {
		at++;
		n--;
	}
	p->value_begun |= n > 0;
	return hb_append(p, at, n);
}

/* Transfer-Encoding: llhttp checks that chunked is last and once; what it
 * lets through with another coding before chunked ("gzip, chunked") or
 * without chunked at all ("gzip") we cannot decode: 501. */
static int check_te(struct vhttp_parser *p, const char *v, size_t n)
{
	p->te_seen = true;
	const char *end = v + n;
	while (v < end) {
		const char *c = memchr(v, ',', (size_t)(end - v));
		const char *tok = v;
		size_t len = (size_t)((c ? c : end) - v);
		trim_ows(&tok, &len);
		if (len && !eq_nocase(tok, len, "chunked"))
			return fail(p, 501, "transfer coding not implemented");
		v = c ? c + 1 : end;
	}
	return 0;
}

static int on_header_value_complete(llhttp_t *ll)
{
	struct vhttp_parser *p = P(ll);
	enum field_id id = p->field_id;
	p->field_id = F_NONE;
	if (p->st == ST_TRAILER)
		return 0;
	while (p->hb_len > p->value_off && is_ows(p->hb[p->hb_len - 1]))
		p->hb_len--;
	const char *v = p->hb + p->value_off;
	size_t n = p->hb_len - p->value_off;
	int rc = hb_append(p, "\n", 1);
	p->n_fields++;
	if (rc)
		return rc;
	switch (id) {
	case F_HOST:
		if (p->host_seen)
			return fail(p, 400, "more than one Host");
		p->host_seen = true;
		p->host_off = (size_t)(v - p->hb);
		p->host_len = n;
		break;
	case F_TE:
		rc = check_te(p, v, n);
		break;
	case F_EXPECT:
		if (eq_nocase(v, n, "100-continue")) {
			/* RFC 9110 10.1.1: ignore it in an HTTP/1.0 request */
			if (ll->http_minor >= 1)
				p->expect_continue = true;
		} else if (n) {
			rc = fail(p, 417, "expectation not supported");
		}
		break;
	case F_NONE:
		break;
	}
	return rc;
}

static int on_headers_complete(llhttp_t *ll)
{
	struct vhttp_parser *p = P(ll);
	bool minor1 = ll->http_minor >= 1;
	bool has_cl = ll->flags & F_CONTENT_LENGTH;
	bool chunked = ll->flags & F_CHUNKED;

	/* llhttp takes "GET /path" with no version for HTTP/0.9, which has
	 * no version field (and no on_version_complete). */
	if (p->version_len == 0)
		return fail(p, 400, "request line without HTTP version");
	if (ll->http_major != 1 || ll->http_minor > 1)
		return fail(p, 505, "HTTP version not supported");
	if (ll->method == HTTP_CONNECT)
		return fail(p, 501, "CONNECT not implemented");
	if (minor1 && !p->host_seen)
		return fail(p, 400, "HTTP/1.1 request without Host");
	if (has_cl && (ll->flags & F_TRANSFER_ENCODING))
		return fail(p, 400, "Content-Length with Transfer-Encoding");
	if (has_cl && ll->content_length > p->lim.max_body_bytes)
		return fail(p, 413, "Content-Length over max_body_bytes");
	/* An Upgrade offer is optional for the server: answer in HTTP/1.1.
	 * Clearing the flag keeps llhttp from switching protocols. */
	ll->upgrade = 0;

	size_t fields_len = p->hb_len - p->url_len;
	size_t need = sizeof(struct vhttp_request) + p->url_len + 1 + p->host_len + 1 + fields_len + 1;
	struct vhttp_request *r = p->spare;
	size_t cap = r ? r->mem_cap : 0;
	if (cap >= need) {
		p->spare = NULL;
	} else {
		cap = need > VHTTP_REQUEST_MIN ? need : VHTTP_REQUEST_MIN;
		r = p->lim.req_alloc ? p->lim.req_alloc(p->lim.req_ctx, cap) : malloc(cap);
		if (!r)
			return fail(p, 503, "out of memory");
	}
	memset(r, 0, sizeof(*r));
	r->mem_cap = cap;
	char *s = (char *)(r + 1);
	memcpy(s, p->hb, p->url_len);
	s[p->url_len] = '\0';
	r->target = s;
	r->target_len = p->url_len;
	s += p->url_len + 1;
	if (p->host_seen)
		memcpy(s, p->hb + p->host_off, p->host_len);
	s[p->host_len] = '\0';
	r->host = s;
	r->host_len = p->host_len;
	s += p->host_len + 1;
	memcpy(s, p->hb + p->url_len, fields_len);
	s[fields_len] = '\0';
	r->fields = s;
	r->fields_len = fields_len;
	r->n_fields = p->n_fields;
	split_target(r);

	r->method = method_of(ll->method);
	r->method_name = llhttp_method_name((llhttp_method_t)ll->method);
	r->version_minor = ll->http_minor;
	if (minor1)
		r->keep_alive = !(ll->flags & F_CONNECTION_CLOSE);
	else
		r->keep_alive = (ll->flags & F_CONNECTION_KEEP_ALIVE) &&
				!(ll->flags & F_CONNECTION_CLOSE);
	/* RFC 9112 6.1: an HTTP/1.0 message with Transfer-Encoding has faulty
	 * framing; process it, then close. */
	if (!minor1 && p->te_seen)
		r->keep_alive = false;
	r->chunked = chunked;
	r->has_content_length = has_cl;
	r->content_length = has_cl ? ll->content_length : 0;
	r->expect_continue = p->expect_continue;

	p->req = r;
	p->body_cap = 0;
	p->st = ST_BODY;
	if (r->expect_continue && (chunked || r->content_length > 0))
		p->ev = VHTTP_EV_CONTINUE;
	return HPE_PAUSED;
}

static int on_body(llhttp_t *ll, const char *at, size_t n)
{
	struct vhttp_parser *p = P(ll);
	struct vhttp_request *r = p->req;
	if (n > p->lim.max_body_bytes - r->body_len)
		return fail(p, 413, "chunked body over max_body_bytes");
	if (r->body_len + n > p->body_cap) {
		/* Grow by doubling, capped at the declared length or the limit:
		 * memory follows the bytes actually received. */
		size_t want = r->body_len + n;
		size_t cap = p->body_cap ? p->body_cap * 2 : MIN_BODY_ALLOC;
		size_t max = r->has_content_length ? r->content_length : p->lim.max_body_bytes;
		if (cap < want)
			cap = want;
		if (cap > max)
			cap = max;
		uint8_t *b = realloc(r->body, cap);
		if (!b)
			return fail(p, 503, "out of memory");
		r->body = b;
		p->body_cap = cap;
	}
	memcpy(r->body + r->body_len, at, n);
	r->body_len += n;
	return 0;
}

static int on_chunk_header(llhttp_t *ll)
{
	struct vhttp_parser *p = P(ll);
	if (ll->content_length > p->lim.max_body_bytes - p->req->body_len)
		return fail(p, 413, "chunked body over max_body_bytes");
	if (ll->content_length == 0) {
		/* Last chunk: pause so that the trailer section is counted
		 * from its first byte (see the top of the file). */
		p->st = ST_TRAILER;
		p->head_bytes = 0;
		p->last_lf = true;
		p->hscan = HS_BOL;
		return HPE_PAUSED;
	}
	return 0;
}

static int on_chunk_extension(llhttp_t *ll, const char *at, size_t n)
{
	struct vhttp_parser *p = P(ll);
	(void)at;
	p->ext_bytes += n;
	if (p->ext_bytes > p->lim.max_header_bytes)
		return fail(p, 400, "chunk extensions too long");
	return 0;
}

static int on_message_complete(llhttp_t *ll)
{
	struct vhttp_parser *p = P(ll);
	p->in_message = false;
	p->ev = VHTTP_EV_REQUEST;
	p->st = p->req->keep_alive ? ST_HEAD : ST_CLOSED;
	return HPE_PAUSED;
}

static const llhttp_settings_t settings = {
	.on_message_begin = on_message_begin,
	.on_url = on_url,
	.on_url_complete = on_url_complete,
	.on_version = on_version,
	.on_version_complete = on_version_complete,
	.on_header_field = on_header_field,
	.on_header_field_complete = on_header_field_complete,
	.on_header_value = on_header_value,
	.on_header_value_complete = on_header_value_complete,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_chunk_header = on_chunk_header,
	.on_chunk_extension_name = on_chunk_extension,
	.on_chunk_extension_value = on_chunk_extension,
	.on_message_complete = on_message_complete,
};

/* --------------------------------------------------------------- public */

void vhttp_request_free(struct vhttp_request *r)
{
	if (!r)
		return;
	free(r->body);
	free(r);
}

void vhttp_request_release(struct vhttp_parser *p, struct vhttp_request *r)
{
	if (!p || p->spare) {
		vhttp_request_free(r);
		return;
	}
	if (!r)
		return;
	free(r->body);
	p->spare = r;
}

size_t vhttp_request_cap(const struct vhttp_request *r)
{
	return r->mem_cap;
}

uint8_t *vhttp_request_take_body(struct vhttp_request *r, size_t *len)
{
	uint8_t *b = r->body;
	*len = r->body_len;
	r->body = NULL;
	r->body_len = 0;
	return b;
}

void vhttp_parser_reset(struct vhttp_parser *p)
{
	struct vhttp_limits lim = p->lim;
	char *in = p->in, *hb = p->hb;
	size_t in_cap = p->in_cap, hb_cap = p->hb_cap;
	struct vhttp_request *spare = p->spare;

	vhttp_request_free(p->req);
	memset(p, 0, sizeof(*p));
	p->spare = spare;
	p->lim = lim;
	p->in = in;
	p->in_cap = in_cap;
	p->hb = hb;
	p->hb_cap = hb_cap;
	llhttp_init(&p->ll, HTTP_REQUEST, &settings);
	p->ll.data = p;
	p->st = ST_HEAD;
}

int vhttp_parser_new(const struct vhttp_limits *lim, struct vhttp_parser **out)
{
	*out = NULL;
	if (lim->max_header_bytes == 0)
		return -EINVAL;
	struct vhttp_parser *p = calloc(1, sizeof(*p));
	if (!p)
		goto fail;
	p->lim = *lim;
	p->in_cap = lim->read_buf_bytes ? lim->read_buf_bytes : VHTTP_DEFAULT_READ_BUF;
	p->in = malloc(p->in_cap);
	if (!p->in)
		goto free_parser;
	p->hb_cap = lim->max_header_bytes;
	p->hb = malloc(p->hb_cap);
	if (!p->hb)
		goto free_in;
	vhttp_parser_reset(p);
	*out = p;
	return 0;

free_in:
	free(p->in);
free_parser:
	free(p);
fail:
	return -ENOMEM;
}

void vhttp_parser_free(struct vhttp_parser *p)
{
	if (!p)
		return;
	vhttp_request_free(p->req);
	free(p->spare);
	free(p->hb);
	free(p->in);
	free(p);
}

void *vhttp_parser_rbuf(struct vhttp_parser *p, size_t *room)
{
	if (p->in_off == p->in_len) {
		p->in_off = p->in_len = 0;
	} else if (p->in_off && p->in_cap - p->in_len < p->in_cap / 2) {
		/* Leftover pipelined bytes: slide them to the front (rare and
		 * short: at most one buffer). */
		memmove(p->in, p->in + p->in_off, p->in_len - p->in_off);
		p->in_len -= p->in_off;
		p->in_off = 0;
	}
	*room = p->in_cap - p->in_len;
	return p->in + p->in_len;
}

void vhttp_parser_commit(struct vhttp_parser *p, size_t n)
{
	VB_BUG_ON(n > p->in_cap - p->in_len);
	p->in_len += n;
}

size_t vhttp_parser_feed(struct vhttp_parser *p, const void *data, size_t len)
{
	size_t room;
	void *dst = vhttp_parser_rbuf(p, &room);
	if (len > room)
		len = room;
	memcpy(dst, data, len);
	p->in_len += len;
	return len;
}

size_t vhttp_parser_body_held(const struct vhttp_parser *p)
{
	if (!p->req)
		return 0;
	if (p->req->has_content_length && p->req->content_length > p->body_cap)
		return (size_t)p->req->content_length;
	return p->body_cap;
}

size_t vhttp_parser_buffered(const struct vhttp_parser *p)
{
	return p->in_len - p->in_off;
}

static enum vhttp_event set_error(struct vhttp_parser *p, int status, const char *reason)
{
	p->st = ST_ERROR;
	p->err_status = status;
	p->err_reason = reason;
	return VHTTP_EV_ERROR;
}

/* A version llhttp rejected: 505 when it is well formed (DIGIT "." DIGIT,
 * e.g. 1.2 or 3.0), 400 when it is not a version at all. */
static bool version_well_formed(const struct vhttp_parser *p)
{
	const char *v = p->version;
	return p->version_len == 3 && v[0] >= '0' && v[0] <= '9' && v[1] == '.' &&
	       v[2] >= '0' && v[2] <= '9';
}

static enum vhttp_event map_llhttp_error(struct vhttp_parser *p, llhttp_errno_t e)
{
	/* A callback of ours failed (llhttp reports HPE_USER for data
	 * callbacks and HPE_CB_<name> for the others): its status decides. */
	if (p->err_status)
		return set_error(p, p->err_status, p->err_reason);
	switch (e) {
	case HPE_INVALID_VERSION:
		if (version_well_formed(p))
			return set_error(p, 505, "HTTP version not supported");
		return set_error(p, 400, "malformed HTTP version");
	case HPE_INVALID_TRANSFER_ENCODING:
		return set_error(p, 400, "chunked is not the final transfer coding");
	case HPE_UNEXPECTED_CONTENT_LENGTH:
		return set_error(p, 400, "duplicate Content-Length or with Transfer-Encoding");
	case HPE_INVALID_CONTENT_LENGTH:
		return set_error(p, 400, "invalid Content-Length");
	case HPE_INVALID_CHUNK_SIZE:
	case HPE_STRICT:
		return set_error(p, 400, "bad chunked framing or line ending");
	default:
		return set_error(p, 400, "malformed request");
	}
}

/* Where, in the n bytes at s, a line of the head starts with SP or HTAB
 * (obs-fold, or a first header line starting with whitespace); n if none. */
static size_t find_fold(const struct vhttp_parser *p, const char *s, size_t n)
{
	if (n && p->last_lf && is_ows(s[0]))
		return 0;
	for (const char *lf = memchr(s, '\n', n); lf && lf + 1 < s + n;
	     lf = memchr(lf + 1, '\n', (size_t)(s + n - lf - 1)))
		if (is_ows(lf[1]))
			return (size_t)(lf + 1 - s);
	return n;
}

/* HTAB in a field value becomes SP (see the top), in the n bytes at s of
 * the head or trailer section; stops at the section's end, so body bytes
 * after it are never touched. */
static void untab_values(struct vhttp_parser *p, char *s, size_t n)
{
	enum hscan h = p->hscan;

	for (size_t i = 0; i < n && h != HS_DONE; i++) {
		char c = s[i];

		switch (h) {
		case HS_LINE0:
			if (c == '\n')
				h = HS_BOL;
			break;
		case HS_BOL:
		case HS_CR:
			if (c == '\n') {
				h = HS_DONE;
				break;
			}
			if (c == '\r' && h == HS_BOL) {
				h = HS_CR;
				break;
			}
			h = c == ':' ? HS_VALUE : HS_NAME;
			break;
		case HS_NAME:
			if (c == ':')
				h = HS_VALUE;
			else if (c == '\n')
				h = HS_BOL;
			break;
		case HS_VALUE:
			if (c == '\t')
				s[i] = ' ';
			else if (c == '\n')
				h = HS_BOL;
			break;
		case HS_DONE:
			break;
		}
	}
	p->hscan = (uint8_t)h;
}

enum vhttp_event vhttp_parser_next(struct vhttp_parser *p, struct vhttp_request **req)
{
	*req = NULL;
	for (;;) {
		if (p->st == ST_ERROR)
			return VHTTP_EV_ERROR;
		if (p->st == ST_CLOSED)
			return VHTTP_EV_CLOSED;
		bool counted = p->st == ST_HEAD || p->st == ST_TRAILER;
		size_t avail = p->in_len - p->in_off;
		size_t n = avail;
		if (counted && n > p->lim.max_header_bytes - p->head_bytes)
			n = p->lim.max_header_bytes - p->head_bytes;
		char *start = p->in + p->in_off;
		/* A fold is caught before llhttp sees its first byte, so that the
		 * outcome cannot depend on how the stream was split (llhttp would
		 * glue the folded line to the value before we could object). */
		size_t fold = counted ? find_fold(p, start, n) : n;
		bool at_fold = fold < n;
		n = fold;
		if (counted)
			untab_values(p, start, n);
		if (n == 0 && !p->resume) {
			if (at_fold)
				return set_error(p, 400, "obs-fold or line starting with whitespace");
			if (avail == 0)
				return VHTTP_EV_MORE;
			goto over_limit; /* bytes left, no budget */
		}
		p->resume = false;
		p->ev = VHTTP_EV_MORE;
		llhttp_errno_t e = llhttp_execute(&p->ll, start, n);
		size_t used = n;
		if (e == HPE_PAUSED) {
			used = (size_t)(llhttp_get_error_pos(&p->ll) - start);
			llhttp_resume(&p->ll);
			p->resume = true;
		} else if (e != HPE_OK) {
			return map_llhttp_error(p, e);
		}
		p->in_off += used;
		if (p->in_off == p->in_len)
			p->in_off = p->in_len = 0;
		if (counted) {
			p->head_bytes += used;
			if (used)
				p->last_lf = start[used - 1] == '\n';
			/* stopped short of a fold and still in the head */
			if (at_fold && e == HPE_OK)
				return set_error(p, 400, "obs-fold or line starting with whitespace");
		}
		switch (p->ev) {
		case VHTTP_EV_REQUEST:
			/* The next head starts after this call's bytes. */
			p->head_bytes = 0;
			p->last_lf = false;
			p->hscan = HS_LINE0;
			*req = p->req;
			p->req = NULL;
			return VHTTP_EV_REQUEST;
		case VHTTP_EV_CONTINUE:
			*req = p->req;
			return VHTTP_EV_CONTINUE;
		default:
			break;
		}
		if (e == HPE_OK) {
			if (p->in_off == p->in_len)
				return VHTTP_EV_MORE;
			/* all n taken, bytes left: n was cut to the head budget */
			goto over_limit;
		}
	}

over_limit:
	if (p->st == ST_TRAILER)
		return set_error(p, 431, "trailer section over max_header_bytes");
	if (!p->url_done && p->in_message)
		return set_error(p, 414, "request-target over max_header_bytes");
	return set_error(p, 431, "request head over max_header_bytes");
}

int vhttp_parser_error(const struct vhttp_parser *p, const char **reason)
{
	if (reason)
		*reason = p->st == ST_ERROR ? p->err_reason : NULL;
	return p->st == ST_ERROR ? p->err_status : 0;
}

enum vhttp_phase vhttp_parser_phase(const struct vhttp_parser *p)
{
	switch (p->st) {
	case ST_HEAD:
		return (p->in_message || p->in_len > p->in_off) ? VHTTP_PHASE_HEAD
								 : VHTTP_PHASE_IDLE;
	case ST_BODY:
	case ST_TRAILER:
		return VHTTP_PHASE_BODY;
	default:
		return VHTTP_PHASE_DONE;
	}
}
