# SPDX-License-Identifier: MIT
# src/jobs: modules (the loader, the registry and routing, the host table of
# <voltd/module.h>), the built-in module's kinds, and their tests.
libvolt_a_SOURCES += \
	src/jobs/abi.c \
	src/jobs/job.c src/jobs/job.h src/jobs/internal.h \
	src/jobs/host.c \
	src/jobs/module.c \
	src/jobs/registry.c \
	src/jobs/log.c \
	src/jobs/crash.c \
	src/jobs/builtin.c src/jobs/builtin.h \
	src/jobs/kind_echo.c \
	src/jobs/kind_spin.c \
	src/jobs/kind_sleep.c \
	src/jobs/kind_hash.c \
	src/jobs/kind_gzip.c

check_PROGRAMS += tests/unit/test_jobs
TESTS += tests/unit/test_jobs
tests_unit_test_jobs_SOURCES = tests/unit/test_jobs.c
tests_unit_test_jobs_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS) $(ZLIB_CFLAGS)
tests_unit_test_jobs_LDADD = $(VOLT_ALL_LIBS) $(CMOCKA_LIBS)

check_PROGRAMS += tests/unit/test_jobs_host
TESTS += tests/unit/test_jobs_host
tests_unit_test_jobs_host_SOURCES = tests/unit/test_jobs_host.c
tests_unit_test_jobs_host_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_jobs_host_LDADD = $(VOLT_ALL_LIBS) $(CMOCKA_LIBS)

# count() and log() under worker threads (stress; also under TSan), and the
# host calls' test (it runs a runtime, and logs from the main thread).
check_PROGRAMS += tests/stress/stress_jobs
TESTS += tests/stress/stress_jobs
TSAN_TESTS += tests/stress/stress_jobs tests/unit/test_jobs_host
tests_stress_stress_jobs_SOURCES = tests/stress/stress_jobs.c
tests_stress_stress_jobs_LDADD = $(VOLT_ALL_LIBS)

# Modules in a running voltd (pytest, once per I/O backend), with the test
# modules of tests/modules; test_alloc.py counts a module kind's requests.
TESTS += tests/integration/test_modules.py
EXTRA_DIST += tests/integration/test_modules.py
tests/integration/test_modules.log tests/integration/test_alloc.log: tests/modules/good.so tests/modules/many.so
