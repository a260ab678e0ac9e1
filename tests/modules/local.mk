# SPDX-License-Identifier: MIT
# tests/modules: job modules built as shared objects at check time (plain
# -fPIC -shared, no libtool), against <voltd/module.h> alone: good.so, the
# module voltd must load; bad_*.so, one refusal each; future.so, built
# against a later minor. tests/unit/test_jobs_loader.c opens them.
MODFLAGS_CC = $(AM_CFLAGS) -fPIC -fvisibility=hidden
MODFLAGS_LD = $(AM_LDFLAGS) -shared -Wl,--build-id

check_PROGRAMS += tests/modules/good.so
tests_modules_good_so_SOURCES = tests/modules/good.c
tests_modules_good_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_good_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/many.so
tests_modules_many_so_SOURCES = tests/modules/many.c
tests_modules_many_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_many_so_LDFLAGS = $(MODFLAGS_LD)

# An object file (ELF relocatable), not a shared object: refused.
check_PROGRAMS += tests/modules/good_reloc.so
tests_modules_good_reloc_so_SOURCES = tests/modules/good.c
tests_modules_good_reloc_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_good_reloc_so_LDFLAGS = -r -nostdlib

check_PROGRAMS += tests/modules/bad_nosym.so
tests_modules_bad_nosym_so_SOURCES = tests/modules/bad.c
tests_modules_bad_nosym_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_NOSYM
tests_modules_bad_nosym_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_nosym_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_v2.so
tests_modules_bad_v2_so_SOURCES = tests/modules/bad.c
tests_modules_bad_v2_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_V2
tests_modules_bad_v2_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_v2_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_future.so
tests_modules_bad_future_so_SOURCES = tests/modules/bad.c
tests_modules_bad_future_so_CPPFLAGS = $(AM_CPPFLAGS) -DFUTURE
tests_modules_bad_future_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_future_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_major.so
tests_modules_bad_major_so_SOURCES = tests/modules/bad.c
tests_modules_bad_major_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_MAJOR
tests_modules_bad_major_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_major_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_minor.so
tests_modules_bad_minor_so_SOURCES = tests/modules/bad.c
tests_modules_bad_minor_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_MINOR
tests_modules_bad_minor_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_minor_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_small.so
tests_modules_bad_small_so_SOURCES = tests/modules/bad.c
tests_modules_bad_small_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_SMALL
tests_modules_bad_small_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_small_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_stride.so
tests_modules_bad_stride_so_SOURCES = tests/modules/bad.c
tests_modules_bad_stride_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_STRIDE
tests_modules_bad_stride_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_stride_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_name.so
tests_modules_bad_name_so_SOURCES = tests/modules/bad.c
tests_modules_bad_name_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_NAME
tests_modules_bad_name_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_name_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_version.so
tests_modules_bad_version_so_SOURCES = tests/modules/bad.c
tests_modules_bad_version_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_VERSION
tests_modules_bad_version_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_version_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_init.so
tests_modules_bad_init_so_SOURCES = tests/modules/bad.c
tests_modules_bad_init_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_INIT
tests_modules_bad_init_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_init_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_counter.so
tests_modules_bad_counter_so_SOURCES = tests/modules/bad.c
tests_modules_bad_counter_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_COUNTER
tests_modules_bad_counter_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_counter_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_dupkind.so
tests_modules_bad_dupkind_so_SOURCES = tests/modules/bad.c
tests_modules_bad_dupkind_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_DUPKIND
tests_modules_bad_dupkind_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_dupkind_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_route.so
tests_modules_bad_route_so_SOURCES = tests/modules/bad.c
tests_modules_bad_route_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_ROUTE
tests_modules_bad_route_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_route_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_server_route.so
tests_modules_bad_server_route_so_SOURCES = tests/modules/bad.c
tests_modules_bad_server_route_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_SERVER_ROUTE
tests_modules_bad_server_route_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_server_route_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_own_clash.so
tests_modules_bad_own_clash_so_SOURCES = tests/modules/bad.c
tests_modules_bad_own_clash_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_OWN_CLASH
tests_modules_bad_own_clash_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_own_clash_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_nostep.so
tests_modules_bad_nostep_so_SOURCES = tests/modules/bad.c
tests_modules_bad_nostep_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_NOSTEP
tests_modules_bad_nostep_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_nostep_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_methods.so
tests_modules_bad_methods_so_SOURCES = tests/modules/bad.c
tests_modules_bad_methods_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_METHODS
tests_modules_bad_methods_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_methods_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_kindname.so
tests_modules_bad_kindname_so_SOURCES = tests/modules/bad.c
tests_modules_bad_kindname_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_KINDNAME
tests_modules_bad_kindname_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_kindname_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_route_syntax.so
tests_modules_bad_route_syntax_so_SOURCES = tests/modules/bad.c
tests_modules_bad_route_syntax_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_ROUTE_SYNTAX
tests_modules_bad_route_syntax_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_route_syntax_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_key_bounds.so
tests_modules_bad_key_bounds_so_SOURCES = tests/modules/bad.c
tests_modules_bad_key_bounds_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_KEY_BOUNDS
tests_modules_bad_key_bounds_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_key_bounds_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_key_path.so
tests_modules_bad_key_path_so_SOURCES = tests/modules/bad.c
tests_modules_bad_key_path_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_KEY_PATH
tests_modules_bad_key_path_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_key_path_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_key_type.so
tests_modules_bad_key_type_so_SOURCES = tests/modules/bad.c
tests_modules_bad_key_type_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_KEY_TYPE
tests_modules_bad_key_type_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_key_type_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_key_live_string.so
tests_modules_bad_key_live_string_so_SOURCES = tests/modules/bad.c
tests_modules_bad_key_live_string_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_KEY_LIVE_STRING
tests_modules_bad_key_live_string_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_key_live_string_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/modules/bad_good_clash.so
tests_modules_bad_good_clash_so_SOURCES = tests/modules/bad.c
tests_modules_bad_good_clash_so_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_GOOD_CLASH
tests_modules_bad_good_clash_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_bad_good_clash_so_LDFLAGS = $(MODFLAGS_LD)

# A module whose step dies of a signal (the fatal-signal report).
check_PROGRAMS += tests/modules/crash.so
tests_modules_crash_so_SOURCES = tests/modules/crash.c
tests_modules_crash_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_crash_so_LDFLAGS = $(MODFLAGS_LD)

# Blocking kinds, and a kind that overruns (test_blocking.py).
check_PROGRAMS += tests/modules/pool.so
tests_modules_pool_so_SOURCES = tests/modules/pool.c
tests_modules_pool_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_pool_so_LDFLAGS = $(MODFLAGS_LD)

check_PROGRAMS += tests/unit/test_jobs_loader
TESTS += tests/unit/test_jobs_loader
tests_unit_test_jobs_loader_SOURCES = tests/unit/test_jobs_loader.c
tests_unit_test_jobs_loader_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_jobs_loader_LDADD = $(VOLT_ALL_LIBS) $(CMOCKA_LIBS)
# The modules it opens are built with it.
EXTRA_tests_unit_test_jobs_loader_DEPENDENCIES = $(filter tests/modules/%,$(check_PROGRAMS))

# The fatal-signal report: a child dies in crash.so's step, once per signal.
check_PROGRAMS += tests/unit/test_jobs_crash
TESTS += tests/unit/test_jobs_crash
tests_unit_test_jobs_crash_SOURCES = tests/unit/test_jobs_crash.c
tests_unit_test_jobs_crash_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_jobs_crash_LDADD = $(VOLT_ALL_LIBS) $(CMOCKA_LIBS)
EXTRA_tests_unit_test_jobs_crash_DEPENDENCIES = tests/modules/crash.so
