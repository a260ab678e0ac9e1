/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/stress_chan_set.c: many parties on a channel set (one member
 * per worker, stealing across), every message tagged (producer, sequence).
 * Checks: nothing lost, nothing duplicated, nothing invented; per-producer
 * order where the set promises it (each producer always sends to one member
 * that never fills, one consumer); no waiter left on any member at the end.
 * Parties are tasks on a 3-worker runtime whose home is the worker they run
 * on (as the server's stages), or a fixed or random member, plus try_
 * threads; consumers are sometimes busy (they hold a value for a few yields,
 * like an executor running a sliced job), so members run out of waiting
 * receivers and values must be stolen or woken across members. Scenarios:
 * P x C over sets of 1 to 5 members (more members than workers: some have
 * no local party at all), close during traffic, waiting tasks cancelled
 * during traffic. A watchdog thread fails the test (exit 1, state printed)
 * when no message moves for a while: a lost wakeup, or a value left behind
 * busy consumers while another consumer waits, shows up as a stall. Sizes
 * scale with VOLTD_STRESS_SCALE; seed: VOLTD_TEST_SEED (printed).
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
#define WORKERS 3

static unsigned scale = 1;
static uint64_t seed;
static struct vrt *rt;
static struct vb_rng main_rng;

static _Atomic uint64_t progress;
static const char *_Atomic scen_name;
static struct vch_set *_Atomic cur_set;

static void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void fatal(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "stress_chan_set: FAIL (%s, seed %" PRIu64 "): ", atomic_load(&scen_name), seed);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(1);
}

/* Where a party says it is: the worker it runs on (mod n), a fixed
 * member, or a new random member at every operation. */
enum home_mode { H_WORKER, H_FIXED, H_RANDOM };
enum kind { K_TASK, K_THREAD_TRY };

struct scen;

struct party {
	struct vrt_task task;
	pthread_t tid;
	struct scen *sc;
	enum kind kind;
	enum home_mode hm;
	unsigned fixed;             /* H_FIXED: the member */
	bool producer;
	unsigned id;
	uint64_t count;             /* producer: values to send */
	uint64_t next;              /* producer: next sequence (= sent OK) */
	uint64_t received;
	unsigned busy;              /* consumer: yields left on the value held */
	unsigned busy_max;          /* consumer: 0 never busy */
	struct vch_waiter w;
	struct vb_rng rng;
};

struct scen {
	const char *name;
	struct vch_set *set;
	unsigned np, nc;
	bool order;                    /* check per-producer order */
	struct party *prod, *cons;
	_Atomic uint8_t *seen[MAXP];
	uint64_t seen_len;
	_Atomic uint64_t last_seq[MAXP];
	_Atomic unsigned dropped;
};

static uint64_t total_msgs, total_waits, total_stolen, total_spilled, total_cross;

static void record(struct party *c, uint64_t v)
{
	struct scen *sc = c->sc;
	uint64_t p = v >> SEQ_BITS, s = v & ((1ull << SEQ_BITS) - 1);

	if (p >= sc->np || s >= sc->seen_len)
		fatal("invented value %#" PRIx64, v);
	/* Relaxed: counters read after every party joined. */
	if (atomic_fetch_add_explicit(&sc->seen[p][s], 1, memory_order_relaxed) != 0)
		fatal("duplicate: producer %" PRIu64 " seq %" PRIu64, p, s);
	if (sc->order) {
		uint64_t last = atomic_load_explicit(&sc->last_seq[p], memory_order_relaxed);
		if (last != UINT64_MAX && s != last + 1)
			fatal("order: producer %" PRIu64 " seq %" PRIu64 " after %" PRIu64, p, s, last);
		atomic_store_explicit(&sc->last_seq[p], s, memory_order_relaxed);
	}
	c->received++;
	atomic_fetch_add_explicit(&progress, 1, memory_order_relaxed);
}

static unsigned home_of(struct party *pa)
{
	unsigned n = vch_set_size(pa->sc->set);
	int w;

	switch (pa->hm) {
	case H_FIXED:
		return pa->fixed;
	case H_RANDOM:
		return vb_rng_below(&pa->rng, n);
	case H_WORKER:
		w = vrt_worker_id();
		return w < 0 ? 0 : (unsigned)w % n;
	}
	return 0;
}

/* ------------------------------------------------------------ threads */

static void *thread_main(void *arg)
{
	struct party *pa = arg;
	struct vch_set *set = pa->sc->set;
	enum vch_status r;
	uint64_t v;

	for (;;) {
		if (pa->producer) {
			if (pa->next >= pa->count)
				return NULL;
			r = vch_set_try_send(set, home_of(pa), TAG(pa->id, pa->next));
			if (r == VCH_OK) {
				pa->next++;
				atomic_fetch_add_explicit(&progress, 1, memory_order_relaxed);
			}
		} else {
			r = vch_set_try_recv(set, home_of(pa), &v);
			if (r == VCH_OK)
				record(pa, v);
		}
		if (r == VCH_CLOSED)
			return NULL;
		if (r != VCH_OK)
			sched_yield();
	}
}

/* -------------------------------------------------------------- tasks */

static enum vrt_poll task_poll(struct vrt_task *t)
{
	struct party *pa = vb_container_of(t, struct party, task);
	struct vch_set *set = pa->sc->set;
	enum vch_status r;
	uint64_t v;

	if (vrt_task_is_cancelled(t)) {
		vch_waiter_cancel(&pa->w);
		return VRT_READY;
	}
	for (;;) {
		if (pa->busy) {
			/* Holding the last value, as an executor runs a job in
			 * slices: its member has one waiting receiver fewer. */
			pa->busy--;
			return VRT_YIELD;
		}
		if (pa->producer) {
			if (pa->next >= pa->count)
				return VRT_READY;
			r = vch_set_send_poll(set, home_of(pa), &pa->w, TAG(pa->id, pa->next));
		} else {
			r = vch_set_recv_poll(set, home_of(pa), &pa->w, &v);
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
				if (pa->busy_max && vb_rng_below(&pa->rng, 4) == 0)
					pa->busy = 1 + vb_rng_below(&pa->rng, pa->busy_max);
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

static void scen_init(struct scen *sc, const char *name, unsigned members, size_t cap, unsigned np,
		      unsigned nc, uint64_t per_producer)
{
	memset(sc, 0, sizeof(*sc));
	sc->name = name;
	atomic_store(&scen_name, name);
	if (vch_set_new(members, cap, &sc->set))
		fatal("vch_set_new(%u, %zu) failed", members, cap);
	atomic_store(&cur_set, sc->set);
	sc->np = np;
	sc->nc = nc;
	sc->seen_len = per_producer;
	sc->prod = calloc(np, sizeof(struct party));
	sc->cons = calloc(nc, sizeof(struct party));
	for (unsigned p = 0; p < np; p++) {
		sc->seen[p] = calloc(per_producer, 1);
		atomic_init(&sc->last_seq[p], UINT64_MAX);
		sc->prod[p] = (struct party){ .sc = sc, .producer = true, .id = p, .count = per_producer,
			.kind = vb_rng_below(&main_rng, 5) ? K_TASK : K_THREAD_TRY,
			.hm = (enum home_mode)vb_rng_below(&main_rng, 3),
			.fixed = vb_rng_below(&main_rng, members) };
	}
	for (unsigned c = 0; c < nc; c++)
		sc->cons[c] = (struct party){ .sc = sc,
			.kind = vb_rng_below(&main_rng, 6) ? K_TASK : K_THREAD_TRY,
			.hm = vb_rng_below(&main_rng, 3) ? H_WORKER : (enum home_mode)vb_rng_below(&main_rng, 3),
			.fixed = vb_rng_below(&main_rng, members),
			.busy_max = vb_rng_below(&main_rng, 2) ? 1 + vb_rng_below(&main_rng, 8) : 0 };
}

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
	for (unsigned i = 0; i < vch_set_size(sc->set); i++) {
		struct vch *m = vch_set_member(sc->set, i);
		if (atomic_load(&m->sendq.has_waiters) || atomic_load(&m->recvq.has_waiters))
			fatal("waiters left behind on member %u", i);
	}
	end = vb_now_ns() + STALL_NS;
	while (atomic_load(&sc->dropped) < tasks) {
		if (vb_now_ns() > end)
			fatal("task references leaked: %u of %u dropped", atomic_load(&sc->dropped), tasks);
		sched_yield();
	}
	vch_set_stats_get(sc->set, &st);
	if (st.recvs != received)
		fatal("statistics: %" PRIu64 " receives counted, %" PRIu64 " values received", st.recvs, received);
	total_msgs += st.recvs;
	total_waits += st.send_waits + st.recv_waits;
	total_stolen += st.stolen;
	total_spilled += st.spilled;
	total_cross += st.cross_wakes;
	atomic_store(&cur_set, NULL);
	vch_set_free(sc->set);
	free(sc->prod);
	free(sc->cons);
}

static const size_t caps[] = { 1, 2, 3, 7, 64, 100, 1024 };

static void start_all(struct scen *sc)
{
	for (unsigned c = 0; c < sc->nc; c++)
		party_start(&sc->cons[c]);
	for (unsigned p = 0; p < sc->np; p++)
		party_start(&sc->prod[p]);
}

/* Producers send a fixed count; then close; consumers drain to CLOSED. */
static void run_fixed(unsigned members, unsigned np, unsigned nc, uint64_t total)
{
	struct scen sc;
	size_t cap = caps[vb_rng_below(&main_rng, VB_ARRAY_SIZE(caps))];
	uint64_t per = total / np + 1;

	scen_init(&sc, "PxC", members, cap, np, nc, per);
	start_all(&sc);
	for (unsigned p = 0; p < np; p++)
		party_join(&sc.prod[p]);
	for (unsigned p = 0; p < np; p++)
		if (sc.prod[p].next != per)
			fatal("producer %u sent only %" PRIu64, p, sc.prod[p].next);
	vch_set_close(sc.set);
	for (unsigned c = 0; c < nc; c++)
		party_join(&sc.cons[c]);
	scen_check_fini(&sc);
}

/* Order: each producer sends to one member only, whose share of the
 * capacity holds everything sent to it (no spill), and one consumer
 * receives: every producer's values arrive in order. */
static void run_order(unsigned members, unsigned np, uint64_t per)
{
	struct scen sc;

	scen_init(&sc, "order", members, (size_t)(per * np) * members, np, 1, per);
	sc.order = true;
	for (unsigned p = 0; p < np; p++)
		sc.prod[p].hm = H_FIXED;
	start_all(&sc);
	for (unsigned p = 0; p < np; p++)
		party_join(&sc.prod[p]);
	vch_set_close(sc.set);
	party_join(&sc.cons[0]);
	scen_check_fini(&sc);
}

static void sleep_us(unsigned us)
{
	struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000L };
	nanosleep(&ts, NULL);
}

/* Producers would send far more than they get to; close mid-traffic. */
static void run_close(unsigned members, unsigned np, unsigned nc, uint64_t limit)
{
	struct scen sc;
	size_t cap = caps[vb_rng_below(&main_rng, VB_ARRAY_SIZE(caps))];

	scen_init(&sc, "close during traffic", members, cap, np, nc, limit);
	start_all(&sc);
	sleep_us(500 + vb_rng_below(&main_rng, 10000));
	vch_set_close(sc.set);
	for (unsigned p = 0; p < np; p++)
		party_join(&sc.prod[p]);
	for (unsigned c = 0; c < nc; c++)
		party_join(&sc.cons[c]);
	scen_check_fini(&sc);
}

/*
 * Cancellation: a steady producer task and consumer task, and waves of
 * producer and consumer tasks cancelled at random moments (most are
 * waiting, or woken and not yet run: capacity 1..3 over the members, so a
 * wakeup they were given is passed on). What a cancelled task sent or
 * received before it stopped counts.
 */
static void run_cancel(unsigned members, uint64_t total, unsigned waves)
{
	const unsigned per_wave = 3;
	unsigned np = 1 + waves * per_wave, nc = 1 + waves * per_wave;
	struct scen sc;

	if (np > MAXP)
		np = MAXP;
	scen_init(&sc, "cancel during traffic", members, 1 + vb_rng_below(&main_rng, 3), np, nc, total);
	for (unsigned p = 0; p < np; p++)
		sc.prod[p].kind = K_TASK;
	for (unsigned c = 0; c < nc; c++)
		sc.cons[c].kind = K_TASK;
	party_start(&sc.prod[0]);
	party_start(&sc.cons[0]);
	for (unsigned w = 0; w < waves; w++) {
		unsigned first = 1 + w * per_wave;

		for (unsigned i = 0; i < per_wave; i++) {
			if (first + i < np)
				party_start(&sc.prod[first + i]);
			party_start(&sc.cons[first + i]);
		}
		sleep_us(200 + vb_rng_below(&main_rng, 2000));
		for (unsigned i = 0; i < per_wave; i++) {
			if (first + i < np) {
				vrt_task_cancel(&sc.prod[first + i].task);
				party_join(&sc.prod[first + i]);
			}
			vrt_task_cancel(&sc.cons[first + i].task);
			party_join(&sc.cons[first + i]);
		}
	}
	party_join(&sc.prod[0]);
	vch_set_close(sc.set);
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
		struct vch_set *set;

		if (now != last) {
			last = now;
			since = vb_now_ns();
		} else if (vb_now_ns() - since > STALL_NS) {
			set = atomic_load(&cur_set);
			fprintf(stderr, "stress_chan_set: STALL in '%s' (seed %" PRIu64 "): no message moved for %lld ms\n",
				atomic_load(&scen_name), seed, (long long)(STALL_NS / VB_NS_PER_MS));
			for (unsigned i = 0; set && i < vch_set_size(set); i++) {
				struct vch *m = vch_set_member(set, i);
				struct vch_stats st;
				vch_stats_get(m, &st);
				fprintf(stderr, "  member %u: cap %" PRIu64 " len %" PRIu64 " sends %" PRIu64
					" recvs %" PRIu64 " stolen %" PRIu64 " cross_wakes %" PRIu64
					" closed %" PRIu64 " send waiters %#lx recv waiters %#lx help %#" PRIx64 "\n",
					i, st.capacity, st.len, st.sends, st.recvs, st.stolen, st.cross_wakes,
					st.closed, (unsigned long)atomic_load(&m->sendq.has_waiters),
					(unsigned long)atomic_load(&m->recvq.has_waiters),
					(uint64_t)atomic_load(&set->help[0]));
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
	int64_t t0 = vb_now_ns(), t;
	int rc;

	if (env && atoi(env) > 0)
		scale = (unsigned)atoi(env);
	seed = senv ? strtoull(senv, NULL, 0) : (uint64_t)vb_now_ns();
	vb_rng_seed(&main_rng, seed);
	printf("# stress_chan_set seed=%" PRIu64 " scale=%u (VOLTD_TEST_SEED, VOLTD_STRESS_SCALE)\n",
	       seed, scale);
	fflush(stdout);
	atomic_store(&scen_name, "start");

	tcfg_rt(&cfg);
	cfg.workers = WORKERS;   /* more workers than CPUs: more interleavings */
	rc = vrt_new(&cfg, &rt);
	if (rc) {
		fprintf(stderr, "vrt_new: %d\n", rc);
		return 99;
	}
	pthread_create(&wd, NULL, watchdog_main, NULL);
	pthread_detach(wd);

	base = 40000ull * scale / SAN_SLOWDOWN;
	t = vb_now_ns();
	for (unsigned members = 1; members <= 5; members++)
		for (unsigned np = 1; np <= 4; np++)
			for (unsigned nc = 1; nc <= 4; nc++)
				run_fixed(members, np, nc, base);
	printf("# PxC, 1..5 members: 80 runs x %" PRIu64 " messages: %.2f s; %" PRIu64 " messages, %" PRIu64
	       " waits, %" PRIu64 " stolen, %" PRIu64 " spilled, %" PRIu64 " woken across so far\n", base,
	       (vb_now_ns() - t) / 1e9, total_msgs, total_waits, total_stolen, total_spilled, total_cross);
	t = vb_now_ns();
	for (unsigned members = 1; members <= 4; members++)
		run_order(members, 1 + vb_rng_below(&main_rng, 4), base / 4);
	printf("# order: 4 runs: %.2f s\n", (vb_now_ns() - t) / 1e9);
	t = vb_now_ns();
	for (unsigned i = 0; i < 16 * scale; i++)
		run_close(1 + vb_rng_below(&main_rng, 4), 1 + vb_rng_below(&main_rng, 4),
			  1 + vb_rng_below(&main_rng, 4), 200000ull * scale);
	printf("# close during traffic: %u runs: %.2f s; %" PRIu64 " messages so far\n", 16 * scale,
	       (vb_now_ns() - t) / 1e9, total_msgs);
	t = vb_now_ns();
	for (unsigned i = 0; i < 8 * scale; i++)
		run_cancel(1 + vb_rng_below(&main_rng, 4), base, 2);
	printf("# cancel during traffic: %u runs: %.2f s; %" PRIu64 " messages, %" PRIu64 " stolen, %" PRIu64
	       " spilled, %" PRIu64 " woken across in all\n", 8 * scale, (vb_now_ns() - t) / 1e9, total_msgs,
	       total_stolen, total_spilled, total_cross);
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	vrt_free(rt);
	printf("# stress_chan_set: ok in %.2f s\n", (vb_now_ns() - t0) / 1e9);
	return 0;
}
