# SPDX-License-Identifier: MIT
# src/voltd: the daemon (config, notify, main) and its tests.
libvolt_a_SOURCES += \
	src/voltd/cfg.c src/voltd/cfg.h \
	src/voltd/cfg_schema.c src/voltd/cfg_types.c src/voltd/cfg_internal.h src/voltd/cfg_modules.c \
	src/voltd/reconf.c src/voltd/reconf.h \
	src/voltd/notify.c src/voltd/notify.h \
	src/voltd/life.c src/voltd/life.h \
	src/voltd/malloc_policy.c src/voltd/malloc_policy.h

sbin_PROGRAMS += voltd
voltd_SOURCES = src/voltd/main.c
voltd_LDADD = $(VOLT_ALL_LIBS)

# voltd-schema: renders the schema (cfg_schema.c) into what must repeat its facts.
# voltd-defaults.h (voltctl's defaults) is made by the build. The tracked
# files, man/voltd.conf.5, conf/voltd.conf and tests/helpers/test_config.h,
# are rewritten in the source tree by `make regen` (after a schema change)
# and tests/doc/test_schema_docs.sh fails when they drift from the schema.
noinst_PROGRAMS += voltd-schema
voltd_schema_SOURCES = src/voltd/schema_gen.c
voltd_schema_LDADD = $(VOLT_ALL_LIBS)
voltd-defaults.h: voltd-schema$(EXEEXT)
	$(AM_V_GEN)./voltd-schema$(EXEEXT) defaults-h > $@.tmp && mv $@.tmp $@
CLEANFILES += voltd-defaults.h
regen: voltd-schema$(EXEEXT)
	./voltd-schema$(EXEEXT) man $(top_srcdir)/man/voltd.conf.5.in > man-voltd.conf.5.tmp
	./voltd-schema$(EXEEXT) conf $(top_srcdir)/conf/voltd.conf.in > conf-voltd.conf.tmp
	./voltd-schema$(EXEEXT) test-config > test_config.h.tmp
	mv man-voltd.conf.5.tmp $(top_srcdir)/man/voltd.conf.5
	mv conf-voltd.conf.tmp $(top_srcdir)/conf/voltd.conf
	mv test_config.h.tmp $(top_srcdir)/tests/helpers/test_config.h
.PHONY: regen
TESTS += tests/doc/test_schema_docs.sh
EXTRA_DIST += man/voltd.conf.5.in conf/voltd.conf.in tests/doc/test_schema_docs.sh
tests/doc/test_schema_docs.log: voltd-schema$(EXEEXT)

# voltd-test: the same daemon plus test-only job kinds (GET /v1/stall), for
# the integration tests. Never installed. Its own builtin.o (the built-in
# module's descriptor, with VOLTD_TEST_KINDS) comes first on the link line,
# so libvolt.a's is not used.
check_PROGRAMS += voltd-test
voltd_test_SOURCES = src/voltd/main.c src/jobs/builtin.c src/jobs/kind_stall.c
voltd_test_CPPFLAGS = $(AM_CPPFLAGS) -DVOLTD_TEST_KINDS
voltd_test_LDADD = $(VOLT_ALL_LIBS)

check_PROGRAMS += tests/unit/test_cfg
TESTS += tests/unit/test_cfg
tests_unit_test_cfg_SOURCES = tests/unit/test_cfg.c
tests_unit_test_cfg_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_cfg_LDADD = $(VOLT_ALL_LIBS) $(CMOCKA_LIBS)
# The module test_cfg and test_module_config.py load from [module.cfgmod]:
# a shared object built as a module's author builds one (plain -fPIC
# -shared against <voltd/module.h> alone).
check_PROGRAMS += tests/modules/cfgmod.so
tests_modules_cfgmod_so_SOURCES = tests/modules/cfgmod.c
tests_modules_cfgmod_so_CFLAGS = $(MODFLAGS_CC)
tests_modules_cfgmod_so_LDFLAGS = $(MODFLAGS_LD)
EXTRA_tests_unit_test_cfg_DEPENDENCIES = tests/modules/cfgmod.so

# Integration tests (pytest): scripts/test runs them; `make check` too.
TESTS += tests/integration/test_cli.py tests/integration/test_daemon_io.py tests/integration/test_stall.py \
	tests/integration/test_module_config.py
EXTRA_DIST += tests/integration/test_cli.py tests/integration/test_daemon_io.py tests/integration/test_stall.py \
	tests/integration/test_module_config.py tests/integration/conftest.py tests/integration/pytest-driver
# The daemon's life (notify, activation, drain, restarts); NOTIFY_TESTS also
# run in the --without-systemd build (scripts/test, build-nosd).
NOTIFY_TESTS = tests/integration/test_notify.py
TESTS += $(NOTIFY_TESTS) tests/integration/test_drain.py tests/integration/test_activation.py tests/integration/test_units.py tests/integration/test_haproxy.py
EXTRA_DIST += $(NOTIFY_TESTS) tests/integration/test_drain.py tests/integration/test_activation.py tests/integration/test_units.py tests/integration/test_haproxy.py tests/integration/notifyutil.py

dist_man_MANS += man/voltd.8 man/voltd.conf.5
# The sample configuration: $(sysconfdir)/voltd/voltd.conf only when none is
# there (an operator's edits survive `make install`; an edited file gets the
# new sample next to it as voltd.conf.new), and always under
# $(docdir)/examples. uninstall removes voltd.conf only when unedited.
sysconf_voltddir = $(sysconfdir)/voltd
EXTRA_DIST += conf/voltd.conf
install-voltd-conf:
	$(MKDIR_P) '$(DESTDIR)$(sysconf_voltddir)'
	@conf='$(DESTDIR)$(sysconf_voltddir)/voltd.conf'; \
	if test ! -f "$$conf"; then \
		echo " $(INSTALL_DATA) $(top_srcdir)/conf/voltd.conf $$conf"; \
		$(INSTALL_DATA) $(top_srcdir)/conf/voltd.conf "$$conf"; \
	elif cmp -s $(top_srcdir)/conf/voltd.conf "$$conf"; then \
		rm -f "$$conf.new"; \
	else \
		$(INSTALL_DATA) $(top_srcdir)/conf/voltd.conf "$$conf.new"; \
		echo "voltd: $$conf differs from the shipped sample: kept; the new sample is $$conf.new"; \
	fi
uninstall-voltd-conf:
	@conf='$(DESTDIR)$(sysconf_voltddir)/voltd.conf'; \
	rm -f "$$conf.new"; \
	if cmp -s $(top_srcdir)/conf/voltd.conf "$$conf"; then rm -f "$$conf"; \
	elif test -f "$$conf"; then echo "voltd: $$conf was edited: left in place"; fi
.PHONY: install-voltd-conf uninstall-voltd-conf

# Documentation: the README, the architecture map with the documents it
# links (installed side by side, so its links resolve) and the examples (the
# sample configuration, the HAProxy front end of README's scale-out part).
dist_doc_DATA = README.md doc/ARCHITECTURE.md doc/layers.txt doc/channel.md \
	doc/config.md doc/control.md doc/conventions.md doc/daemon.md doc/io.md \
	doc/metrics.md doc/ordering.md doc/runtime.md doc/scaling.md doc/server.md doc/testing.md
examplesdir = $(docdir)/examples
dist_examples_DATA = conf/voltd.conf
haproxyexamplesdir = $(docdir)/examples/haproxy
dist_haproxyexamples_DATA = contrib/haproxy/voltd.cfg

# The systemd units (the service with this build's paths, its two sockets)
# and the user (sysusers.d) and runtime directory (tmpfiles.d) it needs.
systemdsystemunit_DATA = systemd/voltd.service
dist_systemdsystemunit_DATA = systemd/voltd.socket systemd/voltd-control.socket
EXTRA_DIST += systemd/voltd.sysusers systemd/voltd.tmpfiles
install-data-local: install-voltd-sysusers install-voltd-conf
uninstall-local: uninstall-voltd-sysusers uninstall-voltd-conf
install-voltd-sysusers:
	$(MKDIR_P) '$(DESTDIR)$(sysusersdir)' '$(DESTDIR)$(tmpfilesdir)'
	$(INSTALL_DATA) $(top_srcdir)/systemd/voltd.sysusers '$(DESTDIR)$(sysusersdir)/voltd.conf'
	$(INSTALL_DATA) $(top_srcdir)/systemd/voltd.tmpfiles '$(DESTDIR)$(tmpfilesdir)/voltd.conf'
uninstall-voltd-sysusers:
	rm -f '$(DESTDIR)$(sysusersdir)/voltd.conf' '$(DESTDIR)$(tmpfilesdir)/voltd.conf'
.PHONY: install-voltd-sysusers uninstall-voltd-sysusers
systemd/voltd.service: $(top_srcdir)/systemd/voltd.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) systemd && sed -e 's|@sbindir[@]|$(sbindir)|g' -e 's|@bindir[@]|$(bindir)|g' \
		-e 's|@sysconfdir[@]|$(sysconfdir)|g' $< > $@
CLEANFILES += systemd/voltd.service
EXTRA_DIST += systemd/voltd.service.in
