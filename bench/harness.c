/* SPDX-License-Identifier: MIT */
/*
 * bench/harness.c: see harness.h. Mirrors the micro peer's src/lib.rs
 * (Opts, summarize, report, header, measure) and chan_bench.rs's pin /
 * process_cpu / thread_cpu.
 */
#include "config.h"   /* _GNU_SOURCE: cpu_set_t */
#include "harness.h"

#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "base/time.h"

struct bh_opts bh_opt = { .reps = 10, .warmup = 1 };
static const char *prog = "bench";

void bh_die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(2);
}

void bh_parse(int argc, char **argv, const char *program, const char *csv_tag,
	      unsigned default_warmup, bh_option_fn *extra, const char *usage)
{
	prog = program;
	bh_opt.warmup = default_warmup;
	bh_opt.csv_tag = csv_tag;
	bh_opt.filters = calloc((size_t)argc, sizeof(char *));
	if (!bh_opt.filters)
		bh_die("out of memory");
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--reps") && i + 1 < argc)
			bh_opt.reps = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(a, "--warmup") && i + 1 < argc)
			bh_opt.warmup = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(a, "--raw"))
			bh_opt.raw = true;
		else if (!strcmp(a, "--csv"))
			bh_opt.csv = true;
		else if (!strncmp(a, "--", 2)) {
			if (!extra || !extra(argc, argv, &i))
				bh_die("unknown option %s; usage: %s", a, usage);
		} else {
			bh_opt.filters[bh_opt.nfilters++] = argv[i];
		}
	}
	if (bh_opt.reps < 1)
		bh_die("--reps must be >= 1");
}

bool bh_selected(const char *name)
{
	if (bh_opt.nfilters == 0)
		return true;
	for (int i = 0; i < bh_opt.nfilters; i++)
		if (strstr(name, bh_opt.filters[i]))
			return true;
	return false;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* lib.rs fmt_dur. */
static void fmt_dur(char *buf, size_t n, uint64_t ns)
{
	double d = (double)ns;

	if (d >= 1e9)
		snprintf(buf, n, "%.3f s", d / 1e9);
	else if (d >= 1e6)
		snprintf(buf, n, "%.3f ms", d / 1e6);
	else if (d >= 1e3)
		snprintf(buf, n, "%.1f us", d / 1e3);
	else
		snprintf(buf, n, "%.0f ns", d);
}

void bh_header(const char *program, const char *config)
{
	printf("# %s | reps=%u warmup=%u | %s\n", program, bh_opt.reps, bh_opt.warmup, config);
	printf("%-36s %4s %12s %12s %12s %12s | %s\n", "workload", "reps", "median", "min", "max",
	       "mean", "per unit: median [min..max]");
}

void bh_report(const char *name, const uint64_t *samples, unsigned n, uint64_t units,
	       const char *unit, bool rate, const char *note)
{
	uint64_t *s = malloc(n * sizeof(*s)), total = 0, median, mean;
	char med[32], mn[32], mx[32], me[32];

	if (!s)
		bh_die("out of memory");
	memcpy(s, samples, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_u64);
	median = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	for (unsigned i = 0; i < n; i++)
		total += s[i];
	mean = total / n;
	fmt_dur(med, sizeof(med), median);
	fmt_dur(mn, sizeof(mn), s[0]);
	fmt_dur(mx, sizeof(mx), s[n - 1]);
	fmt_dur(me, sizeof(me), mean);
	printf("%-36s %4u %12s %12s %12s %12s | %.2f ns/%s [%.2f..%.2f]", name, n, med, mn, mx, me,
	       (double)median / units, unit, (double)s[0] / units, (double)s[n - 1] / units);
	if (rate)
		printf(" | %.2f M%s/s [%.2f..%.2f]", units / ((double)median / 1e9) / 1e6, unit,
		       units / ((double)s[n - 1] / 1e9) / 1e6, units / ((double)s[0] / 1e9) / 1e6);
	if (note && *note)
		printf(" | %s", note);
	printf("\n");
	if (bh_opt.csv) {
		printf("#csv,%s,%s,%u,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%s,",
		       bh_opt.csv_tag, name, n, median, s[0], s[n - 1], mean, units, unit);
		for (unsigned i = 0; i < n; i++)
			printf("%s%" PRIu64, i ? ";" : "", samples[i]);
		printf("\n");
	}
	fflush(stdout);
	free(s);
}

void bh_print_raw(const char *name, const uint64_t *samples, unsigned n)
{
	printf("#   raw %s (us):", name);
	for (unsigned i = 0; i < n; i++)
		printf(" %.1f", (double)samples[i] / 1e3);
	printf("\n");
	fflush(stdout);
}

uint64_t *bh_measure(bh_body_fn *body, void *arg)
{
	uint64_t *samples = calloc(bh_opt.reps, sizeof(*samples));

	if (!samples)
		bh_die("out of memory");
	for (unsigned i = 0; i < bh_opt.warmup; i++)
		body(arg);
	for (unsigned i = 0; i < bh_opt.reps; i++) {
		int64_t t0 = vb_now_ns();
		body(arg);
		samples[i] = (uint64_t)(vb_now_ns() - t0);
	}
	return samples;
}

uint64_t bh_process_cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ull +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ull;
}

uint64_t bh_thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void bh_pin(unsigned k)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;

	if (!bh_opt.pin)
		return;
	if (n < 1)
		n = 1;
	CPU_ZERO(&set);
	CPU_SET(k % (unsigned)n, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		bh_die("sched_setaffinity: cpu %u", k % (unsigned)n);
}
