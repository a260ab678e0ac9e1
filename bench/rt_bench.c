/* SPDX-License-Identifier: MIT */
/*
 * bench/rt_bench.c: the scheduler workloads of the peers' micro-benchmark
 * spec, section 1 (Tokio's benches/rt_multi_threaded.rs; bench/README.md,
 * "Runtime (rt_bench)") on voltd's runtime, with
 * the counts, timed regions, warm-up, repetitions, output (`#csv` lines
 * included) and options of the Rust peer (src/bin/rt_bench.rs), so the two
 * can be run alternately and compared row by row.
 *
 * voltd has no block_on and no awaitable JoinHandle; where Tokio's body uses
 * them, this port uses (SPEC.md "voltd variant" rules):
 *   - block_on(...) on the main thread -> the same spawns made from the main
 *     thread (remote spawns, as Tokio 1.24 does from block_on), then the main
 *     thread blocks;
 *   - awaiting JoinHandles in spawn order -> vrt_task_join_wait() on each
 *     handle in spawn order (a futex wait when not complete yet);
 *   - "signal main" (sync_channel send/recv) -> struct vb_event (futex);
 *     yield_many's 200 reports -> a POSIX semaphore (futex), one post each;
 *   - a countdown leaf captures one plain pointer to the shared context.
 * Every task is malloc'ed by its spawner and freed by its drop() (Tokio
 * allocates every task too).
 *
 * Usage: rt_bench [--drivers none] [--stealing on|off] [--lifo on|off]
 *                 [--reps N] [--warmup N] [--raw] [--csv] [--stats] [FILTER...]
 * (--stats prints the runtime's counters after each workload.)
 * spawn_many_remote_busy2 runs only when named exactly (60 s watchdog: DNF,
 * exit status 3). Threading: the main thread spawns and times; 2 workers.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/compiler.h"
#include "base/futex.h"
#include "base/time.h"
#include "rt/rt.h"
#include "tests/helpers/test_config.h"
#include "harness.h"

#define NUM_WORKERS 2
#define NUM_SPAWN 10000
#define NUM_SPAWN_BUSY2 1000
#define STALL_NS 10000
#define NUM_PINGS 1000
#define NUM_YIELD 1000
#define YIELD_TASKS 200
#define CHAIN_ITER 1000
#define BUSY2_WATCHDOG_S 60

/* ---------------------------------------------------------------- harness */

/* Ours, besides the common options of bench/harness.h. */
static struct {
	bool stats;
	bool stealing, lifo;
	bool busy2;
} ropt = { .stealing = true, .lifo = true };

static struct vrt *mkrt(void)
{
	struct vrt_config c;
	struct vrt *rt;
	int err;

	tcfg_rt(&c);
	c.workers = NUM_WORKERS;
	c.stealing = ropt.stealing;
	c.lifo_slot = ropt.lifo;
	err = vrt_new(&c, &rt);
	if (err)
		bh_die("%s", strerror(-err));
	return rt;
}

static void stall(void)
{
	int64_t t0 = vb_now_ns();

	while (vb_now_ns() - t0 < STALL_NS)
		sched_yield();
}

/* ------------------------------------------------------------------ tasks */

/* Shared context of one workload. */
struct ctx {
	struct vrt *rt;
	_Atomic uint64_t rem;
	struct vb_event done;     /* "signal main" */
	sem_t reports;            /* yield_many's sync_channel(200) */
	_Atomic bool flag;        /* busy tasks run while set */
	struct vrt_task **handles;
};

/* A task that runs a function; `ctx` is the one captured pointer. Like a
 * Rust closure, each kind of task carries only what it uses (at most 120
 * bytes: glibc's fast bins; bigger blocks cost this benchmark more in the
 * allocator than in the scheduler). The ping_pong tasks extend it. */
struct btask {
	struct vrt_task t;
	enum vrt_poll (*fn)(struct btask *);
	struct ctx *ctx;
	uint64_t n;               /* hops left, yields left, started flag */
};

/* ping_pong's tasks have vtables of their own (no fn field) to stay small. */
struct pong {
	struct vrt_task t;
	struct vrt_oneshot a, r;  /* A and B of the Tokio bench */
};

struct ping {
	struct vrt_task t;
	struct ctx *ctx;
	struct pong *pong;        /* a handle: the ping reads B after the pong ends */
};
static_assert(sizeof(struct pong) <= 120 && sizeof(struct ping) <= 120 &&
	      sizeof(struct btask) <= 120, "fast-bin sizes");

static enum vrt_poll bt_poll(struct vrt_task *t)
{
	struct btask *b = vb_container_of(t, struct btask, t);
	return b->fn(b);
}

static void bt_drop(struct vrt_task *t)
{
	free(vb_container_of(t, struct btask, t));
}

static const struct vrt_task_vtable bt_vt = { .poll = bt_poll, .drop = bt_drop };

static struct btask *bt_alloc(enum vrt_poll (*fn)(struct btask *), struct ctx *c, size_t size)
{
	struct btask *b = malloc(size);

	if (!b)
		bh_die("out of memory");
	vrt_task_init(&b->t, &bt_vt);
	b->fn = fn;
	b->ctx = c;
	b->n = 0;
	return b;
}

static struct btask *bt_new(enum vrt_poll (*fn)(struct btask *), struct ctx *c)
{
	return bt_alloc(fn, c, sizeof(struct btask));
}

/* Spawn detached (Tokio: the JoinHandle is dropped at once). */
static void spawn_detached(struct vrt *rt, struct btask *b)
{
	if (vrt_spawn_detached(rt, &b->t) != 0)
		bh_die("spawn refused");
}

static void signal_main(struct ctx *c)
{
	vb_event_set(&c->done);
}

static void wait_main(struct ctx *c)
{
	vb_event_wait(&c->done, -1);
}

static enum vrt_poll fn_leaf(struct btask *b)
{
	if (atomic_fetch_sub_explicit(&b->ctx->rem, 1, memory_order_relaxed) == 1)
		signal_main(b->ctx);
	return VRT_READY;
}

static enum vrt_poll fn_empty(struct btask *b)
{
	(void)b;
	return VRT_READY;
}

static struct ctx *ctx_new(void)
{
	struct ctx *c = calloc(1, sizeof(*c));

	if (!c)
		bh_die("out of memory");
	c->rt = mkrt();
	vb_event_init(&c->done);
	sem_init(&c->reports, 0, 0);
	c->handles = calloc(NUM_SPAWN, sizeof(*c->handles));
	if (!c->handles)
		bh_die("out of memory");
	return c;
}

/* --stats: the runtime's counters over this workload's life, per worker,
 * as the runtime's metric table names them. */
static void print_stats(struct ctx *c, const char *name)
{
	struct vrt_worker_stats ws[NUM_WORKERS];
	char line[2048];
	size_t off;

	if (!ropt.stats)
		return;
	vrt_stats_snapshot(c->rt, NULL, ws, NUM_WORKERS);
	for (unsigned i = 0; i < NUM_WORKERS; i++) {
		off = 0;
		line[0] = '\0';
		vb_metric_format(line, sizeof(line), &off, vrt_worker_metrics, vrt_worker_metrics_n, &ws[i]);
		printf("#stats %s w%u: %s\n", name, i, line);
	}
}

static void ctx_free(struct ctx *c)
{
	vrt_shutdown(c->rt, VRT_SHUTDOWN_DRAIN);
	vrt_free(c->rt);
	sem_destroy(&c->reports);
	free(c->handles);
	free(c);
}

static void check_rem(struct ctx *c, const char *name)
{
	if (atomic_load(&c->rem) != 0) {
		fprintf(stderr, "rt_bench: %s: %" PRIu64 " tasks did not run\n", name,
			(uint64_t)atomic_load(&c->rem));
		exit(1);
	}
}

static void emit(const char *name, uint64_t *samples, uint64_t units, const char *unit,
		 const char *note)
{
	bh_report(name, samples, bh_opt.reps, units, unit, false, note);
	if (bh_opt.raw)
		bh_print_raw(name, samples, bh_opt.reps);
	free(samples);
}

/* ----------------------------------------------- 1a spawn_many_local */

static enum vrt_poll fn_spawner(struct btask *b)
{
	struct vrt *rt = vrt_current_rt();

	for (unsigned i = 0; i < NUM_SPAWN; i++)
		spawn_detached(rt, bt_new(fn_leaf, b->ctx));
	return VRT_READY;
}

static void body_spawn_many_local(void *arg)
{
	struct ctx *c = arg;

	atomic_store_explicit(&c->rem, NUM_SPAWN, memory_order_relaxed);
	spawn_detached(c->rt, bt_new(fn_spawner, c));
	wait_main(c);
	check_rem(c, "spawn_many_local");
}

static void spawn_many_local(void)
{
	struct ctx *c = ctx_new();

	emit("spawn_many_local", bh_measure(body_spawn_many_local, c), NUM_SPAWN, "task",
	     "spawner = task on a worker");
	print_stats(c, "spawn_many_local");
	ctx_free(c);
}

/* ----------------------------- 1b spawn_many_local_blockon / 2b counter */

static void body_remote_counter(void *arg)
{
	struct ctx *c = arg;

	atomic_store_explicit(&c->rem, NUM_SPAWN, memory_order_relaxed);
	for (unsigned i = 0; i < NUM_SPAWN; i++)
		spawn_detached(c->rt, bt_new(fn_leaf, c));
	wait_main(c);
	check_rem(c, "remote_counter");
}

static void spawn_many_local_blockon(void)
{
	struct ctx *c = ctx_new();

	emit("spawn_many_local_blockon", bh_measure(body_remote_counter, c), NUM_SPAWN, "task",
	     "voltd: no block_on; 10,000 spawns from the main thread (remote, as in tokio 1.24)");
	print_stats(c, "spawn_many_local_blockon");
	ctx_free(c);
}

static void spawn_many_remote_idle_counter(void)
{
	struct ctx *c = ctx_new();

	emit("spawn_many_remote_idle_counter", bh_measure(body_remote_counter, c), NUM_SPAWN, "task",
	     "countdown completion, handles detached");
	print_stats(c, "spawn_many_remote_idle_counter");
	ctx_free(c);
}

/* -------------------------------------------- 2a spawn_many_remote_idle */

static void spawn_and_join(struct ctx *c, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct btask *b = bt_new(fn_empty, c);
		if (vrt_spawn(c->rt, &b->t) != 0)
			bh_die("spawn refused");
		c->handles[i] = &b->t;
	}
	/* block_on { for h in handles { h.await } } */
	for (unsigned i = 0; i < n; i++) {
		vrt_task_join_wait(c->handles[i]);
		vrt_task_unref(c->handles[i]);
	}
}

static void body_remote_idle(void *arg)
{
	spawn_and_join(arg, NUM_SPAWN);
}

static void spawn_many_remote_idle(void)
{
	struct ctx *c = ctx_new();

	emit("spawn_many_remote_idle", bh_measure(body_remote_idle, c), NUM_SPAWN, "task",
	     "handles joined in order (vrt_task_join_wait)");
	print_stats(c, "spawn_many_remote_idle");
	ctx_free(c);
}

/* --------------------------------------------------------- 3a/3b busy1 */

/* while flag { yield_now().await; stall(); } */
static enum vrt_poll fn_busy1(struct btask *b)
{
	if (b->n)
		stall();
	b->n = 1;
	if (!atomic_load_explicit(&b->ctx->flag, memory_order_relaxed))
		return VRT_READY;
	return VRT_YIELD;
}

static void start_busy1(struct ctx *c, struct vrt_task **busy)
{
	atomic_store(&c->flag, true);
	for (unsigned i = 0; i < 2 * NUM_WORKERS; i++) {
		struct btask *b = bt_new(fn_busy1, c);
		if (vrt_spawn(c->rt, &b->t) != 0)
			bh_die("spawn refused");
		busy[i] = &b->t;
	}
}

static void stop_busy(struct ctx *c, struct vrt_task **busy, unsigned n)
{
	atomic_store(&c->flag, false);
	for (unsigned i = 0; i < n; i++) {
		vrt_task_join_wait(busy[i]);
		vrt_task_unref(busy[i]);
	}
}

static void spawn_many_remote_busy1(void)
{
	struct ctx *c = ctx_new();
	struct vrt_task *busy[2 * NUM_WORKERS];
	uint64_t *s;

	start_busy1(c, busy);
	s = bh_measure(body_remote_idle, c);
	stop_busy(c, busy, 2 * NUM_WORKERS);
	emit("spawn_many_remote_busy1", s, NUM_SPAWN, "task",
	     "handles joined in order; 4 yield+stall(10us) tasks busy");
	print_stats(c, "spawn_many_remote_busy1");
	ctx_free(c);
}

static void spawn_many_remote_busy1_counter(void)
{
	struct ctx *c = ctx_new();
	struct vrt_task *busy[2 * NUM_WORKERS];
	uint64_t *s;

	start_busy1(c, busy);
	s = bh_measure(body_remote_counter, c);
	stop_busy(c, busy, 2 * NUM_WORKERS);
	emit("spawn_many_remote_busy1_counter", s, NUM_SPAWN, "task",
	     "countdown completion; 4 yield+stall tasks busy");
	print_stats(c, "spawn_many_remote_busy1_counter");
	ctx_free(c);
}

/* --------------------------------------------------------------- 3c busy2 */

/* if flag { stall(); local-spawn next } */
static enum vrt_poll fn_chain(struct btask *b)
{
	if (atomic_load_explicit(&b->ctx->flag, memory_order_relaxed)) {
		stall();
		spawn_detached(vrt_current_rt(), bt_new(fn_chain, b->ctx));
	}
	return VRT_READY;
}

static enum vrt_poll fn_chain_starter(struct btask *b)
{
	spawn_detached(vrt_current_rt(), bt_new(fn_chain, b->ctx));
	return VRT_READY;
}

static void body_busy2(void *arg)
{
	spawn_and_join(arg, NUM_SPAWN_BUSY2);
}

static struct vb_event busy2_finished;

static void *busy2_watchdog(void *arg)
{
	(void)arg;
	if (vb_event_wait(&busy2_finished, (int64_t)BUSY2_WATCHDOG_S * 1000000000) == 0)
		return NULL;
	printf("%-36s DNF: %u warmup+%u reps not done within %d s\n", "spawn_many_remote_busy2",
	       bh_opt.warmup, bh_opt.reps, BUSY2_WATCHDOG_S);
	fflush(stdout);
	_exit(3);
}

static void spawn_many_remote_busy2(void)
{
	struct ctx *c = ctx_new();
	pthread_t wd;
	uint64_t *s;

	vb_event_init(&busy2_finished);
	if (pthread_create(&wd, NULL, busy2_watchdog, NULL))
		bh_die("pthread_create");
	atomic_store(&c->flag, true);
	for (unsigned i = 0; i < NUM_WORKERS; i++)
		spawn_detached(c->rt, bt_new(fn_chain_starter, c));
	s = bh_measure(body_busy2, c);
	atomic_store(&c->flag, false);
	vb_event_set(&busy2_finished);
	pthread_join(wd, NULL);
	emit("spawn_many_remote_busy2", s, NUM_SPAWN_BUSY2, "task",
	     "handles joined in order; 2 respawning stall(10us) chains");
	print_stats(c, "spawn_many_remote_busy2");
	ctx_free(c);
}

/* ------------------------------------------------------------ 4 ping_pong */

/* pong: await A; send B. The two oneshots live in the pong task, which its
 * ping holds a handle to (Tokio: each oneshot is an Arc of its own). */
static enum vrt_poll pong_poll(struct vrt_task *t)
{
	struct pong *q = vb_container_of(t, struct pong, t);
	uint64_t v;

	if (!vrt_oneshot_poll(&q->a, &v))
		return VRT_PENDING;
	vrt_oneshot_send(&q->r, v);
	return VRT_READY;
}

static void pong_drop(struct vrt_task *t)
{
	free(vb_container_of(t, struct pong, t));
}

static const struct vrt_task_vtable pong_vt = { .poll = pong_poll, .drop = pong_drop };

/* ping: make A and B; spawn pong; send A; await B; countdown */
static enum vrt_poll ping_poll(struct vrt_task *t)
{
	struct ping *p = vb_container_of(t, struct ping, t);
	uint64_t v;

	if (!p->pong) {
		struct pong *q = malloc(sizeof(*q));

		if (!q)
			bh_die("out of memory");
		vrt_task_init(&q->t, &pong_vt);
		vrt_oneshot_init(&q->a);
		vrt_oneshot_init(&q->r);
		p->pong = q;
		if (vrt_spawn(vrt_current_rt(), &q->t) != 0) /* keeps the handle */
			bh_die("spawn refused");
		vrt_oneshot_send(&q->a, 1);
	}
	if (!vrt_oneshot_poll(&p->pong->r, &v))
		return VRT_PENDING;
	vrt_task_unref(&p->pong->t);
	if (atomic_fetch_sub_explicit(&p->ctx->rem, 1, memory_order_relaxed) == 1)
		signal_main(p->ctx);
	return VRT_READY;
}

static void ping_drop(struct vrt_task *t)
{
	free(vb_container_of(t, struct ping, t));
}

static const struct vrt_task_vtable ping_vt = { .poll = ping_poll, .drop = ping_drop };

static enum vrt_poll fn_ping_root(struct btask *b)
{
	struct vrt *rt = vrt_current_rt();

	for (unsigned i = 0; i < NUM_PINGS; i++) {
		struct ping *p = malloc(sizeof(*p));

		if (!p)
			bh_die("out of memory");
		vrt_task_init(&p->t, &ping_vt);
		p->ctx = b->ctx;
		p->pong = NULL;
		if (vrt_spawn_detached(rt, &p->t) != 0)
			bh_die("spawn refused");
	}
	return VRT_READY;
}

static void body_ping_pong(void *arg)
{
	struct ctx *c = arg;

	atomic_store_explicit(&c->rem, NUM_PINGS, memory_order_relaxed);
	spawn_detached(c->rt, bt_new(fn_ping_root, c));
	wait_main(c);
	check_rem(c, "ping_pong");
}

static void ping_pong(void)
{
	struct ctx *c = ctx_new();

	emit("ping_pong", bh_measure(body_ping_pong, c), NUM_PINGS, "ping",
	     "Tokio bench workload; vrt_oneshot (embedded in the pong)");
	print_stats(c, "ping_pong");
	ctx_free(c);
}

/* ----------------------------------------------------------- 5 yield_many */

static enum vrt_poll fn_yielder(struct btask *b)
{
	if (b->n++ < NUM_YIELD)
		return VRT_YIELD;
	sem_post(&b->ctx->reports);
	return VRT_READY;
}

static void body_yield_many(void *arg)
{
	struct ctx *c = arg;

	for (unsigned i = 0; i < YIELD_TASKS; i++)
		spawn_detached(c->rt, bt_new(fn_yielder, c));
	for (unsigned i = 0; i < YIELD_TASKS; i++)
		while (sem_wait(&c->reports) != 0)
			if (errno != EINTR)
				bh_die("sem_wait");
}

static void yield_many(void)
{
	struct ctx *c = ctx_new();

	emit("yield_many", bh_measure(body_yield_many, c), YIELD_TASKS * NUM_YIELD, "yield",
	     "Tokio bench workload; reports on a semaphore");
	print_stats(c, "yield_many");
	ctx_free(c);
}

/* -------------------------------------------------------- 6 chained_spawn */

static enum vrt_poll fn_link(struct btask *b)
{
	if (b->n == 0) {
		signal_main(b->ctx);
	} else {
		struct btask *next = bt_new(fn_link, b->ctx);
		next->n = b->n - 1;
		spawn_detached(vrt_current_rt(), next);
	}
	return VRT_READY;
}

static void body_chained_spawn(void *arg)
{
	struct ctx *c = arg;
	struct btask *first = bt_new(fn_link, c);

	first->n = CHAIN_ITER;
	spawn_detached(c->rt, first);
	wait_main(c);
}

static void chained_spawn(void)
{
	struct ctx *c = ctx_new();

	emit("chained_spawn", bh_measure(body_chained_spawn, c), CHAIN_ITER, "spawn", "Tokio bench workload");
	print_stats(c, "chained_spawn");
	ctx_free(c);
}

/* ------------------------------------------------------------------- main */

static bool parse_onoff(int argc, char **argv, int *i)
{
	const char *v = *i + 1 < argc ? argv[++*i] : "";

	if (!strcmp(v, "on"))
		return true;
	if (strcmp(v, "off"))
		bh_die("%s: on|off expected", argv[*i - 1]);
	return false;
}

static bool rt_option(int argc, char **argv, int *i)
{
	const char *a = argv[*i];

	if (!strcmp(a, "--stats")) {
		ropt.stats = true;
	} else if (!strcmp(a, "--drivers")) {
		const char *v = *i + 1 < argc ? argv[++*i] : "";
		if (strcmp(v, "none"))
			bh_die("--drivers: the runtime core parks on a futex; only 'none' (the I/O driver's park hook is not part of rt)");
	} else if (!strcmp(a, "--stealing")) {
		ropt.stealing = parse_onoff(argc, argv, i);
	} else if (!strcmp(a, "--lifo")) {
		ropt.lifo = parse_onoff(argc, argv, i);
	} else {
		return false;
	}
	return true;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*fn)(void);
	} all[] = {
		{ "spawn_many_local", spawn_many_local },
		{ "spawn_many_local_blockon", spawn_many_local_blockon },
		{ "spawn_many_remote_idle", spawn_many_remote_idle },
		{ "spawn_many_remote_idle_counter", spawn_many_remote_idle_counter },
		{ "spawn_many_remote_busy1", spawn_many_remote_busy1 },
		{ "spawn_many_remote_busy1_counter", spawn_many_remote_busy1_counter },
		{ "ping_pong", ping_pong },
		{ "yield_many", yield_many },
		{ "chained_spawn", chained_spawn },
	};
	char config[160];

	bh_parse(argc, argv, "rt_bench", "voltd", 5, rt_option,
		 "rt_bench [--reps N] [--warmup N] [--raw] [--csv] [--stats] [--drivers none] "
		 "[--stealing on|off] [--lifo on|off] [FILTER...]");
	for (int i = 0; i < bh_opt.nfilters; i++)
		if (!strcmp(bh_opt.filters[i], "spawn_many_remote_busy2"))
			ropt.busy2 = true;
	if (!ropt.stealing || !ropt.lifo)
		bh_opt.csv_tag = !ropt.stealing && !ropt.lifo ? "voltd-nosteal-nolifo"
			  : !ropt.stealing ? "voltd-nosteal" : "voltd-nolifo";
	snprintf(config, sizeof(config), "worker_threads=%d park=futex stealing=%s lifo_slot=%s",
		 NUM_WORKERS, ropt.stealing ? "on" : "off", ropt.lifo ? "on" : "off");
	bh_header("rt_bench (voltd rt, work-stealing)", config);
	for (size_t i = 0; i < VB_ARRAY_SIZE(all); i++)
		if (bh_selected(all[i].name))
			all[i].fn();
	if (ropt.busy2)
		spawn_many_remote_busy2();
	free(bh_opt.filters);
	return 0;
}
