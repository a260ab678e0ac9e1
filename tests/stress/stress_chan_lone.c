/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/stress_chan_lone.c: lone values and lone free slots on the
 * blocking (thread) path must not be stranded. Several pairs of threads run
 * at once, both sides using blocking vch_send / vch_recv:
 *   - "lone value" pairs: the producer sends one value, then sleeps a few
 *     hundred us (every 50th value: twice the deadline) before the next; the
 *     consumer blocks in vch_recv on an empty channel each time (one pair
 *     spins 1-4 us between values instead, so they arrive while the consumer
 *     is still spinning);
 *   - "lone slot" pairs: the producer keeps the channel full and blocks in
 *     vch_send; the consumer takes one value, then sleeps (one pair: spins
 *     1-4 us), so each blocked send has exactly one free slot to take.
 * Checks: every value arrives exactly once and in order (nothing lost, nothing
 * duplicated), and nothing is stranded: every LONG_GAP_EVERY-th value the
 * sleeping side waits, before its next operation, until the value it sent
 * was received (the free slot it made was filled), so a waiter that needed
 * a batch of values (slots), or the next operation, to wake never wakes,
 * and the watchdog fails the test (nothing moves for STALL_NS, a hang
 * guard); the last value of a pair has no follower at all. No time bound is
 * asserted: the delays between a value's appearance and its taking are
 * printed (bench/bounds reports the max against its target, 400 ms).
 * Seed: VOLTD_TEST_SEED (printed).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/rng.h"
#include "base/time.h"
#include "chan/chan.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SAN_SLOWDOWN 2
#else
#define SAN_SLOWDOWN 1
#endif

/* The target the delays are reported against (not asserted: a loaded
 * 2-CPU machine once ran a woken thread 112 ms late, the old code and the
 * new alike, and a test must not fail on the machine). */
#define TARGET_NS (400 * VB_NS_PER_MS)
#define STALL_NS (10 * 1000 * VB_NS_PER_MS * SAN_SLOWDOWN)
#define VALUES 100           /* per pair */
#define LONG_GAP_EVERY 50    /* then wait until the last one was taken */
#define GAP_MIN_US 100
#define GAP_SPREAD_US 400

static uint64_t seed;
static _Atomic uint64_t progress;

static void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void fatal(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "stress_chan_lone: FAIL (seed %" PRIu64 "): ", seed);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(1);
}

static void sleep_ns(int64_t ns)
{
	struct timespec ts = { ns / 1000000000LL, (long)(ns % 1000000000LL) };

	while (nanosleep(&ts, &ts) != 0)
		;
}

struct pair {
	bool lone_slot;            /* false: lone values; true: lone free slots */
	bool short_gaps;           /* gaps of 1-4 us, spun: the waiter is still spinning */
	size_t cap;
	struct vch *ch;
	struct vb_rng rng;         /* the sleeping side's gaps */
	pthread_t prod, cons;
	uint64_t total;            /* values the producer sends */
	/* Times in ns. lone value: appear = just before send i, taken = recv i
	 * returned. lone slot: appear = just before recv i (which frees a slot),
	 * taken = the send it unblocks (number cap + i) returned. */
	int64_t *appear, *taken;
	_Atomic uint64_t received;  /* read by the watchdog and the producer */
	_Atomic uint64_t sent;      /* read by the consumer */
};

static void gap(struct pair *p, uint64_t i)
{
	if (i % LONG_GAP_EVERY == LONG_GAP_EVERY - 1) {
		/* Before value i (lone value) or recv i (lone slot): the value
		 * i - 1 received, the slot recv i - 1 freed filled (send
		 * cap + i - 1 returned). A stranded one never is: the watchdog
		 * ends the test. */
		_Atomic uint64_t *n = p->lone_slot ? &p->sent : &p->received;
		uint64_t want = p->lone_slot ? p->cap + i : i;

		while (atomic_load(n) < want)
			sleep_ns(50 * VB_NS_PER_US);
	} else if (p->short_gaps) {
		int64_t end = vb_now_ns() + 1000 + vb_rng_below(&p->rng, 3000);

		while (vb_now_ns() < end)
			;
	} else {
		sleep_ns((GAP_MIN_US + vb_rng_below(&p->rng, GAP_SPREAD_US)) * VB_NS_PER_US);
	}
}

static void *producer_main(void *arg)
{
	struct pair *p = arg;

	for (uint64_t i = 0; i < p->total; i++) {
		if (!p->lone_slot) {
			gap(p, i);
			p->appear[i] = vb_now_ns();
		}
		if (vch_send(p->ch, i) != VCH_OK)
			fatal("send %" PRIu64 " failed", i);
		if (p->lone_slot && i >= p->cap)
			p->taken[i - p->cap] = vb_now_ns();
		atomic_fetch_add(&p->sent, 1);
		atomic_fetch_add(&progress, 1);
	}
	return NULL;
}

static void *consumer_main(void *arg)
{
	struct pair *p = arg;
	uint64_t v;

	for (uint64_t i = 0; i < p->total; i++) {
		bool paced = p->lone_slot && i < VALUES;

		if (paced) {
			gap(p, i);
			p->appear[i] = vb_now_ns();
		}
		if (vch_recv(p->ch, &v) != VCH_OK)
			fatal("recv %" PRIu64 " failed", i);
		if (!p->lone_slot)
			p->taken[i] = vb_now_ns();
		if (v != i)
			fatal("%s pair: received %" PRIu64 " where %" PRIu64 " was due (lost or duplicated)",
			      p->lone_slot ? "lone-slot" : "lone-value", v, i);
		atomic_fetch_add(&p->received, 1);
		atomic_fetch_add(&progress, 1);
	}
	return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* Prints one kind's delays: their distribution, and the max against the
 * target for bench/bounds. */
static void check_kind(struct pair *pairs, unsigned n, bool lone_slot)
{
	int64_t d[8 * VALUES];
	unsigned k = 0;
	uint64_t spins = 0, waits = 0;

	for (unsigned i = 0; i < n; i++) {
		struct pair *p = &pairs[i];
		struct vch_stats st;

		if (p->lone_slot != lone_slot)
			continue;
		for (unsigned j = 0; j < VALUES; j++) {
			d[k++] = p->taken[j] - p->appear[j];
		}
		vch_stats_get(p->ch, &st);
		spins += lone_slot ? st.send_spins : st.recv_spins;
		waits += lone_slot ? st.send_waits : st.recv_waits;
	}
	qsort(d, k, sizeof(d[0]), cmp_i64);
	printf("# %s: %u waits: delay p50 %.1f us, p99 %.1f us, max %.1f us; "
	       "taken while spinning %" PRIu64 ", after sleeping %" PRIu64 "\n",
	       lone_slot ? "lone free slots" : "lone values", k, d[k / 2] / 1e3,
	       d[(k * 99) / 100] / 1e3, d[k - 1] / 1e3, spins, waits);
	printf("bound: stress_chan_lone %s_max_delay_ms %.3f < %lld\n", lone_slot ? "lone_slot" : "lone_value",
	       d[k - 1] / 1e6, (long long)(TARGET_NS / VB_NS_PER_MS));
}

int main(void)
{
	static const struct { bool lone_slot, short_gaps; size_t cap; } conf[] = {
		{ false, false, 1024 }, { false, false, 1024 }, { false, false, 64 },
		{ false, true, 1024 },
		{ true, false, 1024 }, { true, false, 64 }, { true, true, 1024 },
	};
	const unsigned n = sizeof(conf) / sizeof(conf[0]);
	const char *senv = getenv("VOLTD_TEST_SEED");
	struct pair pairs[sizeof(conf) / sizeof(conf[0])];
	struct vb_rng rng;
	uint64_t last = UINT64_MAX;
	int64_t since = vb_now_ns(), t0 = since;
	unsigned finished = 0;

	seed = senv ? strtoull(senv, NULL, 0) : (uint64_t)vb_now_ns();
	vb_rng_seed(&rng, seed);
	printf("# stress_chan_lone seed=%" PRIu64 " (VOLTD_TEST_SEED); %u pairs x %d values\n",
	       seed, n, VALUES);
	fflush(stdout);

	for (unsigned i = 0; i < n; i++) {
		struct pair *p = &pairs[i];

		memset(p, 0, sizeof(*p));
		p->lone_slot = conf[i].lone_slot;
		p->cap = conf[i].cap;
		p->short_gaps = conf[i].short_gaps;
		p->total = p->lone_slot ? p->cap + VALUES : VALUES;
		vb_rng_seed(&p->rng, vb_rng_next32(&rng));
		p->appear = calloc(VALUES, sizeof(int64_t));
		p->taken = calloc(VALUES, sizeof(int64_t));
		if (!p->appear || !p->taken || vch_new(p->cap, &p->ch))
			fatal("out of memory");
		if (pthread_create(&p->cons, NULL, consumer_main, p) ||
		    pthread_create(&p->prod, NULL, producer_main, p))
			fatal("pthread_create");
	}
	/* Watchdog: every pair finishes, or something stopped moving. */
	while (finished < n) {
		uint64_t now = atomic_load(&progress);

		finished = 0;
		for (unsigned i = 0; i < n; i++)
			finished += atomic_load(&pairs[i].received) == pairs[i].total;
		if (now != last) {
			last = now;
			since = vb_now_ns();
		} else if (vb_now_ns() - since > STALL_NS) {
			for (unsigned i = 0; i < n; i++)
				fprintf(stderr, "  pair %u: received %" PRIu64 " of %" PRIu64 ", len %zu\n",
					i, atomic_load(&pairs[i].received), pairs[i].total,
					vch_len(pairs[i].ch));
			fatal("stall: nothing moved for %lld ms", (long long)(STALL_NS / VB_NS_PER_MS));
		}
		sleep_ns(10 * VB_NS_PER_MS);
	}
	for (unsigned i = 0; i < n; i++) {
		pthread_join(pairs[i].prod, NULL);
		pthread_join(pairs[i].cons, NULL);
		if (vch_len(pairs[i].ch) != 0)
			fatal("pair %u: %zu values left over", i, vch_len(pairs[i].ch));
	}
	check_kind(pairs, n, false);
	check_kind(pairs, n, true);
	for (unsigned i = 0; i < n; i++) {
		vch_free(pairs[i].ch);
		free(pairs[i].appear);
		free(pairs[i].taken);
	}
	printf("# stress_chan_lone: ok in %.2f s\n", (vb_now_ns() - t0) / 1e9);
	return 0;
}
