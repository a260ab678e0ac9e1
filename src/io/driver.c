/* SPDX-License-Identifier: MIT */
/*
 * io/driver.c: the driver object: configuration, backend choice (io_uring
 * or libev), the runtime's park/unpark hooks, provided-buffer returns and
 * statistics.
 *
 * Threading: vio_new / vio_free on a control thread; the park hooks on the
 * worker they name (unpark: any thread); vio_stats_snapshot anywhere.
 *
 * Ordering
 * Shared: w->park_state (owner: park; any thread: unpark), w->buf_returns
 * (any worker pushes, the owner takes all).
 * [P1] park: CAS EMPTY->PARKED (acq_rel) and [P3] unpark: exchange to
 *      NOTIFIED (acq_rel) are ordered on park_state: if [P3] comes first
 *      the CAS fails and park returns at once; otherwise [P3] sees PARKED
 *      and kicks the backend (eventfd / ev_async) which ends the kernel
 *      wait. Release in [P3] / acquire in [P1]/[P2] carry the unparker's
 *      writes (queued work) to the parked worker.
 * [P2] owner leaves park: exchange to EMPTY (acq_rel), consuming a
 *      notification.
 * [B1] push of a released buffer: CAS (seq_cst); release pairs with [B2],
 *      the owner's exchange (acquire) before it hands the buffer to the
 *      kernel.
 * [B3] after a push onto an empty stack, the releaser loads park_state
 *      (seq_cst) and wakes a PARKED owner. [B4] the owner, after [P1]
 *      (seq_cst on success), peeks at the stack (seq_cst) and takes it
 *      before it sleeps. Store-buffering: with all four seq_cst, one side
 *      sees the other, so a returned buffer never waits out a sleep.
 */
#include "config.h"

#include "io/internal.h"
#include "base/lineaudit.h"
#include "base/time.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Thread_local struct vio_worker *tls_self;

struct vio_worker *vio__self(void)
{
	return tls_self;
}

static bool pow2(unsigned x)
{
	return x && !(x & (x - 1));
}

int vio_config_check(const struct vio_config *cfg, unsigned workers)
{
	if (workers < 1 || workers > VRT_MAX_WORKERS)
		return -EINVAL;
	if (cfg->backend != VIO_BACKEND_AUTO && cfg->backend != VIO_BACKEND_URING &&
	    cfg->backend != VIO_BACKEND_LIBEV)
		return -EINVAL;
	if (!pow2(cfg->ring_entries) || cfg->ring_entries < VIO_RING_ENTRIES_MIN ||
	    cfg->ring_entries > VIO_RING_ENTRIES_MAX)
		return -EINVAL;
	if (cfg->recv_buffer_size < VIO_RECV_BUFFER_SIZE_MIN || cfg->recv_buffer_size > VIO_RECV_BUFFER_SIZE_MAX)
		return -EINVAL;
	if (cfg->recv_buffers != 0 && (!pow2(cfg->recv_buffers) || cfg->recv_buffers < VIO_RECV_BUFFERS_MIN ||
				       cfg->recv_buffers > VIO_RECV_BUFFERS_MAX))
		return -EINVAL;
	if (cfg->accept_pause_ms < 1 || cfg->accept_pause_ms > VIO_ACCEPT_PAUSE_MS_MAX)
		return -EINVAL;
	return 0;
}

/* ------------------------------------------------------------ park hooks */

/* Timers, mailbox, returned buffers, listeners: everything but the kernel. */
static void service(struct vio_worker *w)
{
	int64_t now;

	vio__mbox_run(w);
	vio__buf_take_returns(w);
	now = vb_now_ns();
	vio__theap_run(&w->heap, now);
	if (w->nlsocks)
		w->lsock_resume = vio__lsock_service(w, now);
}

static int po_worker_start(void *ctx, unsigned id)
{
	struct vio *io = ctx;
	struct vio_worker *w;
	int r;

	if (id >= io->nworkers)
		return -EINVAL;
	w = &io->w[id];
	r = io->be->worker_start(w);
	if (r < 0)
		return r;
	tls_self = w;
	w->started = true;
	service(w); /* listeners posted before the worker started */
	io->be->poll(w);
	return 0;
}

static void po_worker_stop(void *ctx, unsigned id)
{
	struct vio *io = ctx;
	struct vio_worker *w = &io->w[id];

	service(w);
	io->be->worker_stop(w);
	w->started = false;
	tls_self = NULL;
}

/* Test hook (internal.h): parks ignore the runtime's timeout. */
bool vio__test_park_unbounded;

bool vio__test_completions_pending(void)
{
	struct vio_worker *w = vio__self();

	return !w || w->io->be != &vio__uring_ops || vio__uring_test_pending(w);
}

static void po_park(void *ctx, unsigned id, int64_t timeout_ns)
{
	struct vio *io = ctx;
	struct vio_worker *w = &io->w[id];
	uint32_t expected = VIO_PK_EMPTY;
	int64_t now, limit, until;

	VIO_STAT_INC(w, parks);
	/* No service() here: it may wake tasks, and we are about to sleep.
	 * The runtime ran the poll hook just before; a timer that fell due
	 * since makes the wait below zero-length. */
	/* [P1] seq_cst (acq_rel, and [B3]/[B4]'s store): see the Ordering
	 * block; acquire on failure pairs with [P3]. */
	if (!atomic_compare_exchange_strong_explicit(&w->park_state, &expected, VIO_PK_PARKED,
						     memory_order_seq_cst, memory_order_acquire)) {
		/* [P2] acq_rel: consume the notification. */
		atomic_exchange_explicit(&w->park_state, VIO_PK_EMPTY, memory_order_acq_rel);
		io->be->poll(w);
		service(w);
		return;
	}
	/* [B4]: buffers returned before we were seen PARKED go back to the
	 * ring now; later ones wake us ([B3]). */
	vio__buf_take_returns(w);
	now = vb_now_ns();
	if (vio__test_park_unbounded)
		timeout_ns = -1;
	limit = timeout_ns < 0 ? INT64_MAX : now + timeout_ns;
	/* The poll hook reaped after its service pass: an accept that ended
	 * there (one-shot, EMFILE, a throttle's cancel) left its listener
	 * unarmed with no resume time yet. Re-arm or time it now, or the
	 * sleep below has no bound for it (arming wakes no task). */
	if (w->nlsocks) {
		w->lsock_resume = vio__lsock_service(w, now);
		if (w->lsock_resume < limit)
			limit = w->lsock_resume;
	}
	until = vio__theap_next(&w->heap, true, limit);
	if (until > limit)
		until = limit;
	io->be->wait(w, until == INT64_MAX ? -1 : (until > now ? until - now : 0));
	vio__theap_next(&w->heap, false, 0);
	/* [P2] acq_rel: leave PARKED, consuming a notification if any. */
	atomic_exchange_explicit(&w->park_state, VIO_PK_EMPTY, memory_order_acq_rel);
	service(w);
	io->be->poll(w);
}

void vio__notify(struct vio_worker *w)
{
	/* [P3] acq_rel: pairs with [P1]/[P2]. */
	if (atomic_exchange_explicit(&w->park_state, VIO_PK_NOTIFIED, memory_order_acq_rel) ==
	    VIO_PK_PARKED)
		w->io->be->kick(w);
}

static void po_unpark(void *ctx, unsigned id)
{
	struct vio *io = ctx;

	if (id < io->nworkers)
		vio__notify(&io->w[id]);
}

static void po_poll(void *ctx, unsigned id)
{
	struct vio *io = ctx;
	struct vio_worker *w = &io->w[id];

	service(w);
	io->be->poll(w);
}

static void po_poll_park(void *ctx, unsigned id)
{
	struct vio *io = ctx;
	struct vio_worker *w = &io->w[id];

	service(w);
	(io->be->poll_park ? io->be->poll_park : io->be->poll)(w);
}

static void po_flush(void *ctx, unsigned id)
{
	struct vio *io = ctx;

	if (io->be->flush)
		io->be->flush(&io->w[id]);
}

static const struct vrt_park_ops park_ops = {
	.worker_start = po_worker_start,
	.worker_stop = po_worker_stop,
	.park = po_park,
	.unpark = po_unpark,
	.poll = po_poll,
	.flush = po_flush,
	.poll_park = po_poll_park,
};

void vio_park_ops(struct vio *io, const struct vrt_park_ops **ops, void **ctx)
{
	*ops = &park_ops;
	*ctx = io;
}

/* ------------------------------------------------------ provided buffers */

void vio__buf_release(struct vio_worker *self, struct vio_buf *b)
{
	struct vio_worker *w = b->w;
	struct vio_buf *head;

	if (!w) { /* a heap copy (rx_push under squeeze) */
		/* Relaxed: a budget count; the bytes are ours until free. */
		atomic_fetch_sub_explicit(b->charged, (int64_t)b->len, memory_order_relaxed);
		free(b);
		return;
	}
	if (w == self) {
		w->io->be->buf_recycle(w, b);
		return;
	}
	head = atomic_load_explicit(&w->buf_returns, memory_order_relaxed);
	do {
		b->next = head;
		VB_LINE_WRITE(io_bufret);
		/* [B1] seq_cst: release pairs with [B2] (we are done with the
		 * bytes); seq_cst for [B3]. */
	} while (!atomic_compare_exchange_weak_explicit(&w->buf_returns, &head, b,
							memory_order_seq_cst,
							memory_order_relaxed));
	/* The first return to a sleeping owner wakes it: its ring needs the
	 * buffer while it sleeps (its multishot receives stay armed).
	 * [B3] seq_cst load: pairs with the owner's [P1] then [B4] (store
	 * buffering): its take before it sleeps sees our push, or we see it
	 * parked. */
	if (!head && atomic_load_explicit(&w->park_state, memory_order_seq_cst) == VIO_PK_PARKED)
		vio__notify(w);
}

void vio__buf_take_returns(struct vio_worker *w)
{
	struct vio_buf *b, *next;

	/* [B4] seq_cst peek (the park's half of [B3]); otherwise empty is
	 * common and a later push is seen next time. */
	if (!atomic_load_explicit(&w->buf_returns, memory_order_seq_cst))
		return;
	/* [B2] acquire: pairs with [B1]. */
	b = atomic_exchange_explicit(&w->buf_returns, NULL, memory_order_acquire);
	for (; b; b = next) {
		next = b->next;
		w->io->be->buf_recycle(w, b);
	}
}

/* ------------------------------------------------------------ lifecycle */

static const char *backend_label(enum vio_backend b)
{
	return b == VIO_BACKEND_URING ? "uring" : b == VIO_BACKEND_LIBEV ? "libev" : "auto";
}

int vio_new(const struct vio_config *cfg, unsigned workers, struct vio **out)
{
	struct vio *io;
	char why[sizeof(io->reason)];
	unsigned i;
	int r;

	*out = NULL;
	r = vio_config_check(cfg, workers);
	if (r < 0)
		return r;
	io = calloc(1, sizeof(*io));
	if (!io)
		return -ENOMEM;
	io->cfg = *cfg;
	io->nworkers = workers;
	pthread_mutex_init(&io->mu, NULL);
	atomic_init(&io->ms_recv_broken, false);
	atomic_init(&io->heap_own, 0);
	io->heap_used = &io->heap_own;
	io->heap_max = INT64_MAX;
	atomic_init(&io->ms_accept_broken, !cfg->accept_multishot);
	/* A connection may hold an eighth of its worker's buffers (at
	 * least 2) before its multishot receive stops until it reads. */
	io->rx_throttle = cfg->recv_buffers / 8 > 2 ? cfg->recv_buffers / 8 : 2;
	io->rx_squeeze = cfg->recv_buffers / 2;

	if (cfg->backend == VIO_BACKEND_LIBEV) {
		io->be = &vio__ev_ops;
		snprintf(io->reason, sizeof(io->reason), "configured");
	} else {
		r = vio__uring_probe(io, why, sizeof(why));
		if (r == 0) {
			io->be = &vio__uring_ops;
			snprintf(io->reason, sizeof(io->reason), "%s", why);
		} else if (cfg->backend == VIO_BACKEND_URING) {
			vb_err("io: backend=uring requested but unusable: %s", why);
			goto err_free;
		} else {
			io->be = &vio__ev_ops;
			snprintf(io->reason, sizeof(io->reason), "%s", why);
		}
	}

	io->w = aligned_alloc(VB_CACHELINE, workers * sizeof(*io->w));
	if (!io->w) {
		r = -ENOMEM;
		goto err_free;
	}
	memset(io->w, 0, workers * sizeof(*io->w));
	for (i = 0; i < workers; i++) {
		struct vio_worker *w = &io->w[i];

		w->io = io;
		w->id = i;
		w->lsock_resume = INT64_MAX;
		atomic_init(&w->park_state, VIO_PK_EMPTY);
		atomic_init(&w->mbox, NULL);
		atomic_init(&w->buf_returns, NULL);
		for (unsigned k = 0; k < VIO_HIST_N; k++)
			vb_hist_init(&w->hist[k]);
		r = vio__theap_init(&w->heap, w);
		if (r < 0)
			goto err_workers;
		r = io->be->worker_init(w);
		if (r < 0) {
			vio__theap_fini(&w->heap);
			goto err_workers;
		}
	}
	*out = io;
	return 0;

err_workers:
	while (i-- > 0) {
		io->be->worker_fini(&io->w[i]);
		vio__theap_fini(&io->w[i].heap);
	}
	free(io->w);
err_free:
	vb_debug("io: vio_new(%s) failed: %s", backend_label(cfg->backend), strerror(-r));
	pthread_mutex_destroy(&io->mu);
	free(io);
	return r;
}

void vio_set_heap_budget(struct vio *io, _Atomic int64_t *used, int64_t max)
{
	io->heap_used = used ? used : &io->heap_own;
	io->heap_max = max > 0 ? max : INT64_MAX;
}

int64_t vio_heap_charged(const struct vio *io)
{
	/* Relaxed: a gauge. */
	return atomic_load_explicit(io->heap_used, memory_order_relaxed);
}

const char *vio_backend_name(const struct vio *io)
{
	return io->be->name;
}

const char *vio_backend_reason(const struct vio *io)
{
	return io->reason;
}

/* Descriptors whose close was asked of w after it stopped (a connection
 * cut at shutdown on another worker): close them; their table slots go
 * with the ring. Other requests left in the mailbox are dropped, as
 * before. No worker runs. */
static void fixed_close_left(struct vio_worker *w)
{
	/* [IM2] acquire: pairs with [IM1] of the posts. */
	struct vio_req *r = atomic_exchange_explicit(&w->mbox, NULL, memory_order_acquire);

	for (struct vio_req *next; r; r = next) {
		next = r->next;
		if (r->type == VIO_REQ_FIXED_CLOSE)
			close((int)(r - w->fixed_reqs));
		else if (r->type == VIO_REQ_WAKE) /* nobody runs it now */
			vrt_task_unref(vb_container_of(r, struct vio_wake, req)->task);
	}
}

void vio_free(struct vio *io)
{
	if (!io)
		return;
	/* Listeners first: their sockets may still be armed in a ring. */
	vio__listeners_free(io);
	for (unsigned i = 0; i < io->nworkers; i++) {
		struct vio_worker *w = &io->w[i];

		fixed_close_left(w);
		io->be->worker_fini(w);
		vio__theap_fini(&w->heap);
		free(w->lsocks);
	}
	free(io->w);
	pthread_mutex_destroy(&io->mu);
	free(io);
}

#define ROW(...) VB_METRIC_ROW(struct vio_worker_stats, __VA_ARGS__)
const struct vb_metric vio_worker_metrics[] = { VIO_WORKER_METRICS(ROW) };
const size_t vio_worker_metrics_n = VB_ARRAY_SIZE(vio_worker_metrics);
#undef ROW

const char *vio_hist_name(enum vio_hist_kind k)
{
	static const char *const names[VIO_HIST_N] = {
		[VIO_HIST_RX_TX] = "rx_tx",
		[VIO_HIST_SQ_WAIT] = "sq_wait",
		[VIO_HIST_CQ_LAG] = "cq_lag",
	};

	return (unsigned)k < VIO_HIST_N ? names[k] : "";
}

int vio_hist_snapshot(struct vio *io, enum vio_hist_kind k, int worker, struct vb_hist_snap *out)
{
	unsigned from = worker < 0 ? 0 : (unsigned)worker;
	unsigned to = worker < 0 ? io->nworkers : (unsigned)worker + 1;

	if ((unsigned)k >= VIO_HIST_N)
		return -EINVAL;
	if (worker >= (int)io->nworkers)
		return -ENOENT;
	memset(out, 0, sizeof(*out));
	for (unsigned i = from; i < to; i++)
		vb_hist_snapshot_add(&io->w[i].hist[k], out);
	return 0;
}

unsigned vio_stats_snapshot(struct vio *io, struct vio_worker_stats *per_worker, unsigned n)
{
	for (unsigned i = 0; per_worker && i < n && i < io->nworkers; i++) {
		struct vio_worker *w = &io->w[i];
		struct vio_worker_stats *o = &per_worker[i];

		/* Relaxed: single-writer statistics, each a snapshot on its own. */
#define COPY(field, kind, ...) \
	VB_METRIC_IF_SLOT(kind, o->field = atomic_load_explicit(&w->st.field, memory_order_relaxed);)
		VIO_WORKER_METRICS(COPY)
#undef COPY
		pthread_mutex_lock(&w->heap.mu);
		o->timers_armed = w->heap.n;
		pthread_mutex_unlock(&w->heap.mu);
	}
	return io->nworkers;
}
