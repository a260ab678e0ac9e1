# SPDX-License-Identifier: MIT
# src/rt: sources, tests and benchmarks of this layer (included by Makefile.am).
libvolt_a_SOURCES += \
	src/rt/rt.h src/rt/internal.h \
	src/rt/inject.c \
	src/rt/monitor.c \
	src/rt/park.c \
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

# The measurements: histograms, worker state, the stall monitor (also TSan).
check_PROGRAMS += tests/unit/test_rt_monitor
TESTS += tests/unit/test_rt_monitor
TSAN_TESTS += tests/unit/test_rt_monitor
tests_unit_test_rt_monitor_SOURCES = tests/unit/test_rt_monitor.c
tests_unit_test_rt_monitor_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_rt_monitor_LDADD = $(VOLT_CORE_LIBS) $(CMOCKA_LIBS)

# The mixed-work policy, asserted by counts (also TSan).
check_PROGRAMS += tests/unit/test_rt_policy
TESTS += tests/unit/test_rt_policy
TSAN_TESTS += tests/unit/test_rt_policy
tests_unit_test_rt_policy_SOURCES = tests/unit/test_rt_policy.c
tests_unit_test_rt_policy_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_rt_policy_LDADD = $(VOLT_CORE_LIBS) $(CMOCKA_LIBS)

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
bench_rt_bench_SOURCES = bench/rt_bench.c bench/harness.c bench/harness.h
bench_rt_bench_LDADD = $(VOLT_CORE_LIBS)

# Stress tests: multi-threaded validators (seed printed, VOLTD_STRESS_SCALE,
# watchdog); all of them also run in the ThreadSanitizer build.
RT_STRESS = \
	tests/stress/stress_rt_steal \
	tests/stress/stress_rt_spawn \
	tests/stress/stress_rt_idle \
	tests/stress/stress_rt_notify \
	tests/stress/stress_rt_busy2 \
	tests/stress/stress_rt_search \
	tests/stress/stress_rt_drain
check_PROGRAMS += $(RT_STRESS)
TESTS += $(RT_STRESS)
TSAN_TESTS += $(RT_STRESS) tests/unit/test_rt_wsq
EXTRA_DIST += tests/stress/stress_rt_harness.h
tests_stress_stress_rt_steal_SOURCES = tests/stress/stress_rt_steal.c
tests_stress_stress_rt_steal_LDADD = $(VOLT_CORE_LIBS)
tests_stress_stress_rt_spawn_SOURCES = tests/stress/stress_rt_spawn.c
tests_stress_stress_rt_spawn_LDADD = $(VOLT_CORE_LIBS)
tests_stress_stress_rt_idle_SOURCES = tests/stress/stress_rt_idle.c
tests_stress_stress_rt_idle_LDADD = $(VOLT_CORE_LIBS)
tests_stress_stress_rt_notify_SOURCES = tests/stress/stress_rt_notify.c
tests_stress_stress_rt_notify_LDADD = $(VOLT_CORE_LIBS)
tests_stress_stress_rt_busy2_SOURCES = tests/stress/stress_rt_busy2.c
tests_stress_stress_rt_busy2_LDADD = $(VOLT_CORE_LIBS)
tests_stress_stress_rt_search_SOURCES = tests/stress/stress_rt_search.c
tests_stress_stress_rt_search_LDADD = $(VOLT_CORE_LIBS)
tests_stress_stress_rt_drain_SOURCES = tests/stress/stress_rt_drain.c
tests_stress_stress_rt_drain_LDADD = $(VOLT_CORE_LIBS)
