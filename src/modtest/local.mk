# SPDX-License-Identifier: MIT
# src/modtest: what voltd gives module authors (the Debian package
# voltd-dev): the harness voltd-modtest and its page; and their tests. The
# header itself is the layer api (Makefile.am).
bin_PROGRAMS += voltd-modtest
voltd_modtest_SOURCES = src/modtest/main.c
# The jobs layer and what the built-in kinds use; no socket, no runtime.
voltd_modtest_LDADD = libvolt.a $(CRYPTO_LIBS) $(ZLIB_LIBS)
# [jobs] slice_us's default comes from the schema (src/voltd/local.mk).
$(voltd_modtest_OBJECTS): voltd-defaults.h
dist_man_MANS += man/voltd-modtest.1

# The harness passes a request through and reports as voltd would.
MODULE_TESTS = tests/modules/test_modtest.sh
TESTS += $(MODULE_TESTS)
EXTRA_DIST += $(MODULE_TESTS) tests/modules/modtest_probe.c
$(MODULE_TESTS:.sh=.log): voltd-modtest$(EXEEXT)
