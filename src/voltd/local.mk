# SPDX-License-Identifier: MIT
# src/voltd: the daemon (config, notify, main) and its tests.
libvolt_a_SOURCES += \
	src/voltd/cfg.c src/voltd/cfg.h \
	src/voltd/control.c src/voltd/control.h \
	src/voltd/notify.c src/voltd/notify.h \
	src/voltd/life.c src/voltd/life.h

sbin_PROGRAMS += voltd
voltd_SOURCES = src/voltd/main.c
voltd_LDADD = $(VOLT_ALL_LIBS)

# voltd-defaults.h: schema defaults for programs outside the daemon layer
# (voltctl), printed by a generator linked with cfg.c.
noinst_PROGRAMS += voltd-defaults
voltd_defaults_SOURCES = src/voltd/defaults_h.c
voltd_defaults_LDADD = libvolt.a $(INIH_LIBS)
voltd-defaults.h: voltd-defaults$(EXEEXT)
	$(AM_V_GEN)./voltd-defaults$(EXEEXT) > $@.tmp && mv $@.tmp $@
CLEANFILES += voltd-defaults.h

# voltd-test: the same daemon plus test-only job kinds (GET /v1/stall), for
# the integration tests. Never installed. Its own registry.o (with
# VOLTD_TEST_KINDS) comes first on the link line, so libvolt.a's is not used.
check_PROGRAMS += voltd-test
voltd_test_SOURCES = src/voltd/main.c src/jobs/registry.c src/jobs/kind_stall.c
voltd_test_CPPFLAGS = $(AM_CPPFLAGS) -DVOLTD_TEST_KINDS
voltd_test_LDADD = $(VOLT_ALL_LIBS)

check_PROGRAMS += tests/unit/test_cfg
TESTS += tests/unit/test_cfg
tests_unit_test_cfg_SOURCES = tests/unit/test_cfg.c
tests_unit_test_cfg_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_cfg_LDADD = $(VOLT_ALL_LIBS) $(CMOCKA_LIBS)

# Integration tests (pytest): scripts/test runs them; `make check` too.
TESTS += tests/integration/test_cli.py tests/integration/test_daemon_io.py tests/integration/test_stall.py
EXTRA_DIST += tests/integration/test_cli.py tests/integration/test_daemon_io.py tests/integration/test_stall.py tests/integration/conftest.py tests/integration/pytest-driver
# The daemon's life (notify, activation, drain, restarts); NOTIFY_TESTS also
# run in the --without-systemd build (scripts/test, build-nosd).
NOTIFY_TESTS = tests/integration/test_notify.py
TESTS += $(NOTIFY_TESTS) tests/integration/test_drain.py tests/integration/test_activation.py tests/integration/test_units.py tests/integration/test_haproxy.py
EXTRA_DIST += $(NOTIFY_TESTS) tests/integration/test_drain.py tests/integration/test_activation.py tests/integration/test_units.py tests/integration/test_haproxy.py tests/integration/notifyutil.py contrib/haproxy/voltd.cfg

dist_man_MANS += man/voltd.8 man/voltd.conf.5
sysconf_voltddir = $(sysconfdir)/voltd
dist_sysconf_voltd_DATA = conf/voltd.conf

# The systemd units (the service with this build's paths, its two sockets)
# and the user (sysusers.d) and runtime directory (tmpfiles.d) it needs.
systemdsystemunit_DATA = systemd/voltd.service
dist_systemdsystemunit_DATA = systemd/voltd.socket systemd/voltd-control.socket
EXTRA_DIST += systemd/voltd.sysusers systemd/voltd.tmpfiles
install-data-local: install-voltd-sysusers
uninstall-local: uninstall-voltd-sysusers
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
