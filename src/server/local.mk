# SPDX-License-Identifier: MIT
# src/server: the HTTP/1.1 front end and the three stages, and their
# integration tests (pytest, run once per I/O backend).
libvolt_a_SOURCES += \
	src/server/server.h src/server/internal.h \
	src/server/server.c \
	src/server/conn.c \
	src/server/stages.c
