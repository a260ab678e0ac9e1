/* SPDX-License-Identifier: MIT */
/*
 * server/server.c: the server object: configuration, channels, listeners,
 * the accept tasks (one per listener per worker queue, made here; their
 * loop and their pause at max_connections are accept.c), the connection
 * registry used by the drain, the live keys, start, stop and free. The
 * statistics are stats.c.
 *
 * Threading: vsrv_new/start/stop/free run on the control thread.
 *
 * Ordering
 * Shared: srv->draining (vsrv_stop sets it; every task reads it), the
 * registry (under reg_mu), srv->conns_open and srv->paused_n (written by
 * accept.c under [A1]/[A2]; read here relaxed: the drain polls the count
 * for zero; stats.c's snapshot reports them).
 * srv->unready, srv->alive: status bits the daemon sets from any thread;
 * relaxed everywhere (a request that reads a stale value answers /readyz,
 * /livez or "Connection: close" as of a moment earlier).
 * srv->draining: relaxed everywhere. vsrv_stop stores it, then wakes every
 * connection through the registry (a mutex, then vrt_task_wake, which
 * orders the store before the woken poll); tasks that read a stale value
 * merely finish one more step before they notice.
 * srv->live (timeouts, Retry-After, job limits): the daemon stores them from any thread
 * (vsrv_set_live), connections load them when they compute a deadline or a
 * 503; relaxed both ways: each value stands alone, and a connection that
 * reads the old one computes one deadline as of a moment earlier.
 * srv->conns_alive: relaxed counter; vsrv_stop only polls it for zero and
 * the tasks' memory is already released when it drops.
 */
#include "config.h"
#include "server/internal.h"
#include "base/time.h"

#include <errno.h>
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int vsrv_config_check(const struct vsrv_config *c)
{
	if ((c->n_listen == 0 && c->n_fds == 0) || c->n_listen > VSRV_MAX_LISTEN ||
	    c->n_fds > VSRV_MAX_LISTEN)
		return -EINVAL;
	if (c->max_connections == 0 || c->max_pipeline == 0 || c->max_pipeline > VSRV_MAX_PIPELINE)
		return -EINVAL;
	if (c->header_timeout_ms == 0 || c->body_timeout_ms == 0 || c->idle_timeout_ms == 0 ||
	    c->send_timeout_ms == 0)
		return -EINVAL;
	if (c->max_header_bytes == 0 || c->exec_tasks == 0 || c->write_tasks == 0)
		return -EINVAL;
	if (c->jobs_capacity == 0 || c->replies_capacity == 0 || c->slice_us == 0)
		return -EINVAL;
	if (c->on_full > VSRV_ON_FULL_CODEL || c->codel_target_ms == 0 || c->codel_interval_ms == 0)
		return -EINVAL;
	if (c->quarantine_window_ms == 0 || c->blocking_threads > VSRV_BLOCKING_THREADS_MAX)
		return -EINVAL;
	return 0;
}

/* ------------------------------------------------------------ registry */

void vsrv__reg_add(struct vsrv *srv, struct vsrv_conn *c)
{
	VB_LINE_WRITE(srv_registry);
	pthread_mutex_lock(&srv->reg_mu);
	c->reg_prev = NULL;
	c->reg_next = srv->reg_head;
	if (srv->reg_head)
		srv->reg_head->reg_prev = c;
	srv->reg_head = c;
	srv->reg_n++;
	c->registered = true;
	pthread_mutex_unlock(&srv->reg_mu);
}

void vsrv__reg_del(struct vsrv *srv, struct vsrv_conn *c)
{
	VB_LINE_WRITE(srv_registry);
	pthread_mutex_lock(&srv->reg_mu);
	if (c->registered) {
		if (c->reg_prev)
			c->reg_prev->reg_next = c->reg_next;
		else
			srv->reg_head = c->reg_next;
		if (c->reg_next)
			c->reg_next->reg_prev = c->reg_prev;
		c->registered = false;
		srv->reg_n--;
	}
	pthread_mutex_unlock(&srv->reg_mu);
}

/*
 * Wake (or cancel) every registered connection. A connection leaves the
 * registry in its poll before it completes, so while we hold reg_mu each
 * one is still alive; we take a reference there and wake outside the lock.
 */
static void reg_kick(struct vsrv *srv, bool cancel)
{
	struct vsrv_conn **v = NULL;
	size_t n = 0;

	VB_LINE_WRITE(srv_registry);
	pthread_mutex_lock(&srv->reg_mu);
	if (srv->reg_n)
		v = malloc(srv->reg_n * sizeof(*v));
	if (v) {
		for (struct vsrv_conn *c = srv->reg_head; c; c = c->reg_next) {
			vrt_task_ref(&c->task);
			v[n++] = c;
		}
	}
	pthread_mutex_unlock(&srv->reg_mu);
	if (!v && srv->reg_n) {
		/* No memory for the list: wake under the lock instead (wake
		 * takes no lock of ours and calls nothing back). */
		VB_LINE_WRITE(srv_registry);
		pthread_mutex_lock(&srv->reg_mu);
		for (struct vsrv_conn *c = srv->reg_head; c; c = c->reg_next) {
			if (cancel)
				vrt_task_cancel(&c->task);
			else
				vrt_task_wake(&c->task);
		}
		pthread_mutex_unlock(&srv->reg_mu);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (cancel)
			vrt_task_cancel(&v[i]->task);
		else
			vrt_task_wake(&v[i]->task);
		vrt_task_unref(&v[i]->task);
	}
	free(v);
}

/* ------------------------------------------------------- life and death */

static int make_listeners(struct vsrv *srv)
{
	const struct vsrv_config *cfg = &srv->cfg;
	int rc;

	if (cfg->n_fds) {
		/* Socket activation: each inherited socket is one listener that
		 * every worker accepts from (no SO_REUSEPORT siblings: the
		 * socket may belong to another uid). */
		for (unsigned i = 0; i < cfg->n_fds && i < VSRV_MAX_LISTEN; i++) {
			rc = vio_listener_adopt(srv->io, &cfg->fds[i], 1, &srv->listeners[i]);
			if (rc < 0)
				return rc;
			srv->n_listeners++;
		}
		return 0;
	}
	for (unsigned i = 0; i < cfg->n_listen; i++) {
		rc = vio_listener_new(srv->io, (const struct sockaddr *)&cfg->listen[i].addr,
				      cfg->listen[i].len, (int)cfg->backlog, &srv->listeners[i]);
		if (rc < 0)
			return rc;
		srv->n_listeners++;
	}
	vsrv_spread(srv); /* before the first connection can come */
	return 0;
}

void vsrv_spread(struct vsrv *srv)
{
	unsigned width;

	pthread_mutex_lock(&srv->spread_mu);
	if (srv->spread_off) {
		pthread_mutex_unlock(&srv->spread_mu);
		return;
	}
	width = vrt_spread_width(srv->rt);
	for (unsigned i = 0; i < srv->n_listeners; i++) {
		int rc = vio_listener_spread(srv->listeners[i], width);

		if (rc < 0 && !srv->spread_failed) {
			/* Then the kernel spreads them over every worker, as it
			 * did before; said once. */
			srv->spread_failed = true;
			vb_warn("server: new connections cannot be gathered on %u of %u workers: %s",
				width, vio_listener_count(srv->listeners[i]), strerror(-rc));
		}
	}
	pthread_mutex_unlock(&srv->spread_mu);
}

static void spread_hook(void *ctx)
{
	vsrv_spread(ctx);
}

static int make_tasks(struct vsrv *srv)
{
	const struct vsrv_config *cfg = &srv->cfg;
	unsigned n_acc = 0;

	for (unsigned i = 0; i < srv->n_listeners; i++)
		n_acc += vio_listener_count(srv->listeners[i]);
	srv->acc = calloc(n_acc, sizeof(*srv->acc));
	srv->exec = calloc(cfg->exec_tasks, sizeof(*srv->exec));
	srv->wr = calloc(cfg->write_tasks, sizeof(*srv->wr));
	if (!srv->acc || !srv->exec || !srv->wr)
		return -ENOMEM;
	for (unsigned i = 0; i < srv->n_listeners; i++) {
		for (unsigned q = 0; q < vio_listener_count(srv->listeners[i]); q++) {
			struct vsrv_acceptor *a = calloc(1, sizeof(*a));
			if (!a)
				return -ENOMEM;
			vrt_task_init(&a->task, &vsrv__acceptor_vt);
			a->srv = srv;
			a->l = srv->listeners[i];
			a->idx = q;
			atomic_init(&a->paused, false);
			srv->acc[srv->n_acc++] = a;
		}
	}
	for (unsigned i = 0; i < cfg->exec_tasks; i++) {
		struct vsrv_exec *x = vsrv__exec_new(srv, -1);
		if (!x)
			return -ENOMEM;
		srv->exec[i] = x;
	}
	if (vsrv__lane_init(srv) < 0)
		return -ENOMEM;
	for (unsigned i = 0; i < cfg->write_tasks; i++) {
		struct vsrv_writer *w = calloc(1, sizeof(*w));
		if (!w)
			return -ENOMEM;
		vrt_task_init(&w->task, &vsrv__writer_vt);
		srv->wr[i] = w;
		w->srv = srv;
		vch_waiter_init(&w->replies_waiter);
	}
	return 0;
}

int vsrv_new(const struct vsrv_config *cfg, struct vrt *rt, struct vio *io, struct vsrv **out)
{
	struct vrt_stats rst;
	struct vsrv *srv;
	int rc;

	*out = NULL;
	rc = vsrv_config_check(cfg);
	if (rc < 0)
		return rc;
	srv = aligned_alloc(VB_CACHELINE, (sizeof(*srv) + VB_CACHELINE - 1) / VB_CACHELINE * VB_CACHELINE);
	if (!srv)
		return -ENOMEM;
	memset(srv, 0, sizeof(*srv));
	srv->cfg = *cfg;
	vsrv_set_live(srv, cfg);
	srv->rt = rt;
	srv->io = io;
	pthread_mutex_init(&srv->reg_mu, NULL);
	pthread_mutex_init(&srv->trace_mu, NULL);
	pthread_mutex_init(&srv->spread_mu, NULL);
	vsrv__mem_init(srv);
	atomic_init(&srv->inflight, 0);
	atomic_init(&srv->copies, 0);
	/* Received bytes io keeps on the heap for connections that do not
	 * read count against their own share of the budget, bodies against
	 * the rest (VSRV_COPY_SHARE). */
	if (cfg->max_inflight_bytes && cfg->max_inflight_bytes < INT64_MAX) {
		int64_t share = (int64_t)cfg->max_inflight_bytes / VSRV_COPY_SHARE;

		srv->body_max = (int64_t)cfg->max_inflight_bytes - share;
		vio_set_heap_budget(io, &srv->copies, share);
	} else {
		srv->body_max = INT64_MAX;
		vio_set_heap_budget(io, &srv->copies, INT64_MAX);
	}
	atomic_init(&srv->conns_open, 0);
	atomic_init(&srv->conns_alive, 0);
	atomic_init(&srv->paused_n, 0);
	atomic_init(&srv->draining, false);
	atomic_init(&srv->unready, false);
	atomic_init(&srv->alive, true);

	vhttp_limits_default(&srv->limits);
	srv->limits.max_header_bytes = cfg->max_header_bytes;
	srv->limits.max_body_bytes = cfg->max_body_bytes; /* 0: no body (413) */
	srv->limits.req_alloc = vsrv__req_alloc;
	srv->limits.req_ctx = srv;
	srv->jcfg.slice_us = cfg->slice_us;

	srv->nworkers = vrt_stats_snapshot(rt, &rst, NULL, 0);
	srv->kind_other = VSRV_ROUTES + (unsigned)vjob_kind_count();
	srv->n_kinds = srv->kind_other + 1;

	rc = -ENOMEM;
	srv->ws = aligned_alloc(VB_CACHELINE, (srv->nworkers + 1) * sizeof(*srv->ws));
	if (!srv->ws)
		goto fail;
	memset(srv->ws, 0, (srv->nworkers + 1) * sizeof(*srv->ws));
	for (unsigned w = 0; w <= srv->nworkers; w++) {
		srv->ws[w].lat = malloc(srv->n_kinds * sizeof(struct vb_hist));
		if (!srv->ws[w].lat)
			goto fail;
		for (unsigned k = 0; k < srv->n_kinds; k++)
			vb_hist_init(&srv->ws[w].lat[k]);
	}

	rc = vsrv__kinds_init(srv);
	if (rc < 0)
		goto fail;
	rc = vsrv__pool_new(srv);
	if (rc < 0)
		goto fail;
	/* The capacities are the process's: split over the members. */
	rc = vch_set_new(srv->nworkers, cfg->jobs_capacity, &srv->jobs);
	if (rc < 0)
		goto fail;
	rc = vch_set_new(srv->nworkers, cfg->replies_capacity, &srv->replies);
	if (rc < 0)
		goto fail;
	srv->ready_limit = ((size_t)cfg->jobs_capacity * 9 + 9) / 10;

	rc = make_listeners(srv);
	srv->cfg.fds = NULL; /* borrowed: used by make_listeners only */
	if (rc < 0)
		goto fail;
	rc = make_tasks(srv);
	if (rc < 0)
		goto fail;
	/* The monitor moves new connections as soon as its verdict changes;
	 * the daemon's tick applies a live change of scheduler.gather. */
	vrt_set_spread_hook(rt, spread_hook, srv);
	*out = srv;
	return 0;

fail:
	for (unsigned i = 0; i < srv->n_listeners; i++)
		vio_listener_close(srv->listeners[i]);
	srv->stopped = true;
	vsrv_free(srv);
	return rc;
}

int vsrv_start(struct vsrv *srv)
{
	int rc;

	for (unsigned i = 0; i < srv->cfg.exec_tasks; i++) {
		rc = vrt_spawn(srv->rt, &srv->exec[i]->task);
		if (rc < 0)
			return rc;
		srv->exec[i]->spawned = true;
	}
	for (unsigned i = 0; i < srv->nworkers; i++) {
		rc = vrt_spawn(srv->rt, &srv->lane.runner[i]->task);
		if (rc < 0)
			return rc;
		srv->lane.runner[i]->spawned = true;
	}
	for (unsigned i = 0; i < srv->cfg.write_tasks; i++) {
		rc = vrt_spawn(srv->rt, &srv->wr[i]->task);
		if (rc < 0)
			return rc;
		srv->wr[i]->spawned = true;
	}
	rc = vsrv__pool_start(srv);
	if (rc < 0)
		return rc;
	srv->started = true;
	for (unsigned i = 0; i < srv->n_acc; i++) {
		rc = vrt_spawn(srv->rt, &srv->acc[i]->task);
		if (rc < 0)
			return rc;
		srv->acc[i]->spawned = true;
	}
	return 0;
}

unsigned vsrv_listener_count(const struct vsrv *srv)
{
	return srv->n_listeners;
}

int vsrv_port(const struct vsrv *srv, unsigned i)
{
	return i < srv->n_listeners ? vio_listener_port(srv->listeners[i]) : -EINVAL;
}

bool vsrv_draining(const struct vsrv *srv)
{
	/* Relaxed: a status bit; see the Ordering block. */
	return atomic_load_explicit(&srv->draining, memory_order_relaxed);
}

void vsrv_set_ready(struct vsrv *srv, bool ready)
{
	/* Relaxed: a status bit; see the Ordering block. */
	atomic_store_explicit(&srv->unready, !ready, memory_order_relaxed);
}

bool vsrv_ready(const struct vsrv *srv)
{
	/* Relaxed: a status bit; see the Ordering block. */
	return !atomic_load_explicit(&srv->unready, memory_order_relaxed);
}

int vsrv_set_live(struct vsrv *srv, const struct vsrv_config *cfg)
{
	if (!cfg->header_timeout_ms || !cfg->body_timeout_ms || !cfg->idle_timeout_ms || !cfg->send_timeout_ms ||
	    !cfg->codel_target_ms || !cfg->codel_interval_ms || !cfg->quarantine_window_ms)
		return -EINVAL;
	/* Relaxed: each value stands alone; see the Ordering block. */
	atomic_store_explicit(&srv->live.header_timeout_ms, cfg->header_timeout_ms, memory_order_relaxed);
	atomic_store_explicit(&srv->live.body_timeout_ms, cfg->body_timeout_ms, memory_order_relaxed);
	atomic_store_explicit(&srv->live.idle_timeout_ms, cfg->idle_timeout_ms, memory_order_relaxed);
	atomic_store_explicit(&srv->live.send_timeout_ms, cfg->send_timeout_ms, memory_order_relaxed);
	atomic_store_explicit(&srv->live.retry_after_s, cfg->retry_after_s, memory_order_relaxed);
	atomic_store_explicit(&srv->live.access_log, cfg->access_log, memory_order_relaxed);
	atomic_store_explicit(&srv->live.heavy_lane, cfg->heavy_lane, memory_order_relaxed);
	atomic_store_explicit(&srv->live.heavy_share, cfg->heavy_share, memory_order_relaxed);
	atomic_store_explicit(&srv->live.heavy_wait_ms, cfg->heavy_wait_ms, memory_order_relaxed);
	atomic_store_explicit(&srv->live.heavy_spread_us, cfg->heavy_spread_us, memory_order_relaxed);
	atomic_store_explicit(&srv->live.codel_target_ms, cfg->codel_target_ms, memory_order_relaxed);
	atomic_store_explicit(&srv->live.codel_interval_ms, cfg->codel_interval_ms, memory_order_relaxed);
	atomic_store_explicit(&srv->live.overrun_factor, cfg->overrun_factor, memory_order_relaxed);
	atomic_store_explicit(&srv->live.quarantine_overruns, cfg->quarantine_overruns, memory_order_relaxed);
	atomic_store_explicit(&srv->live.quarantine_window_ms, cfg->quarantine_window_ms, memory_order_relaxed);
	return 0;
}

void vsrv_get_live(struct vsrv *srv, struct vsrv_config *out)
{
	out->header_timeout_ms = vsrv__live(srv, header_timeout_ms);
	out->body_timeout_ms = vsrv__live(srv, body_timeout_ms);
	out->idle_timeout_ms = vsrv__live(srv, idle_timeout_ms);
	out->send_timeout_ms = vsrv__live(srv, send_timeout_ms);
	out->retry_after_s = vsrv__live(srv, retry_after_s);
	out->access_log = vsrv__live(srv, access_log);
	out->heavy_lane = vsrv__live(srv, heavy_lane);
	out->heavy_share = vsrv__live(srv, heavy_share);
	out->heavy_wait_ms = vsrv__live(srv, heavy_wait_ms);
	out->heavy_spread_us = vsrv__live(srv, heavy_spread_us);
	out->codel_target_ms = vsrv__live(srv, codel_target_ms);
	out->codel_interval_ms = vsrv__live(srv, codel_interval_ms);
	out->overrun_factor = vsrv__live(srv, overrun_factor);
	out->quarantine_overruns = vsrv__live(srv, quarantine_overruns);
	out->quarantine_window_ms = vsrv__live(srv, quarantine_window_ms);
}

void vsrv_set_alive(struct vsrv *srv, bool alive)
{
	/* Relaxed: a status bit; see the Ordering block. */
	atomic_store_explicit(&srv->alive, alive, memory_order_relaxed);
}

#define ACC_DRAIN_MS 1000

static void nap_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)ms * 1000000L };

	nanosleep(&ts, NULL);
}

/* Wait until *ctr is 0 or `deadline` passes; true when it reached 0. The
 * daemon's drain tick runs about every 250 ms meanwhile. */
static bool wait_zero(struct vsrv *srv, _Atomic uint64_t *ctr, int64_t deadline)
{
	int64_t tick = vb_now_ns() + 250 * VB_NS_PER_MS;

	/* Relaxed: a count polled for zero (see the Ordering block). */
	while (atomic_load_explicit(ctr, memory_order_relaxed) != 0) {
		int64_t now = vb_now_ns();

		if (now >= deadline)
			return false;
		if (now >= tick && srv->cfg.drain_tick_fn) {
			srv->cfg.drain_tick_fn(srv->cfg.drain_tick_ctx);
			tick = now + 250 * VB_NS_PER_MS;
		}
		nap_ms(2);
	}
	return true;
}

static void join_spawned(struct vrt_task *t, bool spawned)
{
	if (spawned)
		vrt_task_join_wait(t);
}

int vsrv_stop(struct vsrv *srv)
{
	int64_t now = vb_now_ns();
	int rc = 0;

	if (srv->stopped)
		return 0;
	srv->stopped = true;
	/* Relaxed: see the Ordering block (the wakes below publish it). */
	atomic_store_explicit(&srv->draining, true, memory_order_relaxed);
	vrt_set_spread_hook(srv->rt, NULL, NULL);
	pthread_mutex_lock(&srv->spread_mu);
	srv->spread_off = true; /* a hook call under way ends before the close */
	pthread_mutex_unlock(&srv->spread_mu);
	for (unsigned i = 0; i < srv->n_listeners; i++)
		vio_listener_close(srv->listeners[i]);
	/* The acceptors serve the connections already accepted (queued in
	 * the I/O layer: with a shared or inherited socket the client may be
	 * waiting on them) and end at -ESHUTDOWN; one that has not ended
	 * within ACC_DRAIN_MS (paused at max_connections, say) is cancelled. */
	int64_t acc_deadline = now + ACC_DRAIN_MS * VB_NS_PER_MS;
	for (unsigned i = 0; i < srv->n_acc; i++) {
		if (!srv->acc[i]->spawned)
			continue;
		while (!vrt_task_is_complete(&srv->acc[i]->task) && vb_now_ns() < acc_deadline)
			nap_ms(1);
		vrt_task_cancel(&srv->acc[i]->task); /* paused ones too */
		vrt_task_join_wait(&srv->acc[i]->task);
	}

	/* Let every connection finish what it received, then close. */
	reg_kick(srv, false);
	if (!wait_zero(srv, &srv->conns_open, now + (int64_t)srv->cfg.drain_timeout_ms * VB_NS_PER_MS)) {
		vb_warn("drain: %" PRIu64 " connection(s) still busy after %u ms: cutting them",
			atomic_load_explicit(&srv->conns_open, memory_order_relaxed),
			srv->cfg.drain_timeout_ms);
		rc = -ETIMEDOUT;
		reg_kick(srv, true);
		if (!wait_zero(srv, &srv->conns_open, vb_now_ns() + 2000 * VB_NS_PER_MS))
			vb_err("drain: connections did not stop after being cancelled");
	}

	/* The stages: executors drain `jobs` (every job now belongs to a
	 * closed connection and is dropped), then the writers. */
	vch_set_close(srv->jobs);
	for (unsigned i = 0; i < srv->cfg.exec_tasks; i++) {
		/* One that waits only on its sleepers' timers would not see
		 * the close: wake it to drop jobs of closed connections. */
		if (srv->exec[i]->spawned)
			vrt_task_wake(&srv->exec[i]->task);
	}
	for (unsigned i = 0; i < srv->cfg.exec_tasks; i++)
		join_spawned(&srv->exec[i]->task, srv->exec[i]->spawned);
	/* No executor puts a job in the lane now: its runners finish the
	 * queue (jobs of closed connections, dropped) and end. */
	vsrv__lane_close(srv);
	for (unsigned i = 0; srv->lane.runner && i < srv->nworkers; i++)
		if (srv->lane.runner[i])
			join_spawned(&srv->lane.runner[i]->task, srv->lane.runner[i]->spawned);
	/* The blocking pool drops what its queue still holds; its threads
	 * deposit what they finish until they end. */
	vsrv__pool_stop(srv);
	vch_set_close(srv->replies);
	for (unsigned i = 0; i < srv->cfg.write_tasks; i++)
		join_spawned(&srv->wr[i]->task, srv->wr[i]->spawned);

	/* Connections whose last operation is still completing. */
	if (!wait_zero(srv, &srv->conns_alive, vb_now_ns() + 2000 * VB_NS_PER_MS))
		vb_warn("drain: %" PRIu64 " connection object(s) still referenced",
			atomic_load_explicit(&srv->conns_alive, memory_order_relaxed));
	return rc;
}

static void drain_channel(struct vsrv *srv, struct vch_set *ch)
{
	uint64_t v;

	if (!ch)
		return;
	while (vch_set_try_recv(ch, 0, &v) == VCH_OK)
		vsrv__job_free(srv, vch_ptr(v));
}

void vsrv_free(struct vsrv *srv)
{
	if (!srv)
		return;
	if (!srv->stopped)
		vsrv_stop(srv);
	/* Relaxed: see the Ordering block. */
	if (atomic_load_explicit(&srv->conns_alive, memory_order_relaxed)) {
		/* A connection's last I/O completion is still due and would
		 * touch the server: leaking it is the safe choice. */
		vb_err("server: %" PRIu64 " connection(s) still referenced at exit; not freeing",
		       atomic_load_explicit(&srv->conns_alive, memory_order_relaxed));
		return;
	}
	if (srv->pool.stuck) {
		/* A blocking pool thread still runs a step and will touch the
		 * server when it returns. */
		vb_err("server: %u blocking pool thread(s) still running at exit; not freeing", srv->pool.stuck);
		return;
	}
	vsrv__mem_fini(srv); /* every connection is gone */
	vio_set_heap_budget(srv->io, NULL, 0); /* no heap copy is left */
	for (unsigned i = 0; i < srv->n_acc; i++)
		vrt_task_unref(&srv->acc[i]->task);
	if (srv->exec)
		for (unsigned i = 0; i < srv->cfg.exec_tasks && srv->exec[i]; i++)
			vrt_task_unref(&srv->exec[i]->task);
	if (srv->wr)
		for (unsigned i = 0; i < srv->cfg.write_tasks && srv->wr[i]; i++)
			vrt_task_unref(&srv->wr[i]->task);
	free(srv->acc);
	free(srv->exec);
	free(srv->wr);
	vsrv__lane_free(srv);
	/* Jobs left behind by cancelled executors. */
	drain_channel(srv, srv->jobs);
	drain_channel(srv, srv->replies);
	if (srv->jobs)
		vch_set_free(srv->jobs);
	vsrv__pool_free(srv);
	if (srv->replies)
		vch_set_free(srv->replies);
	vsrv__kinds_free(srv);
	if (srv->ws) {
		vsrv__cache_free(srv);
		for (unsigned w = 0; w <= srv->nworkers; w++)
			free(srv->ws[w].lat);
		free(srv->ws);
	}
	pthread_mutex_destroy(&srv->reg_mu);
	pthread_mutex_destroy(&srv->trace_mu);
	pthread_mutex_destroy(&srv->spread_mu);
	free(srv->trace_log);
	free(srv);
}
