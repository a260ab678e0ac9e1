# SPDX-License-Identifier: MIT
# src/chan: sources, tests and benchmarks of this layer (included by Makefile.am).
libvolt_a_SOURCES += \
	src/chan/chan.c src/chan/chan.h src/chan/internal.h \
	src/chan/waitq.c \
	src/chan/async.c \
	src/chan/set.c

check_PROGRAMS += tests/unit/test_chan
TESTS += tests/unit/test_chan
tests_unit_test_chan_SOURCES = tests/unit/test_chan.c
tests_unit_test_chan_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_chan_LDADD = $(VOLT_CORE_LIBS) $(CMOCKA_LIBS)

check_PROGRAMS += tests/unit/test_chan_wait
TESTS += tests/unit/test_chan_wait
TSAN_TESTS += tests/unit/test_chan_wait
tests_unit_test_chan_wait_SOURCES = tests/unit/test_chan_wait.c
tests_unit_test_chan_wait_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_chan_wait_LDADD = $(VOLT_CORE_LIBS) $(CMOCKA_LIBS)

check_PROGRAMS += tests/stress/stress_chan
TESTS += tests/stress/stress_chan
TSAN_TESTS += tests/stress/stress_chan
tests_stress_stress_chan_SOURCES = tests/stress/stress_chan.c
tests_stress_stress_chan_LDADD = $(VOLT_CORE_LIBS)

check_PROGRAMS += tests/stress/stress_chan_lone
TESTS += tests/stress/stress_chan_lone
TSAN_TESTS += tests/stress/stress_chan_lone
tests_stress_stress_chan_lone_SOURCES = tests/stress/stress_chan_lone.c
tests_stress_stress_chan_lone_LDADD = $(VOLT_CORE_LIBS)

check_PROGRAMS += tests/unit/test_chan_set
TESTS += tests/unit/test_chan_set
TSAN_TESTS += tests/unit/test_chan_set
tests_unit_test_chan_set_SOURCES = tests/unit/test_chan_set.c
tests_unit_test_chan_set_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_chan_set_LDADD = $(VOLT_CORE_LIBS) $(CMOCKA_LIBS)

check_PROGRAMS += tests/stress/stress_chan_set
TESTS += tests/stress/stress_chan_set
TSAN_TESTS += tests/stress/stress_chan_set
tests_stress_stress_chan_set_SOURCES = tests/stress/stress_chan_set.c
tests_stress_stress_chan_set_LDADD = $(VOLT_CORE_LIBS)

EXTRA_PROGRAMS += bench/chan_bench
bench_chan_bench_SOURCES = bench/chan_bench.c bench/harness.c bench/harness.h
bench_chan_bench_LDADD = $(VOLT_CORE_LIBS)
EXTRA_DIST += bench/chan_compare.sh
