/* SPDX-License-Identifier: MIT */
/*
 * rt/rt.c: runtime lifecycle (config, vrt_new, vrt_shutdown, vrt_free), the
 * task registry, live tunables and the statistics snapshot.
 *
 * Threading: vrt_new / vrt_shutdown / vrt_free from one non-worker thread;
 * tunables and snapshots from any thread at any time; registry functions
 * from workers (add/remove/cancel_all) and from vrt_shutdown after the
 * workers were joined (sweep).
 *
 * The registry holds every task that was polled at least once and has not
 * completed (a task completing on its first poll never enters it). A task
 * enters the shard of the worker that first polls it. It exists so that
 * shutdown can finish (DRAIN: cancel, then run) or drop (DROP) tasks that
 * wait on something that will never come, and so that no wake can reach a
 * runtime after vrt_free: every such task ends COMPLETE, and a complete task
 * ignores wakes.
 *
 * Ordering:
 *   shard lists, task reg_* fields: under the shard mutex.
 *   tunables t_*: relaxed stores, relaxed loads by workers (independent knobs;
 *   a stale value for one interval is harmless).
 *   [R1] phase: release store in vrt_shutdown; pairs with the workers'
 *        acquire loads ([W7] in worker.c).
 *   stats: relaxed loads of single-writer counters (a snapshot need not be
 *   consistent across counters).
 */
#include "rt/internal.h"
#include "base/log.h"
#include "base/time.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REG_NONE UINT16_MAX

int vrt_config_check(const struct vrt_config *c)
{
	if (c->workers < 1 || c->workers > VRT_MAX_WORKERS)
		return -EINVAL;
	if (c->global_interval_min < 1 || c->global_interval_max > VRT_GLOBAL_INTERVAL_MAX ||
	    c->global_interval_min > c->global_interval_max)
		return -EINVAL;
	if (c->global_batch_max < 1 || c->global_batch_max > VRT_GLOBAL_BATCH_MAX)
		return -EINVAL;
	if (c->lifo_poll_cap < 1 || c->lifo_poll_cap > VRT_LIFO_POLL_CAP_MAX)
		return -EINVAL;
	if (c->budget < 1 || c->budget > VRT_BUDGET_MAX)
		return -EINVAL;
	if (c->park_timeout_ms < 1 || c->park_timeout_ms > VRT_PARK_TIMEOUT_MS_MAX)
		return -EINVAL;
	if (c->io_poll_interval > VRT_IO_POLL_INTERVAL_MAX)
		return -EINVAL;
	if (c->io_reap_us > VRT_IO_REAP_US_MAX)
		return -EINVAL;
	if (c->park_ops && (!c->park_ops->park || !c->park_ops->unpark))
		return -EINVAL;
	if (c->stall_warn_ms > VRT_STALL_WARN_MS_MAX)
		return -EINVAL;
	return 0;
}

static void free_struct(struct vrt *rt)
{
	if (rt->workers) {
		for (unsigned i = 0; i < rt->nworkers; i++) {
			if (rt->workers[i])
				free(rt->workers[i]->seen);
			free(rt->workers[i]);
		}
		free(rt->workers);
	}
	if (rt->shards) {
		for (unsigned i = 0; i < rt->nshards; i++)
			pthread_mutex_destroy(&rt->shards[i].lock);
		free(rt->shards);
	}
	free(rt->parked_bits);
	free(rt->mon.w);
	pthread_mutex_destroy(&rt->park_lock);
	vrt__inject_fini(&rt->inject);
	free(rt);
}

int vrt_new(const struct vrt_config *cfg, struct vrt **out)
{
	struct vrt *rt;
	unsigned started = 0;
	int err;
	uint64_t seed = (uint64_t)getpid() * 0x9E3779B97F4A7C15ull;

	err = vrt_config_check(cfg);
	if (err)
		return err;
	rt = aligned_alloc(VB_CACHELINE, (sizeof(*rt) + VB_CACHELINE - 1) / VB_CACHELINE * VB_CACHELINE);
	if (!rt)
		return -ENOMEM;
	memset(rt, 0, sizeof(*rt));
	err = vrt__inject_init(&rt->inject);
	if (err) {
		free(rt);
		return err;
	}
	vrt__mutex_init(&rt->park_lock);
	rt->nworkers = cfg->workers;
	rt->ops = cfg->park_ops ? cfg->park_ops : &vrt__futex_park_ops;
	rt->park_ctx = cfg->park_ops ? cfg->park_ctx : rt;
	rt->io_poll_interval = cfg->io_poll_interval;
	rt->park_timeout_ns = (int64_t)cfg->park_timeout_ms * 1000000;
	rt->nwords = (cfg->workers + 63) / 64;
	atomic_init(&rt->t_stealing, cfg->stealing);
	atomic_init(&rt->t_lifo, cfg->lifo_slot);
	atomic_init(&rt->t_gi_min, cfg->global_interval_min);
	atomic_init(&rt->t_gi_max, cfg->global_interval_max);
	atomic_init(&rt->t_lifo_cap, cfg->lifo_poll_cap);
	atomic_init(&rt->t_budget, cfg->budget);
	atomic_init(&rt->t_batch_max, cfg->global_batch_max);
	atomic_init(&rt->t_reap_us, cfg->io_reap_us);
	atomic_init(&rt->t_gather, cfg->gather);
	/* Nothing is saturated yet; without a monitor nobody measures, and
	 * vrt__may_spread reads this as "spread", as with gather off. */
	atomic_init(&rt->spreading, cfg->stall_warn_ms == 0);
	atomic_init(&rt->spread_width, 1); /* nothing busy yet */
	atomic_init(&rt->phase, VRT_RUNNING);
	atomic_init(&rt->idle, 0);
	atomic_init(&rt->start_pending, cfg->workers);
	atomic_init(&rt->start_err, 0);
	vb_event_init(&rt->started);

	err = -ENOMEM;
	rt->parked_bits = calloc(rt->nwords, sizeof(*rt->parked_bits));
	rt->workers = calloc(rt->nworkers, sizeof(*rt->workers));
	rt->nshards = rt->nworkers;
	rt->shards = aligned_alloc(VB_CACHELINE, rt->nshards * sizeof(*rt->shards));
	if (!rt->parked_bits || !rt->workers || !rt->shards) {
		free(rt->shards);
		rt->shards = NULL;
		goto fail_struct;
	}
	for (unsigned i = 0; i < rt->nshards; i++) {
		vrt__mutex_init(&rt->shards[i].lock);
		rt->shards[i].head = NULL;
	}
	for (unsigned i = 0; i < rt->nworkers; i++) {
		struct vrt_worker *w = aligned_alloc(VB_CACHELINE, sizeof(*w));
		if (!w)
			goto fail_struct;
		memset(w, 0, sizeof(*w));
		rt->workers[i] = w;
		if (!(w->seen = calloc(rt->nworkers, sizeof(*w->seen))))
			goto fail_struct;
		vrt__wsq_init(&w->q, 0);
		vrt__wsq_init(&w->cq, 0);
		w->rt = rt;
		w->id = i;
		vb_rng_seed(&w->rng, seed + i);
		vb_event_init(&w->park_ev);
	}
	for (; started < rt->nworkers; started++) {
		err = -pthread_create(&rt->workers[started]->thread, NULL,
				      vrt__worker_main, rt->workers[started]);
		if (err)
			break;
	}
	if (started == rt->nworkers) {
		vb_event_wait(&rt->started, -1);
		/* relaxed: ordered by the event ([W8] in worker.c). */
		err = atomic_load_explicit(&rt->start_err, memory_order_relaxed);
		if (!err)
			err = vrt__monitor_start(rt, cfg->stall_warn_ms);
		if (!err) {
			*out = rt;
			return 0;
		}
	}
	/* A thread or a park-ops start failed: stop those that run. */
	vrt__inject_close_remote(&rt->inject);
	/* [R1] release: pairs with the workers' [W7]. */
	atomic_store_explicit(&rt->phase, VRT_CLOSING_DROP, memory_order_release);
	vrt__unpark_all(rt);
	for (unsigned i = 0; i < started; i++)
		pthread_join(rt->workers[i]->thread, NULL);
fail_struct:
	free_struct(rt);
	return err;
}

/* ---------------------------------------------------------------- registry */

void vrt__registry_add(struct vrt *rt, struct vrt_task *t, unsigned shard)
{
	struct vrt_shard *s = &rt->shards[shard];

	pthread_mutex_lock(&s->lock);
	t->reg_shard = (uint16_t)shard; /* < VRT_MAX_WORKERS */
	t->reg_prev = NULL;
	t->reg_next = s->head;
	if (s->head)
		s->head->reg_prev = t;
	s->head = t;
	pthread_mutex_unlock(&s->lock);
}

void vrt__registry_remove(struct vrt *rt, struct vrt_task *t)
{
	struct vrt_shard *s = &rt->shards[t->reg_shard];

	pthread_mutex_lock(&s->lock);
	if (t->reg_prev)
		t->reg_prev->reg_next = t->reg_next;
	else
		s->head = t->reg_next;
	if (t->reg_next)
		t->reg_next->reg_prev = t->reg_prev;
	t->reg_prev = t->reg_next = NULL;
	t->reg_shard = REG_NONE;
	pthread_mutex_unlock(&s->lock);
}

void vrt__registry_cancel_all(struct vrt *rt)
{
	for (unsigned i = 0; i < rt->nshards; i++) {
		struct vrt_shard *s = &rt->shards[i];

		pthread_mutex_lock(&s->lock);
		/* Registered tasks are alive (the registry's removal precedes the
		 * release of the runtime's reference), so waking them is safe.
		 * vrt_task_cancel only schedules them: no user code runs here. */
		for (struct vrt_task *t = s->head; t; t = t->reg_next)
			vrt_task_cancel(t);
		pthread_mutex_unlock(&s->lock);
	}
}

/* ---------------------------------------------------------------- shutdown */

/* A task found in a queue after the workers stopped. */
static void dispose_queued(struct vrt *rt, struct vrt_task *t)
{
	/* Registered ones are completed by the registry sweep. */
	if (t->reg_shard == REG_NONE)
		vrt__task_force_complete(rt, t);
}

void vrt_shutdown(struct vrt *rt, enum vrt_shutdown_mode mode)
{
	struct vrt_task *list, *next;

	VB_BUG_ON(vrt__tls_worker != NULL); /* from a worker it would join itself */
	if (rt->shut)
		return;
	rt->shut = true;
	vrt__inject_close_remote(&rt->inject);
	/* [R1] release: pairs with the workers' [W7]. */
	atomic_store_explicit(&rt->phase,
		mode == VRT_SHUTDOWN_DRAIN ? VRT_CLOSING_DRAIN : VRT_CLOSING_DROP,
		memory_order_release);
	vrt__unpark_all(rt);
	for (unsigned i = 0; i < rt->nworkers; i++)
		pthread_join(rt->workers[i]->thread, NULL);
	/* [M2] release: the threads (and their CPU clocks) are gone; pairs
	 * with the acquire in vrt__worker_cpu_ns (monitor.c). */
	atomic_store_explicit(&rt->workers_joined, 1, memory_order_release);
	vrt__monitor_stop(rt);

	/* Workers are gone (pthread_join orders their writes before ours):
	 * what is still queued is dropped without being polled. */
	for (list = vrt__inject_close(&rt->inject); list; list = next) {
		next = list->next;
		dispose_queued(rt, list);
	}
	for (unsigned i = 0; i < rt->nworkers; i++) {
		struct vrt_worker *w = rt->workers[i];
		struct vrt_task *t;

		if (w->lifo) {
			t = w->lifo;
			w->lifo = NULL;
			dispose_queued(rt, t);
		}
		while (w->pf_len) {
			t = w->prefetch[w->pf_head++];
			w->pf_len--;
			dispose_queued(rt, t);
		}
		if (w->resume) {
			t = w->resume;
			w->resume = NULL;
			dispose_queued(rt, t);
		}
		if (w->cont_cur) {
			t = w->cont_cur;
			w->cont_cur = NULL;
			dispose_queued(rt, t);
		}
		while ((t = vrt__wsq_pop(&w->q)) != NULL)
			dispose_queued(rt, t);
		while ((t = vrt__wsq_pop(&w->cq)) != NULL)
			dispose_queued(rt, t);
	}
	for (unsigned i = 0; i < rt->nshards; i++) {
		struct vrt_shard *s = &rt->shards[i];

		pthread_mutex_lock(&s->lock);
		list = s->head;
		s->head = NULL;
		pthread_mutex_unlock(&s->lock);
		/* Outside the lock: completion may run drop() callbacks. */
		for (; list; list = next) {
			next = list->reg_next;
			list->reg_prev = list->reg_next = NULL;
			list->reg_shard = REG_NONE;
			vrt__task_force_complete(rt, list);
		}
	}
}

void vrt_free(struct vrt *rt)
{
	if (!rt)
		return;
	if (!rt->shut)
		vrt_shutdown(rt, VRT_SHUTDOWN_DROP);
	free_struct(rt);
}

/* ---------------------------------------------------------------- tunables */

int vrt_set_stealing(struct vrt *rt, bool on)
{
	/* relaxed: see the Ordering block (tunables). */
	atomic_store_explicit(&rt->t_stealing, on, memory_order_relaxed);
	return 0;
}

int vrt_set_global_interval(struct vrt *rt, unsigned min, unsigned max)
{
	if (min < 1 || max > VRT_GLOBAL_INTERVAL_MAX || min > max)
		return -EINVAL;
	/* relaxed: a worker reading a torn pair clamps min to max. */
	atomic_store_explicit(&rt->t_gi_min, min, memory_order_relaxed);
	atomic_store_explicit(&rt->t_gi_max, max, memory_order_relaxed);
	return 0;
}

int vrt_set_lifo_poll_cap(struct vrt *rt, unsigned cap)
{
	if (cap < 1 || cap > VRT_LIFO_POLL_CAP_MAX)
		return -EINVAL;
	atomic_store_explicit(&rt->t_lifo_cap, cap, memory_order_relaxed); /* relaxed: tunable */
	return 0;
}

int vrt_set_budget(struct vrt *rt, unsigned budget)
{
	if (budget < 1 || budget > VRT_BUDGET_MAX)
		return -EINVAL;
	atomic_store_explicit(&rt->t_budget, budget, memory_order_relaxed); /* relaxed: tunable */
	return 0;
}

void vrt_get_tunables(struct vrt *rt, struct vrt_config *out)
{
	/* relaxed: each a tunable of its own, as the workers read them. */
	out->stealing = atomic_load_explicit(&rt->t_stealing, memory_order_relaxed);
	out->global_interval_min = atomic_load_explicit(&rt->t_gi_min, memory_order_relaxed);
	out->global_interval_max = atomic_load_explicit(&rt->t_gi_max, memory_order_relaxed);
	out->lifo_poll_cap = atomic_load_explicit(&rt->t_lifo_cap, memory_order_relaxed);
	out->budget = atomic_load_explicit(&rt->t_budget, memory_order_relaxed);
	out->io_reap_us = atomic_load_explicit(&rt->t_reap_us, memory_order_relaxed);
	out->gather = atomic_load_explicit(&rt->t_gather, memory_order_relaxed);
	out->stall_warn_ms = rt->mon.w ? atomic_load_explicit(&rt->mon.warn_ms, memory_order_relaxed) : 0;
}

int vrt_set_io_reap_us(struct vrt *rt, unsigned us)
{
	if (us > VRT_IO_REAP_US_MAX)
		return -EINVAL;
	atomic_store_explicit(&rt->t_reap_us, us, memory_order_relaxed); /* relaxed: tunable */
	return 0;
}

int vrt_set_gather(struct vrt *rt, bool on)
{
	atomic_store_explicit(&rt->t_gather, on, memory_order_relaxed); /* relaxed: tunable */
	return 0;
}

void vrt_set_spread_hook(struct vrt *rt, void (*fn)(void *ctx), void *ctx)
{
	/* relaxed: published by the release store of fn below. */
	atomic_store_explicit(&rt->spread_ctx, ctx, memory_order_relaxed);
	/* [G1] release: pairs with gather_tick's acquire load of fn. */
	atomic_store_explicit(&rt->spread_fn, fn, memory_order_release);
}

/* The gather rule holds work and its monitor measures: its verdict
 * (spreading, spread_width) means something. */
static bool gather_measured(struct vrt *rt)
{
	return rt->mon.w && atomic_load_explicit(&rt->t_gather, memory_order_relaxed); /* relaxed: tunable */
}

bool vrt_saturated(struct vrt *rt)
{
	/* relaxed: the monitor's verdict. */
	return gather_measured(rt) && atomic_load_explicit(&rt->spreading, memory_order_relaxed);
}

bool vrt_stealing(struct vrt *rt)
{
	return atomic_load_explicit(&rt->t_stealing, memory_order_relaxed); /* relaxed: tunable */
}

unsigned vrt_spread_width(struct vrt *rt)
{
	if (!gather_measured(rt))
		return rt->nworkers;
	/* relaxed: the monitor's verdict. */
	return atomic_load_explicit(&rt->spread_width, memory_order_relaxed);
}

/* ------------------------------------------------------------------ stats */

static uint64_t rd(_Atomic uint64_t *c)
{
	/* relaxed: single-writer counters; snapshots need not be consistent. */
	return atomic_load_explicit(c, memory_order_relaxed);
}

#define ROW(...) VB_METRIC_ROW(struct vrt_worker_stats, __VA_ARGS__)
const struct vb_metric vrt_worker_metrics[] = { VRT_WORKER_METRICS(ROW) };
const size_t vrt_worker_metrics_n = VB_ARRAY_SIZE(vrt_worker_metrics);
#undef ROW
#define ROW(...) VB_METRIC_ROW(struct vrt_stats, __VA_ARGS__)
const struct vb_metric vrt_metrics[] = { VRT_METRICS(ROW) };
const size_t vrt_metrics_n = VB_ARRAY_SIZE(vrt_metrics);
#undef ROW

/* The measurements of monitor.c for one worker's snapshot. */
static void measure_worker(struct vrt *rt, unsigned i, struct vrt_worker_stats *o)
{
	struct vrt_worker *w = rt->workers[i];
	/* relaxed (all): single-writer hints and statistics. */
	const struct vrt_task_vtable *vt = atomic_load_explicit(&w->c.cur_vt, memory_order_relaxed);

	if (atomic_load_explicit(&w->c.parked, memory_order_relaxed))
		o->state = VRT_WS_PARKED;
	else
		o->state = vt ? VRT_WS_RUNNING : VRT_WS_SEARCHING;
	o->cpu_ns = vrt__worker_cpu_ns(rt, w);
	o->poll_age_ns = o->stall_ns = o->stalls = 0;
	o->stall = VRT_STALL_NONE;
	if (rt->mon.w) {
		struct vrt_mon_worker *m = &rt->mon.w[i];
		int64_t since = atomic_load_explicit(&m->stall_since_ns, memory_order_relaxed);
		int64_t now = vb_now_ns();

		o->poll_age_ns = atomic_load_explicit(&m->poll_age_ns, memory_order_relaxed);
		o->stalls = rd(&m->stalls);
		if (since) {
			o->stall = atomic_load_explicit(&m->stall_kind, memory_order_relaxed);
			o->stall_ns = now > since ? (uint64_t)(now - since) : 0;
		}
	}
}

unsigned vrt_stats_snapshot(struct vrt *rt, struct vrt_stats *out,
			    struct vrt_worker_stats *per_worker, unsigned n)
{
	uint64_t local = 0, completed = 0;
	uint64_t idle = rd(&rt->idle);

	for (unsigned i = 0; i < rt->nworkers; i++) {
		struct vrt_worker *w = rt->workers[i];
		struct vrt_worker_counters *c = &w->c;

		local += rd(&c->spawned_local);
		completed += rd(&c->completed);
		if (!per_worker || i >= n)
			continue;
		struct vrt_worker_stats *o = &per_worker[i];
#define COPY(field, kind, ...) VB_METRIC_IF_SLOT(kind, o->field = rd(&c->field);)
		VRT_WORKER_METRICS(COPY)
#undef COPY
		o->tasks_stolen_from = rd(&w->q.stolen_from);
		o->local_queue_depth = vrt__wsq_len(&w->q) + vrt__wsq_len(&w->cq);
		/* cont_cur and resume are owner-only pointers: not read here. */
		measure_worker(rt, i, o);
	}
	if (out) {
		uint64_t spawned = local + rd(&rt->spawned_remote);
		uint64_t done = completed + rd(&rt->force_completed);

		out->workers = rt->nworkers;
		out->injection_depth = vrt__inject_len(&rt->inject);
		out->searching = vrt__idle_searching(idle);
		out->parked = vrt__idle_parked(idle);
		out->spawned_local = local;
		out->spawned_remote = rd(&rt->spawned_remote);
		/* Counters are read one by one: clamp a transient negative. */
		out->tasks_alive = spawned > done ? spawned - done : 0;
		struct vrt_health h;
		vrt_health(rt, &h);
		out->stalled = h.stalled;
		out->stalls = h.stalls_total;
		/* Work spreads freely while nothing gathers it. relaxed: the
		 * monitor's verdict. */
		out->spreading = !gather_measured(rt) || atomic_load_explicit(&rt->spreading, memory_order_relaxed);
		out->spread_width = vrt_spread_width(rt);
		out->spreads = rd(&rt->spreads);

	}
	return rt->nworkers;
}
