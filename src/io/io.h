/* SPDX-License-Identifier: MIT */
/*
 * io/io.h: the voltd I/O driver: one io_uring per runtime worker (or one
 * libev loop per worker when io_uring cannot be used), socket operations and
 * timers as awaitable operations for runtime tasks, and the park/unpark hooks
 * that let a parked worker sleep in the kernel until I/O, a timer or an
 * unpark arrives.
 *
 * Threading contract:
 * - vio_new / vio_free / vio_listener_new / vio_stats_snapshot: any non-worker
 *   thread (vio_free only after the runtime's workers have stopped).
 * - Every awaitable call (vio_conn_*, vio_accept, vio_sleep_until,
 *   vio_timer_*) runs inside a task's poll on a worker of a runtime that was
 *   started with vio_park_ops(); it submits on the calling worker's ring and
 *   the completion wakes the calling task. A task may migrate between polls;
 *   its next operation goes to its new worker. An operation already in
 *   flight stays with the worker that submitted it (its owner) until its
 *   last completion; only the owner reaps its ring, between polls (every
 *   io_poll_interval) and when it parks (doc/runtime.md, the I/O ownership rule).
 * - An object (struct vio_conn, struct vio_timer) is used by one task at a
 *   time; it must live in memory the task's vtable drop() frees: the driver
 *   holds a task reference while the kernel may still touch the object, so
 *   a cancelled task's memory outlives its last completion.
 *
 * Awaitable calls return enum vrt_poll: VRT_READY with the result stored
 * (>= 0 or -errno), VRT_PENDING (the task will be woken; call again with the
 * same arguments to collect), or VRT_YIELD (the task's cooperative budget is
 * spent; nothing was done; return VRT_YIELD and call again later).
 */
#ifndef VOLTD_IO_IO_H
#define VOLTD_IO_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "base/histogram.h"
#include "base/metric.h"
#include "rt/rt.h"

struct vio;
struct vio_worker;
struct vio_listener;
struct vio_theap;
struct vio_buf;

enum vio_backend {
	VIO_BACKEND_AUTO = 0,  /* io_uring when the kernel has every opcode and feature
				* the backend relies on (IORING_FEAT_NODROP, _EXT_ARG),
				* else libev; vio_backend_reason says which was missing */
	VIO_BACKEND_URING = 1, /* io_uring or fail */
	VIO_BACKEND_LIBEV = 2, /* libev (epoll) */
};

/* Bounds of struct vio_config's fields, inclusive: vio_new refuses values
 * outside them, and voltd.conf's schema (src/voltd/cfg_schema.c) takes its bounds
 * from here. The small rings and buffer pools are real configurations that
 * tests use to overflow them. */
#define VIO_RING_ENTRIES_MIN 8u         /* power of two */
#define VIO_RING_ENTRIES_MAX 32768u
#define VIO_RECV_BUFFER_SIZE_MIN 512u
#define VIO_RECV_BUFFER_SIZE_MAX 1048576u
#define VIO_RECV_BUFFERS_MIN 8u         /* power of two; or 0 (tests: plain recv) */
#define VIO_RECV_BUFFERS_MAX 32768u
#define VIO_ACCEPT_PAUSE_MS_MAX 10000u  /* from 1 */

/* Embedded in the daemon's struct vcfg and filled from voltd.conf's [io]
 * section (src/voltd/cfg_schema.c is the only place its defaults are written);
 * tests and benchmarks fill it themselves (tests/helpers/test_config.h).
 * vio_new copies it. */
struct vio_config {
	enum vio_backend backend;
	unsigned ring_entries;     /* SQ entries per worker ring */
	unsigned recv_buffer_size; /* bytes per provided receive buffer */
	unsigned recv_buffers;     /* provided buffers per worker: 0 = plain recv */
	bool recv_multishot;       /* false: plain recv only (ablation and tests) */
	bool accept_multishot;     /* false: one-shot accept re-armed per connection */
	unsigned accept_pause_ms;  /* pause of a listener after EMFILE/ENFILE */
	bool fixed_files;          /* io_uring: a connection's receives and sends on the ring
				    * that holds its descriptor in its registered-file table
				    * use it (IOSQE_FIXED_FILE); libev ignores it */
};


/* 0 if vio_new accepts cfg and workers, else -EINVAL. Any thread. */
int vio_config_check(const struct vio_config *cfg, unsigned workers);

/* Create the driver for `workers` runtime workers (1..256), choose the
 * backend and set up every worker's ring or loop (used from the worker
 * threads once the runtime starts). 0 or -errno (-EINVAL: bad config;
 * with backend=uring, the io_uring setup error). */
int vio_new(const struct vio_config *cfg, unsigned workers, struct vio **out);

/* Bytes that io holds on the heap for connections whose task is not
 * reading (while more than half of a worker's provided buffers are out,
 * received bytes are copied so that the ring stays available: see
 * doc/io.md) are charged to *used (added, and subtracted when
 * the task takes them), and no copy is made that would take *used past
 * max: the provided buffer is kept instead. The server passes a counter
 * of its own for them and their share of max_inflight_bytes (bodies have
 * the rest). Default: an own counter, no bound. Before any connection is
 * served (the listeners' set-up orders it before the workers' reads). */
void vio_set_heap_budget(struct vio *io, _Atomic int64_t *used, int64_t max);
/* Bytes charged by io to its heap budget now (any thread). */
int64_t vio_heap_charged(const struct vio *io);

/* The hooks to put in vrt_config.park_ops / park_ctx. */
void vio_park_ops(struct vio *io, const struct vrt_park_ops **ops, void **ctx);

/* "uring" or "libev", and why, e.g. "configured", "io_uring_setup: Operation
 * not permitted", or the uring setup flags. Stable strings owned by io. */
const char *vio_backend_name(const struct vio *io);
const char *vio_backend_reason(const struct vio *io);

/* After vrt_shutdown() (no worker runs): closes listeners and rings. */
void vio_free(struct vio *io);

/* ------------------------------------------------------------ listeners */

/*
 * One SO_REUSEPORT listening socket per worker, bound to `addr` (port 0:
 * the kernel picks one port, shared by all), each accepting on its own
 * worker (multishot accept / an ev_io). Accepted sockets are non-blocking
 * and close-on-exec. Under fd exhaustion (EMFILE/ENFILE) a socket pauses
 * for accept_pause_ms, logs rate-limited, and resumes. io_uring reads
 * RLIMIT_NOFILE when an accept is armed: set the limit before creating
 * listeners (a change applies at the next re-arm).
 */
int vio_listener_new(struct vio *io, const struct sockaddr *addr, socklen_t addrlen,
		     int backlog, struct vio_listener **out);
/* Adopt already listening sockets (socket activation): worker i accepts on
 * fds[i % nfds]. The listener owns the fds from now on. */
int vio_listener_adopt(struct vio *io, const int *fds, unsigned nfds,
		       struct vio_listener **out);
/* Number of accept queues (= workers) and the bound port (host order). */
unsigned vio_listener_count(const struct vio_listener *l);
/* New connections to the accept queues of the first `width` workers only
 * (1 .. vio_listener_count: a classic BPF program on the SO_REUSEPORT
 * group picks one of them at random; at the count, the kernel's own choice
 * over all of them), so that work gathers on the workers that carry it.
 * Adopted sockets (socket activation) are left as the kernel groups them.
 * 0, or -errno with the queues as they were. One caller at a time (the
 * daemon's main thread). */
int vio_listener_spread(struct vio_listener *l, unsigned width);
int vio_listener_port(const struct vio_listener *l);
/* Stop accepting. Connections the kernel has already handed over (queued,
 * or from an accept completing meanwhile) are still returned by vio_accept,
 * which says -ESHUTDOWN once the queue is empty and the home worker's accept
 * has ended, so that a drain refuses nobody who connected. Any thread. The
 * memory (and any fd never taken) is released by vio_free. */
void vio_listener_close(struct vio_listener *l);

/* Take one accepted connection from queue `idx` (< vio_listener_count).
 * One task per queue. VRT_READY with *fd >= 0, or *fd = -ESHUTDOWN. */
enum vrt_poll vio_accept(struct vio_listener *l, unsigned idx, int *fd);

/* -------------------------------------------------------------- timers */

/*
 * A deadline that wakes the task which armed it. Embed it; fields private.
 * Arming from any worker, re-arming and disarming are O(log n) on the heap
 * of the worker where it was first armed.
 */
struct vio_timer {
	int64_t deadline;               /* private: under home's lock */
	_Atomic(struct vio_theap *) home; /* private: heap holding it, or NULL */
	uint32_t idx;                   /* private: heap slot, under home's lock */
	_Atomic uint32_t fired;         /* private */
	struct vrt_task *task;          /* private: woken at expiry, ref held while armed */
};

void vio_timer_init(struct vio_timer *t);
/* (Re)arm for `deadline_ns` (vb_now_ns clock) to wake the current task.
 * 0 or -ENOMEM / -EPERM (not on a worker). */
int vio_timer_arm(struct vio_timer *t, int64_t deadline_ns);
/* Disarm (no wakeup afterwards). Safe on an unarmed timer. By the timer's
 * task (e.g. when cancelled, before it returns VRT_READY; a timer left
 * armed only delays the task's drop until it fires). */
void vio_timer_disarm(struct vio_timer *t);
/* The armed deadline has passed (the timer fired). */
bool vio_timer_expired(const struct vio_timer *t);

/* Sleep until vb_now_ns() >= deadline_ns: VRT_READY never earlier. A task
 * that stops sleeping early (cancelled) calls vio_timer_disarm(). */
enum vrt_poll vio_sleep_until(struct vio_timer *t, int64_t deadline_ns);

/* ------------------------------------------------- wake-ups placed on a worker */

/*
 * A wake-up of a task delivered by a chosen worker. The runtime queues a
 * woken task on the worker that wakes it, so a wake-up that worker sends
 * places the task there (unless it is running or queued already: then it
 * stays where it is). Embed it beside the task; fields private.
 */
/* A request to a worker's mailbox (private to src/io). */
struct vio_req {
	struct vio_req *next;
	uint32_t type;
};

struct vio_wake {
	struct vio_req req;             /* private: mailbox link */
	_Atomic uint32_t posted;        /* private: 1 while in a mailbox */
	struct vrt_task *task;          /* private */
};

void vio_wake_init(struct vio_wake *wk, struct vrt_task *t);
/* Wake wk's task from worker `worker` (< workers): at once when the caller
 * runs on that worker, else by that worker's mailbox (its next poll, a
 * parked worker is unparked). A wake-up already on its way is not sent
 * twice. The task is referenced until then. Any thread. */
void vio_wake_on(struct vio *io, unsigned worker, struct vio_wake *wk);

/* ------------------------------------------------------------ operations */

/*
 * struct vio_op: one in-flight kernel operation. A vio_conn embeds its
 * receive's and is lent its send's (vio_conn_tx_lend); every field is
 * private to src/io (exposed for embedding only). `state` is
 * written by the submitting task, the worker that owns the operation and a
 * canceller (see io/op.c for the protocol).
 */
struct vio_op {
	_Atomic uint32_t state;          /* private */
	int32_t res;                     /* private: result, published by state */
	uint8_t kind;                    /* private */
	uint8_t tflags;                  /* private: task-side flags */
	uint8_t wflags;                  /* private: owner-worker flags */
	uint8_t pad_;
	uint32_t pad2_;
	size_t done;                     /* private: bytes sent so far */
	struct vio_worker *owner;        /* private: worker whose ring holds it */
	struct vrt_task *task;           /* private: ref held while in flight */
	struct vio_req req;              /* private: mailbox link (cancel request) */
	struct vio_conn *conn;           /* private */
	void *buf;                       /* private */
	size_t len;                      /* private */
	struct iovec *iov;               /* private */
	unsigned iovcnt;                 /* private */
	union {                          /* private: backend scratch */
		struct msghdr msg;       /* io_uring: a vectored send's header */
	} u;
};

/*
 * A connected stream socket driven by one task at a time: receive (with
 * multishot recv into the worker's provided-buffer ring where the kernel
 * allows it), send, vectored send, a deadline that cancels the pending
 * operation, close. Embed it; fields private. The send side's operation
 * is the caller's memory, lent while it sends or closes (vio_conn_tx_lend),
 * so that a caller with many idle connections keeps none for them.
 */
struct vio_conn {
	int fd;                          /* public, read-only */
	uint32_t cflags;                 /* private: eof, err, plain-once */
	int32_t rx_err;                  /* private */
	uint32_t rx_off;                 /* private: offset into rxq_head */
	struct vio_op rx;                /* private: recv (multishot or plain) */
	struct vio_op *tx;               /* private: send / sendv / close (lent), or NULL */
	struct vio_buf *_Atomic inbox;   /* private: buffers pushed by rx's worker */
	struct vio_buf *rxq_head;        /* private: task-side FIFO */
	struct vio_buf *rxq_tail;        /* private */
	_Atomic uint32_t rx_queued;      /* private: buffers held (throttle) */
	_Atomic uint32_t close_count;    /* private: abandon countdown */
	struct vio_timer *deadline;      /* private: the caller's, or NULL (vio_conn_set_deadline) */
	struct vio_worker *last_worker;  /* private: migration statistics */
	_Atomic int64_t rx_at;           /* private: rx_tx histogram's start; vio_conn_rx_at */
	int64_t *trace_tx;               /* private: vio_conn_trace_tx's stamps, or NULL */
	struct vio_worker *fixed_w;      /* private: the worker whose registered-file
					  * table holds fd (uring, fixed_files), or NULL;
					  * written by the task before its first
					  * operation, never again */
};

/* Take over `fd` (a connected, non-blocking socket). It has no send
 * operation yet: lend one before the first send or the close. */
void vio_conn_init(struct vio_conn *c, int fd);
/* Lend op (the caller's memory, any content: it is initialised here) for
 * the connection's sends and its close. It must stay valid, and be the
 * same one, until vio_conn_tx_take gives it back, or, once the connection
 * is closed or abandoned, until the task's drop(). */
void vio_conn_tx_lend(struct vio_conn *c, struct vio_op *op);
/* Give the lent op back when no send and no close is under way (NULL
 * otherwise, or when none is lent): a waiting connection needs none. */
struct vio_op *vio_conn_tx_take(struct vio_conn *c);

/* Deadline for every operation on the connection from now on (0: none):
 * when it passes, the pending operation is cancelled and returns
 * -ETIMEDOUT; calls made after it return -ETIMEDOUT at once. The timer
 * that wakes the task for it is the caller's (vio_timer_init'ed; the same
 * one for every call, in the task's memory), so a connection without a
 * deadline keeps none. Returns 0 or -ENOMEM / -EPERM. */
int vio_conn_set_deadline(struct vio_conn *c, struct vio_timer *t, int64_t deadline_ns);

/* Receive up to len (> 0) bytes: *res = bytes (> 0), 0 at end of stream,
 * or -errno (-ETIMEDOUT, -ECONNRESET, ...). */
enum vrt_poll vio_conn_recv(struct vio_conn *c, void *buf, size_t len, ssize_t *res);
/* The same, but buf is lent for this call only: when nothing can be
 * received now, the connection waits for bytes without holding any buffer
 * (io_uring's multishot receive needs none; otherwise a readiness wait),
 * and the call after the wake-up receives into the buffer it is given then.
 * For a caller that takes a buffer only once bytes come (an idle
 * connection). While one of the two calls waits, use only that one. */
enum vrt_poll vio_conn_recv_lent(struct vio_conn *c, void *buf, size_t len, ssize_t *res);
/* Send all len bytes (partial sends are continued internally): *res = len
 * or -errno. `buf` must stay valid until VRT_READY (or the task's drop). */
enum vrt_poll vio_conn_send(struct vio_conn *c, const void *buf, size_t len, ssize_t *res);
/* Vectored send of every byte of iov[0..iovcnt) (e.g. header + body, not
 * copied together). The iovec array is modified (advanced) in place and
 * must stay valid until VRT_READY. *res = total bytes or -errno. */
enum vrt_poll vio_conn_sendv(struct vio_conn *c, struct iovec *iov, unsigned iovcnt,
			     ssize_t *res);
/*
 * The send under way (after vio_conn_send/sendv said VRT_PENDING): with
 * quiet, its successful completion does not wake the task, which collects
 * it at its next send call anyway (an error still wakes it); without, it
 * wakes the task as usual (the default for every new send). For a task
 * that waits on other events and does not need the send to finish before
 * them: it saves a poll per response. Returns true when the send has
 * already finished: the caller collects it now rather than wait. A no-op
 * (false) when no send is under way.
 */
bool vio_conn_tx_quiet(struct vio_conn *c, bool quiet);
/*
 * Request tracing (sampled by the caller; nothing is stamped otherwise).
 * vio_conn_rx_at: when the driver reaped the first bytes received since
 * the connection's last send was handed to the kernel (vb_now_ns of that
 * reap; 0 when none, or not yet known). vio_conn_trace_tx: the next send's
 * hand-over to the kernel (io_uring: the enter that submits it; libev: its
 * first syscall) goes to at[0] and its completion (the reap of its last
 * completion; libev: the syscall that finished it) to at[1], both
 * vb_now_ns, 0 until then; NULL stops. Task side; `at` stays valid until
 * the send is collected and the call with NULL that follows. at[] is
 * written by the send's owner before the completion the task collects
 * ([IO1]/[IO2] order it).
 */
int64_t vio_conn_rx_at(const struct vio_conn *c);
void vio_conn_trace_tx(struct vio_conn *c, int64_t *at);
/* shutdown(2) the write side (half-close). Never blocks. 0 or -errno. */
int vio_conn_shutdown_write(struct vio_conn *c);
/* Cancel what is pending, then close the socket: *res = 0 or -errno. With
 * io_uring registered files, on another worker than the one whose table
 * holds the socket, that worker clears its slot and closes it, and this
 * says 0 at once. */
enum vrt_poll vio_conn_close(struct vio_conn *c, int *res);
/* For a task that stops early (e.g. cancelled): cancel everything pending
 * without waiting; the socket is closed once the last completion arrives.
 * The connection must not be used again. Call it from the task's poll
 * (also works from another thread, e.g. the task's drop, but then every
 * cancel goes through a mailbox). After a vio_conn_close that said
 * VRT_PENDING, the close request already under way closes the socket (once);
 * abandon only detaches it. */
void vio_conn_abandon(struct vio_conn *c);

/* ---------------------------------------------------------------- stats */

/* Per worker, one line per field: X(field, kind, unit, help[, name])
 * (base/metric.h). A slot kind (COUNTER, GAUGE) is an atomic of that name
 * in the worker's block (io/internal.h), bumped by its owner with
 * VIO_STAT_INC / VIO_STAT_ADD and copied by vio_stats_snapshot. */
#define VIO_WORKER_METRICS(X) \
	X(submitted, COUNTER, "", "kernel requests (io_uring SQEs, libev watcher starts)") \
	X(completed, COUNTER, "", "operations finished") \
	X(immediate, COUNTER, "", "libev: operations finished without waiting") \
	X(cancels, COUNTER, "", "cancellations issued") \
	X(recv_multishot_arms, COUNTER, "", "multishot receives armed") \
	X(recv_enobufs, COUNTER, "", "multishot receives ended for want of provided buffers") \
	X(recv_plain, COUNTER, "", "plain (single-shot) receives") \
	X(eagain_retries, COUNTER, "", \
	  "io_uring receives and sends the kernel ended with EAGAIN, issued again") \
	X(recv_bytes, COUNTER, "bytes", "bytes received", "bytes_in") \
	X(send_bytes, COUNTER, "bytes", "bytes sent", "bytes_out") \
	X(send_partial, COUNTER, "", "sends the kernel took only in part") \
	X(rx_copies, COUNTER, "", \
	  "received buffers copied to the heap while half the provided buffers were out") \
	X(rx_copy_refused, COUNTER, "", \
	  "such copies not made because the heap budget (max_inflight_bytes) was reached") \
	X(accepts, COUNTER, "", "connections accepted") \
	X(accept_pauses, COUNTER, "", \
	  "listener pauses for want of file descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM)") \
	X(accept_errors, COUNTER, "", "listener pauses after any other accept error") \
	X(accept_rearms, COUNTER, "", "accepts armed again") \
	X(timers_fired, COUNTER, "", "timers that expired") \
	X(parks, COUNTER, "", "times the worker slept in the driver") \
	X(park_wakeups_io, COUNTER, "", "driver sleeps ended by an I/O completion") \
	X(sq_full, COUNTER, "", "times the submission queue was full") \
	X(cq_overflow, COUNTER, "", "completion queue overflows") \
	X(flushes, COUNTER, "", "submissions made right after a task poll (16 queued, one 200 us old, or left by a park step that found work)") \
	X(migrations, COUNTER, "", "connection operations issued on another worker than the previous one") \
	X(enters, COUNTER, "", "io_uring_enter system calls (submissions, waits, completion runs)") \
	X(reaps, COUNTER, "", \
	  "io_uring: reaps that found completions (reap_cqes / reaps: completions per reap)") \
	X(reap_cqes, COUNTER, "", "io_uring: completions those reaps dispatched") \
	X(quiet_wait_short, COUNTER, "", \
	  "park waits past quiet sends that ended with fewer completions than asked (the 1 ms bound: a peer slower than that, or the park's timeout)") \
	X(fixed_installs, COUNTER, "", \
	  "io_uring: connection descriptors installed in this worker's registered-file table") \
	X(fixed_ops, COUNTER, "", \
	  "io_uring: receives and sends submitted through the registered-file table (IOSQE_FIXED_FILE)") \
	X(fixed_update_errors, COUNTER, "", \
	  "io_uring: registered-file table updates the kernel refused (that connection's fixed operations fail)") \
	X(fixed_remote_closes, COUNTER, "", \
	  "io_uring: descriptors this worker closed for a connection that ended on another worker (its table slot is cleared first)") \
	X(timers_armed, GAUGE_SNAP, "", "timers armed on this worker now") \
	X(bufs_out, GAUGE, "", "provided buffers held by connections now")

struct vio_worker_stats {
	VIO_WORKER_METRICS(VB_METRIC_FIELD)
};
extern const struct vb_metric vio_worker_metrics[];
extern const size_t vio_worker_metrics_n;

/*
 * The driver's latency histograms (io_uring; libev records none), in
 * nanoseconds, one per worker:
 * - VIO_HIST_RX_TX: from the reap that delivered a connection's request
 *   bytes to the io_uring_enter that handed its next send to the kernel
 *   (what a response waits for on the worker: the tasks run before it, the
 *   submission batch);
 * - VIO_HIST_SQ_WAIT: at each enter that submits, how long the oldest of
 *   its SQEs was queued;
 * - VIO_HIST_CQ_LAG: when a running worker finds completions waiting in
 *   the kernel (deferred task work), the time since it last collected:
 *   how long they may have waited for it (a parked worker is woken at
 *   once and records nothing).
 */
enum vio_hist_kind {
	VIO_HIST_RX_TX = 0,
	VIO_HIST_SQ_WAIT,
	VIO_HIST_CQ_LAG,
	VIO_HIST_N,
};
/* Its name in `voltctl hist`: rx_tx, sq_wait, cq_lag. */
const char *vio_hist_name(enum vio_hist_kind k);
/* Any thread: worker `worker`'s histogram `k`, or all merged (worker < 0).
 * 0, -EINVAL (no such kind), -ENOENT (no such worker). */
int vio_hist_snapshot(struct vio *io, enum vio_hist_kind k, int worker, struct vb_hist_snap *out);

/* Snapshot without stopping workers; `per_worker` has room for n entries.
 * Returns the number of workers. */
unsigned vio_stats_snapshot(struct vio *io, struct vio_worker_stats *per_worker, unsigned n);

#endif
