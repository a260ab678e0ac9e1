/* SPDX-License-Identifier: MIT */
/*
 * bench/harness.h: the timing harness shared by rt_bench and chan_bench,
 * the C side of the Rust peer's harness (src/lib.rs of the micro peer,
 * bench/README.md): the same options (--reps N
 * --warmup N --raw --csv, name substrings as filters), the same summary
 * (median = mean of the two middle samples for an even count; min, max,
 * mean), the same result row and `#csv` line, so a C row and the Rust peer's
 * row of the same workload can be run alternately and compared; plus the
 * CPU-time readings and thread pinning of the peer's chan_bench.
 *
 * Threading: options and output belong to the main thread; bh_pin and the
 * CPU clocks may be called from any thread.
 */
#ifndef VOLTD_BENCH_HARNESS_H
#define VOLTD_BENCH_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

struct bh_opts {
	unsigned reps, warmup;
	bool raw, csv;
	bool pin;              /* --pin, for programs that accept it */
	const char *csv_tag;   /* first field of the #csv lines */
	int nfilters;
	char **filters;
};

/* Filled by bh_parse; programs read it. */
extern struct bh_opts bh_opt;

/*
 * Program-specific option: called for every argv[*i] starting with "--"
 * that is not a common one; consume values by advancing *i. Returns false
 * for an unknown option (bh_parse then prints `usage` and exits 2).
 */
typedef bool bh_option_fn(int argc, char **argv, int *i);

/* Parses the command line. `program` prefixes error messages; `csv_tag`
 * starts each #csv line (the program may change bh_opt.csv_tag later). */
void bh_parse(int argc, char **argv, const char *program, const char *csv_tag,
	      unsigned default_warmup, bh_option_fn *extra, const char *usage);

/* Prints "<program>: <message>" to stderr and exits with status 2. */
void bh_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* True when no filter was given or `name` contains one of them. */
bool bh_selected(const char *name);

/* The two header lines (lib.rs header()). */
void bh_header(const char *program, const char *config);

/*
 * One result row (lib.rs report()): n samples in ns, `units` work units per
 * sample; `rate` adds units per second. With --csv the #csv line follows.
 */
void bh_report(const char *name, const uint64_t *samples, unsigned n, uint64_t units,
	       const char *unit, bool rate, const char *note);
/* The samples in us (lib.rs print_raw(); the programs call it under --raw
 * where the peer does). */
void bh_print_raw(const char *name, const uint64_t *samples, unsigned n);

/* warmup untimed runs of body, then reps timed ones; malloc'ed samples. */
typedef void bh_body_fn(void *arg);
uint64_t *bh_measure(bh_body_fn *body, void *arg);

/* CPU time (user + system) of the whole process so far (getrusage), and of
 * the calling thread (CLOCK_THREAD_CPUTIME_ID), in ns. */
uint64_t bh_process_cpu_ns(void);
uint64_t bh_thread_cpu_ns(void);

/* With --pin: pin the calling thread to CPU k mod (online CPUs). */
void bh_pin(unsigned k);

#endif
