# SPDX-License-Identifier: MIT
# src/base: helpers every layer may use (libc only).
libvolt_a_SOURCES += \
	src/base/compiler.h \
	src/base/futex.c src/base/futex.h \
	src/base/lineaudit.c src/base/lineaudit.h \
	src/base/log.c src/base/log.h \
	src/base/metric.c src/base/metric.h \
	src/base/query.c src/base/query.h \
	src/base/rng.h \
	src/base/strlist.c src/base/strlist.h \
	src/base/time.h
libvolt_a_SOURCES += src/base/histogram.c src/base/histogram.h

check_PROGRAMS += tests/unit/test_histogram
TESTS += tests/unit/test_histogram
TSAN_TESTS += tests/unit/test_histogram
tests_unit_test_histogram_SOURCES = tests/unit/test_histogram.c
tests_unit_test_histogram_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_histogram_LDADD = $(VOLT_CORE_LIBS) $(CMOCKA_LIBS)

check_PROGRAMS += tests/unit/test_query
TESTS += tests/unit/test_query
tests_unit_test_query_SOURCES = tests/unit/test_query.c
tests_unit_test_query_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_query_LDADD = $(VOLT_CORE_LIBS) $(CMOCKA_LIBS)

# Every layer's metric tables (base/metric.h); links the whole library.
check_PROGRAMS += tests/unit/test_metric
TESTS += tests/unit/test_metric
tests_unit_test_metric_SOURCES = tests/unit/test_metric.c
tests_unit_test_metric_LDADD = $(VOLT_ALL_LIBS)
