/* SPDX-License-Identifier: MIT */
/*
 * server/server.h: the HTTP/1.1 front end and the stages of
 * doc/server.md: listeners and one accept task per listener per worker, one task per
 * connection (parse, limits, timeouts, /healthz and errors, 100 Continue,
 * in-order sending), the `jobs` channel, executor tasks running the job
 * kinds in slices, the `replies` channel, and writer tasks that encode
 * responses and hand them to their connection in request order.
 *
 * Threading contract: vsrv_new, vsrv_start, vsrv_stop and vsrv_free are
 * called by one control thread (main), never from a worker; the runtime and
 * the I/O driver must be running from vsrv_start until vsrv_stop returns.
 * vsrv_stats_snapshot, vsrv_draining and vsrv_port may be called from any
 * thread at any time between vsrv_new and vsrv_free. Everything else runs in
 * runtime tasks on the worker threads.
 *
 * Ownership: the server owns its listeners' use (the I/O driver owns their
 * memory), channels, tasks and every connection and job; vsrv_free releases
 * them. It borrows the runtime and the I/O driver, which must outlive it.
 */
#ifndef VOLTD_SERVER_SERVER_H
#define VOLTD_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/histogram.h"
#include "base/lineaudit.h"
#include "chan/chan.h"

struct vrt;
struct vio;
struct vsrv;
struct vjob_kind;

#define VSRV_MAX_LISTEN 16
/* Requests in flight per connection at most (server.max_pipeline's bound). */
#define VSRV_MAX_PIPELINE 1024u
/* Threads of the blocking pool at most ([modules] blocking_threads' bound). */
#define VSRV_BLOCKING_THREADS_MAX 256u

enum vsrv_on_full {
	VSRV_ON_FULL_WAIT = 0, /* stop reading the connection until there is room */
	VSRV_ON_FULL_SHED = 1, /* answer 503 with Retry-After at once */
	/* as shed, and also 503 while the jobs' wait in the channel stands
	 * above codel_target_ms (admit.c) */
	VSRV_ON_FULL_CODEL = 2,
};

/* Embedded in the daemon's struct vcfg and filled from voltd.conf's
 * schema (src/voltd/cfg_schema.c, the only place its defaults are written);
 * vsrv_new copies it. Public. */
struct vsrv_config {
	struct {
		struct sockaddr_storage addr;
		socklen_t len;
	} listen[VSRV_MAX_LISTEN];
	unsigned n_listen;
	/* Already listening sockets (socket activation): used instead of
	 * listen[] when n_fds > 0 (at most VSRV_MAX_LISTEN); each becomes one
	 * listener served by every worker, which takes the fd over. */
	const int *fds;
	unsigned n_fds;
	unsigned backlog;
	unsigned max_connections;
	unsigned header_timeout_ms, body_timeout_ms, idle_timeout_ms;
	/* a send under way with no byte acknowledged for this long is cut */
	unsigned send_timeout_ms;
	unsigned max_header_bytes;
	unsigned max_body_bytes;
	unsigned max_pipeline;          /* requests in flight per connection, 1..VSRV_MAX_PIPELINE */
	/* bytes of request and reply bodies held at once, all connections:
	 * over it, reading stops (wait) or jobs are answered 503 (shed) */
	uint64_t max_inflight_bytes;
	unsigned exec_tasks, write_tasks;
	unsigned jobs_capacity, replies_capacity;
	enum vsrv_on_full on_full;
	/* on_full = codel: the wait a job may stand in `jobs`, and the
	 * interval it must stand above that for (live, vsrv_set_live) */
	unsigned codel_target_ms, codel_interval_ms;
	unsigned retry_after_s;
	/* log.access: a log line per response sent (live) */
	bool access_log;
	unsigned slice_us;
	/* stages.heavy_lane: a job that outlasts its first slice runs on the
	 * heavy lane, first come first served, one per worker (live);
	 * stages.heavy_share: the share of a worker (percent) a runner keeps
	 * while heavy jobs wait and light work also does (live) */
	bool heavy_lane;
	unsigned heavy_share;
	/* stages.heavy_wait_ms: while the lane's first job has waited this
	 * long, a job that outlasts its slice stays with its executor (0:
	 * the lane takes every job; live) */
	unsigned heavy_wait_ms;
	/* stages.heavy_spread_us: a job entering the lane while its worker's
	 * runner is busy waits this long for it before an idle runner of
	 * another worker takes it (0: at once; live) */
	unsigned heavy_spread_us;
	/* [modules]: the blocking pool (threads and its queue's capacity;
	 * started only when a registered kind is blocking); a step longer
	 * than overrun_factor x slice_us is an overrun; quarantine_overruns
	 * overruns of a kind within quarantine_window_ms quarantine it (0:
	 * never). The last three are live (vsrv_set_live). */
	unsigned blocking_threads, blocking_queue;
	unsigned overrun_factor;
	unsigned quarantine_overruns, quarantine_window_ms;
	/* vsrv_stop: how long in-flight requests may take to finish before
	 * their connections are cut. */
	unsigned drain_timeout_ms;
	/* Called by vsrv_stop on its own thread about every 250 ms while it
	 * waits for connections to finish (the daemon's watchdog, status and
	 * EXTEND_TIMEOUT_USEC); NULL: none. */
	void (*drain_tick_fn)(void *ctx);
	void *drain_tick_ctx;
};

/* 0 if vsrv_new accepts cfg's values, else -EINVAL. Any thread. */
int vsrv_config_check(const struct vsrv_config *cfg);

/* Check the config, create the channels and bind the listeners (so that
 * errors such as EADDRINUSE surface before anything runs). 0 or -errno
 * (-EINVAL: a bad value; the bind / listen error). */
int vsrv_new(const struct vsrv_config *cfg, struct vrt *rt, struct vio *io,
	     struct vsrv **out);

/* Spawn the accept, exec and write tasks: from now on connections are
 * served. 0 or -errno (-ESHUTDOWN: the runtime stopped). */
int vsrv_start(struct vsrv *srv);

/* New connections to as many workers as the work needs now
 * (vrt_spread_width: the gather rule; all of them with scheduler.gather
 * off), so that a second worker is not handed connections one worker
 * serves well. Called by vsrv_new and by the daemon's tick; main thread. */
void vsrv_spread(struct vsrv *srv);

/* Number of listeners and the port listener i is bound to (host order). */
unsigned vsrv_listener_count(const struct vsrv *srv);
int vsrv_port(const struct vsrv *srv, unsigned i);

/* True from the moment vsrv_stop begins (for /readyz and the daemon). */
bool vsrv_draining(const struct vsrv *srv);

/*
 * Readiness, set by the daemon (any thread, any time): while not ready,
 * /readyz answers 503 and every response says "Connection: close" (a load
 * balancer stops sending and does not reuse the connection), but requests
 * are still served. Ready from vsrv_new. The first step of the drain.
 */
void vsrv_set_ready(struct vsrv *srv, bool ready);
bool vsrv_ready(const struct vsrv *srv);

/*
 * The keys read per request, changed while running (the control socket's
 * `set`, a reload: the schema rows whose setter is live_server): their
 * fields of cfg are copied, the rest of cfg is ignored. Any thread, any
 * time between vsrv_new and vsrv_free; connections use the new values for
 * the deadlines, 503s, jobs and access-log lines they make from then on.
 * 0, or -EINVAL for a zero timeout. vsrv_get_live reads the values in use
 * back into the same fields of out (the others untouched).
 */
int vsrv_set_live(struct vsrv *srv, const struct vsrv_config *cfg);
void vsrv_get_live(struct vsrv *srv, struct vsrv_config *out);
/* Liveness for /livez (any thread): false while a worker is stalled past
 * the daemon's fail threshold. Alive from vsrv_new. */
void vsrv_set_alive(struct vsrv *srv, bool alive);

/*
 * Drain and stop: close the listeners, stop reading new requests, let the
 * requests already received finish and be answered (their responses say
 * "Connection: close") -- a request whose first bytes have arrived is
 * still read to its end, upload included --, close idle connections at
 * once; after cfg.drain_timeout_ms cut whatever is left (counted as
 * dropped, a request cut while arriving included). Then stop
 * the exec and write tasks. Blocks the calling (non-worker) thread; the
 * runtime must still run. Returns 0 when everything finished in time,
 * -ETIMEDOUT when connections had to be cut. Idempotent.
 */
int vsrv_stop(struct vsrv *srv);

/* Free everything. After vsrv_stop, and after the runtime has shut down
 * (vrt_shutdown), so that no task of the server can still be dropped. */
void vsrv_free(struct vsrv *srv);

/* ------------------------------------------------------------- stats */

enum vsrv_stage { VSRV_STAGE_PARSE, VSRV_STAGE_EXEC, VSRV_STAGE_WRITE, VSRV_STAGE_SEND, VSRV_STAGES };

/* Per kind (labels module and kind), one line per counter
 * (base/metric.h); the latency histogram and the module's own counters are
 * rendered on their own. The slices are every callback of the kind that
 * ran (start, each step), each timed by the thread that ran it; the
 * server's routes and "other" have none. */
#define VSRV_KIND_METRICS(X) \
	X(count, COUNTER_SNAP, "", "responses sent for requests of this job kind", "kind_responses") \
	X(jobs, COUNTER_SNAP, "", "jobs of this kind made (start run, or queued for the blocking pool)", "kind_jobs") \
	X(slices, COUNTER_SNAP, "", "callbacks of the kind run (start and each step), each timed", "kind_slices") \
	X(slice_ns, COUNTER_SNAP, "nanoseconds", "time inside those callbacks", "kind_slice") \
	X(slice_overruns, COUNTER_SNAP, "", \
	  "callbacks longer than [modules] overrun_factor x [jobs] slice_us (never for a blocking kind)", \
	  "kind_slice_overruns") \
	X(slice_max_ns, GAUGE_SNAP, "nanoseconds", "the longest callback since start or `voltctl clear counters`", \
	  "kind_slice_max") \
	X(quarantined, GAUGE_SNAP, "", \
	  "1 while the kind is quarantined ([modules] quarantine_overruns): its requests are answered 503", \
	  "kind_quarantined") \
	X(quarantine_refused, COUNTER_SNAP, "", "requests answered 503 because the kind was quarantined", \
	  "kind_quarantine_refused")

#define VSRV_KIND_COUNTERS 16 /* VOLTD_COUNTERS_MAX of <voltd/module.h> (kinds.c checks) */

struct vsrv_kind_stats {
	const char *name;          /* "healthz", "echo", ... (static) */
	const char *module;        /* the kind's module, "voltd" for the server's own rows (static) */
	VSRV_KIND_METRICS(VB_METRIC_FIELD)
	struct vb_hist_snap lat;   /* parse -> response sent, nanoseconds */
	/* the module's counters of the kind (voltd->count()), in its order;
	 * their names: vjob_kind_counter_decl of vsrv_kind_job's kind */
	unsigned n_counters;
	uint64_t counters[VSRV_KIND_COUNTERS];
};
extern const struct vb_metric vsrv_kind_metrics[];
extern const size_t vsrv_kind_metrics_n;

/*
 * The server's scalars, one line each: X(field, kind, unit, help[, name])
 * (base/metric.h). A slot kind (COUNTER, GAUGE) is a counter of every
 * worker's block (server/internal.h), bumped with VSRV_INC(srv, field) /
 * VSRV_ADD(srv, field, n) and summed by vsrv_stats_snapshot; a _SNAP value
 * is read there from the server itself.
 */
#define VSRV_METRICS(X) \
	X(conns_open, GAUGE_SNAP, "", "client connections open now") \
	X(conns_accepted, COUNTER, "", "client connections accepted") \
	X(conns_closed, COUNTER, "", "client connections closed") \
	X(conns_refused, COUNTER, "", "connections closed at once for want of memory") \
	X(accept_pauses, COUNTER, "", "times accepting paused at max_connections") \
	X(accept_paused, GAUGE_SNAP, "", "1 while accepting is paused") \
	X(requests, COUNTER, "", "requests received (parsed, parse errors answered, 408s)") \
	X(continues, COUNTER, "", "interim 100 Continue responses sent") \
	X(requests_dropped, COUNTER, "", "requests whose connection closed before their response went out") \
	X(results_dropped, COUNTER, "", "finished jobs whose connection was gone") \
	X(shed, COUNTER, "", \
	  "requests answered 503 at once because the jobs channel was full, max_inflight_bytes was reached or (codel) the jobs' wait stood above target") \
	X(timeouts_header, COUNTER, "", "request heads not received in time (408)") \
	X(timeouts_body, COUNTER, "", "request bodies not received in time (408)") \
	X(timeouts_idle, COUNTER, "", "idle keep-alive connections closed") \
	X(timeouts_send, COUNTER, "", "connections cut because a send took too long") \
	X(client_resets, COUNTER, "", "connections ended by the peer mid-request or mid-response") \
	X(lingers, COUNTER, "", \
	  "connections that answered before the request was read whole (parse errors, 408), shut their write side and read what the client still sent before closing") \
	X(linger_drained, COUNTER, "bytes", "bytes read and dropped while lingering") \
	X(linger_cut, COUNTER, "", \
	  "lingers ended by their time or byte bound while the client still sent (closed with a reset)") \
	X(bytes_in, COUNTER, "bytes", "bytes received from clients") \
	X(bytes_out, COUNTER, "bytes", "bytes sent to clients") \
	X(draining, GAUGE_SNAP, "", "1 while not ready (/readyz 503): drained by the control socket, or stopping") \
	X(stopping, GAUGE_SNAP, "", "1 once the server stops (SIGTERM): drained for good") \
	X(budget_waits, COUNTER, "", "times a connection stopped reading because max_inflight_bytes was reached") \
	X(budget_shed, COUNTER, "", \
	  "requests answered 503 at once because max_inflight_bytes was reached (also in shed)") \
	X(delay_shed, COUNTER, "", \
	  "requests answered 503 because the jobs' wait in the queue stood above codel_target_ms (on_full = codel; also in shed)") \
	X(queue_delay_ns, GAUGE_SNAP, "nanoseconds", \
	  "on_full = codel: the least wait of a job in the jobs channel over the last interval (0 in other modes)", \
	  "queue_delay") \
	X(delay_overload, GAUGE_SNAP, "", "on_full = codel: 1 while overloaded (that least wait above codel_target_ms)") \
	X(spares_made, COUNTER, "", \
	  "request buffers (parsers, busy blocks, batches, jobs) allocated because the worker's cache and the depot were empty: the pool growing to the load") \
	X(spares_freed, COUNTER, "", "request buffers freed because the worker's cache and the depot were full: the pool shrinking") \
	X(lane_jobs, COUNTER, "", \
	  "jobs that outlasted their first slice and moved to the heavy lane (stages.heavy_lane)") \
	X(lane_wait_ns, COUNTER, "nanoseconds", \
	  "time those jobs waited in the lane for a runner (over lane_jobs: the mean wait)", "lane_wait") \
	X(lane_waiting, GAUGE_SNAP, "", "heavy jobs waiting in the lane now") \
	X(lane_spreads, COUNTER, "", \
	  "lane jobs taken by an idle runner of another worker after waiting stages.heavy_spread_us for their own") \
	X(lane_homes, COUNTER, "", \
	  "runners found on another worker's thread (taken by the scheduler's stealing) and sent back to their own") \
	X(lane_turn_slices, COUNTER, "", \
	  "slices a runner took at once, not yielding to its worker's other work, because jobs waited in the lane") \
	X(lane_run_slices, COUNTER, "", \
	  "slices a runner with nothing waiting took at once, in a short run while the CPUs were saturated") \
	X(trace_sampled, COUNTER, "", "requests picked for a trace record (voltctl trace)") \
	X(trace_skipped, COUNTER, "", "picks skipped because the connection's trace record was in use") \
	X(inflight_bytes, GAUGE_SNAP, "bytes", \
	  "request and reply body bytes, and received bytes copied for connections that do not read, held now (max_inflight_bytes)", \
	  "inflight") \
	X(inflight_copies_bytes, GAUGE_SNAP, "bytes", \
	  "of which received bytes copied for connections that do not read (at most a quarter of max_inflight_bytes)", \
	  "inflight_copies") \
	X(blocking_threads, GAUGE_SNAP, "", \
	  "threads of the blocking pool ([modules] blocking_threads; 0 when no kind is blocking)") \
	X(blocking_busy, GAUGE_SNAP, "", "blocking pool threads inside a job now") \
	X(blocking_jobs, COUNTER, "", "jobs a blocking pool thread took from the pool's queue") \
	X(blocking_wait_ns, COUNTER, "nanoseconds", \
	  "time those jobs had waited since their parse (over blocking_jobs: the mean wait; `voltctl hist blocking_wait`)", \
	  "blocking_wait") \
	X(blocking_shed, COUNTER, "", \
	  "jobs of blocking kinds answered 503 because the pool's queue was full or (codel) their wait stood above target (also in shed)")

/*
 * A snapshot; every field is read on its own (not one instant's cut), so
 * two related counters may disagree by what is in flight. Public fields.
 * Scalar fields are VSRV_METRICS (table vsrv_metrics); responses, in_flight
 * and the channels are described by the labelled families of
 * vsrv_metric_groups (labels code, stage, channel); kinds[] by
 * vsrv_kind_metrics (label kind).
 */
struct vsrv_stats {
	VSRV_METRICS(VB_METRIC_FIELD)
	uint64_t responses[6];      /* by status class: [1] 1xx final never, [2] 2xx ... [5] 5xx */
	/* per stage: requests currently in that stage */
	uint64_t in_flight[VSRV_STAGES];
	/* channels (adjacent: vsrv_metric_groups walks them with one stride);
	 * blocking is the blocking pool's queue (zeros without a pool) */
	struct vch_stats jobs, replies, blocking;
	/* per kind: the server's routes, the job kinds, "other" (as many as
	 * the registry has: the memory after the struct, vsrv_stats_new) */
	unsigned n_kinds;
	unsigned kinds_cap;
	struct vsrv_kind_stats *kinds;
	/* per worker: its members of the jobs and replies channels, whose
	 * sums are jobs and replies above (as many as workers: the memory
	 * after kinds; table vch_metrics, labels worker and channel) */
	unsigned n_workers;
	unsigned workers_cap;
	struct vsrv_worker_channels {
		struct vch_stats jobs, replies;
	} *worker_channels;
	/* writes to cache lines shared between workers, by site (base/lineaudit.h):
	 * counted in --enable-line-audit builds only (the family line_writes
	 * exists there only); 0 otherwise */
	uint64_t line_writes[VB_LINE_N];
};
extern const struct vb_metric vsrv_metrics[];
extern const size_t vsrv_metrics_n;
extern const struct vb_metric_group vsrv_metric_groups[];
extern const size_t vsrv_metric_groups_n;

/* ------------------------------------------------------------- tracing */

/*
 * Per-request timestamps at each hand-over, for one request in `every`
 * (doc/server.md, "Tracing"): vb_now_ns (CLOCK_MONOTONIC) at each point,
 * 0 where the request did not pass (a /healthz has no job) or the backend
 * cannot say.
 */
enum vsrv_trace_point {
	VSRV_TP_CLIENT,   /* the client's own send time: query parameter trace_t0 */
	VSRV_TP_REAP,     /* the driver reaped the request's first bytes */
	VSRV_TP_RUN,      /* the connection task's poll that parsed it began */
	VSRV_TP_PARSED,   /* parsed */
	VSRV_TP_QUEUED,   /* offered to `jobs` */
	VSRV_TP_EXEC,     /* an executor took it */
	VSRV_TP_SLICE1,   /* its first slice began */
	VSRV_TP_DONE,     /* its last slice ended */
	VSRV_TP_WRITER,   /* a writer took it from `replies` */
	VSRV_TP_DEPOSIT,  /* in its connection's slot, the connection woken */
	VSRV_TP_COLLECT,  /* in the connection's send batch */
	VSRV_TP_SEND,     /* the batch's send asked for */
	VSRV_TP_ENTER,    /* the send handed to the kernel */
	VSRV_TP_SENT,     /* its completion reaped */
	VSRV_TP_END,      /* the connection collected the send */
	VSRV_TP_N
};
/* The point's name in replies ("client", "reap", ...); NULL past the end. */
const char *vsrv_trace_point_name(unsigned p);

enum { VSRV_TW_PARSE, VSRV_TW_EXEC, VSRV_TW_WRITER, VSRV_TW_SEND, VSRV_TW_N };

struct vsrv_trace_rec {
	int64_t t[VSRV_TP_N];
	int64_t run_ns;           /* time inside the kind's slices */
	int64_t gap_max_ns;       /* the longest wait between two of its slices */
	uint32_t slices;
	uint16_t status;
	uint32_t kind;            /* index of vsrv_stats.kinds */
	int8_t worker[VSRV_TW_N]; /* who parsed, ran, encoded, sent it (-1: nobody) */
};

struct vsrv_trace_status {
	unsigned every;           /* 0: off */
	unsigned pending;         /* finished records not taken yet */
	uint64_t sampled;         /* requests picked */
	uint64_t finished;        /* records that reached the log */
	uint64_t lost;            /* finished with the log full (not kept) */
	uint64_t skipped;         /* picked while its connection had one in flight */
};

/* Trace one request in `every` from now on (0: none). The log is
 * allocated the first time (VSRV_TRACE_LOG records, kept until vsrv_free).
 * 0 or -ENOMEM. Any thread. */
int vsrv_trace_set(struct vsrv *srv, unsigned every);
/* Move up to max finished records, oldest first, to out; *st (may be
 * NULL) the counts after. Returns how many. Any thread. Out may be NULL
 * when max is 0. */
#define VSRV_TRACE_LOG 16384 /* finished records the log keeps */
unsigned vsrv_trace_take(struct vsrv *srv, struct vsrv_trace_rec *out, unsigned max,
			 struct vsrv_trace_status *st);
/* The name of kind index k (vsrv_stats.kinds[k].name). */
const char *vsrv_kind_name(const struct vsrv *srv, unsigned k);
/* The job kind of index k, NULL for the server's own rows ("healthz",
 * "other"). */
const struct vjob_kind *vsrv_kind_job(const struct vsrv *srv, unsigned k);

/* `voltctl clear counters`: the longest-callback gauges (slice_max_ns)
 * start again from 0. `voltctl clear quarantine` and a reload: every
 * quarantined kind serves again (its overruns counted afresh); returns
 * how many were. Any thread. */
void vsrv_kinds_clear_max(struct vsrv *srv);
unsigned vsrv_quarantine_clear(struct vsrv *srv);
/* `voltctl hist blocking_wait`: the jobs' waits for a blocking pool
 * thread (nanoseconds). Any thread. */
void vsrv_blocking_wait_hist(struct vsrv *srv, struct vb_hist_snap *out);

/* What the server has freed so far, roughly (connections closed, bytes
 * sent: each gives buffers back): a cheap hint for whoever trims malloc's
 * arenas that there may be something to trim. Any thread. */
uint64_t vsrv_freed_mark(struct vsrv *srv);

/* A snapshot's memory, zeroed, with room for srv's kinds (~8 KiB each):
 * free() it. NULL: no memory. Any thread. */
struct vsrv_stats *vsrv_stats_new(const struct vsrv *srv);
/* Fill *out (from vsrv_stats_new for this server). Any thread. */
void vsrv_stats_snapshot(struct vsrv *srv, struct vsrv_stats *out);

/* Log the snapshot's counters on one line at notice level, from the tables
 * (vb_metric_format): "server stats: conns_open=N ... responses_2xx=N ...
 * in_flight_parse=N ... jobs_send_waits=N ...", then one line per kind that
 * answered or had jobs: "server kind NAME: count=N p50_us=N p90_us=N
 * p99_us=N p999_us=N module=M jobs=N slices=N slice_overruns=N
 * slice_max_us=N", then its module's counters, COUNTER=N each. */
void vsrv_stats_log(struct vsrv *srv);

#endif
