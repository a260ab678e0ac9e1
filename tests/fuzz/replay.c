/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/replay.c: runs a libFuzzer harness (LLVMFuzzerTestOneInput of
 * tests/fuzz/fuzz_<target>.c, linked in) over its corpus without libFuzzer,
 * so that `make check` replays every corpus in every build (gcc, ASan),
 * as a regression test: a crash, a sanitizer report or a failed check of
 * the harness fails it.
 *
 *   replay_<target> [FILE|DIR]...
 *
 * Without arguments: $VOLTD_SRCDIR/tests/fuzz/corpus/<target>/ (the test
 * suite's environment). Files are run in name order. Exit 0 when every
 * input ran, 99 when the corpus cannot be read or is empty (a replay of
 * nothing passes nothing); a finding aborts.
 */
#include "config.h"
#include "fuzz.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef FUZZ_TARGET
#error "FUZZ_TARGET (the corpus directory name) must be defined"
#endif


static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return -1;
	}
	size_t cap = 4096, len = 0, n;
	uint8_t *buf = malloc(cap);
	while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len == cap) {
			uint8_t *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	fclose(f);
	if (!buf) {
		fprintf(stderr, "%s: out of memory\n", path);
		return -1;
	}
	/* An exact-size copy: ASan sees a read past the input. */
	uint8_t *in = malloc(len ? len : 1);
	if (!in) {
		free(buf);
		return -1;
	}
	memcpy(in, buf, len);
	free(buf);
	LLVMFuzzerTestOneInput(in, len);
	free(in);
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Run every regular file of dir; returns the count, or -1. */
static long run_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d) {
		perror(dir);
		return -1;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 256;
			char **nn = realloc(names, cap * sizeof(*names));
			if (!nn)
				break;
			names = nn;
		}
		if (asprintf(&names[n], "%s/%s", dir, e->d_name) < 0)
			break;
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), by_name);
	long ran = 0;
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode) && run_file(names[i]) == 0)
			ran++;
		free(names[i]);
	}
	free(names);
	return ran;
}

int main(int argc, char **argv)
{
	char *def = NULL;
	long ran = 0;

	if (argc < 2) {
		const char *src = getenv("VOLTD_SRCDIR");
		if (asprintf(&def, "%s/tests/fuzz/corpus/%s", src ? src : ".", FUZZ_TARGET) < 0)
			return 99;
	}
	for (int i = 1; i < argc || (def && i == 1); i++) {
		const char *p = def ? def : argv[i];
		struct stat st;
		if (stat(p, &st) < 0) {
			perror(p);
			return 99;
		}
		long n = S_ISDIR(st.st_mode) ? run_dir(p) : run_file(p) == 0 ? 1 : -1;
		if (n < 0)
			return 99;
		ran += n;
	}
	free(def);
	if (ran == 0) {
		fprintf(stderr, "replay_%s: no input found\n", FUZZ_TARGET);
		return 99;
	}
	printf("replay_%s: %ld inputs replayed, no finding\n", FUZZ_TARGET, ran);
	return 0;
}
