# SPDX-License-Identifier: MIT
# src/io: sources, tests and benchmarks of this layer (included by Makefile.am).
# liburing.h and ev.h are included only by uring.c and evloop.c.
libvolt_a_SOURCES += \
	src/io/io.h src/io/internal.h \
	src/io/driver.c \
	src/io/op.c \
	src/io/conn.c \
	src/io/timer.c \
	src/io/listener.c \
	src/io/uring.c \
	src/io/evloop.c

# ------------------------------------------------------------------ tests
# Every I/O test is built once per backend (IOH_BACKEND); the uring build
# exits 77 where io_uring cannot be set up. The *_auto builds take the
# backend from $VOLTD_IO_BACKEND and only run under test_io_fallback.
IO_TEST_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
IO_TEST_LDADD = $(VOLT_ALL_LIBS) $(CMOCKA_LIBS)
IO_HARNESS = tests/helpers/io_harness.c tests/helpers/io_harness.h
IO_URING = -DIOH_BACKEND=VIO_BACKEND_URING
IO_LIBEV = -DIOH_BACKEND=VIO_BACKEND_LIBEV

check_PROGRAMS += tests/unit/test_io_echo_uring tests/unit/test_io_echo_libev tests/unit/test_io_echo_auto
TESTS += tests/unit/test_io_echo_uring tests/unit/test_io_echo_libev
TSAN_TESTS += tests/unit/test_io_echo_uring tests/unit/test_io_echo_libev
tests_unit_test_io_echo_uring_SOURCES = tests/unit/test_io_echo.c $(IO_HARNESS)
tests_unit_test_io_echo_uring_CPPFLAGS = $(AM_CPPFLAGS) $(IO_URING)
tests_unit_test_io_echo_uring_CFLAGS = $(IO_TEST_CFLAGS)
tests_unit_test_io_echo_uring_LDADD = $(IO_TEST_LDADD)
tests_unit_test_io_echo_libev_SOURCES = tests/unit/test_io_echo.c $(IO_HARNESS)
tests_unit_test_io_echo_libev_CPPFLAGS = $(AM_CPPFLAGS) $(IO_LIBEV)
tests_unit_test_io_echo_libev_CFLAGS = $(IO_TEST_CFLAGS)
tests_unit_test_io_echo_libev_LDADD = $(IO_TEST_LDADD)
tests_unit_test_io_echo_auto_SOURCES = tests/unit/test_io_echo.c $(IO_HARNESS)
tests_unit_test_io_echo_auto_CFLAGS = $(IO_TEST_CFLAGS)
tests_unit_test_io_echo_auto_LDADD = $(IO_TEST_LDADD)

check_PROGRAMS += tests/unit/test_io_conn_uring tests/unit/test_io_conn_libev
TESTS += tests/unit/test_io_conn_uring tests/unit/test_io_conn_libev
TSAN_TESTS += tests/unit/test_io_conn_uring tests/unit/test_io_conn_libev
tests_unit_test_io_conn_uring_SOURCES = tests/unit/test_io_conn.c $(IO_HARNESS)
tests_unit_test_io_conn_uring_CPPFLAGS = $(AM_CPPFLAGS) $(IO_URING)
tests_unit_test_io_conn_uring_CFLAGS = $(IO_TEST_CFLAGS)
tests_unit_test_io_conn_uring_LDADD = $(IO_TEST_LDADD)
tests_unit_test_io_conn_libev_SOURCES = tests/unit/test_io_conn.c $(IO_HARNESS)
tests_unit_test_io_conn_libev_CPPFLAGS = $(AM_CPPFLAGS) $(IO_LIBEV)
tests_unit_test_io_conn_libev_CFLAGS = $(IO_TEST_CFLAGS)
tests_unit_test_io_conn_libev_LDADD = $(IO_TEST_LDADD)

check_PROGRAMS += tests/unit/test_io_timer_uring tests/unit/test_io_timer_libev tests/unit/test_io_timer_auto
TESTS += tests/unit/test_io_timer_uring tests/unit/test_io_timer_libev
TSAN_TESTS += tests/unit/test_io_timer_uring tests/unit/test_io_timer_libev
tests_unit_test_io_timer_uring_SOURCES = tests/unit/test_io_timer.c $(IO_HARNESS)
tests_unit_test_io_timer_uring_CPPFLAGS = $(AM_CPPFLAGS) $(IO_URING)
tests_unit_test_io_timer_uring_CFLAGS = $(IO_TEST_CFLAGS)
tests_unit_test_io_timer_uring_LDADD = $(IO_TEST_LDADD)
tests_unit_test_io_timer_libev_SOURCES = tests/unit/test_io_timer.c $(IO_HARNESS)
tests_unit_test_io_timer_libev_CPPFLAGS = $(AM_CPPFLAGS) $(IO_LIBEV)
tests_unit_test_io_timer_libev_CFLAGS = $(IO_TEST_CFLAGS)
tests_unit_test_io_timer_libev_LDADD = $(IO_TEST_LDADD)
tests_unit_test_io_timer_auto_SOURCES = tests/unit/test_io_timer.c $(IO_HARNESS)
tests_unit_test_io_timer_auto_CFLAGS = $(IO_TEST_CFLAGS)
tests_unit_test_io_timer_auto_LDADD = $(IO_TEST_LDADD)

check_PROGRAMS += tests/unit/test_io_park_uring tests/unit/test_io_park_libev
TESTS += tests/unit/test_io_park_uring tests/unit/test_io_park_libev
TSAN_TESTS += tests/unit/test_io_park_uring tests/unit/test_io_park_libev
tests_unit_test_io_park_uring_SOURCES = tests/unit/test_io_park.c $(IO_HARNESS)
tests_unit_test_io_park_uring_CPPFLAGS = $(AM_CPPFLAGS) $(IO_URING)
tests_unit_test_io_park_uring_CFLAGS = $(IO_TEST_CFLAGS)
tests_unit_test_io_park_uring_LDADD = $(IO_TEST_LDADD)
tests_unit_test_io_park_libev_SOURCES = tests/unit/test_io_park.c $(IO_HARNESS)
tests_unit_test_io_park_libev_CPPFLAGS = $(AM_CPPFLAGS) $(IO_LIBEV)
tests_unit_test_io_park_libev_CFLAGS = $(IO_TEST_CFLAGS)
tests_unit_test_io_park_libev_LDADD = $(IO_TEST_LDADD)

# An io_uring feature hidden (test hook): auto falls back to libev.
check_PROGRAMS += tests/unit/test_io_features
TESTS += tests/unit/test_io_features
tests_unit_test_io_features_SOURCES = tests/unit/test_io_features.c $(IO_HARNESS)
tests_unit_test_io_features_CFLAGS = $(IO_TEST_CFLAGS)
tests_unit_test_io_features_LDADD = $(IO_TEST_LDADD)

# The seccomp helper (no io_uring) and the test that runs the backend=auto
# builds through it.
check_PROGRAMS += tests/helpers/no_uring
tests_helpers_no_uring_SOURCES = tests/helpers/no_uring.c

check_PROGRAMS += tests/unit/test_io_fallback
TESTS += tests/unit/test_io_fallback
tests_unit_test_io_fallback_SOURCES = tests/unit/test_io_fallback.c
tests_unit_test_io_fallback_CFLAGS = $(IO_TEST_CFLAGS)
tests_unit_test_io_fallback_LDADD = $(IO_TEST_LDADD)

check_PROGRAMS += tests/unit/test_io_fdlimit_uring tests/unit/test_io_fdlimit_libev
TESTS += tests/unit/test_io_fdlimit_uring tests/unit/test_io_fdlimit_libev
tests_unit_test_io_fdlimit_uring_SOURCES = tests/unit/test_io_fdlimit.c $(IO_HARNESS)
tests_unit_test_io_fdlimit_uring_CPPFLAGS = $(AM_CPPFLAGS) $(IO_URING)
tests_unit_test_io_fdlimit_uring_CFLAGS = $(IO_TEST_CFLAGS)
tests_unit_test_io_fdlimit_uring_LDADD = $(IO_TEST_LDADD)
tests_unit_test_io_fdlimit_libev_SOURCES = tests/unit/test_io_fdlimit.c $(IO_HARNESS)
tests_unit_test_io_fdlimit_libev_CPPFLAGS = $(AM_CPPFLAGS) $(IO_LIBEV)
tests_unit_test_io_fdlimit_libev_CFLAGS = $(IO_TEST_CFLAGS)
tests_unit_test_io_fdlimit_libev_LDADD = $(IO_TEST_LDADD)

check_PROGRAMS += tests/stress/stress_io_steal_uring tests/stress/stress_io_steal_libev
TESTS += tests/stress/stress_io_steal_uring tests/stress/stress_io_steal_libev
TSAN_TESTS += tests/stress/stress_io_steal_uring tests/stress/stress_io_steal_libev
tests_stress_stress_io_steal_uring_SOURCES = tests/stress/stress_io_steal.c $(IO_HARNESS)
tests_stress_stress_io_steal_uring_CPPFLAGS = $(AM_CPPFLAGS) $(IO_URING)
tests_stress_stress_io_steal_uring_LDADD = $(VOLT_ALL_LIBS)
tests_stress_stress_io_steal_libev_SOURCES = tests/stress/stress_io_steal.c $(IO_HARNESS)
tests_stress_stress_io_steal_libev_CPPFLAGS = $(AM_CPPFLAGS) $(IO_LIBEV)
tests_stress_stress_io_steal_libev_LDADD = $(VOLT_ALL_LIBS)

# Benchmark (never part of check): both backends, connections x message
# size, and the cost of 10,000 idle connections with live deadlines.
EXTRA_PROGRAMS += bench/echo_bench
bench_echo_bench_SOURCES = bench/echo_bench.c
bench_echo_bench_LDADD = $(VOLT_ALL_LIBS)
