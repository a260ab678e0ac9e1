/* SPDX-License-Identifier: MIT */
/*
 * tests/helpers/no-cmocka/cmocka.h: stands in for <cmocka.h> when configure
 * did not find cmocka (or ran --without-cmocka). A unit test built against it
 * never runs a test: a constructor prints why and exits 77 (automake's
 * "skip") before main. The macros below only let the test sources compile;
 * they evaluate nothing at run time because nothing after the constructor
 * runs. Install libcmocka-dev and re-run configure to run the tests.
 */
#ifndef VOLTD_TESTS_NO_CMOCKA_H
#define VOLTD_TESTS_NO_CMOCKA_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void vcm_skip_without_cmocka(void)
{
	static const char msg[] = "SKIP: this test needs cmocka: install the Debian package libcmocka-dev "
				  "and run configure again\n";
	ssize_t n = write(STDOUT_FILENO, msg, sizeof(msg) - 1);
	(void)n;
	_exit(77);
}

struct CMUnitTest {
	const char *name;
	void (*test_func)(void **state);
};
#define cmocka_unit_test(f) { #f, f }
#define cmocka_run_group_tests(tests, setup, teardown) \
	((void)(tests), (void)(setup), (void)(teardown), 77)
#define cmocka_run_group_tests_name(name, tests, setup, teardown) \
	((void)(name), (void)(tests), (void)(setup), (void)(teardown), 77)

#define assert_true(c) ((void)(c))
#define assert_false(c) ((void)(c))
#define assert_null(p) ((void)(p))
#define assert_non_null(p) ((void)(p))
#define assert_int_equal(a, b) ((void)(a), (void)(b))
#define assert_int_not_equal(a, b) ((void)(a), (void)(b))
#define assert_ptr_equal(a, b) ((void)(a), (void)(b))
#define assert_string_equal(a, b) ((void)(a), (void)(b))
#define assert_memory_equal(a, b, n) ((void)(a), (void)(b), (void)(n))
#define print_message(...) printf(__VA_ARGS__)
#define print_error(...) fprintf(stderr, __VA_ARGS__)
#define fail() abort()
#define fail_msg(...) (fprintf(stderr, __VA_ARGS__), abort())
#define skip() exit(77)

#endif
