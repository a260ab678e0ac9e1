# SPDX-License-Identifier: MIT
# src/base: helpers every layer may use (libc only).
libvolt_a_SOURCES += \
	src/base/compiler.h \
	src/base/futex.c src/base/futex.h \
	src/base/log.c src/base/log.h \
	src/base/rng.h \
	src/base/time.h
libvolt_a_SOURCES += src/base/histogram.c src/base/histogram.h
