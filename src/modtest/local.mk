# SPDX-License-Identifier: MIT
# src/modtest: what voltd gives module authors (voltd-module(7); the Debian
# package voltd-dev): the harness voltd-modtest, voltd.pc, the example
# modules, the pages; and their tests. The header itself is the layer api
# (Makefile.am).
bin_PROGRAMS += voltd-modtest
voltd_modtest_SOURCES = src/modtest/main.c
# The jobs layer and what the built-in kinds use; no socket, no runtime.
voltd_modtest_LDADD = libvolt.a $(CRYPTO_LIBS) $(ZLIB_LIBS)
# [jobs] slice_us's default comes from the schema (src/voltd/local.mk).
$(voltd_modtest_OBJECTS): voltd-defaults.h
dist_man_MANS += man/voltd-modtest.1 man/voltd-module.7

# voltd.pc, and voltd-uninstalled.pc: the same for this build, its -I the
# source tree's include/ (pkg-config prefers it when PKG_CONFIG_PATH names
# the build tree: the tests build the examples through it). The ABI
# variables are read from the header, the one place they are written.
pkgconfigdir = $(libdir)/pkgconfig
pkgconfig_DATA = voltd.pc
noinst_DATA = voltd-uninstalled.pc
voltd.pc voltd-uninstalled.pc: $(top_srcdir)/src/modtest/voltd.pc.in $(top_srcdir)/include/voltd/module.h Makefile
	$(AM_V_GEN)h=$(top_srcdir)/include/voltd/module.h; \
	major=`sed -n 's/^#define VOLTD_MODULE_ABI_MAJOR \([0-9]*\)$$/\1/p' $$h`; \
	minor=`sed -n 's/^#define VOLTD_MODULE_ABI_MINOR \([0-9]*\)$$/\1/p' $$h`; \
	test -n "$$major" && test -n "$$minor" || { echo "$$h: no VOLTD_MODULE_ABI_MAJOR or _MINOR" >&2; exit 1; }; \
	case $@ in *-uninstalled.pc) inc='$(abs_top_srcdir)/include' ;; *) inc='$(includedir)' ;; esac; \
	sed -e 's|@prefix[@]|$(prefix)|g' -e "s|@includedir[@]|$$inc|g" -e 's|@moduledir[@]|$(moduledir)|g' \
		-e "s|@module_abi_major[@]|$$major|g" -e "s|@module_abi_minor[@]|$$minor|g" \
		-e 's|@PACKAGE_VERSION[@]|$(PACKAGE_VERSION)|g' $(top_srcdir)/src/modtest/voltd.pc.in >$@.tmp && \
	mv $@.tmp $@
CLEANFILES += voltd.pc voltd-uninstalled.pc
EXTRA_DIST += src/modtest/voltd.pc.in

# voltd's default [modules] dir, made (empty) by make install.
install-exec-local:
	$(MKDIR_P) '$(DESTDIR)$(moduledir)'

# The examples, each folder with its own Makefile, under $(docdir)/examples/modules.
modexamplesdir = $(docdir)/examples/modules
dist_modexamples_DATA = examples/modules/README.md
modhellodir = $(modexamplesdir)/hello
dist_modhello_DATA = examples/modules/hello/Makefile examples/modules/hello/README.md \
	examples/modules/hello/hello.c
modcountdir = $(modexamplesdir)/count
dist_modcount_DATA = examples/modules/count/Makefile examples/modules/count/README.md \
	examples/modules/count/count.c
moddelaydir = $(modexamplesdir)/delay
dist_moddelay_DATA = examples/modules/delay/Makefile examples/modules/delay/README.md \
	examples/modules/delay/delay.c
modjournaldir = $(modexamplesdir)/journal
dist_modjournal_DATA = examples/modules/journal/Makefile examples/modules/journal/README.md \
	examples/modules/journal/journal.c

# The tests: the harness itself (a probe module); the examples built by
# their Makefiles against this tree and checked (and count against the
# built-in spin); modules of other ABI minors and majors; a module built
# from `make install` alone; the documents against the tree.
MODULE_TESTS = tests/modules/test_examples.sh tests/modules/test_modtest.sh \
	tests/modules/test_abi_compat.sh tests/modules/test_install.sh
TESTS += $(MODULE_TESTS) tests/doc/test_module_docs.sh
EXTRA_DIST += $(MODULE_TESTS) tests/doc/test_module_docs.sh tests/modules/modtest_probe.c \
	tests/modules/abi-1.0/voltd/module.h
$(MODULE_TESTS:.sh=.log): voltd-modtest$(EXEEXT) voltd-uninstalled.pc
clean-local: clean-module-tests
clean-module-tests:
	rm -rf tests/modules/examples
.PHONY: clean-module-tests
