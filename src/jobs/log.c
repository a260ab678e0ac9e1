/* SPDX-License-Identifier: MIT */
/*
 * jobs/log.c: a module's log lines (the host table's log): prefixed with
 * the module's name, rate-limited per module (VJOB_LOG_BURST lines per
 * VJOB_LOG_WINDOW_MS, the lines held back counted and said with the next
 * one), and never blocking a worker: on a worker the line goes to a queue
 * that a thread of its own writes out (stderr or syslog may block: a slow
 * journal, a full pipe); a worker that finds the queue busy or full drops
 * the line and counts it (the writer says how many). Other threads (main:
 * init and shutdown; control) write at once.
 *
 * Threading: any thread. The queue is a ring under a mutex that workers
 * only try (pthread_mutex_trylock: they never wait) and the writer takes;
 * the writer sleeps on a condition variable, woken by each line queued. The
 * limiter's counters are relaxed atomics: a count a moment off lets a line
 * more or fewer through, which a rate limit may. Lock-free for the workers
 * in the sense that matters here: a worker never waits.
 */
#include "jobs/internal.h"
#include "base/compiler.h"
#include "base/time.h"
#include "rt/rt.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define VJOB_LOG_QUEUE 64
#define VJOB_LOG_LINE 480

struct qline {
	int level;
	char text[VJOB_LOG_LINE];
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct qline q[VJOB_LOG_QUEUE]; /* under mu */
	unsigned head, n;               /* under mu */
	bool running, stop;             /* under mu */
	pthread_t thread;
	_Atomic uint64_t dropped;       /* lines a worker could not queue */
} lq = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

/* The limiter: true when the line may go; *held gets (and clears) the count
 * of the lines held back since the last one that went. */
static bool admit(struct vb_ratelimit *rl, uint64_t *held)
{
	int64_t now = vb_now_ns();
	/* Relaxed: see the top of the file. */
	int64_t start = atomic_load_explicit(&rl->window_start, memory_order_relaxed);

	if (now - start >= rl->interval_ns &&
	    atomic_compare_exchange_strong_explicit(&rl->window_start, &start, now, memory_order_relaxed,
						    memory_order_relaxed))
		atomic_store_explicit(&rl->printed, 0, memory_order_relaxed);
	if (atomic_fetch_add_explicit(&rl->printed, 1, memory_order_relaxed) >= rl->burst) {
		atomic_fetch_add_explicit(&rl->suppressed, 1, memory_order_relaxed);
		return false;
	}
	*held = atomic_exchange_explicit(&rl->suppressed, 0, memory_order_relaxed);
	return true;
}

static void *writer(void *arg)
{
	struct qline line;

	(void)arg;
	pthread_mutex_lock(&lq.mu);
	for (;;) {
		while (!lq.n && !lq.stop)
			pthread_cond_wait(&lq.cv, &lq.mu);
		if (!lq.n)
			break;
		line = lq.q[lq.head];
		lq.head = (lq.head + 1) % VJOB_LOG_QUEUE;
		lq.n--;
		/* Never write with the lock held: a worker would find it busy. */
		pthread_mutex_unlock(&lq.mu);
		vb_log(line.level, "%s", line.text);
		/* Relaxed: a count reported on its own. */
		uint64_t d = atomic_exchange_explicit(&lq.dropped, 0, memory_order_relaxed);
		if (d)
			vb_log(LOG_WARNING, "jobs: %llu module log line(s) dropped (the log queue was busy or full)",
			       (unsigned long long)d);
		pthread_mutex_lock(&lq.mu);
	}
	pthread_mutex_unlock(&lq.mu);
	return NULL;
}

void vjob__log_start(void)
{
	pthread_mutex_lock(&lq.mu);
	if (!lq.running && !lq.stop && pthread_create(&lq.thread, NULL, writer, NULL) == 0)
		lq.running = true;
	pthread_mutex_unlock(&lq.mu);
}

void vjob__log_stop(void)
{
	pthread_mutex_lock(&lq.mu);
	bool running = lq.running;
	lq.stop = true;
	pthread_cond_signal(&lq.cv);
	pthread_mutex_unlock(&lq.mu);
	if (running)
		pthread_join(lq.thread, NULL); /* what is queued is written first */
	pthread_mutex_lock(&lq.mu);
	lq.running = false;
	lq.stop = false;
	pthread_mutex_unlock(&lq.mu);
	/* Relaxed: see writer (no worker logs any more). */
	uint64_t d = atomic_exchange_explicit(&lq.dropped, 0, memory_order_relaxed);
	if (d)
		vb_log(LOG_WARNING, "jobs: %llu module log line(s) dropped (the log queue was busy or full)",
		       (unsigned long long)d);
}

/* On a worker: queue the line, or drop it (counted) rather than wait;
 * false when dropped. */
static bool enqueue(int level, const char *text)
{
	if (pthread_mutex_trylock(&lq.mu) != 0) {
		/* Relaxed: see writer. */
		atomic_fetch_add_explicit(&lq.dropped, 1, memory_order_relaxed);
		return false;
	}
	if (!lq.running || lq.n == VJOB_LOG_QUEUE) {
		pthread_mutex_unlock(&lq.mu);
		atomic_fetch_add_explicit(&lq.dropped, 1, memory_order_relaxed);
		return false;
	}
	struct qline *l = &lq.q[(lq.head + lq.n) % VJOB_LOG_QUEUE];
	l->level = level;
	snprintf(l->text, sizeof(l->text), "%s", text);
	lq.n++;
	pthread_cond_signal(&lq.cv);
	pthread_mutex_unlock(&lq.mu);
	return true;
}

void vjob__log(const struct vjob_mod *m, int level, const char *fmt, va_list ap)
{
	char text[VJOB_LOG_LINE];
	uint64_t held = 0;
	int n;

	if (level < VOLTD_LOG_ERR)
		level = VOLTD_LOG_ERR;
	if (level > VOLTD_LOG_DEBUG)
		level = VOLTD_LOG_DEBUG;
	if (level > vb_log_get_level())
		return;
	/* The limiter's state is the one part of the module a log line
	 * changes (atomics). */
	if (!admit((struct vb_ratelimit *)&m->log_rl, &held))
		return;
	n = snprintf(text, sizeof(text), "module %s: ", m->name);
	if (n < 0 || (size_t)n >= sizeof(text))
		return;
	int k = vsnprintf(text + n, sizeof(text) - (size_t)n, fmt, ap);
	if (k >= 0 && held) {
		size_t at = strlen(text);
		snprintf(text + at, sizeof(text) - at, " (%llu more line(s) held back)", (unsigned long long)held);
	}
	if (vrt_worker_id() < 0) {
		vb_log(level, "%s", text);
	} else if (!enqueue(level, text) && held) {
		/* The line is counted as dropped; the lines it said were held
		 * back are said by the next one instead. Relaxed: see admit. */
		atomic_fetch_add_explicit(&((struct vb_ratelimit *)&m->log_rl)->suppressed, (uint32_t)held,
					  memory_order_relaxed);
	}
}
