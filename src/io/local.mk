# SPDX-License-Identifier: MIT
# src/io: sources, tests and benchmarks of this layer (included by Makefile.am).
# liburing.h and ev.h are included only by uring.c and evloop.c.
libvolt_a_SOURCES += \
	src/io/io.h src/io/internal.h \
	src/io/driver.c \
	src/io/op.c \
	src/io/conn.c \
	src/io/timer.c \
	src/io/listener.c \
	src/io/uring.c \
	src/io/evloop.c
