/* SPDX-License-Identifier: MIT */
/*
 * http/response.h: HTTP/1.1 response heads. The head is encoded into a
 * caller's buffer on its own, so that the body (a job's result buffer) goes
 * out as a second iovec without being copied. Small fixed answers (errors,
 * /healthz) can be encoded head and body together.
 *
 * Threading: every function may be called on any thread at once. The Date
 * value is cached per thread and per second (no shared state, no locks).
 */
#ifndef VOLTD_HTTP_RESPONSE_H
#define VOLTD_HTTP_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Interim answer to "Expect: 100-continue" (send it as is). */
#define VHTTP_RESPONSE_100 "HTTP/1.1 100 Continue\r\n\r\n"
#define VHTTP_RESPONSE_100_LEN (sizeof(VHTTP_RESPONSE_100) - 1)

/* A head always fits in this many bytes (checked: -ENOSPC otherwise, e.g.
 * for an Allow or Content-Type value of hundreds of bytes). */
#define VHTTP_HEAD_MAX 512

/* What to put in a head. Fields public; set the ones you need and leave the
 * rest zero (vhttp_response_init does that). */
struct vhttp_response {
	int status;                /* 100..599 */
	uint64_t content_length;   /* the body's length (sent even for HEAD) */
	const char *content_type;  /* NULL: no Content-Type */
	/* The connection closes after this response: "Connection: close".
	 * Otherwise an HTTP/1.0 peer (version_minor 0) gets
	 * "Connection: keep-alive", since it assumes close without it. */
	bool close;
	uint8_t version_minor;     /* the request's HTTP/1.<minor> */
	const char *allow;         /* NULL, or the Allow value (405) */
	int retry_after_s;         /* > 0: Retry-After seconds (503) */
	/* More header fields, encoded ("Name: value\r\n" each, fields_len
	 * bytes; a job's), written after the head's own. */
	const char *fields;
	size_t fields_len;
	/* The head stops after its own fields, without fields[] and the blank
	 * line: the caller sends those after it (a job's fields too long to
	 * copy into the head's buffer). */
	bool open;
};

static inline void vhttp_response_init(struct vhttp_response *r, int status)
{
	*r = (struct vhttp_response){ .status = status, .version_minor = 1 };
}

/* Encode the head ("HTTP/1.1 <status> <reason>", Date, Server: voltd,
 * Content-Length (not for a status without a body: vhttp_status_has_body),
 * Content-Type, Connection, Allow, Retry-After, the fields, blank line)
 * into buf. Returns its length, -ENOSPC when cap is too small, -EINVAL for a
 * status outside 100..599. */
int vhttp_response_head(const struct vhttp_response *r, char *buf, size_t cap);

/* Head plus a short text/plain body in one buffer: body NULL means
 * "<status> <reason>\n". r->content_type and content_length are ignored.
 * Returns the total length, -ENOSPC or -EINVAL. */
int vhttp_response_text(const struct vhttp_response *r, const char *body, char *buf,
			size_t cap);

/* May a response of this status have a body (and so a Content-Length)?
 * Not 1xx, 204 and 304 (RFC 9110 6.4.1). */
static inline bool vhttp_status_has_body(int status)
{
	return status >= 200 && status != 204 && status != 304;
}

/* Reason phrase of a status ("Not Found"); "Unknown" for ones we never send. */
const char *vhttp_status_reason(int status);

/* The current time as an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"),
 * VHTTP_DATE_LEN bytes, not NUL-terminated. Cached per thread per second. */
#define VHTTP_DATE_LEN 29
void vhttp_date(char out[VHTTP_DATE_LEN]);
/* The same for a given time (seconds since the epoch); no cache. */
void vhttp_date_format(int64_t unix_s, char out[VHTTP_DATE_LEN]);

#endif
