# SPDX-License-Identifier: MIT
# src/ctl: the control plane (control socket thread, commands, renderers)
# and its integration tests (pytest).
libvolt_a_SOURCES += \
	src/ctl/ctl.h src/ctl/internal.h \
	src/ctl/socket.c \
	src/ctl/peer.c \
	src/ctl/commands.c \
	src/ctl/stats.c \
	src/ctl/prom.c \
	src/ctl/schema.c

# Integration tests (pytest): a real voltd and its control socket.
TESTS += tests/integration/test_ctl.py tests/integration/test_ctl_load.py tests/integration/test_ctl_bounds.py
EXTRA_DIST += tests/integration/ctlutil.py tests/integration/test_ctl.py tests/integration/test_ctl_load.py \
	tests/integration/test_ctl_bounds.py

# The reply schemas, written once as JSON, embedded as a C string.
BUILT_SOURCES += ctl-schemas.inc
ctl-schemas.inc: $(top_srcdir)/src/ctl/schemas.json
	$(AM_V_GEN)sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $< > $@
CLEANFILES += ctl-schemas.inc
EXTRA_DIST += src/ctl/schemas.json
# BUILT_SOURCES are made by `make all` and `make check` only: a single
# target (`make voltd` after configure) needs the edge itself.
src/ctl/libvolt_a-schema.$(OBJEXT): ctl-schemas.inc
