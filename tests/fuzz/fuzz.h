/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz.h: what the libFuzzer harnesses share. CHECK(c): a
 * property of the code under test; when it fails, the harness says which
 * and aborts (a finding for libFuzzer, a failure for the replay).
 */
#ifndef VOLTD_TESTS_FUZZ_FUZZ_H
#define VOLTD_TESTS_FUZZ_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(c)                                                                                  \
	do {                                                                                      \
		if (!(c)) {                                                                       \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);    \
			abort();                                                                  \
		}                                                                                 \
	} while (0)

/* The harness's entry point (libFuzzer's, or tests/fuzz/replay.c's). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
