# SPDX-License-Identifier: MIT
# src/io: sources, tests and benchmarks of this layer (included by Makefile.am).
# liburing.h and ev.h are included only by the io_uring backend (uring.h,
# uring_setup.c, uring.c) and evloop.c.
libvolt_a_SOURCES += \
	src/io/io.h src/io/internal.h \
	src/io/driver.c \
	src/io/op.c \
	src/io/socket.c \
	src/io/timer.c \
	src/io/listener.c \
	src/io/uring.h src/io/uring_setup.c src/io/uring.c \
	src/io/evloop.c

# ------------------------------------------------------------------ tests
# An I/O test is one program, run once per backend: it is listed in IO_TESTS
# (and IO_TSAN_TESTS), and Makefile.am turns each into the tests
# <program>-uring.iot and <program>-libev.iot, which tests/helpers/io-backend
# runs as VOLTD_IO_BACKEND=<backend> <program>. The uring run exits 77 where
# io_uring cannot be set up. test_io_fallback runs the same programs with
# backend=auto under a seccomp filter that forbids io_uring.
IO_TEST_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
IO_TEST_LDADD = $(VOLT_ALL_LIBS) $(CMOCKA_LIBS)
IO_HARNESS = tests/helpers/io_harness.c tests/helpers/io_harness.h

check_PROGRAMS += tests/unit/test_io_echo
IO_TESTS += tests/unit/test_io_echo
IO_TSAN_TESTS += tests/unit/test_io_echo
tests_unit_test_io_echo_SOURCES = tests/unit/test_io_echo.c $(IO_HARNESS)
tests_unit_test_io_echo_CFLAGS = $(IO_TEST_CFLAGS)
tests_unit_test_io_echo_LDADD = $(IO_TEST_LDADD)

check_PROGRAMS += tests/unit/test_io_conn
IO_TESTS += tests/unit/test_io_conn
IO_TSAN_TESTS += tests/unit/test_io_conn
tests_unit_test_io_conn_SOURCES = tests/unit/test_io_conn.c $(IO_HARNESS)
tests_unit_test_io_conn_CFLAGS = $(IO_TEST_CFLAGS)
tests_unit_test_io_conn_LDADD = $(IO_TEST_LDADD)

check_PROGRAMS += tests/unit/test_io_timer
IO_TESTS += tests/unit/test_io_timer
IO_TSAN_TESTS += tests/unit/test_io_timer
tests_unit_test_io_timer_SOURCES = tests/unit/test_io_timer.c $(IO_HARNESS)
tests_unit_test_io_timer_CFLAGS = $(IO_TEST_CFLAGS)
tests_unit_test_io_timer_LDADD = $(IO_TEST_LDADD)

check_PROGRAMS += tests/unit/test_io_park
IO_TESTS += tests/unit/test_io_park
IO_TSAN_TESTS += tests/unit/test_io_park
tests_unit_test_io_park_SOURCES = tests/unit/test_io_park.c $(IO_HARNESS)
tests_unit_test_io_park_CFLAGS = $(IO_TEST_CFLAGS)
tests_unit_test_io_park_LDADD = $(IO_TEST_LDADD)

check_PROGRAMS += tests/unit/test_io_fdlimit
IO_TESTS += tests/unit/test_io_fdlimit
tests_unit_test_io_fdlimit_SOURCES = tests/unit/test_io_fdlimit.c $(IO_HARNESS)
tests_unit_test_io_fdlimit_CFLAGS = $(IO_TEST_CFLAGS)
tests_unit_test_io_fdlimit_LDADD = $(IO_TEST_LDADD)

check_PROGRAMS += tests/stress/stress_io_steal
IO_TESTS += tests/stress/stress_io_steal
IO_TSAN_TESTS += tests/stress/stress_io_steal
tests_stress_stress_io_steal_SOURCES = tests/stress/stress_io_steal.c $(IO_HARNESS)
tests_stress_stress_io_steal_LDADD = $(VOLT_ALL_LIBS)

# An io_uring feature hidden (test hook): auto falls back to libev.
check_PROGRAMS += tests/unit/test_io_features
TESTS += tests/unit/test_io_features
tests_unit_test_io_features_SOURCES = tests/unit/test_io_features.c $(IO_HARNESS)
tests_unit_test_io_features_CFLAGS = $(IO_TEST_CFLAGS)
tests_unit_test_io_features_LDADD = $(IO_TEST_LDADD)

# The seccomp helper (no io_uring) and the test that runs I/O tests with
# backend=auto through it.
check_PROGRAMS += tests/helpers/no_uring
tests_helpers_no_uring_SOURCES = tests/helpers/no_uring.c

check_PROGRAMS += tests/unit/test_io_fallback
TESTS += tests/unit/test_io_fallback
tests_unit_test_io_fallback_SOURCES = tests/unit/test_io_fallback.c
tests_unit_test_io_fallback_CFLAGS = $(IO_TEST_CFLAGS)
tests_unit_test_io_fallback_LDADD = $(IO_TEST_LDADD)

# Benchmark (never part of check): both backends, connections x message
# size, and the cost of 10,000 idle connections with live deadlines.
EXTRA_PROGRAMS += bench/echo_bench
bench_echo_bench_SOURCES = bench/echo_bench.c $(IO_HARNESS)
bench_echo_bench_LDADD = $(VOLT_ALL_LIBS)
