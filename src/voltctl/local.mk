# SPDX-License-Identifier: MIT
# src/voltctl: the control-socket client, its man page and its tests.
bin_PROGRAMS += voltctl
voltctl_SOURCES = \
	src/voltctl/voltctl.h src/voltctl/main.c \
	src/voltctl/client.h src/voltctl/client.c \
	src/voltctl/render.h src/voltctl/render.c \
	src/voltctl/top.c
voltctl_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) $(NCURSES_CFLAGS)
voltctl_LDADD = $(JANSSON_LIBS) $(NCURSES_LIBS)
# control.socket's default comes from the schema (src/voltd/local.mk).
$(voltctl_OBJECTS): voltd-defaults.h

dist_man_MANS += man/voltctl.1

# Integration tests (pytest): voltctl against a real voltd.
TESTS += tests/integration/test_voltctl.py
EXTRA_DIST += tests/integration/test_voltctl.py

# The generic renderer on replies it has never seen.
check_PROGRAMS += tests/unit/test_voltctl_render
TESTS += tests/unit/test_voltctl_render
tests_unit_test_voltctl_render_SOURCES = tests/unit/test_voltctl_render.c \
	src/voltctl/render.c src/voltctl/render.h
tests_unit_test_voltctl_render_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
tests_unit_test_voltctl_render_LDADD = $(JANSSON_LIBS)
