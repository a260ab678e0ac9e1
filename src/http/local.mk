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


# libFuzzer harness over http + jobs: tests/fuzz/run-fuzz.sh builds it with
# clang and runs it for FUZZ_SECONDS (default 20) from tests/fuzz/corpus;
# it skips (77) without clang's fuzzer runtime. `make fuzz` does the same
# outside the test suite (e.g. make fuzz FUZZ_SECONDS=600).
TESTS += tests/fuzz/run-fuzz.sh
CLEANFILES += tests/fuzz/fuzz_http
fuzz:
	VOLTD_SRCDIR='$(abs_top_srcdir)' VOLTD_BUILDDIR='$(abs_top_builddir)' \
	CLANG='$(CLANG)' LLHTTP_SRC='$(LLHTTP_SRC)' LLHTTP_INC='$(LLHTTP_INC)' \
	$(SHELL) $(top_srcdir)/tests/fuzz/run-fuzz.sh
.PHONY: fuzz
