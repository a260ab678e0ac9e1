# SPDX-License-Identifier: MIT
# src/voltd: the daemon program.
sbin_PROGRAMS += voltd
voltd_SOURCES = src/voltd/main.c
voltd_LDADD = $(VOLT_ALL_LIBS)
