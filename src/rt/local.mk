# SPDX-License-Identifier: MIT
# src/rt: sources, tests and benchmarks of this layer (included by Makefile.am).
libvolt_a_SOURCES += \
	src/rt/rt.h src/rt/internal.h \
	src/rt/inject.c \
	src/rt/rt.c \
	src/rt/task.c \
	src/rt/worker.c \
	src/rt/wsq.c

check_PROGRAMS += tests/unit/test_rt_basic
TESTS += tests/unit/test_rt_basic
TSAN_TESTS += tests/unit/test_rt_basic
tests_unit_test_rt_basic_SOURCES = tests/unit/test_rt_basic.c
tests_unit_test_rt_basic_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_rt_basic_LDADD = $(VOLT_CORE_LIBS) $(CMOCKA_LIBS)

check_PROGRAMS += tests/unit/test_rt_wsq
TESTS += tests/unit/test_rt_wsq
tests_unit_test_rt_wsq_SOURCES = tests/unit/test_rt_wsq.c
tests_unit_test_rt_wsq_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_rt_wsq_LDADD = $(VOLT_CORE_LIBS) $(CMOCKA_LIBS)

check_PROGRAMS += tests/unit/test_rt_math
TESTS += tests/unit/test_rt_math
tests_unit_test_rt_math_SOURCES = tests/unit/test_rt_math.c
tests_unit_test_rt_math_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_rt_math_LDADD = $(VOLT_CORE_LIBS) $(CMOCKA_LIBS) -lm

# Benchmark (never part of check): the Tokio rt_multi_threaded workloads.
EXTRA_PROGRAMS += bench/rt_bench
bench_rt_bench_SOURCES = bench/rt_bench.c
bench_rt_bench_LDADD = $(VOLT_CORE_LIBS)
