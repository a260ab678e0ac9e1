/* SPDX-License-Identifier: MIT */
/*
 * http/response.c: see response.h. The Date cache is thread-local: each
 * worker formats the date at most once a second and nothing is shared.
 */
#include "http/response.h"
#include "base/compiler.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

const char *vhttp_status_reason(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 301: return "Moved Permanently";
	case 302: return "Found";
	case 304: return "Not Modified";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 415: return "Unsupported Media Type";
	case 417: return "Expectation Failed";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	default: return "Unknown";
	}
}

void vhttp_date_format(int64_t unix_s, char out[VHTTP_DATE_LEN])
{
	static const char days[7][4] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
	static const char months[12][4] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
					    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
	time_t t = (time_t)unix_s;
	struct tm tm;
	char tmp[VHTTP_DATE_LEN + 8];
	gmtime_r(&t, &tm);
	/* Names from our own tables: strftime's %a/%b follow the locale. */
	snprintf(tmp, sizeof(tmp), "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday % 7],
		 tm.tm_mday, months[tm.tm_mon % 12], (tm.tm_year + 1900) % 10000, tm.tm_hour,
		 tm.tm_min, tm.tm_sec);
	memcpy(out, tmp, VHTTP_DATE_LEN);
}

void vhttp_date(char out[VHTTP_DATE_LEN])
{
	static _Thread_local int64_t cached_s = -1;
	static _Thread_local char cached[VHTTP_DATE_LEN];
	struct timespec ts;
	/* The coarse clock is a vDSO read of the tick-updated time: enough
	 * for a one-second field and cheaper than CLOCK_REALTIME. */
	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	if (vb_unlikely(ts.tv_sec != cached_s)) {
		vhttp_date_format(ts.tv_sec, cached);
		cached_s = ts.tv_sec;
	}
	memcpy(out, cached, VHTTP_DATE_LEN);
}

/* Append a string; returns false when it does not fit. */
struct out {
	char *p, *end;
};

static bool put(struct out *o, const char *s, size_t n)
{
	if ((size_t)(o->end - o->p) < n)
		return false;
	memcpy(o->p, s, n);
	o->p += n;
	return true;
}

static bool puts_(struct out *o, const char *s)
{
	return put(o, s, strlen(s));
}

static bool put_u64(struct out *o, uint64_t v)
{
	char tmp[24];
	char *e = tmp + sizeof(tmp), *s = e;
	do {
		*--s = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return put(o, s, (size_t)(e - s));
}

int vhttp_response_head(const struct vhttp_response *r, char *buf, size_t cap)
{
	if (r->status < 100 || r->status > 599)
		return -EINVAL;
	struct out o = { buf, buf + cap };
	char status[4] = { (char)('0' + r->status / 100), (char)('0' + r->status / 10 % 10),
			   (char)('0' + r->status % 10), ' ' };
	char date[VHTTP_DATE_LEN];
	vhttp_date(date);
	bool ok = put(&o, "HTTP/1.1 ", 9) && put(&o, status, 4) &&
		  puts_(&o, vhttp_status_reason(r->status)) && put(&o, "\r\nDate: ", 8) &&
		  put(&o, date, VHTTP_DATE_LEN) && puts_(&o, "\r\nServer: voltd\r\n");
	if (ok && vhttp_status_has_body(r->status))
		ok = puts_(&o, "Content-Length: ") && put_u64(&o, r->content_length) && put(&o, "\r\n", 2);
	if (ok && r->content_type)
		ok = puts_(&o, "Content-Type: ") && puts_(&o, r->content_type) && put(&o, "\r\n", 2);
	if (ok && r->close)
		ok = puts_(&o, "Connection: close\r\n");
	else if (ok && r->version_minor == 0)
		ok = puts_(&o, "Connection: keep-alive\r\n");
	if (ok && r->allow)
		ok = puts_(&o, "Allow: ") && puts_(&o, r->allow) && put(&o, "\r\n", 2);
	if (ok && r->retry_after_s > 0)
		ok = puts_(&o, "Retry-After: ") && put_u64(&o, (uint64_t)r->retry_after_s) &&
		     put(&o, "\r\n", 2);
	if (r->open)
		return ok ? (int)(o.p - buf) : -ENOSPC;
	if (ok && r->fields_len)
		ok = put(&o, r->fields, r->fields_len);
	if (ok)
		ok = put(&o, "\r\n", 2);
	return ok ? (int)(o.p - buf) : -ENOSPC;
}

int vhttp_response_text(const struct vhttp_response *r, const char *body, char *buf,
			size_t cap)
{
	char dflt[64];
	if (!body) {
		snprintf(dflt, sizeof(dflt), "%d %s\n", r->status, vhttp_status_reason(r->status));
		body = dflt;
	}
	size_t blen = strlen(body);
	struct vhttp_response h = *r;
	h.content_type = "text/plain";
	h.content_length = blen;
	int n = vhttp_response_head(&h, buf, cap);
	if (n < 0)
		return n;
	if (blen > cap - (size_t)n)
		return -ENOSPC;
	memcpy(buf + n, body, blen);
	return n + (int)blen;
}
