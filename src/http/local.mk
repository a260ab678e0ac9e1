# SPDX-License-Identifier: MIT
# src/http: sources, tests and benchmarks of this layer (included by Makefile.am).
libvolt_a_SOURCES += \
	src/http/parser.c src/http/parser.h \
	src/http/response.c src/http/response.h


check_PROGRAMS += tests/unit/test_http_parser
TESTS += tests/unit/test_http_parser
tests_unit_test_http_parser_SOURCES = tests/unit/test_http_parser.c
tests_unit_test_http_parser_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_http_parser_LDADD = $(VOLT_ALL_LIBS) $(CMOCKA_LIBS)

check_PROGRAMS += tests/unit/test_http_response
TESTS += tests/unit/test_http_response
TSAN_TESTS += tests/unit/test_http_response
tests_unit_test_http_response_SOURCES = tests/unit/test_http_response.c
tests_unit_test_http_response_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_http_response_LDADD = $(VOLT_ALL_LIBS) $(CMOCKA_LIBS)
