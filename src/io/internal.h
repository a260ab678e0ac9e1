/* SPDX-License-Identifier: MIT */
/*
 * io/internal.h: what the files of src/io share: the driver and worker
 * structures, the backend interface (uring.c, evloop.c), the operation state
 * word, the per-worker mailbox, timers and provided buffers. Private to
 * src/io (tests excepted). liburing.h and ev.h stay in their backend's files.
 *
 * Threading: a struct vio_worker is owned by its worker thread; other threads
 * touch only park_state (unpark), mbox (cancel/arm requests), buf_returns
 * (provided buffers released elsewhere) and the timer heap (under its
 * mutex). Each of those sits on its own cache line.
 */
#ifndef VOLTD_IO_INTERNAL_H
#define VOLTD_IO_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/compiler.h"
#include "base/log.h"
#include "io/io.h"

/* ---------------------------------------------------------- op state word */

/*
 * struct vio_op.state bits. The submitting task sets INFLIGHT (it is then
 * on its worker's thread, the owner); the owner clears INFLIGHT and sets
 * DONE when the operation ends; a task running elsewhere that wants it
 * cancelled sets CANCEL|MBOX and queues op->req on the owner's mailbox.
 * While MBOX is set the owner still holds the task reference and the task
 * may not reuse the op. DETACHED: the task gave the op up (abandon); the
 * owner cleans up at completion. Protocol in op.c.
 */
#define VIO_OP_INFLIGHT 0x1u
#define VIO_OP_DONE     0x2u
#define VIO_OP_CANCEL   0x4u
#define VIO_OP_MBOX     0x8u
#define VIO_OP_DETACHED 0x10u
/* QUIET: the task does not need a wakeup when the op succeeds (a send it
 * will collect at its next call anyway); set and cleared by the task,
 * read by the owner at completion. Protocol in op.c ([IO6]). */
#define VIO_OP_QUIET    0x20u

/* struct vio_op.kind */
enum vio_kind {
	VIO_K_NONE = 0,
	VIO_K_RECV,     /* recv into op->buf */
	VIO_K_RECV_MS,  /* multishot recv into provided buffers (uring) */
	VIO_K_SEND,     /* send all of buf/len */
	VIO_K_SENDV,    /* sendmsg all of iov/iovcnt */
	VIO_K_CLOSE,
	VIO_K_RECV_WAIT, /* until a receive would not wait (vio_conn_recv_lent):
			  * op->buf is set only for a try at its start */
};

/* op->tflags (task side, task-private) */
#define VIO_TF_CANCELLED 0x1u /* cancel requested by this task */
#define VIO_TF_TIMEDOUT  0x2u /* ... because the deadline passed */
/* op->wflags (owner worker, owner-private while in flight) */
#define VIO_WF_THROTTLED 0x1u /* multishot cancelled for back pressure */
#define VIO_WF_FAKE_EAGAIN 0x2u /* test hook: this NOP stands for an -EAGAIN */

/* Result of a terminated multishot recv that ended with data but without
 * CQE_F_MORE: re-arm. Not an errno. */
#define VIO_MS_REARM 1

/* conn->cflags (task-private) */
#define VIO_CF_EOF         0x1u
#define VIO_CF_PLAIN_ONCE  0x2u /* ENOBUFS: next receive is a plain recv */
#define VIO_CF_FIXED_TRIED 0x4u /* the first operation has offered fd to its worker's table */

/* ------------------------------------------------------------- mailbox */

enum vio_req_type {
	VIO_REQ_CANCEL = 1,    /* struct vio_op.req */
	VIO_REQ_LSOCK_ARM,     /* struct vio_lsock.arm_req */
	VIO_REQ_LSOCK_STOP,    /* struct vio_lsock.stop_req */
	VIO_REQ_FIXED_CLOSE,   /* w->fixed_reqs[fd]: clear table slot fd, close fd */
	VIO_REQ_WAKE,          /* struct vio_wake.req: wake its task here */
};

/* Registered-file table slots per io_uring worker at most (slot = fd; a
 * descriptor above it is used as a regular one). The table has one slot
 * per descriptor number RLIMIT_NOFILE allows, which the daemon raises to
 * what server.max_connections needs: up to this, the descriptors of some
 * 250,000 connections, at 8 bytes of kernel memory per slot (2 MiB per
 * worker), whatever larger limit the process was given. */
#define VIO_FIXED_FILES_MAX 262144u

/* ------------------------------------------------------ provided buffers */

/* One provided receive buffer of a worker's ring: metadata (the bytes are
 * at w->buf_base + bid * buf_size). Owned by the worker's ring, then by a
 * connection's inbox/rx queue, then returned to w. */
struct vio_buf {
	struct vio_buf *next;    /* inbox / rx queue / return-stack link */
	struct vio_worker *w;    /* ring it belongs to; NULL: a heap copy whose
				  * bytes follow the struct (see rx_push) */
	_Atomic int64_t *charged; /* heap copy: the budget its len is charged to */
	uint32_t len;            /* bytes received into it */
	uint16_t bid;
};

static inline char *vio__buf_data(const struct vio_buf *b);

/* ---------------------------------------------------------------- timers */

struct vio_theap {
	pthread_mutex_t mu;
	struct vio_timer **v;   /* min-heap on deadline, under mu */
	uint32_t n, cap;        /* under mu */
	int64_t sleep_until;    /* under mu: the owner's wake-up time while parked, else INT64_MAX */
	struct vio_worker *w;   /* owner; constant */
};

int vio__theap_init(struct vio_theap *h, struct vio_worker *w);
void vio__theap_fini(struct vio_theap *h);
/* Owner: earliest deadline (INT64_MAX: none); with `parking`, record that
 * the owner sleeps until min(that, limit) so earlier arms kick it. */
int64_t vio__theap_next(struct vio_theap *h, bool parking, int64_t limit);
/* Owner: fire every timer due at `now`; returns how many. */
unsigned vio__theap_run(struct vio_theap *h, int64_t now);

/* ------------------------------------------------------------ listeners */

struct vio_lsock {
	int fd;                    /* constant */
	bool own_fd;               /* close it at the end (adopted: see fd_users) */
	_Atomic unsigned *fd_users; /* adopted fd shared by several workers: users
				     * left (the last closes it); NULL: own fd */
	struct vio_worker *home;   /* accepts on this worker; constant */
	struct vio_listener *l;
	pthread_mutex_t mu;        /* guards q.. and the two flags after it */
	int *q;                    /* ring of accepted fds */
	unsigned qcap, qhead, qlen;
	bool throttled;            /* stopped because q is full; the consumer kicks home */
	bool closed;               /* vio_listener_close: accept no more */
	bool done;                 /* closed, and the home worker's accept ended */
	struct vrt_task *waiter;   /* ref held */
	/* Owner-private (home worker thread); kept apart from the fields
	 * above so that no widened load or store spans both groups. */
	int64_t resume_at;         /* paused after EMFILE until then (0: not paused) */
	bool armed;                /* a (multishot) accept is live, or libev: fd is in the set */
	bool stopping;             /* stop requested; fd closes at the end */
	bool fd_closed;
	struct vio_req arm_req, stop_req;
};

/* ls is done with its socket: close it, or, when the fd is shared by
 * several workers (adopted), let the last one close it, so that no worker's
 * epoll or ring still uses the fd (or a reuse of its number). Once. */
void vio__lsock_close_fd(struct vio_lsock *ls);

/* The home worker's accept on ls has ended after vio_listener_close (its
 * socket is closed): vio_accept may now say -ESHUTDOWN. Home worker. */
void vio__lsock_done(struct vio_lsock *ls);

struct vio_listener {
	struct vio *io;
	unsigned n;
	int port;
	bool own;                  /* created here (one SO_REUSEPORT group), not adopted */
	unsigned width;            /* vio_listener_spread's last width (0: none set) */
	struct vio_listener *next; /* io->listeners, under io->mu */
	_Atomic unsigned *fd_users; /* adopted: per fd, lsocks still using it */
	struct vio_lsock ls[];
};

/* listener.c, called by the backends on the home worker */
/* A new connection (fd >= 0). Returns false when the queue is full enough
 * that the accept should stop (throttled) until the consumer drains it. */
bool vio__lsock_push(struct vio_lsock *ls, int fd);
/* Accept failed with errno `err` (> 0; the accept ended): pause or re-arm. */
void vio__lsock_error(struct vio_lsock *ls, int err);
/* listener.c: free every listener (vio_free). */
void vio__listeners_free(struct vio *io);
/* Owner: re-arm listeners that are paused/throttled and may resume;
 * returns the earliest resume time (INT64_MAX: none). */
int64_t vio__lsock_service(struct vio_worker *w, int64_t now);

/* -------------------------------------------------------------- backend */

struct vio_backend_ops {
	const char *name;
	/* vio_new's thread: per-worker resources (ring / loop). */
	int (*worker_init)(struct vio_worker *w);
	/* vio_free's thread. */
	void (*worker_fini)(struct vio_worker *w);
	/* Worker thread, before/after its loop. */
	int (*worker_start)(struct vio_worker *w);
	void (*worker_stop)(struct vio_worker *w);
	/* Owner: sleep in the kernel until an event, a kick or timeout_ns
	 * (< 0: none), then process what arrived. */
	void (*wait)(struct vio_worker *w, int64_t timeout_ns);
	/* Owner: submit what is queued and process ready events; never blocks. */
	void (*poll)(struct vio_worker *w);
	/* Owner: poll before a park: may leave what is queued to wait() or
	 * the next flush (NULL: poll). */
	void (*poll_park)(struct vio_worker *w);
	/* Owner, after every task poll, never blocks: submit what is queued
	 * if it waited long enough (NULL: the backend has nothing queued). */
	void (*flush)(struct vio_worker *w);
	/* Any thread: end the owner's wait(). */
	void (*kick)(struct vio_worker *w);
	/* Owner: try to finish `op` without waiting (NULL: never). True with
	 * op->res set when it finished. */
	bool (*try_now)(struct vio_worker *w, struct vio_op *op);
	/* Owner: start op (state already INFLIGHT, task ref taken). */
	void (*submit)(struct vio_worker *w, struct vio_op *op);
	/* Owner: cancel an in-flight op (it completes later or at once). */
	void (*cancel)(struct vio_worker *w, struct vio_op *op);
	/* Owner: start / stop accepting on a listening socket. */
	void (*lsock_arm)(struct vio_worker *w, struct vio_lsock *ls);
	void (*lsock_stop)(struct vio_worker *w, struct vio_lsock *ls);
	/* Owner: a provided buffer of w's goes back to the kernel (NULL: the
	 * backend has no provided buffers). */
	void (*buf_recycle)(struct vio_worker *w, struct vio_buf *b);
	/* Owner, in the connection's task, before its first operation: put
	 * c->fd into w's registered-file table (slot c->fd); true when it is
	 * (NULL: no table). */
	bool (*fixed_install)(struct vio_worker *w, struct vio_conn *c);
	/* Owner: clear table slot fd, then close fd (the connection is over;
	 * nothing of it is in flight). */
	void (*fixed_close)(struct vio_worker *w, int fd);
};

extern const struct vio_backend_ops vio__uring_ops;
extern const struct vio_backend_ops vio__ev_ops;

/* uring_setup.c: can io_uring be used with io->cfg? 0 (io->uring_flags and
 * io->pbuf_ok set, `why` describes the setup) or -errno (`why` says why). */
int vio__uring_probe(struct vio *io, char *why, size_t whylen);
/* Test hook: IORING_FEAT_* bits the probe and the rings pretend the kernel
 * lacks (simulates an older kernel). 0 in production; set before vio_new. */
extern uint32_t vio__uring_hide_features;
/* Test hook: a full SQ behaves as if the kernel said -EBUSY (CQ first). */
extern bool vio__uring_test_sq_busy;
/* Test hook: receives and sends per 1000 that end with -EAGAIN unissued. */
extern uint32_t vio__uring_test_eagain_permille;

/* --------------------------------------------------------------- worker */

/* Counters written only by the owning worker (relaxed single-writer adds),
 * read by vio_stats_snapshot: the slots of VIO_WORKER_METRICS (io.h). */
struct vio_wstats {
	VIO_WORKER_METRICS(VB_METRIC_SLOT)
};

/* Single writer: a relaxed load + store is enough (readers tolerate a stale
 * value) and avoids a locked RMW on the hot path. */
#define VIO_STAT_ADD(w, name, v) \
	atomic_store_explicit(&(w)->st.name, \
		atomic_load_explicit(&(w)->st.name, memory_order_relaxed) + (v), \
		memory_order_relaxed)
#define VIO_STAT_INC(w, name) VIO_STAT_ADD(w, name, 1)

enum vio_park_state {
	VIO_PK_EMPTY = 0,
	VIO_PK_PARKED = 1,
	VIO_PK_NOTIFIED = 2,
};

struct vio_worker {
	/* Owner-private and constant fields. */
	struct vio *io;
	unsigned id;
	bool started;
	struct vio_lsock **lsocks;  /* listeners homed here, owner-private copy */
	unsigned nlsocks;
	int64_t lsock_resume;        /* earliest paused listener resume */
	/* provided buffers (uring) */
	char *buf_base;
	uint32_t buf_size, buf_count;
	struct vio_buf *bufs;
	void *be;                    /* backend state (struct vio_uring_w / vio_ev_w) */
	/* Registered-file table (uring, fixed_files): fixed_reqs[fd] is the
	 * mailbox request that asks this worker to clear slot fd and close fd
	 * (any thread fills it before posting it, [IM1]; a slot is installed,
	 * so asked for, at most once at a time); NULL: no table. */
	struct vio_req *fixed_reqs;
	struct vio_wstats st;

	/* Written by unpark (any thread) and the owner. */
	vb_cacheline_aligned _Atomic uint32_t park_state;
	/* Pushed by any thread, taken by the owner. */
	vb_cacheline_aligned _Atomic(struct vio_req *) mbox;
	/* Provided buffers released on other workers, taken by the owner. */
	vb_cacheline_aligned _Atomic(struct vio_buf *) buf_returns;
	/* Timer heap (own mutex). */
	vb_cacheline_aligned struct vio_theap heap;
	/* Written by the owner only (vb_hist_record_owner), read by snapshots. */
	vb_cacheline_aligned struct vb_hist hist[VIO_HIST_N];
};

struct vio {
	struct vio_config cfg;
	const struct vio_backend_ops *be;
	unsigned nworkers;
	char reason[224];
	unsigned uring_flags;             /* io_uring setup flags chosen by the probe */
	bool pbuf_ok;                     /* provided-buffer rings can be registered */
	bool fixed_ok;                    /* fixed_files and a sparse registered-file table works */
	uint32_t rx_throttle;             /* buffers a connection may hold before its multishot stops */
	uint32_t rx_squeeze;              /* buffers out per worker above which connections get fair shares */
	/* Heap copies of received bytes (fair shares, socket.c rx_fair) are
	 * charged to *heap_used, at most heap_max (vio_set_heap_budget; by
	 * default heap_own, unbounded). */
	_Atomic int64_t *heap_used;
	int64_t heap_max;
	_Atomic int64_t heap_own;
	_Atomic bool ms_recv_broken;      /* kernel refused multishot recv: plain from now on (relaxed flag) */
	_Atomic bool ms_accept_broken;    /* same for multishot accept */
	pthread_mutex_t mu;               /* guards listeners */
	struct vio_listener *listeners;
	struct vio_worker *w;             /* [nworkers], cache-line aligned */
};

static inline char *vio__buf_data(const struct vio_buf *b)
{
	return b->w ? b->w->buf_base + (size_t)b->bid * b->w->buf_size : (char *)(b + 1);
}

/* The I/O worker of the calling thread, or NULL outside a started worker. */
struct vio_worker *vio__self(void);

/* Push a request to w's mailbox and make sure w sees it soon. Any thread. */
void vio__mbox_post(struct vio_worker *w, struct vio_req *r);
/* Owner: take and run every queued request. */
void vio__mbox_run(struct vio_worker *w);
/* Test hook: parks ignore the runtime's park timeout, so that a lost
 * wakeup is a hang instead of a delay (driver.c). Set before starting. */
extern bool vio__test_park_unbounded;
/* Test hook, from a task: io_uring holds completions for the calling
 * worker that its next poll collects (always true on libev, whose poll
 * asks the kernel every time). */
bool vio__test_completions_pending(void);
bool vio__uring_test_pending(struct vio_worker *w);
/* Any thread: end the current or next park of w (the runtime's unpark). */
void vio__notify(struct vio_worker *w);

/* ------------------------------------------------------- op.c internals */

/* Start an op whose fields are set, on w (the caller's worker). True when
 * it finished at once (op->res holds the result, state stays idle). */
bool vio__op_start(struct vio_worker *w, struct vio_op *op);
/* Owner: the op ended with res. Wakes the task, drops the reference (or
 * leaves it to the mailbox), cleans up after an abandoned connection. */
void vio__op_complete(struct vio_worker *w, struct vio_op *op, int32_t res);
/* Task side: ask for op's cancellation wherever it runs. */
void vio__op_cancel(struct vio_op *op);
/* Owner: a queued cancel request for op. */
void vio__op_mbox(struct vio_worker *w, struct vio_op *op);
/* Owner: a partial send of n bytes happened: advance; true if more remains. */
bool vio__op_send_advance(struct vio_op *op, size_t n);

/* socket.c: owner side of multishot recv. */
/* A buffer arrived for c (rx in flight on w). */
void vio__conn_rx_push(struct vio_worker *w, struct vio_conn *c, struct vio_buf *b);
/* Owner: an abandoned connection's op ended: drain and count down. */
void vio__conn_detached_done(struct vio_worker *w, struct vio_op *op);
/* Any thread, once nothing of c is in flight: close c->fd, through the
 * worker whose registered-file table holds it (c->fixed_w), which clears the
 * slot first. */
void vio__conn_close_fd(struct vio_conn *c);
/* Any thread: ask w (c->fixed_w) to clear slot fd and close fd. */
void vio__fixed_post_close(struct vio_worker *w, int fd);

/* Provided buffers: return b to its ring (from any worker). */
void vio__buf_release(struct vio_worker *self, struct vio_buf *b);
/* Owner: recycle buffers other workers returned. */
void vio__buf_take_returns(struct vio_worker *w);

#endif
