/* SPDX-License-Identifier: MIT */
/*
 * voltd/life.h: the daemon's life between "ready" and "stopped", on the
 * main thread: a loop on the signalfd, a timerfd tick and the optional
 * agent-check port; the systemd notifications (READY, STATUS refreshed
 * every few seconds, RELOADING/READY around a reload with MONOTONIC_USEC,
 * the watchdog pings at half of WATCHDOG_USEC while no worker is stalled,
 * STOPPING, EXTEND_TIMEOUT_USEC while a drain makes progress); /livez; and
 * the drain sequence (not ready for server.shutdown_delay_ms while still
 * serving, then vsrv_stop).
 *
 * Threading: vd_life_run, vd_life_stop and vd_life_fini on the main thread;
 * vd_life_drain and vd_life_undrain from any thread (the control socket's).
 * The struct is main's; the fields marked "set by main" are filled before
 * vd_life_init and not changed after.
 */
#ifndef VOLTD_VOLTD_LIFE_H
#define VOLTD_VOLTD_LIFE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "voltd/malloc_policy.h"

struct vsrv;
struct vrt;

struct vd_life {
	/* set by main */
	struct vsrv *srv;
	struct vrt *rt;
	const char *backend;           /* "uring" / "libev" */
	unsigned workers;
	unsigned shutdown_delay_ms;
	unsigned stall_fail_ms;
	int sfd;                       /* the signalfd (main's) */
	int agent_fd;                  /* listening agent-check socket or -1 (ours) */
	void (*reload_fn)(void *ctx);  /* SIGHUP; main thread */
	void *reload_ctx;
	/* Appended to STATUS= when not empty ("last reload refused: ...");
	 * main thread; NULL: none. */
	void (*status_note_fn)(void *ctx, char *buf, size_t len);
	void *status_note_ctx;

	/* private */
	int tfd;
	int64_t tick_ns;
	uint64_t wd_usec;
	int64_t wd_next;
	bool wd_tripped;
	bool stalled;
	int64_t status_next, status_t;
	uint64_t status_requests;
	uint64_t drain_conns, drain_bytes, drain_responses;
	struct vd_trim trim;           /* malloc_trim from the tick (malloc_policy.h) */
	pthread_mutex_t mu;            /* drain / undrain / stop transitions */
	_Atomic bool stopping;         /* vd_life_stop began (read by undrain) */
	_Atomic bool drained;          /* vd_life_drain (any thread) */
	_Atomic int64_t drained_since; /* ns, 0: not drained */
};

/* Create the timer, read WATCHDOG_USEC. 0 or -errno. */
int vd_life_init(struct vd_life *l);
/* Send READY=1 with the first STATUS and serve until SIGTERM or SIGINT
 * (SIGHUP calls reload_fn between RELOADING=1 and READY=1). Returns the
 * signal that ended it. */
int vd_life_run(struct vd_life *l);
/* The drain sequence: STOPPING=1, not ready for shutdown_delay_ms (less
 * the time already spent drained) while serving, then vsrv_stop. Returns
 * vsrv_stop's result. A second SIGTERM/SIGINT during the delay ends it. */
int vd_life_stop(struct vd_life *l);
/* The server's drain tick during vsrv_stop (ctx: the struct vd_life). */
void vd_life_drain_tick(void *ctx);
/* Not ready (the drain's first step) / ready again unless stopping. Any
 * thread. 0, or -EBUSY from undrain once stopping. */
int vd_life_drain(struct vd_life *l);
int vd_life_undrain(struct vd_life *l);
void vd_life_fini(struct vd_life *l);

#endif
