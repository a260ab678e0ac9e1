/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_query.c: base/query: finding parameters in a query string
 * and the strict unsigned decimal reader. Single-threaded.
 */
#include "base/query.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static void test_query_get(void **state)
{
	(void)state;
	const char *q = "a=1&bb=&c&n=42&alg=sha256";
	const char *v;
	size_t vl;
	assert_int_equal(vb_query_get(q, strlen(q), "a", &v, &vl), 1);
	assert_int_equal(vl, 1);
	assert_memory_equal(v, "1", 1);
	assert_int_equal(vb_query_get(q, strlen(q), "bb", &v, &vl), 1);
	assert_int_equal(vl, 0);
	assert_int_equal(vb_query_get(q, strlen(q), "c", &v, &vl), 1);
	assert_int_equal(vl, 0);
	assert_int_equal(vb_query_get(q, strlen(q), "alg", &v, &vl), 1);
	assert_int_equal(vl, 6);
	assert_memory_equal(v, "sha256", 6);
	assert_int_equal(vb_query_get(q, strlen(q), "b", &v, &vl), 0);
	assert_int_equal(vb_query_get(q, strlen(q), "alg2", &v, &vl), 0);
	assert_int_equal(vb_query_get("", 0, "a", &v, &vl), 0);
	/* the length bounds the search */
	assert_int_equal(vb_query_get(q, 3, "a", &v, &vl), 1);
	assert_int_equal(vb_query_get(q, 3, "n", &v, &vl), 0);
	assert_int_equal(vb_query_count("n=1&n=2&nn=3", 12, "n"), 2);
}

static void test_query_u64_strict(void **state)
{
	(void)state;
	uint64_t v = 7;
#define Q(s, rc) assert_int_equal(vb_query_u64(s, strlen(s), "n", &v), rc)
	Q("n=1000", 0);
	assert_int_equal(v, 1000);
	Q("x=1&n=0&y", 0);
	assert_int_equal(v, 0);
	Q("n=007", 0);
	assert_int_equal(v, 7);
	Q("n=18446744073709551615", 0);
	assert_true(v == UINT64_MAX);
	Q("n=18446744073709551616", -ERANGE);
	Q("n=99999999999999999999999", -ERANGE);
	Q("n=99999999999999999999999x", -EINVAL);
	Q("", -ENOENT);
	Q("m=1", -ENOENT);
	Q("nn=1", -ENOENT);
	Q("n", -EINVAL);
	Q("n=", -EINVAL);
	Q("n=+1", -EINVAL);
	Q("n=-1", -EINVAL);
	Q("n= 1", -EINVAL);
	Q("n=1 ", -EINVAL);
	Q("n=0x10", -EINVAL);
	Q("n=1e3", -EINVAL);
	Q("n=%31", -EINVAL);
	Q("n=1.0", -EINVAL);
	Q("n=1&n=1", -EINVAL); /* ambiguous */
#undef Q
	assert_int_equal(vb_parse_u64("123", 3, &v), 0);
	assert_int_equal(v, 123);
	assert_int_equal(vb_parse_u64("123", 0, &v), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_query_get),
		cmocka_unit_test(test_query_u64_strict),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
