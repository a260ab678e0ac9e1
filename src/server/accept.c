/* SPDX-License-Identifier: MIT */
/*
 * server/accept.c: the acceptor tasks, one per listener queue (server.c
 * creates and spawns them): each takes accepted sockets from its queue
 * (vio_accept) and spawns a connection task per socket, and pauses while
 * max_connections are open, until a connection ends (vsrv__conn_closed).
 *
 * Threading: acceptors run on workers; vsrv__conn_closed on whichever
 * worker ends a connection.
 *
 * Ordering
 * Shared: srv->conns_open (acceptors add, ending connections subtract),
 * acceptor->paused and srv->paused_n (an acceptor sets them when it pauses;
 * an ending connection clears them and wakes it).
 * [A1] acceptor: paused = true, paused_n += 1, then load conns_open; [A2]
 *      closer: conns_open -= 1, then load paused_n. All four seq_cst: the
 *      Dekker pattern. Either the closer sees paused_n > 0 (and wakes the
 *      acceptor), or the acceptor's load sees the decrement (and goes on
 *      accepting): an acceptor never sleeps while there is room.
 */
#include "config.h"
#include "server/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void vsrv__conn_closed(struct vsrv *srv)
{
	/* [A2] seq_cst: see the Ordering block. */
	VB_LINE_WRITE(srv_conns);
	atomic_fetch_sub_explicit(&srv->conns_open, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&srv->paused_n, memory_order_seq_cst) == 0)
		return;
	for (unsigned i = 0; i < srv->n_acc; i++) {
		struct vsrv_acceptor *a = srv->acc[i];

		/* [A2] seq_cst exchange: one closer wins each paused acceptor. */
		VB_LINE_WRITE(srv_paused);
		if (atomic_exchange_explicit(&a->paused, false, memory_order_seq_cst)) {
			atomic_fetch_sub_explicit(&srv->paused_n, 1, memory_order_seq_cst);
			vrt_task_wake(&a->task); /* the server holds its handle */
		}
	}
}

/* At max_connections: pause (true) until a connection ends. */
static bool acc_must_pause(struct vsrv_acceptor *a)
{
	struct vsrv *srv = a->srv;
	uint64_t max = srv->cfg.max_connections;

	/* Relaxed peek: the decision is re-made below with [A1]. */
	if (atomic_load_explicit(&srv->conns_open, memory_order_relaxed) < max)
		return false;
	/* [A1] seq_cst: see the Ordering block. */
	VB_LINE_WRITE(srv_paused);
	atomic_store_explicit(&a->paused, true, memory_order_seq_cst);
	atomic_fetch_add_explicit(&srv->paused_n, 1, memory_order_seq_cst);
	/* [A1] the load: pairs with a closer's [A2] (conns_open -= 1, then paused_n). */
	if (atomic_load_explicit(&srv->conns_open, memory_order_seq_cst) >= max) {
		VSRV_INC(srv, accept_pauses);
		return true;
	}
	/* Room after all; un-pause unless a closer already did. [A1] */
	VB_LINE_WRITE(srv_paused);
	if (atomic_exchange_explicit(&a->paused, false, memory_order_seq_cst))
		atomic_fetch_sub_explicit(&srv->paused_n, 1, memory_order_seq_cst);
	return false;
}

static struct vb_ratelimit acc_rl = VB_RATELIMIT_INIT(5000, 5);

static void acc_serve(struct vsrv *srv, int fd)
{
	struct vsrv_conn *c;
	int rc;

	/* seq_cst like [A1]/[A2]: part of the same Dekker counter. */
	VB_LINE_WRITE(srv_conns);
	atomic_fetch_add_explicit(&srv->conns_open, 1, memory_order_seq_cst);
	VSRV_INC(srv, conns_accepted);
	rc = vsrv__conn_new(srv, fd, &c); /* closes fd on failure */
	if (rc < 0) {
		VSRV_INC(srv, conns_refused);
		vb_log_rl(&acc_rl, LOG_WARNING, "connection refused: %s", strerror(-rc));
		vsrv__conn_closed(srv);
		return;
	}
	vsrv__reg_add(srv, c);
	rc = vrt_spawn(srv->rt, &c->task);
	if (rc < 0) {
		/* The runtime is stopping: never polled, so close here. */
		vsrv__reg_del(srv, c);
		close(c->io.fd);
		VSRV_INC(srv, conns_refused);
		vsrv__conn_closed(srv);
	}
	vrt_task_unref(&c->task); /* our handle: the runtime keeps its own */
}

static enum vrt_poll acc_poll(struct vrt_task *t)
{
	struct vsrv_acceptor *a = vb_container_of(t, struct vsrv_acceptor, task);
	struct vsrv *srv = a->srv;

	for (;;) {
		enum vrt_poll p;
		int fd;

		if (vrt_task_is_cancelled(t))
			return VRT_READY;
		if (acc_must_pause(a))
			return VRT_PENDING; /* vsrv__conn_closed wakes us */
		p = vio_accept(a->l, a->idx, &fd);
		if (p != VRT_READY)
			return p;
		if (fd == -ESHUTDOWN)
			return VRT_READY;
		if (fd < 0) {
			vb_log_rl(&acc_rl, LOG_WARNING, "accept: %s", strerror(-fd));
			return VRT_YIELD;
		}
		acc_serve(srv, fd);
	}
}

static void acc_drop(struct vrt_task *t)
{
	free(vb_container_of(t, struct vsrv_acceptor, task));
}

const struct vrt_task_vtable vsrv__acceptor_vt = { .poll = acc_poll, .drop = acc_drop, .name = "accept" };
