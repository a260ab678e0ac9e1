# SPDX-License-Identifier: MIT
# src/server: the HTTP/1.1 front end and the three stages, and their
# integration tests (pytest, run once per I/O backend).
libvolt_a_SOURCES += \
	src/server/server.h src/server/internal.h src/server/admit.h \
	src/server/server.c \
	src/server/stats.c \
	src/server/accept.c \
	src/server/admit.c \
	src/server/conn.c \
	src/server/request.c \
	src/server/deadline.c \
	src/server/output.c \
	src/server/pool.c \
	src/server/stages.c \
	src/server/lane.c \
	src/server/kinds.c \
	src/server/blocking.c \
	src/server/trace.c

# Integration tests: a real voltd per I/O backend (tests/integration/httputil.py).
TESTS += \
	tests/integration/test_http_routes.py \
	tests/integration/test_http_protocol.py \
	tests/integration/test_http_timeouts.py \
	tests/integration/test_http_load.py \
	tests/integration/test_adversarial.py \
	tests/integration/test_seam.py \
	tests/integration/test_access_log.py \
	tests/integration/test_admit.py \
	tests/integration/test_linger.py \
	tests/integration/test_trace.py \
	tests/integration/test_blocking.py \
	tests/integration/test_gather.py \
	tests/integration/test_lane.py
EXTRA_DIST += \
	tests/integration/httputil.py \
	tests/integration/test_access_log.py \
	tests/integration/test_http_routes.py \
	tests/integration/test_http_protocol.py \
	tests/integration/test_http_timeouts.py \
	tests/integration/test_http_load.py \
	tests/integration/test_adversarial.py \
	tests/integration/test_seam.py \
	tests/integration/test_line_audit.py \
	tests/integration/test_admit.py \
	tests/integration/test_linger.py \
	tests/integration/test_trace.py \
	tests/integration/test_blocking.py \
	tests/integration/test_gather.py \
	tests/integration/test_lane.py

# Only a build with --enable-line-audit counts shared-line writes (scripts/test's
# ASan tree); elsewhere the test would have nothing to read.
if LINE_AUDIT
TESTS += tests/integration/test_line_audit.py
endif

# The fault suite (tests/fault): network faults (namespaces, loss,
# a rate-limited link), client faults (resets, half-closes, cut pipelines),
# server faults (fd limit, in-flight budget, reload and drain); every byte
# checked, the books closed after each case. Both backends, every build
# that runs `make check`.
FAULT_TESTS = \
	tests/fault/test_network_faults.py \
	tests/fault/test_client_faults.py \
	tests/fault/test_server_faults.py
TESTS += $(FAULT_TESTS)
EXTRA_DIST += $(FAULT_TESTS) tests/fault/faultutil.py tests/fault/netclient.py
check-fault: voltd$(EXEEXT)
	$(MAKE) $(AM_MAKEFLAGS) check-TESTS TESTS='$(FAULT_TESTS)'
.PHONY: check-fault

# Allocations per request (tests/integration/test_alloc.py): an LD_PRELOAD
# interposer counting malloc and friends into a shared file.
check_PROGRAMS += tests/helpers/malloc_count.so
tests_helpers_malloc_count_so_SOURCES = tests/helpers/malloc_count.c
tests_helpers_malloc_count_so_CFLAGS = $(AM_CFLAGS) -fPIC
tests_helpers_malloc_count_so_LDFLAGS = $(AM_LDFLAGS) -shared
# Not in a sanitizer build: its runtime owns malloc, no interposer can count.
if !SAN_ADDRESS
if !SAN_THREAD
TESTS += tests/integration/test_alloc.py
endif
endif
EXTRA_DIST += tests/integration/test_alloc.py

# The connection's three state machines: every listed move, whole paths,
# the trace, and a move off the lists stopping the process.
check_PROGRAMS += tests/unit/test_server_conn
TESTS += tests/unit/test_server_conn
tests_unit_test_server_conn_SOURCES = tests/unit/test_server_conn.c
tests_unit_test_server_conn_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_server_conn_LDADD = $(VOLT_ALL_LIBS) $(CMOCKA_LIBS)

# The heavy lane's turn rule, by its arithmetic.
check_PROGRAMS += tests/unit/test_server_lane
TESTS += tests/unit/test_server_lane
tests_unit_test_server_lane_SOURCES = tests/unit/test_server_lane.c
tests_unit_test_server_lane_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_server_lane_LDADD = $(VOLT_ALL_LIBS) $(CMOCKA_LIBS)

# The connection-object pool under concurrent take / give back.
check_PROGRAMS += tests/unit/test_server_pool
TESTS += tests/unit/test_server_pool
TSAN_TESTS += tests/unit/test_server_pool
tests_unit_test_server_pool_SOURCES = tests/unit/test_server_pool.c
tests_unit_test_server_pool_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_server_pool_LDADD = $(VOLT_ALL_LIBS) $(CMOCKA_LIBS)

# The blocking pool under pipelined load with connections left early, on a
# real server with tests/modules/pool.so (once per backend, also under TSan).
check_PROGRAMS += tests/stress/stress_blocking
IO_TESTS += tests/stress/stress_blocking
IO_TSAN_TESTS += tests/stress/stress_blocking
tests_stress_stress_blocking_SOURCES = tests/stress/stress_blocking.c
tests_stress_stress_blocking_LDADD = $(VOLT_ALL_LIBS)
EXTRA_tests_stress_stress_blocking_DEPENDENCIES = tests/modules/pool.so

# Benchmark client (never part of check): per-class latency (workload B), the
# open-loop variant of workload C (D) and the open-loop mix (E), run by
# scripts/bench.
EXTRA_PROGRAMS += bench/mixload
bench_mixload_SOURCES = bench/mixload.c
