/* SPDX-License-Identifier: MIT */
/*
 * bench/chan_bench.c: the channel workloads of
 * shared/peers/micro/SPEC.md section 2 (crossbeam-channel's anchors) on
 * voltd's chan, with the same timed region, output and options as the Rust
 * peer (src/bin/chan_bench.rs):
 *   chan_mpmc_2p2c, chan_spsc_1p1c, chan_seq_1t   blocking path, OS threads
 * plus the same three over tasks on the runtime (async path, 2 workers):
 *   chan_mpmc_2p2c_tasks, chan_spsc_1p1c_tasks, chan_seq_1t_tasks
 * Capacity 1024, 5,000,000 u64 messages; producers send 0..count-1,
 * consumers sum; the sum is checked.
 *
 * Usage: chan_bench [--reps N] [--warmup N] [--raw] [--csv] [--stats] [FILTER...]
 * (--stats, ours: the channel's counters after the last repetition).
 * Threading: the main thread times; workers are plain threads or tasks.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/compiler.h"
#include "base/time.h"
#include "chan/chan.h"
#include "rt/rt.h"
#include "tests/helpers/test_config.h"

#define MESSAGES 5000000ull
#define CAP 1024

struct opts {
	unsigned reps, warmup;
	bool raw, csv, stats;
	int nfilters;
	char **filters;
};

static struct opts opt = { .reps = 10, .warmup = 1 };

static void die(const char *msg)
{
	fprintf(stderr, "chan_bench: %s\n", msg);
	exit(2);
}

/* Channel statistics of the last repetition (--stats). */
static struct vch_stats last_stats;

static void free_channel(struct vch *ch)
{
	vch_stats_get(ch, &last_stats);
	vch_free(ch);
}

static uint64_t tri(uint64_t n)
{
	return n * (n - 1) / 2;
}

/* ------------------------------------------------------------ threads */

struct thr_ctx {
	struct vch *ch;
	pthread_barrier_t *barrier;
	uint64_t count;
	uint64_t sum;
};

static void *producer_main(void *arg)
{
	struct thr_ctx *c = arg;

	pthread_barrier_wait(c->barrier);
	for (uint64_t i = 0; i < c->count; i++)
		if (vch_send(c->ch, i) != VCH_OK)
			die("send failed");
	return NULL;
}

static void *consumer_main(void *arg)
{
	struct thr_ctx *c = arg;
	uint64_t sum = 0, v;

	pthread_barrier_wait(c->barrier);
	for (uint64_t i = 0; i < c->count; i++) {
		if (vch_recv(c->ch, &v) != VCH_OK)
			die("recv failed");
		sum += v;
	}
	c->sum = sum;
	return NULL;
}

/* Time: main leaves the barrier -> the last thread is joined. */
static int64_t run_mpmc_threads(unsigned producers, unsigned consumers)
{
	unsigned n = producers + consumers;
	pthread_t tid[8];
	struct thr_ctx ctx[8];
	pthread_barrier_t barrier;
	struct vch *ch;
	uint64_t sum = 0;
	int64_t t0, t1;

	if (vch_new(CAP, &ch))
		die("vch_new");
	pthread_barrier_init(&barrier, NULL, n + 1);
	for (unsigned i = 0; i < n; i++) {
		bool prod = i < producers;
		ctx[i] = (struct thr_ctx){ .ch = ch, .barrier = &barrier,
			.count = MESSAGES / (prod ? producers : consumers) };
		if (pthread_create(&tid[i], NULL, prod ? producer_main : consumer_main, &ctx[i]))
			die("pthread_create");
	}
	pthread_barrier_wait(&barrier);
	t0 = vb_now_ns();
	for (unsigned i = 0; i < n; i++) {
		pthread_join(tid[i], NULL);
		sum += ctx[i].sum;
	}
	t1 = vb_now_ns();
	if (sum != producers * tri(MESSAGES / producers))
		die("checksum");
	pthread_barrier_destroy(&barrier);
	free_channel(ch);
	return t1 - t0;
}

static int64_t run_seq_thread(void)
{
	struct vch *ch;
	uint64_t sum = 0, v;
	int64_t t0, t1;

	if (vch_new(CAP, &ch))
		die("vch_new");
	t0 = vb_now_ns();
	for (uint64_t i = 0; i < MESSAGES; i++) {
		if (vch_send(ch, i) != VCH_OK || vch_recv(ch, &v) != VCH_OK)
			die("send/recv");
		sum += v;
	}
	t1 = vb_now_ns();
	if (sum != tri(MESSAGES))
		die("checksum");
	free_channel(ch);
	return t1 - t0;
}

static int64_t run_mpmc_2p2c(void) { return run_mpmc_threads(2, 2); }
static int64_t run_spsc_1p1c(void) { return run_mpmc_threads(1, 1); }

/* -------------------------------------------------------------- tasks */

static struct vrt *rt;

struct btask {
	struct vrt_task task;
	struct vch *ch;
	struct vch_waiter w;
	uint64_t count, i, sum, pending;
	bool have_pending;   /* seq: a value sent, not yet received back */
};

static enum vrt_poll producer_poll(struct vrt_task *t)
{
	struct btask *b = vb_container_of(t, struct btask, task);

	while (b->i < b->count) {
		enum vch_status r = vch_send_poll(b->ch, &b->w, b->i);
		if (r == VCH_PENDING)
			return VRT_PENDING;
		if (r == VCH_YIELD)
			return VRT_YIELD;
		if (r != VCH_OK)
			die("send_poll");
		b->i++;
	}
	return VRT_READY;
}

static enum vrt_poll consumer_poll(struct vrt_task *t)
{
	struct btask *b = vb_container_of(t, struct btask, task);
	uint64_t v;

	while (b->i < b->count) {
		enum vch_status r = vch_recv_poll(b->ch, &b->w, &v);
		if (r == VCH_PENDING)
			return VRT_PENDING;
		if (r == VCH_YIELD)
			return VRT_YIELD;
		if (r != VCH_OK)
			die("recv_poll");
		b->sum += v;
		b->i++;
	}
	return VRT_READY;
}

/* One task: send(i) then recv, MESSAGES times; the channel never holds
 * more than one value, so neither operation ever waits (but the budget
 * makes the task yield every budget/2 iterations). */
static enum vrt_poll seq_poll(struct vrt_task *t)
{
	struct btask *b = vb_container_of(t, struct btask, task);
	uint64_t v;

	while (b->i < b->count) {
		enum vch_status r;

		if (!b->have_pending) {
			r = vch_send_poll(b->ch, &b->w, b->i);
			if (r == VCH_YIELD)
				return VRT_YIELD;
			if (r != VCH_OK)
				die("seq send_poll");
			b->have_pending = true;
		}
		r = vch_recv_poll(b->ch, &b->w, &v);
		if (r == VCH_YIELD)
			return VRT_YIELD;
		if (r != VCH_OK)
			die("seq recv_poll");
		b->have_pending = false;
		b->sum += v;
		b->i++;
	}
	return VRT_READY;
}

/* The runtime drops its own reference just after a task completes, so the
 * task memory may be freed only once every drop() has run. */
static _Atomic unsigned dropped;

static void btask_drop(struct vrt_task *t)
{
	/* release: pairs with the acquire load of dropped in the waiting loop. */
	atomic_fetch_add_explicit(&dropped, 1, memory_order_release);
}

static const struct vrt_task_vtable producer_vt = { .poll = producer_poll, .drop = btask_drop };
static const struct vrt_task_vtable consumer_vt = { .poll = consumer_poll, .drop = btask_drop };
static const struct vrt_task_vtable seq_vt = { .poll = seq_poll, .drop = btask_drop };

/* Time: the first spawn -> every task joined (from the main thread). */
static int64_t run_tasks(unsigned producers, unsigned consumers, bool seq)
{
	unsigned n = seq ? 1 : producers + consumers;
	struct btask *b = calloc(n, sizeof(*b));
	struct vch *ch;
	uint64_t sum = 0;
	int64_t t0, t1;

	if (!b || vch_new(CAP, &ch))
		die("alloc");
	atomic_store_explicit(&dropped, 0, memory_order_relaxed);
	for (unsigned i = 0; i < n; i++) {
		bool prod = i < producers;
		b[i].ch = ch;
		b[i].count = seq ? MESSAGES : MESSAGES / (prod ? producers : consumers);
		vch_waiter_init(&b[i].w);
		vrt_task_init(&b[i].task, seq ? &seq_vt : prod ? &producer_vt : &consumer_vt);
	}
	t0 = vb_now_ns();
	for (unsigned i = 0; i < n; i++)
		if (vrt_spawn(rt, &b[i].task))
			die("vrt_spawn");
	for (unsigned i = 0; i < n; i++) {
		vrt_task_join_wait(&b[i].task);
		sum += b[i].sum;
	}
	t1 = vb_now_ns();
	for (unsigned i = 0; i < n; i++)
		vrt_task_unref(&b[i].task);
	/* acquire: pairs with the release add in btask_drop. */
	while (atomic_load_explicit(&dropped, memory_order_acquire) < n)
		sched_yield();
	if (sum != (seq ? tri(MESSAGES) : producers * tri(MESSAGES / producers)))
		die("checksum");
	free_channel(ch);
	free(b);
	return t1 - t0;
}

static int64_t run_mpmc_2p2c_tasks(void) { return run_tasks(2, 2, false); }
static int64_t run_spsc_1p1c_tasks(void) { return run_tasks(1, 1, false); }
static int64_t run_seq_1t_tasks(void) { return run_tasks(0, 0, true); }

/* ------------------------------------------------------------ harness */

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static void fmt_dur(char *buf, size_t n, double ns)
{
	if (ns >= 1e9)
		snprintf(buf, n, "%.3f s", ns / 1e9);
	else if (ns >= 1e6)
		snprintf(buf, n, "%.3f ms", ns / 1e6);
	else if (ns >= 1e3)
		snprintf(buf, n, "%.1f us", ns / 1e3);
	else
		snprintf(buf, n, "%.0f ns", ns);
}

/* Same row and #csv layout as the Rust harness (peers/micro/src/lib.rs). */
static void report(const char *name, const int64_t *samples, unsigned n,
		   uint64_t units, const char *unit, const char *note)
{
	int64_t *s = malloc(n * sizeof(*s));
	int64_t med, mn, mx, total = 0;
	char dmed[32], dmin[32], dmax[32], dmean[32];

	if (!s)
		die("malloc");
	memcpy(s, samples, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_i64);
	med = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	mn = s[0];
	mx = s[n - 1];
	for (unsigned i = 0; i < n; i++)
		total += s[i];
	fmt_dur(dmed, sizeof(dmed), (double)med);
	fmt_dur(dmin, sizeof(dmin), (double)mn);
	fmt_dur(dmax, sizeof(dmax), (double)mx);
	fmt_dur(dmean, sizeof(dmean), (double)(total / n));
	printf("%-36s %4u %12s %12s %12s %12s | %.2f ns/%s [%.2f..%.2f] | %.2f M%s/s [%.2f..%.2f] | %s\n",
	       name, n, dmed, dmin, dmax, dmean,
	       (double)med / units, unit, (double)mn / units, (double)mx / units,
	       units / ((double)med / 1e9) / 1e6, unit,
	       units / ((double)mx / 1e9) / 1e6, units / ((double)mn / 1e9) / 1e6, note);
	if (opt.csv) {
		printf("#csv,voltd-chan,%s,%u,%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
		       ",%" PRIu64 ",%s,", name, n, med, mn, mx, total / n, units, unit);
		for (unsigned i = 0; i < n; i++)
			printf("%s%" PRId64, i ? ";" : "", samples[i]);
		printf("\n");
	}
	if (opt.raw) {
		printf("#   raw %s (us):", name);
		for (unsigned i = 0; i < n; i++)
			printf(" %.1f", samples[i] / 1e3);
		printf("\n");
	}
	fflush(stdout);
	free(s);
}

static bool selected(const char *name)
{
	if (opt.nfilters == 0)
		return true;
	for (int i = 0; i < opt.nfilters; i++)
		if (strstr(name, opt.filters[i]))
			return true;
	return false;
}

struct workload {
	const char *name;
	int64_t (*run)(void);
	bool tasks;
	const char *note;
};

static const struct workload workloads[] = {
	{ "chan_mpmc_2p2c", run_mpmc_2p2c, false, "2 producers x 2.5M, 2 consumers x 2.5M" },
	{ "chan_spsc_1p1c", run_spsc_1p1c, false, "1 producer x 5M, 1 consumer x 5M" },
	{ "chan_seq_1t", run_seq_thread, false, "1 thread: send+recv pairs, uncontended" },
	{ "chan_mpmc_2p2c_tasks", run_mpmc_2p2c_tasks, true, "tasks, 2 workers: 2 producers x 2.5M, 2 consumers x 2.5M" },
	{ "chan_spsc_1p1c_tasks", run_spsc_1p1c_tasks, true, "tasks, 2 workers: 1 producer x 5M, 1 consumer x 5M" },
	{ "chan_seq_1t_tasks", run_seq_1t_tasks, true, "1 task: send+recv pairs, uncontended" },
};

int main(int argc, char **argv)
{
	char **filters = calloc((size_t)argc, sizeof(char *));

	if (!filters)
		die("calloc");
	opt.filters = filters;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			opt.reps = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
			opt.warmup = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--raw"))
			opt.raw = true;
		else if (!strcmp(argv[i], "--csv"))
			opt.csv = true;
		else if (!strcmp(argv[i], "--stats"))
			opt.stats = true;
		else if (!strncmp(argv[i], "--", 2))
			die("usage: chan_bench [--reps N] [--warmup N] [--raw] [--csv] [--stats] [FILTER...]");
		else
			filters[opt.nfilters++] = argv[i];
	}
	if (opt.reps < 1)
		die("--reps must be >= 1");

	printf("# chan_bench (voltd chan, bounded) | reps=%u warmup=%u | capacity=%d messages=%llu (u64)\n",
	       opt.reps, opt.warmup, CAP, MESSAGES);
	printf("%-36s %4s %12s %12s %12s %12s | %s\n", "workload", "reps", "median", "min",
	       "max", "mean", "per unit: median [min..max]");
	for (size_t k = 0; k < VB_ARRAY_SIZE(workloads); k++) {
		const struct workload *wl = &workloads[k];
		int64_t *samples;

		if (!selected(wl->name))
			continue;
		if (wl->tasks && !rt) {
			struct vrt_config cfg;
			tcfg_rt(&cfg);
			if (vrt_new(&cfg, &rt))
				die("vrt_new");
		}
		samples = calloc(opt.reps, sizeof(*samples));
		if (!samples)
			die("calloc");
		for (unsigned i = 0; i < opt.warmup; i++)
			wl->run();
		for (unsigned i = 0; i < opt.reps; i++)
			samples[i] = wl->run();
		report(wl->name, samples, opt.reps, MESSAGES, "msg", wl->note);
		if (opt.stats)
			printf("#   stats %s (last rep): full_events=%" PRIu64 " empty_events=%" PRIu64
			       " send_waits=%" PRIu64 " recv_waits=%" PRIu64 "\n", wl->name,
			       last_stats.full_events, last_stats.empty_events,
			       last_stats.send_waits, last_stats.recv_waits);
		free(samples);
	}
	if (rt) {
		vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
		vrt_free(rt);
	}
	free(filters);
	return 0;
}
