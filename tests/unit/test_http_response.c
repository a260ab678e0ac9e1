/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_http_response.c: http/response (heads, Date, small text
 * answers). Single-threaded except the Date test, which formats from two
 * threads at once.
 */
#include "http/response.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

/* Replace the 29-byte date after "Date: " by a fixed marker, checking its
 * shape on the way, so heads can be compared as strings. */
static void mask_date(char *h)
{
	char *d = strstr(h, "\r\nDate: ");
	assert_non_null(d);
	d += 8;
	/* "Sun, 06 Nov 1994 08:49:37 GMT" */
	assert_true(d[3] == ',' && d[4] == ' ' && d[7] == ' ' && d[11] == ' ' && d[16] == ' ' &&
		    d[19] == ':' && d[22] == ':' && memcmp(d + 25, " GMT\r\n", 6) == 0);
	memcpy(d, "<date>", 6);
	memmove(d + 6, d + 29, strlen(d + 29) + 1);
}

static void test_head_basic(void **state)
{
	(void)state;
	char buf[VHTTP_HEAD_MAX + 1];
	struct vhttp_response r;
	vhttp_response_init(&r, 200);
	r.content_length = 20;
	r.content_type = "text/plain";
	int n = vhttp_response_head(&r, buf, VHTTP_HEAD_MAX);
	assert_true(n > 0);
	buf[n] = '\0';
	mask_date(buf);
	assert_string_equal(buf, "HTTP/1.1 200 OK\r\nDate: <date>\r\nServer: voltd\r\n"
				 "Content-Length: 20\r\nContent-Type: text/plain\r\n\r\n");
}

static void test_head_connection_and_extras(void **state)
{
	(void)state;
	char buf[VHTTP_HEAD_MAX + 1];
	struct vhttp_response r;
	vhttp_response_init(&r, 405);
	r.allow = "POST";
	r.close = true;
	int n = vhttp_response_head(&r, buf, sizeof(buf) - 1);
	buf[n] = '\0';
	mask_date(buf);
	assert_string_equal(buf, "HTTP/1.1 405 Method Not Allowed\r\nDate: <date>\r\nServer: voltd\r\n"
				 "Content-Length: 0\r\nConnection: close\r\nAllow: POST\r\n\r\n");
	/* HTTP/1.0 peer kept alive must be told so */
	vhttp_response_init(&r, 503);
	r.version_minor = 0;
	r.retry_after_s = 2;
	r.content_length = 18446744073709551615ull;
	n = vhttp_response_head(&r, buf, sizeof(buf) - 1);
	buf[n] = '\0';
	mask_date(buf);
	assert_string_equal(buf, "HTTP/1.1 503 Service Unavailable\r\nDate: <date>\r\nServer: voltd\r\n"
				 "Content-Length: 18446744073709551615\r\nConnection: keep-alive\r\n"
				 "Retry-After: 2\r\n\r\n");
	/* ... but not when closing */
	r.close = true;
	n = vhttp_response_head(&r, buf, sizeof(buf) - 1);
	buf[n] = '\0';
	assert_non_null(strstr(buf, "Connection: close\r\n"));
	assert_null(strstr(buf, "keep-alive"));
}

static void test_head_errors(void **state)
{
	(void)state;
	char buf[VHTTP_HEAD_MAX];
	struct vhttp_response r;
	vhttp_response_init(&r, 99);
	assert_int_equal(vhttp_response_head(&r, buf, sizeof(buf)), -EINVAL);
	r.status = 600;
	assert_int_equal(vhttp_response_head(&r, buf, sizeof(buf)), -EINVAL);
	vhttp_response_init(&r, 200);
	r.content_type = "application/gzip";
	int full = vhttp_response_head(&r, buf, sizeof(buf));
	assert_true(full > 0);
	/* every shorter buffer is refused, never overrun */
	for (int cap = 0; cap < full; cap++) {
		char *b = malloc((size_t)cap + 1);
		assert_int_equal(vhttp_response_head(&r, b, (size_t)cap), -ENOSPC);
		free(b);
	}
	char big[600];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	r.content_type = big;
	assert_int_equal(vhttp_response_head(&r, buf, sizeof(buf)), -ENOSPC);
}

static void test_text_response(void **state)
{
	(void)state;
	char buf[VHTTP_HEAD_MAX + 64];
	struct vhttp_response r;
	vhttp_response_init(&r, 404);
	int n = vhttp_response_text(&r, NULL, buf, sizeof(buf) - 1);
	assert_true(n > 0);
	buf[n] = '\0';
	mask_date(buf);
	assert_string_equal(buf, "HTTP/1.1 404 Not Found\r\nDate: <date>\r\nServer: voltd\r\n"
				 "Content-Length: 14\r\nContent-Type: text/plain\r\n\r\n404 Not Found\n");
	vhttp_response_init(&r, 200);
	n = vhttp_response_text(&r, "ok\n", buf, sizeof(buf) - 1);
	buf[n] = '\0';
	assert_non_null(strstr(buf, "Content-Length: 3\r\n"));
	assert_string_equal(buf + n - 7, "\r\n\r\nok\n");
	assert_int_equal(vhttp_response_text(&r, "ok\n", buf, (size_t)n - 1), -ENOSPC);
	assert_string_equal(vhttp_status_reason(431), "Request Header Fields Too Large");
	assert_string_equal(vhttp_status_reason(799), "Unknown");
	assert_int_equal(strlen(VHTTP_RESPONSE_100), VHTTP_RESPONSE_100_LEN);
}

static void test_date_format(void **state)
{
	(void)state;
	char d[VHTTP_DATE_LEN + 1] = { 0 };
	vhttp_date_format(784111777, d); /* RFC 9110's example */
	assert_string_equal(d, "Sun, 06 Nov 1994 08:49:37 GMT");
	vhttp_date_format(951782400, d); /* leap day */
	assert_string_equal(d, "Tue, 29 Feb 2000 00:00:00 GMT");
	vhttp_date_format(0, d);
	assert_string_equal(d, "Thu, 01 Jan 1970 00:00:00 GMT");
}

static void *date_thread(void *arg)
{
	int *bad = arg;
	for (int i = 0; i < 20000; i++) {
		char a[VHTTP_DATE_LEN + 1] = { 0 }, b[VHTTP_DATE_LEN + 1] = { 0 };
		time_t t0 = time(NULL);
		vhttp_date(a);
		time_t t1 = time(NULL);
		/* the cached value is one of the seconds around the call (the
		 * coarse clock may lag time() by a tick) */
		int ok = 0;
		for (time_t t = t0 - 1; t <= t1; t++) {
			vhttp_date_format(t, b);
			ok |= strcmp(a, b) == 0;
		}
		*bad += !ok;
	}
	return NULL;
}

static void test_date_cached_now(void **state)
{
	(void)state;
	int bad[2] = { 0, 0 };
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, date_thread, &bad[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(bad[0] + bad[1], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_head_basic),
		cmocka_unit_test(test_head_connection_and_extras),
		cmocka_unit_test(test_head_errors),
		cmocka_unit_test(test_text_response),
		cmocka_unit_test(test_date_format),
		cmocka_unit_test(test_date_cached_now),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
