/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/stress_chan.c: many parties on one channel, every message
 * tagged (producer, sequence). Checks: nothing lost, nothing duplicated,
 * nothing invented, and per-producer order when there is one consumer.
 * Scenarios: P x C (1..4 each) over threads, over tasks, and mixed (blocking,
 * timed and try_ threads next to tasks); close during traffic; waiting tasks
 * cancelled during traffic. A watchdog thread fails the test (exit 1, state
 * printed) when no message moves for a while: a lost wakeup shows up as a
 * stall. Sizes scale with VOLTD_STRESS_SCALE; seed: VOLTD_TEST_SEED (printed).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/rng.h"
#include "base/time.h"
#include "chan/internal.h"
#include "rt/rt.h"
#include "tests/helpers/test_config.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SAN_SLOWDOWN 5   /* sanitizers: fewer messages, longer stall limit */
#else
#define SAN_SLOWDOWN 1
#endif

#define MAXP 8
#define SEQ_BITS 40
#define TAG(p, s) (((uint64_t)(p) << SEQ_BITS) | (s))
#define STALL_NS (10 * 1000 * VB_NS_PER_MS * SAN_SLOWDOWN)

static unsigned scale = 1;
static uint64_t seed;
static struct vrt *rt;
static struct vb_rng main_rng;

/* What the watchdog watches. */
static _Atomic uint64_t progress;
static const char *_Atomic scen_name;
static struct vch *_Atomic cur_ch;

static void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void fatal(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "stress_chan: FAIL (%s, seed %" PRIu64 "): ", atomic_load(&scen_name), seed);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(1);
}

enum kind { K_THREAD_BLOCK, K_THREAD_TIMED, K_THREAD_TRY, K_TASK };

struct scen;

struct party {
	struct vrt_task task;       /* K_TASK */
	pthread_t tid;              /* threads */
	struct scen *sc;
	enum kind kind;
	bool producer;
	bool cancellable;
	unsigned id;                /* producer index */
	uint64_t count;             /* producer: values to send */
	uint64_t next;              /* producer: next sequence (= sent OK) */
	uint64_t received;
	struct vch_waiter w;
	struct vb_rng rng;
};

struct scen {
	const char *name;
	struct vch *ch;
	unsigned np, nc;
	struct party *prod, *cons;
	_Atomic uint8_t *seen[MAXP];   /* per producer, per sequence */
	uint64_t seen_len;             /* entries per producer */
	_Atomic uint64_t last_seq[MAXP]; /* single consumer: order check */
	_Atomic unsigned dropped;      /* tasks whose last reference went */
};

/* ------------------------------------------------------------ recording */

static void record(struct party *c, uint64_t v)
{
	struct scen *sc = c->sc;
	uint64_t p = v >> SEQ_BITS, s = v & ((1ull << SEQ_BITS) - 1);

	if (p >= sc->np || s >= sc->seen_len)
		fatal("invented value %#" PRIx64 " (seq %" PRIu64 ")", v, s);
	/* Relaxed: counters read after every party joined. */
	if (atomic_fetch_add_explicit(&sc->seen[p][s], 1, memory_order_relaxed) != 0)
		fatal("duplicate: producer %" PRIu64 " seq %" PRIu64, p, s);
	if (sc->nc == 1) {
		/* One consumer: each producer's values arrive in order. */
		uint64_t last = atomic_load_explicit(&sc->last_seq[p], memory_order_relaxed);
		if (last != UINT64_MAX && s != last + 1)
			fatal("order: producer %" PRIu64 " seq %" PRIu64 " after %" PRIu64, p, s, last);
		atomic_store_explicit(&sc->last_seq[p], s, memory_order_relaxed);
	}
	c->received++;
	atomic_fetch_add_explicit(&progress, 1, memory_order_relaxed);
}

/* ------------------------------------------------------------ threads */

static void *thread_main(void *arg)
{
	struct party *pa = arg;
	struct vch *ch = pa->sc->ch;
	enum vch_status r;
	uint64_t v;

	if (pa->producer) {
		while (pa->next < pa->count) {
			v = TAG(pa->id, pa->next);
			switch (pa->kind) {
			case K_THREAD_TIMED:
				r = vch_send_timed(ch, v, (int64_t)vb_rng_below(&pa->rng, 200) * VB_NS_PER_US);
				break;
			case K_THREAD_TRY:
				r = vch_try_send(ch, v);
				if (r == VCH_FULL)
					sched_yield();
				break;
			default:
				r = vch_send(ch, v);
				break;
			}
			if (r == VCH_CLOSED)
				break;
			if (r == VCH_OK) {
				pa->next++;
				atomic_fetch_add_explicit(&progress, 1, memory_order_relaxed);
			}
		}
		return NULL;
	}
	for (;;) {
		switch (pa->kind) {
		case K_THREAD_TIMED:
			r = vch_recv_timed(ch, &v, (int64_t)vb_rng_below(&pa->rng, 200) * VB_NS_PER_US);
			break;
		case K_THREAD_TRY:
			r = vch_try_recv(ch, &v);
			if (r == VCH_EMPTY)
				sched_yield();
			break;
		default:
			r = vch_recv(ch, &v);
			break;
		}
		if (r == VCH_CLOSED)
			break;
		if (r == VCH_OK)
			record(pa, v);
	}
	return NULL;
}

/* -------------------------------------------------------------- tasks */

static enum vrt_poll task_poll(struct vrt_task *t)
{
	struct party *pa = vb_container_of(t, struct party, task);
	struct vch *ch = pa->sc->ch;
	enum vch_status r;
	uint64_t v;

	if (vrt_task_is_cancelled(t)) {
		vch_waiter_cancel(&pa->w);
		return VRT_READY;
	}
	for (;;) {
		if (pa->producer) {
			if (pa->next >= pa->count)
				return VRT_READY;
			r = vch_send_poll(ch, &pa->w, TAG(pa->id, pa->next));
		} else {
			r = vch_recv_poll(ch, &pa->w, &v);
		}
		switch (r) {
		case VCH_PENDING:
			return VRT_PENDING;
		case VCH_YIELD:
			return VRT_YIELD;
		case VCH_CLOSED:
			return VRT_READY;
		case VCH_OK:
			if (pa->producer) {
				pa->next++;
				atomic_fetch_add_explicit(&progress, 1, memory_order_relaxed);
			} else {
				record(pa, v);
			}
			break;
		default:
			fatal("task op returned %s", vch_status_name(r));
		}
	}
}

static void task_drop(struct vrt_task *t)
{
	struct party *pa = vb_container_of(t, struct party, task);

	atomic_fetch_add(&pa->sc->dropped, 1);
}

static const struct vrt_task_vtable task_vt = { .poll = task_poll, .drop = task_drop };

/* ----------------------------------------------------------- scenarios */

static void party_start(struct party *pa)
{
	vch_waiter_init(&pa->w);
	vb_rng_seed(&pa->rng, vb_rng_next32(&main_rng));
	if (pa->kind == K_TASK) {
		vrt_task_init(&pa->task, &task_vt);
		if (vrt_spawn(rt, &pa->task))
			fatal("vrt_spawn failed");
	} else if (pthread_create(&pa->tid, NULL, thread_main, pa)) {
		fatal("pthread_create failed");
	}
}

static void party_join(struct party *pa)
{
	if (pa->kind == K_TASK) {
		vrt_task_join_wait(&pa->task);
		vrt_task_unref(&pa->task);
	} else {
		pthread_join(pa->tid, NULL);
	}
}

static enum kind pick_kind(unsigned mix, unsigned i)
{
	/* mix 0: threads (blocking, timed, try in turn); 1: tasks; 2: both. */
	if (mix == 1)
		return K_TASK;
	if (mix == 2 && i % 2 == 0)
		return K_TASK;
	return (enum kind)(vb_rng_below(&main_rng, 3));
}

static void scen_init(struct scen *sc, const char *name, size_t cap, unsigned np, unsigned nc,
		      unsigned mix, uint64_t per_producer, uint64_t seen_len)
{
	/* Half of the channels start their positions just before the wrap. */
	uint64_t start = vb_rng_below(&main_rng, 2) ? 0 : UINT64_MAX - 2 * vb_rng_below(&main_rng, 5000);

	memset(sc, 0, sizeof(*sc));
	sc->name = name;
	atomic_store(&scen_name, name);
	if (vch__new_at(cap, start, &sc->ch))
		fatal("vch_new(%zu) failed", cap);
	atomic_store(&cur_ch, sc->ch);
	sc->np = np;
	sc->nc = nc;
	sc->seen_len = seen_len;
	sc->prod = calloc(np, sizeof(struct party));
	sc->cons = calloc(nc, sizeof(struct party));
	for (unsigned p = 0; p < np; p++) {
		sc->seen[p] = calloc(seen_len, 1);
		atomic_init(&sc->last_seq[p], UINT64_MAX);
		sc->prod[p] = (struct party){ .sc = sc, .producer = true, .id = p,
			.count = per_producer, .kind = pick_kind(mix, p) };
	}
	for (unsigned c = 0; c < nc; c++)
		sc->cons[c] = (struct party){ .sc = sc, .kind = pick_kind(mix, c + 1) };
}

/* Every value a producer sent OK was received exactly once; no other. */
static uint64_t total_msgs, total_waits;

static void scen_check_fini(struct scen *sc)
{
	uint64_t sent = 0, received = 0;
	struct vch_stats st;
	unsigned tasks = 0;
	int64_t end;

	for (unsigned p = 0; p < sc->np; p++) {
		for (uint64_t s = 0; s < sc->seen_len; s++) {
			unsigned n = atomic_load(&sc->seen[p][s]);
			if (s < sc->prod[p].next && n != 1)
				fatal("lost: producer %u seq %" PRIu64, p, s);
			if (s >= sc->prod[p].next && n != 0)
				fatal("received unsent: producer %u seq %" PRIu64, p, s);
		}
		sent += sc->prod[p].next;
		tasks += sc->prod[p].kind == K_TASK;
		free(sc->seen[p]);
	}
	for (unsigned c = 0; c < sc->nc; c++) {
		received += sc->cons[c].received;
		tasks += sc->cons[c].kind == K_TASK;
	}
	if (sent != received)
		fatal("count: sent %" PRIu64 " received %" PRIu64, sent, received);
	if (atomic_load(&sc->ch->sendq.has_waiters) || atomic_load(&sc->ch->recvq.has_waiters))
		fatal("waiters left behind");
	/* The runtime drops its task references just after completion. */
	end = vb_now_ns() + STALL_NS;
	while (atomic_load(&sc->dropped) < tasks) {
		if (vb_now_ns() > end)
			fatal("task references leaked: %u of %u dropped",
			      atomic_load(&sc->dropped), tasks);
		sched_yield();
	}
	vch_stats_get(sc->ch, &st);
	total_msgs += st.recvs;
	total_waits += st.send_waits + st.recv_waits;
	atomic_store(&cur_ch, NULL);
	vch_free(sc->ch);
	free(sc->prod);
	free(sc->cons);
}

static const size_t caps[] = { 1, 2, 3, 7, 64, 100, 1024 };

/* Producers send a fixed count; then close; consumers drain to CLOSED. */
static void run_fixed(const char *name, unsigned np, unsigned nc, unsigned mix, uint64_t total)
{
	struct scen sc;
	size_t cap = caps[vb_rng_below(&main_rng, VB_ARRAY_SIZE(caps))];
	uint64_t per = total / np + 1;

	scen_init(&sc, name, cap, np, nc, mix, per, per);
	/* Every other run, blocked threads sleep at once instead of spinning. */
	vch__test_park_at_once = vb_rng_below(&main_rng, 2);
	for (unsigned c = 0; c < nc; c++)
		party_start(&sc.cons[c]);
	for (unsigned p = 0; p < np; p++)
		party_start(&sc.prod[p]);
	for (unsigned p = 0; p < np; p++)
		party_join(&sc.prod[p]);
	for (unsigned p = 0; p < np; p++)
		if (sc.prod[p].next != per)
			fatal("producer %u sent only %" PRIu64, p, sc.prod[p].next);
	vch_close(sc.ch);
	for (unsigned c = 0; c < nc; c++)
		party_join(&sc.cons[c]);
	vch__test_park_at_once = false;
	scen_check_fini(&sc);
}

static void sleep_us(unsigned us)
{
	struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000L };
	nanosleep(&ts, NULL);
}

/* Producers would send far more than they get to; close mid-traffic. */
static void run_close(unsigned np, unsigned nc, uint64_t limit)
{
	struct scen sc;
	size_t cap = caps[vb_rng_below(&main_rng, VB_ARRAY_SIZE(caps))];

	scen_init(&sc, "close during traffic", cap, np, nc, 2, limit, limit);
	for (unsigned p = 0; p < np; p++)
		party_start(&sc.prod[p]);
	for (unsigned c = 0; c < nc; c++)
		party_start(&sc.cons[c]);
	sleep_us(500 + vb_rng_below(&main_rng, 10000));
	vch_close(sc.ch);
	for (unsigned p = 0; p < np; p++)
		party_join(&sc.prod[p]);
	for (unsigned c = 0; c < nc; c++)
		party_join(&sc.cons[c]);
	scen_check_fini(&sc);
}

/*
 * Cancellation: besides one steady producer thread and one steady consumer
 * thread, cancellable producer and consumer tasks come and go; the main
 * thread cancels them at random moments (most are waiting: capacity 1..3).
 * Whatever a cancelled task sent or received before it stopped counts.
 */
static void run_cancel(uint64_t total, unsigned waves)
{
	const unsigned per_wave = 3;
	unsigned np = 1 + waves * per_wave, nc = 1 + waves * per_wave;
	struct scen sc;

	scen_init(&sc, "cancel during traffic", 1 + vb_rng_below(&main_rng, 3), np > MAXP ? MAXP : np,
		  nc, 1, total, total);
	np = sc.np;
	sc.prod[0].kind = K_THREAD_BLOCK;
	sc.cons[0].kind = K_THREAD_BLOCK;
	party_start(&sc.prod[0]);
	party_start(&sc.cons[0]);
	for (unsigned w = 0; w < waves; w++) {
		unsigned pfirst = 1 + w * per_wave, cfirst = 1 + w * per_wave;

		for (unsigned i = 0; i < per_wave; i++) {
			if (pfirst + i < np)
				party_start(&sc.prod[pfirst + i]);
			party_start(&sc.cons[cfirst + i]);
		}
		sleep_us(200 + vb_rng_below(&main_rng, 2000));
		for (unsigned i = 0; i < per_wave; i++) {
			if (pfirst + i < np) {
				vrt_task_cancel(&sc.prod[pfirst + i].task);
				party_join(&sc.prod[pfirst + i]);
			}
			vrt_task_cancel(&sc.cons[cfirst + i].task);
			party_join(&sc.cons[cfirst + i]);
		}
	}
	party_join(&sc.prod[0]);
	vch_close(sc.ch);
	party_join(&sc.cons[0]);
	scen_check_fini(&sc);
}

/* ------------------------------------------------------------ watchdog */

static void *watchdog_main(void *arg)
{
	uint64_t last = UINT64_MAX;
	int64_t since = vb_now_ns();

	for (;;) {
		uint64_t now = atomic_load_explicit(&progress, memory_order_relaxed);
		struct vch *ch;

		if (now != last) {
			last = now;
			since = vb_now_ns();
		} else if (vb_now_ns() - since > STALL_NS) {
			ch = atomic_load(&cur_ch);
			fprintf(stderr, "stress_chan: STALL in '%s' (seed %" PRIu64 "): no message moved for %lld ms\n",
				atomic_load(&scen_name), seed, (long long)(STALL_NS / VB_NS_PER_MS));
			if (ch) {
				struct vch_stats st;
				vch_stats_get(ch, &st);
				fprintf(stderr, "  channel: cap %" PRIu64 " len %" PRIu64 " sends %" PRIu64
					" recvs %" PRIu64 " send_waits %" PRIu64 " recv_waits %" PRIu64
					" closed %" PRIu64 " has_send_waiters %#lx has_recv_waiters %#lx\n",
					st.capacity, st.len, st.sends, st.recvs, st.send_waits,
					st.recv_waits, st.closed,
					(unsigned long)atomic_load(&ch->sendq.has_waiters),
					(unsigned long)atomic_load(&ch->recvq.has_waiters));
			}
			_exit(1);
		}
		sleep_us(50000);
	}
	return NULL;
}

int main(void)
{
	const char *env = getenv("VOLTD_STRESS_SCALE");
	const char *senv = getenv("VOLTD_TEST_SEED");
	struct vrt_config cfg;
	pthread_t wd;
	uint64_t base;
	int64_t t0 = vb_now_ns();
	int rc;

	if (env && atoi(env) > 0)
		scale = (unsigned)atoi(env);
	seed = senv ? strtoull(senv, NULL, 0) : (uint64_t)vb_now_ns();
	vb_rng_seed(&main_rng, seed);
	printf("# stress_chan seed=%" PRIu64 " scale=%u (VOLTD_TEST_SEED, VOLTD_STRESS_SCALE)\n",
	       seed, scale);
	fflush(stdout);
	atomic_store(&scen_name, "start");

	tcfg_rt(&cfg);
	cfg.workers = 3;   /* more workers than CPUs: more interleavings */
	rc = vrt_new(&cfg, &rt);
	if (rc) {
		fprintf(stderr, "vrt_new: %d\n", rc);
		return 99;
	}
	pthread_create(&wd, NULL, watchdog_main, NULL);
	pthread_detach(wd);

	base = 60000ull * scale / SAN_SLOWDOWN;
	for (unsigned mix = 0; mix < 3; mix++) {
		static const char *names[] = { "threads PxC", "tasks PxC", "mixed PxC" };
		int64_t t = vb_now_ns();

		for (unsigned np = 1; np <= 4; np++)
			for (unsigned nc = 1; nc <= 4; nc++)
				run_fixed(names[mix], np, nc, mix, base);
		printf("# %s: 16 combinations x %" PRIu64 " messages: %.2f s; %" PRIu64
		       " messages, %" PRIu64 " waits so far\n", names[mix], base,
		       (vb_now_ns() - t) / 1e9, total_msgs, total_waits);
		fflush(stdout);
	}
	{
		int64_t t = vb_now_ns();
		for (unsigned i = 0; i < 16 * scale; i++)
			run_close(1 + vb_rng_below(&main_rng, 4), 1 + vb_rng_below(&main_rng, 4),
				  200000ull * scale);
		printf("# close during traffic: %u runs: %.2f s; %" PRIu64 " messages, %" PRIu64
		       " waits so far\n", 16 * scale, (vb_now_ns() - t) / 1e9, total_msgs, total_waits);
		t = vb_now_ns();
		for (unsigned i = 0; i < 8 * scale; i++)
			run_cancel(base, 2);
		printf("# cancel during traffic: %u runs: %.2f s; %" PRIu64 " messages, %" PRIu64
		       " waits so far\n", 8 * scale, (vb_now_ns() - t) / 1e9, total_msgs, total_waits);
	}
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	vrt_free(rt);
	printf("# stress_chan: ok in %.2f s\n", (vb_now_ns() - t0) / 1e9);
	return 0;
}
