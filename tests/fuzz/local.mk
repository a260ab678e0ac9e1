# SPDX-License-Identifier: MIT
# tests/fuzz: the libFuzzer harnesses (fuzz_http.c: the request path;
# fuzz_ctl.c: the control socket's line protocol) and their corpora
# (corpus/http, corpus/ctl). `make check` replays each corpus through its
# harness with a plain driver (replay.c), built like every test program
# (gcc; with ASan/UBSan in the address build): a regression test of every
# input a campaign kept. Campaigns (clang, libFuzzer): scripts/fuzz, or
# `make fuzz` (FUZZ_ARGS='--time 600 --target ctl').
check_PROGRAMS += tests/fuzz/replay_http tests/fuzz/replay_ctl
TESTS += tests/fuzz/replay_http tests/fuzz/replay_ctl
tests_fuzz_replay_http_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz_http.c tests/fuzz/fuzz.h
tests_fuzz_replay_http_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_TARGET='"http"'
tests_fuzz_replay_http_CFLAGS = $(AM_CFLAGS) -I$(LLHTTP_INC)
tests_fuzz_replay_http_LDADD = $(VOLT_ALL_LIBS)
tests_fuzz_replay_ctl_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz_ctl.c tests/fuzz/fuzz.h
tests_fuzz_replay_ctl_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_TARGET='"ctl"'
tests_fuzz_replay_ctl_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
tests_fuzz_replay_ctl_LDADD = $(VOLT_ALL_LIBS)
EXTRA_DIST += tests/fuzz/corpus

fuzz:
	$(top_srcdir)/scripts/fuzz $(FUZZ_ARGS)
.PHONY: fuzz
