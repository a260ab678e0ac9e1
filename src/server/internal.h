/* SPDX-License-Identifier: MIT */
/*
 * server/internal.h: what the files of src/server share: the server, the
 * connection (its task does parse and send), the job as it travels through
 * the stages, the per-worker counters. Private to src/server.
 *
 * Lifetimes (the reason for most of this file):
 * - A connection is a runtime task; its reference count is the task's.
 *   The runtime holds one while the task lives; every job in flight (from
 *   the parse stage through the channels, exec and the writer) holds one.
 *   The writer gives the job's reference up when it deposits the job in the
 *   connection's reorder slot: from then on the slot owns the job and the
 *   connection frees it (sent, swept at close, or swept by drop()).
 *   drop() (last reference) gives back the busy block (the parser, the
 *   slots and what is left in them) and frees the memory.
 * - Acceptor, exec and writer tasks are owned by the server, which keeps
 *   their handle reference until vsrv_free.
 * - The server outlives all of them: vsrv_free runs after the runtime has
 *   shut down and every connection has been dropped.
 */
#ifndef VOLTD_SERVER_INTERNAL_H
#define VOLTD_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "base/compiler.h"
#include "base/histogram.h"
#include "base/lineaudit.h"
#include "base/log.h"
#include "base/time.h"
#include "chan/chan.h"
#include "http/parser.h"
#include "http/response.h"
#include "io/io.h"
#include "jobs/job.h"
#include "rt/rt.h"
#include "server/admit.h"
#include "server/server.h"

/* ------------------------------------------------------------ counters */

/* The counters of a worker's block: the slots of VSRV_METRICS (server.h),
 * then those of the labelled families, each with the element of struct
 * vsrv_stats it is summed into. vsrv_stats_snapshot (stats.c) sums by offset. */
#define VSRV_GROUP_COUNTERS(X) \
	X(resp_1xx, responses[1]) X(resp_2xx, responses[2]) X(resp_3xx, responses[3]) \
	X(resp_4xx, responses[4]) X(resp_5xx, responses[5]) \
	X(stage_parse, in_flight[VSRV_STAGE_PARSE]) X(stage_exec, in_flight[VSRV_STAGE_EXEC]) \
	X(stage_write, in_flight[VSRV_STAGE_WRITE]) X(stage_send, in_flight[VSRV_STAGE_SEND])

enum vsrv_counter {
#define VSRV_C_SLOT(field, kind, ...) VB_METRIC_IF_SLOT(kind, VSRV_C_##field,)
	VSRV_METRICS(VSRV_C_SLOT)
#undef VSRV_C_SLOT
#define VSRV_C_ENUM(name, field) VSRV_C_##name,
	VSRV_GROUP_COUNTERS(VSRV_C_ENUM)
#undef VSRV_C_ENUM
	VSRV_C_COUNT
};

/* Spares (pool.c): what a busy connection takes and an idle one gives
 * back, and the jobs. A worker keeps up to VSRV_STASH of a kind, a depot
 * shared by the workers evens them out (mutex, taken once per half a
 * stash), up to VSRV_DEPOT. */
enum vsrv_spare { VSRV_SPARE_PARSER, VSRV_SPARE_BUSY, VSRV_SPARE_BATCH, VSRV_SPARE_JOB,
		  VSRV_SPARE_REQ, VSRV_SPARE_COUNT };
#define VSRV_STASH 16
#define VSRV_DEPOT 256
struct vsrv_stash {
	unsigned n;
	void *v[VSRV_STASH];
};
struct vsrv_depot {
	pthread_mutex_t mu;
	unsigned n;
	void *v[VSRV_DEPOT];
};
/* A send that finishes quietly (no wakeup) is collected at the next
 * request, or by the timer this long after it started, so that an idle
 * connection gives its batch back. */
#define VSRV_QUIET_NS (500 * VB_NS_PER_MS)
/* What a read lends while the connection has no parser (on the task's
 * stack: vio_conn_recv_lent): a request that fits arrives in one read; the
 * parser is taken when it does. */
#define VSRV_IDLE_BUF 256

/*
 * One block per worker (+1 for other threads), each on its own cache lines.
 * Any thread may add to any block (relaxed fetch_add): in practice a worker
 * adds to its own, so the lines stay local. The stage_* gauges go up and
 * down on different workers; only their sum over blocks means anything.
 */
/* A job kind's callbacks as this block's threads ran them (kinds.c). */
struct vsrv_kstep {
	_Atomic uint64_t jobs, slices, slice_ns, overruns, refused;
	_Atomic uint64_t max_ns;  /* the longest; vsrv_kinds_clear_max zeroes it */
};

struct vsrv_wstats {
	_Atomic uint64_t c[VSRV_C_COUNT];
	/* per statistics row (the server's routes, the job kinds, "other";
	 * see enum vsrv_route): latency */
	struct vb_hist *lat; /* [n_kinds], written by this block's worker only */
	/* per job kind (vjob_kind_index): its callbacks (kinds.c); lines of
	 * its own, written by this block's threads */
	struct vsrv_kstep *steps;
	/* Spares for the next requests on this block's worker, used by
	 * that worker only (never the last block); pool.c. */
	struct vsrv_stash stash[VSRV_SPARE_COUNT];
} vb_cacheline_aligned;

/* ---------------------------------------------------------------- job */

enum vsrv_jstage { VSRV_J_NONE, VSRV_J_PARSE, VSRV_J_EXEC, VSRV_J_WRITE, VSRV_J_SEND };

struct vsrv_conn;

/*
 * Where and how a request's answer goes: its place in the connection's
 * order, its statistics and the answer's framing. Made by the parse stage,
 * carried by the job, passed by pointer to every answer.
 */
struct vsrv_reply_to {
	uint64_t seq;             /* per-connection request number */
	int64_t t0;               /* parse time (vb_now_ns) */
	uint32_t kind;            /* statistics index (vsrv_stats.kinds) */
	uint8_t version_minor;    /* HTTP/1.<minor> of the request */
	bool close;               /* the answer closes the connection (the
				   * request's wish; the encoded answer's fact) */
	bool head_only;           /* HEAD: no body bytes */
	bool traced;              /* sampled: its connection's trace record is its (trace.c) */
};

/*
 * A request on its way: created by the parse stage, stepped by an exec task,
 * encoded by a writer, sent by the connection. One thread at a time (the
 * channels order the hand-overs).
 */
struct vsrv_job {
	struct vsrv_conn *conn;   /* task reference held until deposited */
	struct vjob *vj;          /* NULL for an answer made by the server itself */
	/* The parsed request, kept with vj (whose views point into it):
	 * released with the job (vsrv__req_put); NULL without vj. */
	struct vhttp_request *req;
	struct vsrv_job *next;    /* exec run queue; the lane; the per-worker cache */
	int64_t lane_t;           /* when it entered the heavy lane (lane.c) */
	struct vsrv_reply_to to;
	uint8_t stage;            /* enum vsrv_jstage, for the gauges */
	bool refused;             /* codel: taken too late, answered 503 unrun (admit.c) */
	uint16_t head_len;
	int status;
	size_t held;              /* bytes charged to srv->inflight (vsrv__hold) */
	const uint8_t *body;      /* bytes after the head (vj's result) */
	size_t body_len;
	/* vj's header fields when they do not fit head[] with voltd's own
	 * (head then ends after voltd's fields): they go out as an iovec of
	 * their own, xhdrs_len bytes, the head's final "\r\n" included. */
	const char *xhdrs;
	size_t xhdrs_len;
	char head[VHTTP_HEAD_MAX];
	/* vj, when it fits (vjob_new_at): a job costs one spare. */
	alignas(max_align_t) unsigned char vj_mem[VJOB_BLOCK];
};

/* ---------------------------------------------------------- connection */

/* A send batch: consecutive responses in request order, one sendv. */
#define VSRV_BATCH 16
#define VSRV_OBUF 2048

struct vsrv_batch {
	struct iovec iov[3 * VSRV_BATCH + 2]; /* a response: head, header fields, body */
	unsigned niov;
	unsigned n;                       /* responses in the batch */
	struct vsrv_job *jobs[VSRV_BATCH];/* NULL: copied into buf */
	uint32_t kind[VSRV_BATCH];
	uint16_t status[VSRV_BATCH];
	int64_t t0[VSRV_BATCH];
	uint32_t len[VSRV_BATCH];         /* bytes of each response (access log) */
	unsigned continues;               /* 100 Continue lines in buf */
	bool close_after;                 /* a response in it says close */
	size_t bytes;
	size_t buf_len;
	char buf[VSRV_OBUF];
};

/*
 * The connection's three state machines: what it receives, what it sends,
 * how it ends. Each moves only through its transition function in conn.c
 * (vsrv__rx_to, vsrv__tx_to, vsrv__end_to), which does what entering a
 * state takes, checks the move against the machine's list below and traces
 * it at debug level ("conn fd 7: rx READ -> PARSE"). A move to the state
 * the machine is in changes nothing. A STAY line names a request that
 * changes nothing because an earlier event outranks it. Any other move is
 * a bug (VB_BUG_ON, in every build). Names: vsrv__rx_name and the others.
 */
enum vsrv_rx {
	VSRV_RX_READ = 0,    /* everything received is parsed: read more */
	VSRV_RX_PARSE,       /* received bytes wait for the parser */
	VSRV_RX_CONTINUE,    /* a 100 Continue is owed: parse and read wait until it is in the batch */
	VSRV_RX_JOBS_WAIT,   /* a request waits for room in `jobs` (pending): parse and read wait */
	VSRV_RX_BUDGET_WAIT, /* over max_inflight_bytes: nothing is read (the timer looks again) */
	VSRV_RX_EOF,         /* the peer closed its side: no more requests */
	VSRV_RX_DONE,        /* no more requests (close, error, timeout, abort) */
	VSRV_RX_N
};

/* EOF and DONE end the requests: nothing reopens them. A receive is
 * started only in READ, so the peer's close is seen there (or after DONE,
 * when it changes nothing). */
#define VSRV_RX_MOVES(MOVE, STAY) \
	MOVE(READ, PARSE)         /* bytes arrived */ \
	MOVE(PARSE, READ)         /* the parser needs more, or held nothing and went back */ \
	MOVE(READ, BUDGET_WAIT)   /* over the budget (on_full = wait) */ \
	MOVE(BUDGET_WAIT, READ)   /* the budget allows reading again */ \
	MOVE(PARSE, CONTINUE)     /* a request asked for 100 Continue */ \
	MOVE(CONTINUE, PARSE)     /* the 100 Continue is in the batch */ \
	MOVE(PARSE, JOBS_WAIT)    /* the job found `jobs` full */ \
	MOVE(JOBS_WAIT, PARSE)    /* it went, and the parser holds bytes */ \
	MOVE(JOBS_WAIT, READ)     /* it went, and there is no parser */ \
	MOVE(READ, EOF)           /* the peer closed its side */ \
	MOVE(READ, DONE)          /* a read deadline, an abort */ \
	MOVE(PARSE, DONE)         /* a parse error, the parser closed, an abort */ \
	MOVE(CONTINUE, DONE)      /* an abort */ \
	MOVE(JOBS_WAIT, DONE)     /* an abort */ \
	MOVE(BUDGET_WAIT, DONE)   /* an abort */ \
	MOVE(EOF, DONE)           /* an answer said close, an abort */ \
	STAY(DONE, EOF)           /* the peer's close after ours changes nothing */

enum vsrv_tx {
	VSRV_TX_IDLE = 0,    /* no send under way */
	VSRV_TX_SENDING,     /* the batch is being sent; its end wakes us */
	VSRV_TX_QUIET,       /* the same, but its end may not wake us (collected at the next request) */
	VSRV_TX_OVERDUE,     /* was quiet for VSRV_QUIET_NS: its end wakes us (the batch goes back), never quiet again */
	VSRV_TX_N
};

/* Between two states of a send under way the I/O layer is told whether
 * its end wakes us; when it has ended already the state stays (that is
 * not a STAY: vsrv__tx_to returns true and the send is collected). */
#define VSRV_TX_MOVES(MOVE, STAY) \
	MOVE(IDLE, SENDING)       /* a send did not end at once */ \
	MOVE(SENDING, QUIET)      /* nothing but the next request waits for it */ \
	MOVE(QUIET, SENDING)      /* something else waits for it now */ \
	MOVE(QUIET, OVERDUE)      /* quiet for VSRV_QUIET_NS: collect it */ \
	MOVE(SENDING, IDLE)       /* the send ended */ \
	MOVE(QUIET, IDLE)         /* the send ended */ \
	MOVE(OVERDUE, IDLE)       /* the send ended */

/* Listed in the order a connection ends, and it moves forward only (a
 * static_assert in conn.c checks every move): `end >= VSRV_END_ABORTED`
 * means aborted or closing. */
enum vsrv_end {
	VSRV_END_OPEN = 0,   /* requests and answers go on */
	VSRV_END_FAILED,     /* an answer went before its request was read whole: linger once it is out */
	VSRV_END_LINGER,     /* our side is shut: input is read and dropped for a while, then close */
	VSRV_END_ABORTED,    /* stop now: nothing more is sent; close */
	VSRV_END_CLOSING,    /* vio_conn_close under way; nothing else happens */
	VSRV_END_N
};

#define VSRV_END_MOVES(MOVE, STAY) \
	MOVE(OPEN, FAILED)        /* a parse error or a 408 is answered */ \
	MOVE(FAILED, LINGER)      /* that answer is out */ \
	MOVE(OPEN, ABORTED)       /* a reset, an error, a timeout, out of memory, a cut */ \
	MOVE(FAILED, ABORTED)     /* the same while the answer waits */ \
	MOVE(LINGER, ABORTED)     /* the client closed, or a bound passed */ \
	MOVE(OPEN, CLOSING)       /* everything answered, nothing more to read */ \
	MOVE(ABORTED, CLOSING)    /* aborted: close */ \
	STAY(ABORTED, FAILED)     /* the failure's answer aborted (out of memory) */

/* tx_acked before the first look at the socket's progress of a batch. */
#define VSRV_ACKED_UNSEEN UINT64_MAX

/*
 * What a connection holds only while it has work: a spare (pool.c), taken
 * when bytes arrive after idle (or for the close, whose operation is the
 * send's), given back when it is idle again (conn_give_back): no request
 * in flight, no send under way, no parser, no job waiting, still open. An
 * idle keep-alive connection thus holds its task, its socket and its timer,
 * and none of this. Task-private but for the slots (and the trace record,
 * stamped through job->conn by exec and writers while a job is theirs: the
 * block stays while any request is in flight).
 */
struct vsrv_busy {
	struct vio_op tx;              /* io's send operation, lent to c->io while held */
	/* taken when bytes arrive, given back when idle (NULL: none; a read
	 * then lends a buffer for the call only: vio_conn_recv_lent) */
	struct vhttp_parser *parser;
	struct vsrv_batch *out;        /* taken for a response, given back when idle */
	struct vsrv_job *pending;      /* waiting for room in `jobs` (it goes even after DONE) */
	struct vch_waiter pending_waiter; /* pending's wait for room (`jobs`, or the blocking queue) */
	uint64_t collect_seq;  /* next response to put in the batch */
	uint64_t sent_seq;     /* responses fully sent */
	int64_t phase_since;   /* when c->phase last changed */
	int64_t tx_since;      /* the batch send started */
	int64_t tx_mark;       /* its last progress seen (send_timeout_ms) */
	uint64_t tx_acked;     /* TCP bytes acknowledged at tx_mark (VSRV_ACKED_UNSEEN) */
	int64_t linger_until;
	size_t linger_bytes;
	void *recv_buf;        /* where the receive into the parser writes (NULL: none under way) */
	size_t recv_room;      /* its room */
	size_t rx_held;        /* the parser's body bytes charged to srv->inflight */
	int64_t probe_at;      /* next look for a peer reset while not reading (0: none) */
	const char *close_reason; /* for the log, when requests are dropped */
	/* The access log's request lines, by seq & slot_mask: allocated the
	 * first time a request arrives with log.access on, kept with the
	 * block; freed with it (pool.c). */
	struct vsrv_access *alog;
	/* Request tracing (trace.c): the record of the one sampled request
	 * in flight (allocated at the first, kept with the block) and its
	 * sequence number + 1 (0: none in flight). */
	struct vsrv_trace *trace;
	uint64_t trace_seq;
	/* Reorder slots: slots[seq & srv->slot_mask]. A writer (any thread)
	 * stores a finished job; the task exchanges it out. The per-connection
	 * atomics (these, dead, the task state) share lines on purpose:
	 * padding would multiply every connection's memory, and they are
	 * written at most a few times per request. */
	_Atomic(struct vsrv_job *) slots[];
};

struct vsrv_conn {
	struct vrt_task task;          /* refs: runtime + jobs in flight */
	struct vio_conn io;            /* task-private */
	struct vsrv *srv;
	/* While it has work (NULL when idle): taken and given back by the
	 * task; stable while any request is in flight. */
	struct vsrv_busy *busy;

	/* registry (srv->reg_mu) */
	struct vsrv_conn *reg_prev, *reg_next;
	bool registered;

	/* Set once by the task when it stops; writers and exec tasks read it
	 * to skip work for a connection that is gone. */
	_Atomic bool dead;

	/* task-private from here */
	enum vsrv_rx rx : 8;
	enum vsrv_tx tx : 8;
	enum vsrv_end end : 8;
	enum vhttp_phase phase : 8;  /* the parser's, as last seen (IDLE without one) */
	bool recv_lent;        /* a receive into no buffer of ours is under way (vio_conn_recv_lent) */
	uint64_t next_seq;     /* number of the next request parsed */
	int64_t idle_since;    /* nothing in flight, nothing buffered, since */
	int64_t tmr_at;        /* what tmr is armed for (0: not armed) */
	struct vio_timer tmr;  /* header/body/idle/send/linger deadlines, lazily armed */
};

/* ----------------------------------------------------------- the server */

struct vsrv_acceptor {
	struct vrt_task task;
	struct vsrv *srv;
	struct vio_listener *l;
	unsigned idx;
	_Atomic bool paused;   /* waiting for max_connections to allow more */
	bool spawned;
};

struct vsrv_exec {
	struct vrt_task task;
	struct vsrv *srv;
	struct vch_waiter jobs_waiter;       /* receiving from `jobs` */
	struct vch_waiter replies_waiter;    /* sending to `replies` */
	struct vsrv_job *runq, *runq_tail;   /* ready to step */
	struct vsrv_job **sleepers;          /* min-heap on wake time [sleep_cap] */
	unsigned nsleep, sleep_cap;
	int64_t sweep_at;                    /* next sweep for dead sleepers */
	struct vsrv_job *out;                /* finished, waiting for `replies` */
	/* One timer for all sleepers, armed for the earliest: it lives as
	 * long as the task, so no timer memory is freed while a worker may
	 * still be firing it. */
	struct vio_timer tmr;
	int64_t tmr_at;                      /* armed for (0: not armed) */
	bool recv_closed;
	bool jobs_waiting;                   /* jobs_waiter registered on `jobs` */
	bool spawned;
	/* A runner of the heavy lane (lane.c): the worker it serves, or -1
	 * for an executor; lane_idle (under lane.mu): waiting for a job;
	 * wake: its wake-up placed on that worker. */
	int lane_w;
	bool lane_idle;
	struct vio_wake wake;
	/* A runner's share of its worker lately: its slices' time and the
	 * time passed, both decaying over VSRV_LANE_TAU_NS (lane.c). */
	int64_t sh_t, sh_busy, sh_wall;
};
#define VSRV_LANE_TAU_NS (2 * VB_NS_PER_MS)
#define VSRV_LANE_TURN_MAX 20
#define VSRV_LANE_SATURATED_TURN 6

struct vsrv_lane {
	pthread_mutex_t mu;
	struct vsrv_job *head, *tail;   /* waiting, first come first (job->next) */
	_Atomic uint64_t waiting;       /* jobs in the queue (written under mu, read relaxed) */
	_Atomic int64_t head_t;         /* the first one's lane_t, 0 when empty (the same) */
	_Atomic uint32_t idle_n;        /* runners with lane_idle set (the same) */
	bool closed;                    /* stopping: nothing enters; runners end once it is empty */
	struct vsrv_exec **runner;      /* [nworkers] */
	/* on_full = codel: the waits in the lane (admit.c), sampled by
	 * the runners as they take jobs. */
	struct vsrv_admit admit;
};

/* Bodies below this are not charged to the budget (their number is
 * bounded by max_connections x max_pipeline, and the per-request path of
 * small requests stays free of the shared counter). */
#define VSRV_HOLD_MIN 4096
/* The heap copies of received bytes (connections that do not read) may
 * hold 1/VSRV_COPY_SHARE of max_inflight_bytes and bodies the rest: two
 * counts, two limits, so neither can lock the other out (bytes a client
 * sends and nobody asked for cannot stop other clients' uploads, and
 * uploads cannot take the copies' room). */
#define VSRV_COPY_SHARE 4
/* A connection that reads nothing while requests are in flight looks for
 * its peer's reset this often (conn.c peer_reset). */
#define VSRV_PROBE_NS (1000 * VB_NS_PER_MS)
/* A connection waiting for the budget looks again this often. */
#define VSRV_BUDGET_RECHECK_NS (20 * VB_NS_PER_MS)

/* The sleeper heap's first size (it doubles as needed), and how often
 * sleepers of closed connections are swept out before their time. */
#define VSRV_SLEEPERS_MIN 64
#define VSRV_SLEEP_SWEEP_NS (1000 * VB_NS_PER_MS)

struct vsrv_writer {
	struct vrt_task task;
	struct vsrv *srv;
	struct vch_waiter replies_waiter;    /* receiving from `replies` */
	bool spawned;
};

/* A job kind's quarantine (kinds.c): `on` is read by every request of the
 * kind; the window is written by overruns only. */
struct vsrv_quarantine {
	_Atomic bool on;
	_Atomic int64_t window_start;   /* the current window's first overrun */
	_Atomic uint32_t overruns;      /* in the current window */
} vb_cacheline_aligned;

/*
 * The blocking pool (blocking.c): threads outside the runtime that run
 * every callback of the blocking kinds' jobs, fed by a bounded channel
 * (connections send to it as to `jobs`: on_full applies), handing finished
 * jobs to `replies`. q is NULL when no registered kind is blocking.
 */
struct vsrv_pool {
	struct vch *q;
	pthread_t *threads;
	unsigned n;                    /* threads started */
	unsigned stuck;                /* still inside a step when vsrv_stop gave up on them */
	_Atomic unsigned busy;         /* threads inside a job now */
	/* the label of the kind each thread runs now, NULL when idle (for
	 * vsrv_stop's report of a thread that does not come back) */
	_Atomic(const char *) *doing;
	struct vb_hist wait;           /* each job's wait for a thread (ns; atomic records) */
	struct vsrv_admit admit;       /* on_full = codel, applied to q */
};
/* A pool thread sleeping for a SLEEP step looks at its job's connection
 * this often (a closed one drops the job, and the drain is not held up). */
#define VSRV_POOL_SLEEP_CHECK_NS (100 * VB_NS_PER_MS)
/* vsrv_stop waits this long for the pool's threads after its queue closed. */
#define VSRV_POOL_JOIN_MS 2000

struct vsrv {
	struct vsrv_config cfg;
	/* The keys that may change while running (vsrv_set_live): read with
	 * vsrv__live, never from cfg. Relaxed: see server.c's Ordering block. */
	struct {
		_Atomic uint32_t header_timeout_ms, body_timeout_ms, idle_timeout_ms;
		_Atomic uint32_t send_timeout_ms, retry_after_s;
		_Atomic bool access_log, heavy_lane;
		_Atomic uint32_t codel_target_ms, codel_interval_ms;
		_Atomic uint32_t overrun_factor, quarantine_overruns, quarantine_window_ms;
		_Atomic uint32_t heavy_share, heavy_wait_ms, heavy_spread_us;
		/* Not a configuration key: vsrv_trace_set (trace.c), 0 off. */
		_Atomic uint32_t trace_every;
	} live;
	struct vrt *rt;
	struct vio *io;
	struct vhttp_limits limits;
	struct vjob_config jcfg;
	uint32_t slot_mask;        /* a connection's reorder slots, less one (pool.c) */
	unsigned nworkers;
	unsigned n_kinds;          /* statistics rows: routes + vjob kinds + "other" */
	unsigned kind_other;

	struct vio_listener *listeners[VSRV_MAX_LISTEN];
	unsigned n_listeners;
	/* vsrv_spread runs on the main thread and, through the runtime's
	 * spread hook, on its monitor's: spread_mu orders them and keeps it
	 * off the listeners once vsrv_stop closes them (spread_off). */
	pthread_mutex_t spread_mu;
	bool spread_off;
	bool spread_failed;           /* vsrv_spread: said once that it cannot */
	/* One member per worker (chan.h, vch_set): a worker's connections
	 * send their jobs to its member of `jobs`, its executors take them
	 * there first and their replies go to its member of `replies`;
	 * stealing across members spreads a burst. */
	struct vch_set *jobs, *replies;
	size_t ready_limit;        /* /readyz: not ready at or above this jobs length (all members) */

	struct vsrv_acceptor **acc;
	unsigned n_acc;
	struct vsrv_exec **exec;
	struct vsrv_writer **wr;
	bool started, stopped;
	/* Read by every counter bump (ws) and body check (body_max): kept
	 * with the fields nobody writes while serving, never on a line that
	 * inflight, pool_mu or the registry make bounce between workers. */
	struct vsrv_wstats *ws;    /* [nworkers + 1] */
	int64_t body_max;          /* the bodies' part of the budget (INT64_MAX: none) */

	/* connections: registry for drain; every open and close takes reg_mu,
	 * so it has its own line, apart from jobs / replies above. */
	vb_cacheline_aligned pthread_mutex_t reg_mu;
	struct vsrv_conn *reg_head;
	size_t reg_n;

	/* Ordering: conns_open and paused_n see accept.c, conns_alive server.c. */
	vb_cacheline_aligned _Atomic uint64_t conns_open;
	_Atomic uint64_t conns_alive;  /* until drop() */
	/* Written by acceptors pausing at max_connections and by closers. */
	vb_cacheline_aligned _Atomic uint32_t paused_n;
	/* Read by every request, written only when the state changes (drain,
	 * vsrv_set_ready, vsrv_set_alive): a line of their own. */
	vb_cacheline_aligned _Atomic bool draining;
	_Atomic bool unready;      /* vsrv_set_ready(false) */
	_Atomic bool alive;        /* vsrv_set_alive */
	/* Body bytes held for requests and replies (max_inflight_bytes less
	 * the copies' share, body_max). Its own line: written only by
	 * requests and replies with bodies. */
	vb_cacheline_aligned _Atomic int64_t inflight;
	/* Received bytes io holds on the heap for connections that do not
	 * read (vio_set_heap_budget), at most their share of the budget. Its
	 * own line: written by io's workers as copies are made and taken. */
	vb_cacheline_aligned _Atomic int64_t copies;

	/* pool.c: the connection pool (pool_mu); every connection open and
	 * close writes this line. */
	vb_cacheline_aligned pthread_mutex_t pool_mu;
	struct vsrv_conn *pool_free;   /* freed objects, linked through their first word */
	void **pool_chunks;
	unsigned pool_n, pool_cap, pool_used; /* pool_used: of the last chunk */
	/* pool.c: spares the workers even out (off the request path). */
	vb_cacheline_aligned struct vsrv_depot depot[VSRV_SPARE_COUNT];

	/* admit.c: on_full = codel (its lines are its own, admit.h) */
	struct vsrv_admit admit;

	/* kinds.c: per job kind (vjob_kind_index), its quarantine. */
	struct vsrv_quarantine *quar;
	/* blocking.c */
	vb_cacheline_aligned struct vsrv_pool pool;

	/* lane.c: the heavy lane (only heavy jobs take its mutex). */
	vb_cacheline_aligned struct vsrv_lane lane;

	/* trace.c: finished trace records waiting for vsrv_trace_take (only
	 * sampled requests take the mutex). */
	vb_cacheline_aligned pthread_mutex_t trace_mu;
	struct vsrv_trace_rec *trace_log;  /* [VSRV_TRACE_LOG], NULL until tracing is first on */
	unsigned trace_head, trace_len;
	uint64_t trace_finished, trace_lost;
};

/* Counters of different workers never share a line; the connection count
 * and the pause flags sit apart from the constant fields. */
static_assert(sizeof(struct vsrv_wstats) % VB_CACHELINE == 0, "wstats blocks share lines");
static_assert(offsetof(struct vsrv, conns_open) % VB_CACHELINE == 0, "conns_open not aligned");
static_assert(offsetof(struct vsrv, paused_n) - offsetof(struct vsrv, conns_open) >= VB_CACHELINE,
	      "conns_open and paused_n share a line");
/* Two fields on different cache lines (the struct is line-aligned). */
#define VSRV_APART(a, b) (offsetof(struct vsrv, a) / VB_CACHELINE != offsetof(struct vsrv, b) / VB_CACHELINE)
/* admit.h: the exec tasks' line and the flag every codel dispatch reads. */
static_assert(VSRV_APART(admit.refusing, admit.interval_end) && VSRV_APART(admit.interval_end, pool_mu),
	      "codel's state shares a line");
/* What every request reads (ws) stays off the lines others write on the
 * way (the body budget, the pool, the registry, the connection count, the
 * accept pause, the drain flag): a read of a line another core wrote is a
 * cache-line transfer per request. */
static_assert(VSRV_APART(ws, inflight) && VSRV_APART(ws, pool_mu) && VSRV_APART(ws, reg_mu) &&
	      VSRV_APART(ws, conns_open) && VSRV_APART(ws, paused_n) && VSRV_APART(ws, draining),
	      "srv->ws shares a line that is written while serving");
static_assert(VSRV_APART(body_max, inflight) && VSRV_APART(body_max, copies) &&
	      VSRV_APART(body_max, pool_mu), "body_max shares a written line");
static_assert(VSRV_APART(inflight, copies) && VSRV_APART(copies, pool_mu),
	      "the bodies' and the copies' counts share a line");
static_assert(VSRV_APART(draining, paused_n) && VSRV_APART(draining, conns_open) &&
	      VSRV_APART(draining, inflight) && VSRV_APART(alive, paused_n),
	      "the request-path flags share a written line");
static_assert(VSRV_APART(jobs, reg_mu) && VSRV_APART(ready_limit, reg_mu),
	      "the channel pointers share the registry's line");
static_assert(VSRV_APART(inflight, pool_mu) && VSRV_APART(reg_mu, pool_mu),
	      "inflight, the registry and the pool share a line");

/* --------------------------------------------------------- cross-file */

/* The stages' member of the channel sets for the calling thread: its
 * worker's (a thread outside the workers, at shutdown: the first). */
static inline unsigned vsrv__home(const struct vsrv *srv)
{
	int w = vrt_worker_id();

	return w >= 0 && (unsigned)w < srv->nworkers ? (unsigned)w : 0;
}

static inline struct vsrv_wstats *vsrv__ws(struct vsrv *srv)
{
	int w = vrt_worker_id();

	return &srv->ws[w >= 0 && (unsigned)w < srv->nworkers ? (unsigned)w : srv->nworkers];
}

/* Relaxed: statistics, read on their own by the snapshot. */
#define VSRV_ADD(srv, name, v) \
	atomic_fetch_add_explicit(&vsrv__ws(srv)->c[VSRV_C_##name], (uint64_t)(v), \
				  memory_order_relaxed)
#define VSRV_INC(srv, name) VSRV_ADD(srv, name, 1)

/* Move a job's gauge from its stage to `to` (VSRV_J_NONE: leaves). */
void vsrv__job_stage(struct vsrv *srv, struct vsrv_job *job, enum vsrv_jstage to);
/* A job answering `to` (a spare), without a vjob or a connection: the
 * parse stage makes its vjob in vj_mem and, for a job in flight, gives it
 * a reference on its connection. NULL on ENOMEM. */
struct vsrv_job *vsrv__job_new(struct vsrv *srv, const struct vsrv_reply_to *to);
/* Free a job: its vjob, its gauge, its connection reference (if held). */
void vsrv__job_free(struct vsrv *srv, struct vsrv_job *job);
/* Encode job's head from its result (writer, or parse stage): head[],
 * and xhdrs when the kind's header fields do not fit it. */
void vsrv__job_encode(struct vsrv *srv, struct vsrv_job *job);
/* Hand a finished, encoded job to its connection (writer): the slot takes
 * it and the job's connection reference is released. */
void vsrv__job_deposit(struct vsrv *srv, struct vsrv_job *job);
/* stats.c: record a sent response (class counter, kind count and latency). */
void vsrv__count_response(struct vsrv *srv, unsigned kind, int status, int64_t t0, int64_t now);

/* pool.c */
#define VSRV_POOL_CHUNK 128     /* connection objects per mmap'd chunk */
void vsrv__mem_init(struct vsrv *srv);
/* Unmap the pool (no connection may be left). */
void vsrv__mem_fini(struct vsrv *srv);
struct vsrv_conn *vsrv__conn_alloc(struct vsrv *srv); /* zeroed; NULL: no memory */
void vsrv__conn_dealloc(struct vsrv *srv, struct vsrv_conn *c);

/* Spares (pool.c): on a worker its stash first (then the depot, then
 * malloc); elsewhere plain malloc and free. A spare is given back empty
 * (a parser is reset; a busy block holds no parser, batch, pending job or
 * trace in flight, and its slots are all NULL). */
void *vsrv__spare_get(struct vsrv *srv, enum vsrv_spare k);  /* NULL: none kept */
void vsrv__spare_put(struct vsrv *srv, enum vsrv_spare k, void *p);
struct vhttp_parser *vsrv__parser_get(struct vsrv *srv);   /* NULL: no memory */
void vsrv__parser_put(struct vsrv *srv, struct vhttp_parser *p);
struct vsrv_busy *vsrv__busy_get(struct vsrv *srv);         /* empty (above); NULL: no memory */
struct vsrv_batch *vsrv__batch_alloc(struct vsrv *srv);     /* NULL: no memory */
struct vsrv_job *vsrv__job_alloc(struct vsrv *srv);         /* not zeroed; NULL: no memory */
/* A request a job kept, done with: its memory is a spare when it has the
 * standard size (VHTTP_REQUEST_MIN), else freed. Any thread. */
void vsrv__req_put(struct vsrv *srv, struct vhttp_request *r);
/* The parsers' request memory (struct vhttp_limits.req_alloc, ctx the
 * server): a spare of the standard size when one is kept, so a request a
 * job keeps costs no allocation once warm. */
void *vsrv__req_alloc(void *ctx, size_t size);
/* vsrv_free: free every spare (no worker runs). */
void vsrv__cache_free(struct vsrv *srv);

/* Requests of c not answered yet (task-private counters): an idle
 * connection (no busy block) has none. */
static inline uint64_t vsrv__in_flight(const struct vsrv_conn *c)
{
	return c->busy ? c->next_seq - c->busy->sent_seq : 0;
}

static inline int64_t vsrv__ms(unsigned v)
{
	return (int64_t)v * VB_NS_PER_MS;
}

/* A live key's current value (vsrv_set_live). */
#define vsrv__live(srv, key) atomic_load_explicit(&(srv)->live.key, memory_order_relaxed)

/* Charge (n > 0) or release (n < 0) body bytes against the budget.
 * Relaxed: a count compared with a limit; nothing is published through
 * it (a connection that misses a release looks again on its timer). */
static inline void vsrv__hold(struct vsrv *srv, int64_t n)
{
	VB_LINE_WRITE(srv_inflight);
	atomic_fetch_add_explicit(&srv->inflight, n, memory_order_relaxed);
}

static inline bool vsrv__over_budget(const struct vsrv *srv)
{
	/* Relaxed: see vsrv__hold. */
	return atomic_load_explicit(&srv->inflight, memory_order_relaxed) >= srv->body_max;
}

static inline bool vsrv__draining(const struct vsrv *srv)
{
	/* Relaxed: the drain also wakes every connection, whose next poll
	 * (ordered after the wake by the runtime) sees the flag. */
	return atomic_load_explicit(&srv->draining, memory_order_relaxed);
}

/* Responses say "Connection: close": stopping, or not ready (the drain's
 * first step). Relaxed like vsrv__draining: a stale value costs one
 * response with or without the header. */
static inline bool vsrv__closing(const struct vsrv *srv)
{
	return vsrv__draining(srv) || atomic_load_explicit(&srv->unready, memory_order_relaxed);
}

/* ------------------------------------------------------------- tracing */

/*
 * Per-request timestamps, sampled (trace.c, doc/server.md): one request in
 * vsrv_trace_set's EVERY (per worker, counted at parse) gets a record with
 * the vb_now_ns of each hand-over; a record goes to the server's log when
 * its send is collected. Off: a relaxed load at parse, a byte test in the
 * stages, a pointer test on the connection's output path.
 */
struct vsrv_trace {
	struct vsrv_trace_rec r;
	int64_t slice_end;        /* the last slice's end (exec) */
};


/* The parse stage, at request seq of c: sampled? Fills the record's
 * first stamps (client, reap, run = now, parsed) when it is. */
bool vsrv__trace_pick(struct vsrv_conn *c, const struct vhttp_request *req, uint64_t seq,
		      int64_t now);
static inline bool vsrv__trace_begin(struct vsrv_conn *c, const struct vhttp_request *req,
				     uint64_t seq, int64_t now)
{
	/* Relaxed: a setting on its own; its line is read per request anyway
	 * (the access log's switch). */
	if (vb_likely(atomic_load_explicit(&c->srv->live.trace_every, memory_order_relaxed) == 0))
		return false;
	return vsrv__trace_pick(c, req, seq, now);
}
/* Stamp point p of a traced job (parse stage, exec, writer: while it holds
 * its connection, whose busy block stays while the job is in flight). */
void vsrv__trace_mark(struct vsrv_trace *tr, enum vsrv_trace_point p);
static inline void vsrv__trace_job(const struct vsrv_job *job, enum vsrv_trace_point p)
{
	if (vb_unlikely(job->to.traced))
		vsrv__trace_mark(job->conn->busy->trace, p);
}
/* A slice of a traced job began at `start` and just ended (done: its
 * last). */
void vsrv__trace_slice(struct vsrv_trace *tr, int64_t start, bool done);
static inline void vsrv__trace_job_slice(const struct vsrv_job *job, int64_t start, bool done)
{
	if (vb_unlikely(job->to.traced))
		vsrv__trace_slice(job->conn->busy->trace, start, done);
}
/* The connection task (output.c): response seq went into the batch; the
 * batch's send starts; the batch went out (the record is finished). */
void vsrv__trace_collected(struct vsrv_conn *c);
void vsrv__trace_send(struct vsrv_conn *c);
void vsrv__trace_sent(struct vsrv_conn *c);

/* output.c: the connection's send batch and its own answers (task). */
/* Room for one more response, and no send under way. */
bool vsrv__batch_open(const struct vsrv_conn *c);
/* Make sure c->out exists (this worker's cache first); false (and the
 * connection aborts) when there is no memory. */
bool vsrv__batch_get(struct vsrv_conn *c);
/* Take the next responses in order from the slots (and a 100 Continue
 * owed); true when the 100 Continue went in (the caller moves rx on). */
bool vsrv__batch_collect(struct vsrv_conn *c);
/* log.access on: note request seq's method and target for the line its
 * response will log (a no-op when off). */
void vsrv__access_note(struct vsrv_conn *c, uint64_t seq, const char *method, const char *target,
		       size_t target_len);
/* The connection ended: the request lines noted in b (kept with it, a
 * spare) are forgotten, so the next connection's answers never show them. */
void vsrv__access_forget(struct vsrv *srv, struct vsrv_busy *b);
/* The batch went out whole: count, free, advance sent_seq. True when an
 * answer in it said close (the caller ends the requests). */
bool vsrv__batch_done(struct vsrv_conn *c, int64_t now);
void vsrv__batch_free_jobs(struct vsrv *srv, struct vsrv_batch *b);
void vsrv__batch_reset(struct vsrv_batch *b);
/* A response for `to` with this status: version, and close when `to` asks
 * or the server is closing (vsrv__closing). */
void vsrv__reply_init(struct vsrv *srv, struct vhttp_response *r, const struct vsrv_reply_to *to,
		      int status);
/* Answer a request that never parsed whole (an error, 408): it takes the
 * next request number, answers in HTTP/1.1 and closes. */
void vsrv__respond_unparsed(struct vsrv_conn *c, int status, int64_t now);
/* Answer job->to from the parse stage with its finished vjob's result (job
 * owned: freed, or kept by the request's slot until sent). */
void vsrv__respond_job(struct vsrv_conn *c, struct vsrv_job *job);
/* Answer `to` with a status and a short text body (errors, 408, 404, 405
 * with its Allow, shed 503 with Retry-After). */
void vsrv__respond_status(struct vsrv_conn *c, const struct vsrv_reply_to *to, int status,
			  const char *allow);
/* Answer `to` with a status and this text/plain body (a server route). */
void vsrv__respond_text(struct vsrv_conn *c, const struct vsrv_reply_to *to, int status, const char *text);

/* conn.c */
extern const struct vrt_task_vtable vsrv__conn_vt;
/* The three machines' transitions, the only writers of c->rx, c->tx and
 * c->end (their moves: VSRV_RX_MOVES and the others, above). vsrv__tx_to
 * is true when the send under way has ended already (collect it now).
 * vsrv__end_to takes `now` for the linger's deadline; other files end a
 * connection through vsrv__conn_abort and vsrv__conn_fail. */
void vsrv__rx_to(struct vsrv_conn *c, enum vsrv_rx to);
bool vsrv__tx_to(struct vsrv_conn *c, enum vsrv_tx to);
void vsrv__end_to(struct vsrv_conn *c, enum vsrv_end to, int64_t now);
/* The states' names, for the trace and the logs ("READ", "QUIET", ...). */
extern const char *const vsrv__rx_name[VSRV_RX_N];
extern const char *const vsrv__tx_name[VSRV_TX_N];
extern const char *const vsrv__end_name[VSRV_END_N];
/* The parser's phase (IDLE without a parser). */
enum vhttp_phase vsrv__parser_phase(const struct vsrv_conn *c);
/* Make sure c holds its busy block (and io its send operation): work
 * arrived, or the close. false: no memory. */
bool vsrv__conn_take_busy(struct vsrv_conn *c);
/* A connection accepted just before the drain gets this long for its
 * first request (it was accepted, so the client is sending one). */
#define VSRV_DRAIN_FIRST_MS 1000
/* Draining: is a request still arriving, or has a fresh connection not
 * had VSRV_DRAIN_FIRST_MS for its first one? Otherwise it closes. */
bool vsrv__drain_keeps_reading(const struct vsrv_conn *c);

/* deadline.c: act on passed deadlines (true when something changed);
 * arm the timer for the earliest. */
bool vsrv__conn_timeouts(struct vsrv_conn *c, int64_t now);
void vsrv__conn_arm(struct vsrv_conn *c, int64_t now);
/* Stop at once: nothing more is sent, the socket closes; the first
 * reason is logged if requests are dropped. The one way to abort. */
void vsrv__conn_abort(struct vsrv_conn *c, const char *reason);
/* Answer `status` before the request was read whole (a parse error, 408):
 * no more requests; once the answer is out the connection lingers (shuts
 * its write side, reads and drops what the client still sends, bounded in
 * bytes and time), then closes. */
void vsrv__conn_fail(struct vsrv_conn *c, int status, int64_t now);
/* The linger's time or byte bound passed while the client still sent:
 * close now (with a reset, as input is left unread). */
void vsrv__conn_linger_cut(struct vsrv_conn *c);
/* Create the connection for an accepted fd (closes fd on failure). */
int vsrv__conn_new(struct vsrv *srv, int fd, struct vsrv_conn **out);
/* accept.c: a connection ended: open count, acceptors. */
void vsrv__conn_closed(struct vsrv *srv);
/* accept.c: the acceptor task (struct vsrv_acceptor), made by server.c. */
extern const struct vrt_task_vtable vsrv__acceptor_vt;
void vsrv__reg_add(struct vsrv *srv, struct vsrv_conn *c);
void vsrv__reg_del(struct vsrv *srv, struct vsrv_conn *c);

/* request.c: the server's own routes, answered by the connection without a
 * job; the first rows of the per-kind statistics (index = the route), the
 * job kinds' rows follow (VSRV_ROUTES + vjob_kind_index), then "other". */
enum vsrv_route { VSRV_ROUTE_HEALTHZ, VSRV_ROUTE_READYZ, VSRV_ROUTE_LIVEZ, VSRV_ROUTES };
const char *vsrv__route_name(unsigned r);
/* request.c: a parsed request (req owned) is answered at once or becomes
 * a job on `jobs`; true when the job waits for room (left in c->pending). */
bool vsrv__request(struct vsrv_conn *c, struct vhttp_request *req, int64_t now);
/* Offer c->pending again: VCH_OK (sent), VCH_CLOSED (answered 503: shutting
 * down), both clearing c->pending; VCH_PENDING or VCH_YIELD (still waiting). */
enum vch_status vsrv__request_retry(struct vsrv_conn *c);

/* stages.c */
extern const struct vrt_task_vtable vsrv__exec_vt;
extern const struct vrt_task_vtable vsrv__lane_vt;
/* A new executor (lane_w < 0) or runner of worker lane_w's lane. */
struct vsrv_exec *vsrv__exec_new(struct vsrv *srv, int lane_w);

/* lane.c */
int vsrv__lane_init(struct vsrv *srv);
/* An executor's job that outlasted its slice: false when the lane is off
 * or closed (the executor keeps it). */
bool vsrv__lane_put(struct vsrv *srv, struct vsrv_job *job);
/* A runner's next job, or NULL: idle (woken by the next put) or, with
 * x->recv_closed set, the lane is closed and empty. */
struct vsrv_job *vsrv__lane_take(struct vsrv *srv, struct vsrv_exec *x);
/* What a runner does after a slice ("Turns" in lane.c). */
enum vsrv_lane_next {
	VSRV_LANE_YIELD = 0, /* ends its poll: its worker's other work first */
	VSRV_LANE_TURN,      /* its next slice at once: jobs wait in the lane */
	VSRV_LANE_RUN,       /* its next slice at once: a short run, saturated */
};
/* A runner's job used up a slice (the turn-th of this poll), at `now`.
 * `saturated`: vsrv__lane_saturated's verdict. */
enum vsrv_lane_next vsrv__lane_more(struct vsrv *srv, struct vsrv_exec *x, int64_t now, bool saturated,
				    unsigned *turn);
/* The verdict the short runs follow: the runtime finds its CPUs saturated
 * (vrt_saturated) and the light work queued behind a run can go to a
 * sibling (two workers or more, stealing on). */
bool vsrv__lane_saturated(struct vsrv *srv);
/* A runner polled on another worker's thread (the runtime's stealing took
 * it): true when it has asked to be woken on its own worker instead, and
 * its poll ends pending ("Placement" in lane.c). */
bool vsrv__lane_away(struct vsrv *srv, struct vsrv_exec *x);
/* A runner ran a slice of `ran` ns that ended at `now`. */
void vsrv__lane_account(struct vsrv_exec *x, int64_t now, int64_t ran);
void vsrv__lane_close(struct vsrv *srv);
uint64_t vsrv__lane_waiting(struct vsrv *srv);
void vsrv__lane_free(struct vsrv *srv);
extern const struct vrt_task_vtable vsrv__writer_vt;

/* kinds.c: the job kinds' callbacks and quarantine. */
/* A job of kind k was made (its start ran, or it goes to the pool). */
static inline void vsrv__kind_job(struct vsrv *srv, const struct vjob_kind *k)
{
	/* Relaxed: statistics. */
	atomic_fetch_add_explicit(&vsrv__ws(srv)->steps[k->index].jobs, 1, memory_order_relaxed);
}
/* A callback of kind k ran ns nanoseconds: counted, the longest kept; for
 * a kind that is not blocking, longer than overrun_factor x slice_us is an
 * overrun (logged, rate-limited, and counted toward its quarantine). */
void vsrv__kind_slice(struct vsrv *srv, const struct vjob_kind *k, int64_t ns);
/* Is kind k quarantined? Then the caller answers 503 (counted here). */
static inline bool vsrv__kind_quarantined(struct vsrv *srv, const struct vjob_kind *k)
{
	/* Relaxed: a switch on its own; a request that reads it a moment
	 * late is served, or refused, as of a moment earlier. */
	if (vb_likely(!atomic_load_explicit(&srv->quar[k->index].on, memory_order_relaxed)))
		return false;
	atomic_fetch_add_explicit(&vsrv__ws(srv)->steps[k->index].refused, 1, memory_order_relaxed);
	return true;
}
/* The per-kind part of a snapshot (kinds, module counters). */
void vsrv__kinds_snapshot(struct vsrv *srv, struct vsrv_stats *out);
int vsrv__kinds_init(struct vsrv *srv);
void vsrv__kinds_free(struct vsrv *srv);

/* blocking.c: the blocking pool. */
/* Make the pool's queue when a registered kind is blocking (vsrv_new). */
int vsrv__pool_new(struct vsrv *srv);
/* Start its threads (vsrv_start). 0 or -errno. */
int vsrv__pool_start(struct vsrv *srv);
/* Close its queue and wait for its threads (vsrv_stop, after the drain):
 * they drop what is left (its connections are gone); one still inside a
 * step after VSRV_POOL_JOIN_MS is left running (logged; pool.stuck). */
void vsrv__pool_stop(struct vsrv *srv);
void vsrv__pool_free(struct vsrv *srv);
void vsrv__pool_stats(struct vsrv *srv, struct vsrv_stats *out);

/* A job's connection is gone (advice, relaxed: see stages.c). */
static inline bool vsrv__job_dead(const struct vsrv_job *job)
{
	return atomic_load_explicit(&job->conn->dead, memory_order_relaxed);
}

/* Rate-limited log of connection problems. */
extern struct vb_ratelimit vsrv__conn_rl;

#endif
