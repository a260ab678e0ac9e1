/* SPDX-License-Identifier: MIT */
/*
 * voltd/life.c: see life.h. One loop on the main thread: poll(2) on the
 * signalfd, a periodic timerfd (the tick: stall check, watchdog, STATUS,
 * malloc's trim) and the agent-check socket. Nothing here runs on a worker.
 *
 * Ordering
 * l->drained, l->drained_since, l->stopping: written by
 * vd_life_drain/undrain (the control thread) and by the main thread; relaxed: they are status bits
 * read by the main thread's next tick or stop, and the server's own
 * readiness bit (vsrv_set_ready) is what requests see. l->mu makes each
 * transition (drain, undrain, stop) whole, so that an undrain cannot slip
 * between stop's check and its drain.
 */
#include "config.h"
#include "voltd/life.h"
#include "base/log.h"
#include "base/time.h"
#include "rt/rt.h"
#include "server/server.h"
#include "voltd/notify.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define TICK_MS 1000        /* the longest tick (an idle daemon wakes this often) */
#define STATUS_MS 2000      /* STATUS= refresh */
#define EXTEND_USEC 5000000 /* EXTEND_TIMEOUT_USEC while a drain progresses */

static int64_t mono_ns(void)
{
	return vb_now_ns();
}

int vd_life_init(struct vd_life *l)
{
	struct itimerspec its = { 0 };
	int64_t tick = TICK_MS * VB_NS_PER_MS;

	/* /livez turns 503 at most a quarter of stall_fail_ms late. */
	if (l->stall_fail_ms && (int64_t)l->stall_fail_ms * VB_NS_PER_MS / 4 < tick)
		tick = (int64_t)l->stall_fail_ms * VB_NS_PER_MS / 4;
	l->wd_usec = vd_watchdog_usec();
	if (l->wd_usec) {
		/* Ping at half the interval; tick at least twice as often. */
		int64_t quarter = (int64_t)l->wd_usec * 1000 / 4;
		if (quarter < tick)
			tick = quarter > VB_NS_PER_MS ? quarter : VB_NS_PER_MS;
		vb_notice("systemd watchdog: %" PRIu64 " ms, pinging every %" PRIu64 " ms while no worker is stalled",
			  l->wd_usec / 1000, l->wd_usec / 2000);
	}
	l->tick_ns = tick;
	l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (l->tfd < 0)
		return -errno;
	its.it_value.tv_sec = its.it_interval.tv_sec = tick / 1000000000;
	its.it_value.tv_nsec = its.it_interval.tv_nsec = tick % 1000000000;
	if (timerfd_settime(l->tfd, 0, &its, NULL) < 0) {
		int rc = -errno;
		close(l->tfd);
		l->tfd = -1;
		return rc;
	}
	pthread_mutex_init(&l->mu, NULL);
	atomic_init(&l->drained, false);
	atomic_init(&l->stopping, false);
	atomic_init(&l->drained_since, 0);
	return 0;
}

void vd_life_fini(struct vd_life *l)
{
	if (l->tfd >= 0) {
		close(l->tfd);
		pthread_mutex_destroy(&l->mu);
	}
	l->tfd = -1;
	if (l->agent_fd >= 0)
		close(l->agent_fd);
	l->agent_fd = -1;
}

/* ------------------------------------------------------------ health */

/* Is any worker stalled past stall_fail_ms (the runtime's stall monitor,
 * control.stall_warn_ms)? Updates /livez. */
static void set_stalled(struct vd_life *l, bool stalled, unsigned worker, uint64_t ms)
{
	if (stalled == l->stalled)
		return;
	if (stalled) {
		/* What the worker runs: a job kind names itself with its
		 * module and version (the poll's label). */
		const char *task = NULL, *label = NULL;

		vrt_worker_task(l->rt, worker, &task, &label);
		vb_err("worker %u stalled for %" PRIu64 " ms in task %s%s%s%s (control.stall_fail_ms = %u): /livez fails%s",
		       worker, ms, task ? task : "?", label ? " (" : "", label ? label : "", label ? ")" : "",
		       l->stall_fail_ms, l->wd_usec ? ", watchdog pings stop" : "");
	} else
		vb_notice("no worker stalled any more: /livez passes again");
	l->stalled = stalled;
	vsrv_set_alive(l->srv, !stalled);
}

static void check_health(struct vd_life *l)
{
	struct vrt_health h;

	vrt_health(l->rt, &h);
	set_stalled(l, h.stalled && h.max_stall_ms >= l->stall_fail_ms, h.max_stall_worker,
		    h.max_stall_ms);
}

static void watchdog(struct vd_life *l, int64_t now)
{
	if (!l->wd_usec)
		return;
	if (l->stalled) {
		if (!l->wd_tripped) {
			vd_notify("WATCHDOG=trigger");
			l->wd_tripped = true;
		}
		return;
	}
	l->wd_tripped = false;
	if (now < l->wd_next)
		return;
	vd_notify("WATCHDOG=1");
	/* Half a tick early: the tick that falls due just before the exact
	 * time pings, rather than the next one, half a tick late. */
	l->wd_next = now + (int64_t)l->wd_usec * 1000 / 2 - l->tick_ns / 2;
}

/* ------------------------------------------------------------ status */

static const char *state_text(struct vd_life *l)
{
	if (atomic_load_explicit(&l->stopping, memory_order_relaxed))
		return "stopping";
	if (l->stalled)
		return "stalled";
	return vsrv_ready(l->srv) ? "ready" : "drained (not ready)";
}

static void status(struct vd_life *l, int64_t now, bool force)
{
	struct vsrv_stats *s;
	double secs, rate = 0;
	char note[320];

	if (!force && now < l->status_next)
		return;
	if (!vd_notify_enabled())
		return; /* no service manager to tell: skip the snapshot */
	l->status_next = now + STATUS_MS * VB_NS_PER_MS - l->tick_ns / 2;
	s = vsrv_stats_new(l->srv);
	if (!s)
		return;
	vsrv_stats_snapshot(l->srv, s);
	secs = (double)(now - l->status_t) / 1e9;
	if (l->status_t && secs > 0)
		rate = (double)(s->requests - l->status_requests) / secs;
	l->status_t = now;
	l->status_requests = s->requests;
	note[0] = '\0';
	if (l->status_note_fn)
		l->status_note_fn(l->status_note_ctx, note, sizeof(note));
	vd_notifyf("STATUS=%s: %u workers (%s), %.0f req/s, %" PRIu64 " connections, %" PRIu64 " requests%s%s",
		   state_text(l), l->workers, l->backend, rate, s->conns_open, s->requests, *note ? "; " : "",
		   note);
	free(s);
}

static void tick(struct vd_life *l)
{
	int64_t now = mono_ns();

	check_health(l);
	watchdog(l, now);
	status(l, now, false);
	vsrv_spread(l->srv);
	vd_mem_trim(&l->trim, l->srv, now);
}

/* ------------------------------------------------------------- agent */

/* HAProxy agent-check: one line per connection, then close. */
static void agent_answer(struct vd_life *l)
{
	for (int i = 0; i < 16; i++) {
		int fd = accept4(l->agent_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		const char *msg;

		if (fd < 0)
			return;
		msg = vsrv_ready(l->srv) ? "up ready\n" : "drain\n";
		if (send(fd, msg, strlen(msg), MSG_NOSIGNAL) < 0)
			vb_debug("agent-check: send: %s", strerror(errno));
		close(fd);
	}
}

/* ------------------------------------------------------------- loop */

/* One wait of at most timeout_ms (-1: forever). Returns a stopping signal,
 * or 0. */
static int wait_once(struct vd_life *l, int timeout_ms)
{
	struct pollfd pf[3] = {
		{ .fd = l->sfd, .events = POLLIN },
		{ .fd = l->tfd, .events = POLLIN },
		{ .fd = l->agent_fd, .events = POLLIN },
	};
	int n = poll(pf, l->agent_fd >= 0 ? 3 : 2, timeout_ms);

	if (n < 0) {
		if (errno != EINTR)
			vb_err("poll: %s", strerror(errno));
		return 0;
	}
	if (pf[1].revents & POLLIN) {
		uint64_t exp;
		if (read(l->tfd, &exp, sizeof(exp)) < 0 && errno != EAGAIN)
			vb_err("timerfd: %s", strerror(errno));
		tick(l);
	}
	if (l->agent_fd >= 0 && (pf[2].revents & POLLIN))
		agent_answer(l);
	if (pf[0].revents & POLLIN) {
		struct signalfd_siginfo si;
		ssize_t r = read(l->sfd, &si, sizeof(si));

		if (r != (ssize_t)sizeof(si)) {
			if (r < 0 && (errno == EINTR || errno == EAGAIN))
				return 0;
			vb_err("signalfd read failed: %s", r < 0 ? strerror(errno) : "short read");
			return SIGTERM;
		}
		if (si.ssi_signo == SIGUSR1 || si.ssi_signo == SIGUSR2) {
			vb_notice("%s from pid %u ignored: voltd gives it no meaning (SIGTERM stops with a "
				  "drain, SIGHUP reloads)", strsignal((int)si.ssi_signo), si.ssi_pid);
			return 0;
		}
		if (si.ssi_signo != SIGHUP)
			return (int)si.ssi_signo;
		if (atomic_load_explicit(&l->stopping, memory_order_relaxed))
			return 0; /* no reload while stopping */
		{
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			/* MONOTONIC_USEC: what Type=notify-reload (systemd 253+)
			 * wants with RELOADING=1; older managers ignore it. */
			vd_notifyf("RELOADING=1\nMONOTONIC_USEC=%" PRIu64 "\nSTATUS=reloading",
				   (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u);
		}
		if (l->reload_fn)
			l->reload_fn(l->reload_ctx);
		vd_notify("READY=1");
		status(l, mono_ns(), true);
	}
	return 0;
}

int vd_life_run(struct vd_life *l)
{
	int sig;

	l->wd_next = 0;
	check_health(l);
	vd_notify("READY=1");
	watchdog(l, mono_ns());
	status(l, mono_ns(), true);
	while ((sig = wait_once(l, -1)) == 0)
		;
	return sig;
}

/* ------------------------------------------------------------- drain */

static void drain_locked(struct vd_life *l)
{
	int64_t zero = 0;

	vsrv_set_ready(l->srv, false);
	/* Relaxed: see the Ordering block. */
	atomic_store_explicit(&l->drained, true, memory_order_relaxed);
	atomic_compare_exchange_strong_explicit(&l->drained_since, &zero, mono_ns(),
						memory_order_relaxed, memory_order_relaxed);
}

int vd_life_drain(struct vd_life *l)
{
	pthread_mutex_lock(&l->mu);
	drain_locked(l);
	pthread_mutex_unlock(&l->mu);
	return 0;
}

int vd_life_undrain(struct vd_life *l)
{
	/* Relaxed: see the Ordering block; once vsrv_stop has begun the
	 * server stays not ready whatever the bit says. */
	int rc = -EBUSY;

	pthread_mutex_lock(&l->mu);
	if (!atomic_load_explicit(&l->stopping, memory_order_relaxed)) {
		atomic_store_explicit(&l->drained, false, memory_order_relaxed);
		atomic_store_explicit(&l->drained_since, 0, memory_order_relaxed);
		vsrv_set_ready(l->srv, true);
		rc = 0;
	}
	pthread_mutex_unlock(&l->mu);
	return rc;
}

void vd_life_drain_tick(void *ctx)
{
	struct vd_life *l = ctx;
	struct vsrv_stats *s = vsrv_stats_new(l->srv);

	tick(l);
	if (l->agent_fd >= 0)
		agent_answer(l);
	if (!s)
		return;
	vsrv_stats_snapshot(l->srv, s);
	/* Progress: a connection ended, a response went out, bytes came in. */
	if (s->conns_open < l->drain_conns || s->bytes_in > l->drain_bytes ||
	    s->responses[2] + s->responses[3] + s->responses[4] + s->responses[5] > l->drain_responses) {
		vd_notifyf("EXTEND_TIMEOUT_USEC=%u\nSTATUS=stopping: %" PRIu64 " connection(s) left",
			   EXTEND_USEC, s->conns_open);
	}
	l->drain_conns = s->conns_open;
	l->drain_bytes = s->bytes_in;
	l->drain_responses = s->responses[2] + s->responses[3] + s->responses[4] + s->responses[5];
	free(s);
}

int vd_life_stop(struct vd_life *l)
{
	int64_t delay = (int64_t)l->shutdown_delay_ms * VB_NS_PER_MS;
	int64_t since, now = mono_ns(), until;

	/* Relaxed: see the Ordering block (l->mu orders the transition). */
	pthread_mutex_lock(&l->mu);
	since = atomic_load_explicit(&l->drained_since, memory_order_relaxed);
	atomic_store_explicit(&l->stopping, true, memory_order_relaxed);
	drain_locked(l);
	pthread_mutex_unlock(&l->mu);
	/* Time already spent drained (voltctl drain) counts. */
	until = (since ? since : now) + delay;
	if (until > now) {
		vd_notifyf("STOPPING=1\nEXTEND_TIMEOUT_USEC=%" PRIu64 "\nSTATUS=stopping: not ready for %u ms",
			   (uint64_t)(until - now) / 1000 + EXTEND_USEC, l->shutdown_delay_ms);
		vb_notice("drain: not ready, serving for %lld ms more before closing the listeners",
			  (long long)((until - now) / VB_NS_PER_MS));
		while ((now = mono_ns()) < until) {
			int ms = (int)((until - now + VB_NS_PER_MS - 1) / VB_NS_PER_MS);
			if (wait_once(l, ms) != 0) {
				vb_notice("drain: second signal, closing the listeners now");
				break;
			}
		}
	} else {
		vd_notify("STOPPING=1\nSTATUS=stopping");
	}
	l->drain_conns = UINT64_MAX;
	return vsrv_stop(l->srv);
}
