/* SPDX-License-Identifier: MIT */
/*
 * bench/chan_bench.c: the channel workloads of the peers' micro-benchmark
 * spec, section 2 (crossbeam-channel's anchors; bench/README.md, "Channel
 * (chan_bench)") on voltd's chan, with the same workloads, timed regions,
 * rows, `#csv` lines and options as the Rust peer (src/bin/chan_bench.rs), so the two can run
 * alternately row by row:
 *   chan_mpmc_2p2c, chan_spsc_1p1c, chan_seq_1t   throughput, blocking path
 *   chan_pingpong    20,000 round trips through two channels, two threads
 *   chan_paced       one value every 10 us for 1 s: rows chan_paced_p50,
 *                    _p99, _p999 (delivery latency) and
 *                    chan_paced_consumer_cpu (consumer thread CPU per value)
 *   <name>_cpu       process CPU (user + system) of each run, per unit, for
 *                    every workload but chan_paced (as the peer)
 * plus ours, over tasks on the runtime (async path, 2 workers, not pinned):
 *   chan_mpmc_2p2c_tasks, chan_spsc_1p1c_tasks, chan_seq_1t_tasks (+ _cpu)
 * Capacity 1024; u64 values; producers send 0..count-1, consumers sum; every
 * checksum is checked.
 *
 * Usage: chan_bench [--reps N] [--warmup N] [--raw] [--csv] [--pin] [--stats]
 *                   [FILTER...]
 * --pin: worker thread k runs on CPU k mod ncpu (mpmc: producers first, then
 * consumers; pingpong: A 0, B 1; paced: producer 0, consumer 1), as the peer.
 * --stats (ours): the channel's counters after the last repetition.
 * --spin-pauses N, --spin-yields N (ours, for exploring): the cap of the
 * blocked-thread spin bound in PAUSEs and the yield count (defaults 512 and
 * 4; the bound itself adapts to the gaps seen, 128..cap, or 0; chan.c).
 * Threading: the main thread times; workers are plain threads or tasks.
 */
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
#include "chan/internal.h"   /* vch__spin_budget / vch__spin_yields (--spin-*) */
#include "rt/rt.h"
#include "tests/helpers/test_config.h"
#include "harness.h"

#define MESSAGES 5000000ull
#define CAP 1024
#define PINGPONG_TRIPS 20000ull
#define PACED_VALUES 100000ull
#define PACED_GAP_NS 10000ll

static bool opt_stats;

/* Channel statistics of the last repetition (--stats). */
static struct vch_stats last_stats;
/* The spin bounds (PAUSEs) the sides would use next, at the same moment. */
static unsigned last_send_bound, last_recv_bound;

static void free_channel(struct vch *ch)
{
	vch_stats_get(ch, &last_stats);
	last_send_bound = vch__spin_bound(atomic_load(&ch->send_stats.gap_avg), vch__spin_budget);
	last_recv_bound = vch__spin_bound(atomic_load(&ch->recv_stats.gap_avg), vch__spin_budget);
	vch_free(ch);
}

static uint64_t tri(uint64_t n)
{
	return n * (n - 1) / 2;
}

static struct vch *new_channel(void)
{
	struct vch *ch;

	if (vch_new(CAP, &ch))
		bh_die("vch_new");
	return ch;
}

/* ------------------------------------------------------------ threads */

struct thr_ctx {
	struct vch *ch, *back;       /* pingpong: ab and ba */
	pthread_barrier_t *barrier;
	unsigned cpu;                /* --pin */
	uint64_t count;
	uint64_t sum;
	int64_t epoch;               /* paced: the producer's schedule starts here */
	uint64_t *lat;               /* paced: delivery latencies (consumer) */
	uint64_t cpu_ns;             /* paced: consumer thread CPU */
};

static void *producer_main(void *arg)
{
	struct thr_ctx *c = arg;

	bh_pin(c->cpu);
	pthread_barrier_wait(c->barrier);
	for (uint64_t i = 0; i < c->count; i++)
		if (vch_send(c->ch, i) != VCH_OK)
			bh_die("send failed");
	return NULL;
}

static void *consumer_main(void *arg)
{
	struct thr_ctx *c = arg;
	uint64_t sum = 0, v;

	bh_pin(c->cpu);
	pthread_barrier_wait(c->barrier);
	for (uint64_t i = 0; i < c->count; i++) {
		if (vch_recv(c->ch, &v) != VCH_OK)
			bh_die("recv failed");
		sum += v;
	}
	c->sum = sum;
	return NULL;
}

static void start(pthread_t *tid, void *(*fn)(void *), struct thr_ctx *c)
{
	if (pthread_create(tid, NULL, fn, c))
		bh_die("pthread_create");
}

/* Time: main leaves the barrier -> the last thread is joined. */
static int64_t run_mpmc_threads(unsigned producers, unsigned consumers)
{
	unsigned n = producers + consumers;
	pthread_t tid[8];
	struct thr_ctx ctx[8];
	pthread_barrier_t barrier;
	struct vch *ch = new_channel();
	uint64_t sum = 0;
	int64_t t0, t1;

	pthread_barrier_init(&barrier, NULL, n + 1);
	for (unsigned i = 0; i < n; i++) {
		bool prod = i < producers;
		ctx[i] = (struct thr_ctx){ .ch = ch, .barrier = &barrier, .cpu = i,
			.count = MESSAGES / (prod ? producers : consumers) };
		start(&tid[i], prod ? producer_main : consumer_main, &ctx[i]);
	}
	pthread_barrier_wait(&barrier);
	t0 = vb_now_ns();
	for (unsigned i = 0; i < n; i++) {
		pthread_join(tid[i], NULL);
		sum += ctx[i].sum;
	}
	t1 = vb_now_ns();
	if (sum != producers * tri(MESSAGES / producers))
		bh_die("checksum");
	pthread_barrier_destroy(&barrier);
	free_channel(ch);
	return t1 - t0;
}

static int64_t run_seq_thread(void)
{
	struct vch *ch = new_channel();
	uint64_t sum = 0, v;
	int64_t t0, t1;

	t0 = vb_now_ns();
	for (uint64_t i = 0; i < MESSAGES; i++) {
		if (vch_send(ch, i) != VCH_OK || vch_recv(ch, &v) != VCH_OK)
			bh_die("send/recv");
		sum += v;
	}
	t1 = vb_now_ns();
	if (sum != tri(MESSAGES))
		bh_die("checksum");
	free_channel(ch);
	return t1 - t0;
}

static int64_t run_mpmc_2p2c(void) { return run_mpmc_threads(2, 2); }
static int64_t run_spsc_1p1c(void) { return run_mpmc_threads(1, 1); }

/* A: send i on ab, receive it back on ba; the checksum is A's. */
static void *ping_main(void *arg)
{
	struct thr_ctx *c = arg;
	uint64_t sum = 0, v;

	bh_pin(c->cpu);
	pthread_barrier_wait(c->barrier);
	for (uint64_t i = 0; i < c->count; i++) {
		if (vch_send(c->ch, i) != VCH_OK || vch_recv(c->back, &v) != VCH_OK)
			bh_die("ping");
		sum += v;
	}
	c->sum = sum;
	return NULL;
}

/* B: receive on ab, send the value back on ba. */
static void *pong_main(void *arg)
{
	struct thr_ctx *c = arg;
	uint64_t v;

	bh_pin(c->cpu);
	pthread_barrier_wait(c->barrier);
	for (uint64_t i = 0; i < c->count; i++)
		if (vch_recv(c->ch, &v) != VCH_OK || vch_send(c->back, v) != VCH_OK)
			bh_die("pong");
	return NULL;
}

/* Time: barrier release -> both joined. */
static int64_t run_pingpong(void)
{
	struct vch *ab = new_channel(), *ba = new_channel();
	pthread_barrier_t barrier;
	pthread_t ta, tb;
	struct thr_ctx a, b;
	int64_t t0, t1;

	pthread_barrier_init(&barrier, NULL, 3);
	a = (struct thr_ctx){ .ch = ab, .back = ba, .barrier = &barrier, .cpu = 0,
			      .count = PINGPONG_TRIPS };
	b = (struct thr_ctx){ .ch = ab, .back = ba, .barrier = &barrier, .cpu = 1,
			      .count = PINGPONG_TRIPS };
	start(&ta, ping_main, &a);
	start(&tb, pong_main, &b);
	pthread_barrier_wait(&barrier);
	t0 = vb_now_ns();
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	t1 = vb_now_ns();
	if (a.sum != tri(PINGPONG_TRIPS))
		bh_die("pingpong checksum");
	pthread_barrier_destroy(&barrier);
	free_channel(ba);
	{
		struct vch_stats back = last_stats;   /* --stats: both channels */

		free_channel(ab);
		last_stats.full_events += back.full_events;
		last_stats.empty_events += back.empty_events;
		last_stats.send_spins += back.send_spins;
		last_stats.recv_spins += back.recv_spins;
		last_stats.send_waits += back.send_waits;
		last_stats.recv_waits += back.recv_waits;
	}
	return t1 - t0;
}

/* Paced producer: value i is due at start + i * 10 us (busy-wait; a late
 * value goes at once, the schedule does not slip); it carries its send time. */
static void *paced_producer_main(void *arg)
{
	struct thr_ctx *c = arg;
	int64_t start_ns;

	bh_pin(c->cpu);
	pthread_barrier_wait(c->barrier);
	start_ns = vb_now_ns();
	for (uint64_t i = 0; i < c->count; i++) {
		int64_t due = start_ns + (int64_t)i * PACED_GAP_NS, now = vb_now_ns();

		while (now < due) {
			vb_cpu_relax();
			now = vb_now_ns();
		}
		if (vch_send(c->ch, (uint64_t)(now - c->epoch)) != VCH_OK)
			bh_die("paced send");
	}
	return NULL;
}

static void *paced_consumer_main(void *arg)
{
	struct thr_ctx *c = arg;
	uint64_t cpu0, ts;

	bh_pin(c->cpu);
	pthread_barrier_wait(c->barrier);
	cpu0 = bh_thread_cpu_ns();
	for (uint64_t i = 0; i < c->count; i++) {
		int64_t now;

		if (vch_recv(c->ch, &ts) != VCH_OK)
			bh_die("paced recv");
		now = vb_now_ns() - c->epoch;
		c->lat[i] = now > (int64_t)ts ? (uint64_t)now - ts : 0;
	}
	c->cpu_ns = bh_thread_cpu_ns() - cpu0;
	return NULL;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

/* The peer's pct(): index round((n - 1) * q) of the sorted latencies. */
static uint64_t pct(const uint64_t *sorted, size_t n, double q)
{
	return sorted[(size_t)((double)(n - 1) * q + 0.5)];
}

struct paced_result {
	uint64_t p50, p99, p999, cpu_ns;
};

/* One repetition: time barrier -> both joined (not reported, as the peer). */
static void run_paced(struct paced_result *out)
{
	struct vch *ch = new_channel();
	pthread_barrier_t barrier;
	pthread_t tp, tc;
	struct thr_ctx p, c;
	uint64_t *lat = malloc(PACED_VALUES * sizeof(*lat));
	int64_t epoch = vb_now_ns();

	if (!lat)
		bh_die("out of memory");
	pthread_barrier_init(&barrier, NULL, 3);
	p = (struct thr_ctx){ .ch = ch, .barrier = &barrier, .cpu = 0, .count = PACED_VALUES,
			      .epoch = epoch };
	c = (struct thr_ctx){ .ch = ch, .barrier = &barrier, .cpu = 1, .count = PACED_VALUES,
			      .epoch = epoch, .lat = lat };
	start(&tp, paced_producer_main, &p);
	start(&tc, paced_consumer_main, &c);
	pthread_barrier_wait(&barrier);
	pthread_join(tp, NULL);
	pthread_join(tc, NULL);
	qsort(lat, PACED_VALUES, sizeof(*lat), cmp_u64);
	out->p50 = pct(lat, PACED_VALUES, 0.50);
	out->p99 = pct(lat, PACED_VALUES, 0.99);
	out->p999 = pct(lat, PACED_VALUES, 0.999);
	out->cpu_ns = c.cpu_ns;
	pthread_barrier_destroy(&barrier);
	free(lat);
	free_channel(ch);
}

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
			bh_die("send_poll");
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
			bh_die("recv_poll");
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
				bh_die("seq send_poll");
			b->have_pending = true;
		}
		r = vch_recv_poll(b->ch, &b->w, &v);
		if (r == VCH_YIELD)
			return VRT_YIELD;
		if (r != VCH_OK)
			bh_die("seq recv_poll");
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
		bh_die("alloc");
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
			bh_die("vrt_spawn");
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
		bh_die("checksum");
	free_channel(ch);
	free(b);
	return t1 - t0;
}

static int64_t run_mpmc_2p2c_tasks(void) { return run_tasks(2, 2, false); }
static int64_t run_spsc_1p1c_tasks(void) { return run_tasks(1, 1, false); }
static int64_t run_seq_1t_tasks(void) { return run_tasks(0, 0, true); }

/* ------------------------------------------------------------ main */

struct workload {
	const char *name;
	int64_t (*run)(void);
	bool tasks;
	uint64_t units;
	const char *unit;
	const char *note;
};

static const struct workload workloads[] = {
	{ "chan_mpmc_2p2c", run_mpmc_2p2c, false, MESSAGES, "msg", "2 producers x 2.5M, 2 consumers x 2.5M" },
	{ "chan_spsc_1p1c", run_spsc_1p1c, false, MESSAGES, "msg", "1 producer x 5M, 1 consumer x 5M" },
	{ "chan_seq_1t", run_seq_thread, false, MESSAGES, "msg", "1 thread: send+recv pairs, uncontended" },
	{ "chan_pingpong", run_pingpong, false, PINGPONG_TRIPS, "rtt", "2 threads, 2 channels: 20k round trips" },
	{ "chan_mpmc_2p2c_tasks", run_mpmc_2p2c_tasks, true, MESSAGES, "msg", "tasks, 2 workers: 2 producers x 2.5M, 2 consumers x 2.5M" },
	{ "chan_spsc_1p1c_tasks", run_spsc_1p1c_tasks, true, MESSAGES, "msg", "tasks, 2 workers: 1 producer x 5M, 1 consumer x 5M" },
	{ "chan_seq_1t_tasks", run_seq_1t_tasks, true, MESSAGES, "msg", "1 task: send+recv pairs, uncontended" },
};

static void print_stats(const char *name)
{
	if (!opt_stats)
		return;
	printf("#   stats %s (last rep): full_events=%" PRIu64 " empty_events=%" PRIu64
	       " send_spins=%" PRIu64 " recv_spins=%" PRIu64 " send_waits=%" PRIu64
	       " recv_waits=%" PRIu64 " send_spin_bound=%u recv_spin_bound=%u\n", name,
	       last_stats.full_events, last_stats.empty_events, last_stats.send_spins,
	       last_stats.recv_spins, last_stats.send_waits, last_stats.recv_waits,
	       last_send_bound, last_recv_bound);
}

static void run_workload(const struct workload *wl)
{
	uint64_t *samples = calloc(bh_opt.reps, sizeof(uint64_t));
	uint64_t *cpu = calloc(bh_opt.reps, sizeof(uint64_t));
	char cpu_name[64];

	if (!samples || !cpu)
		bh_die("out of memory");
	if (wl->tasks && !rt) {
		struct vrt_config cfg;
		tcfg_rt(&cfg);
		cfg.workers = 2;
		if (vrt_new(&cfg, &rt))
			bh_die("vrt_new");
	}
	for (unsigned i = 0; i < bh_opt.warmup; i++)
		wl->run();
	for (unsigned i = 0; i < bh_opt.reps; i++) {
		uint64_t c0 = bh_process_cpu_ns();
		samples[i] = (uint64_t)wl->run();
		cpu[i] = bh_process_cpu_ns() - c0;
	}
	snprintf(cpu_name, sizeof(cpu_name), "%s_cpu", wl->name);
	bh_report(wl->name, samples, bh_opt.reps, wl->units, wl->unit, !strcmp(wl->unit, "msg"),
		  wl->note);
	bh_report(cpu_name, cpu, bh_opt.reps, wl->units, wl->unit, false,
		  "process CPU (user+sys) of the run");
	if (bh_opt.raw)
		bh_print_raw(wl->name, samples, bh_opt.reps);
	print_stats(wl->name);
	free(samples);
	free(cpu);
}

static void run_paced_rows(void)
{
	const char *note = "1 value / 10 us for 1 s; per rep: delivery latency percentile";
	uint64_t *p50 = calloc(bh_opt.reps, sizeof(uint64_t)), *p99 = calloc(bh_opt.reps, sizeof(uint64_t));
	uint64_t *p999 = calloc(bh_opt.reps, sizeof(uint64_t)), *cpu = calloc(bh_opt.reps, sizeof(uint64_t));
	struct paced_result r;

	if (!p50 || !p99 || !p999 || !cpu)
		bh_die("out of memory");
	for (unsigned i = 0; i < bh_opt.warmup; i++)
		run_paced(&r);
	for (unsigned i = 0; i < bh_opt.reps; i++) {
		run_paced(&r);
		p50[i] = r.p50;
		p99[i] = r.p99;
		p999[i] = r.p999;
		cpu[i] = r.cpu_ns;
	}
	bh_report("chan_paced_p50", p50, bh_opt.reps, 1, "msg", false, note);
	bh_report("chan_paced_p99", p99, bh_opt.reps, 1, "msg", false, note);
	bh_report("chan_paced_p999", p999, bh_opt.reps, 1, "msg", false, note);
	bh_report("chan_paced_consumer_cpu", cpu, bh_opt.reps, PACED_VALUES, "msg", false,
		  "consumer thread CPU per value");
	print_stats("chan_paced");
	free(p50);
	free(p99);
	free(p999);
	free(cpu);
}

static bool chan_option(int argc, char **argv, int *i)
{
	if (!strcmp(argv[*i], "--stats"))
		opt_stats = true;
	else if (!strcmp(argv[*i], "--pin"))
		bh_opt.pin = true;
	else if (!strcmp(argv[*i], "--spin-pauses") && *i + 1 < argc)
		vch__spin_budget = (unsigned)strtoul(argv[++*i], NULL, 10);
	else if (!strcmp(argv[*i], "--spin-yields") && *i + 1 < argc)
		vch__spin_yields = (unsigned)strtoul(argv[++*i], NULL, 10);
	else
		return false;
	return true;
}

int main(int argc, char **argv)
{
	char config[256];

	bh_parse(argc, argv, "chan_bench", "voltd-chan", 1, chan_option,
		 "chan_bench [--reps N] [--warmup N] [--raw] [--csv] [--pin] [--stats] "
		 "[--spin-pauses N] [--spin-yields N] [FILTER...]");
	snprintf(config, sizeof(config), "capacity=%d messages=%llu (u64) pin=%s spin<=%u pauses (adaptive) + %u yields",
		 CAP, MESSAGES,
		 bh_opt.pin ? "thread k -> cpu k mod ncpu (threads only; task workers unpinned)" : "no",
		 vch__spin_budget, vch__spin_yields);
	bh_header("chan_bench (voltd chan, bounded)", config);
	/* The peer's order: its four threaded rows, then chan_paced; ours last. */
	for (size_t k = 0; k < VB_ARRAY_SIZE(workloads); k++)
		if (!workloads[k].tasks && bh_selected(workloads[k].name))
			run_workload(&workloads[k]);
	if (bh_selected("chan_paced"))
		run_paced_rows();
	for (size_t k = 0; k < VB_ARRAY_SIZE(workloads); k++)
		if (workloads[k].tasks && bh_selected(workloads[k].name))
			run_workload(&workloads[k]);
	if (rt) {
		vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
		vrt_free(rt);
	}
	free(bh_opt.filters);
	return 0;
}
