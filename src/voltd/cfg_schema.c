/* SPDX-License-Identifier: MIT */
/*
 * voltd/cfg_schema.c: the schema of voltd.conf, the file you edit to add a
 * key: the sections, one row per key with every fact about it, the names
 * of ENUM values, the live keys' setters, and the lookups. The engine that
 * reads the rows is cfg.c; their value types are cfg_types.c.
 * Read-only data (see cfg.h).
 */
#include "config.h"
#include "voltd/cfg.h"
#include "voltd/cfg_internal.h"
#include "base/compiler.h"
#include "base/log.h"
#include "jobs/job.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <syslog.h>

static const char *const backend_names[] = { "auto", "uring", "libev", NULL };
static const char *const on_full_names[] = { "wait", "shed", "codel", NULL };
/* From LOG_ERR up (the row's .choice_base): log.level is its syslog level. */
static const char *const level_names[] = { "err", "warning", "notice", "info", "debug", NULL };

#define F(f) .offset = offsetof(struct vcfg, f), .field = #f
/* ENUM keys store the index of their name (plus the row's .choice_base): the
 * layers' enums follow the lists. */
static_assert(VIO_BACKEND_AUTO == 0 && VIO_BACKEND_URING == 1 && VIO_BACKEND_LIBEV == 2,
	      "backend_names follows enum vio_backend");
static_assert(VSRV_ON_FULL_WAIT == 0 && VSRV_ON_FULL_SHED == 1 && VSRV_ON_FULL_CODEL == 2,
	      "on_full_names follows enum vsrv_on_full");
static_assert(sizeof(enum vio_backend) == sizeof(int) && sizeof(enum vsrv_on_full) == sizeof(int),
	      "ENUM keys are stored as int");

/*
 * The live keys' setters: a row with .apply is live (`set`, reload), and
 * this is how its value reaches the running daemon. A setter that takes
 * several keys (vsrv_set_live, the interval pair) is named by each of its
 * rows and called once (vcfg_apply_live).
 */
static int live_stealing(const struct vcfg_live *to, const struct vcfg *c)
{
	return to->rt ? vrt_set_stealing(to->rt, c->scheduler.stealing) : 0;
}

static int live_global_interval(const struct vcfg_live *to, const struct vcfg *c)
{
	return to->rt ? vrt_set_global_interval(to->rt, c->scheduler.global_interval_min,
						c->scheduler.global_interval_max) : 0;
}

static int live_lifo_poll_cap(const struct vcfg_live *to, const struct vcfg *c)
{
	return to->rt ? vrt_set_lifo_poll_cap(to->rt, c->scheduler.lifo_poll_cap) : 0;
}

static int live_budget(const struct vcfg_live *to, const struct vcfg *c)
{
	return to->rt ? vrt_set_budget(to->rt, c->scheduler.budget) : 0;
}

static int live_io_reap_us(const struct vcfg_live *to, const struct vcfg *c)
{
	return to->rt ? vrt_set_io_reap_us(to->rt, c->scheduler.io_reap_us) : 0;
}

static int live_gather(const struct vcfg_live *to, const struct vcfg *c)
{
	return to->rt ? vrt_set_gather(to->rt, c->scheduler.gather) : 0;
}

/* -EINVAL when the runtime started without its monitor: the daemon keeps
 * the running value then (voltd/reconf.c: monitor_off). */
static int live_stall_warn_ms(const struct vcfg_live *to, const struct vcfg *c)
{
	return to->rt ? vrt_set_stall_warn_ms(to->rt, c->scheduler.stall_warn_ms) : 0;
}

/* The [server], [stages] and [log] keys read per request (server.h). */
static int live_server(const struct vcfg_live *to, const struct vcfg *c)
{
	return to->srv ? vsrv_set_live(to->srv, &c->server) : 0;
}

static int live_log_level(const struct vcfg_live *to, const struct vcfg *c)
{
	(void)to;
	vb_log_set_level(c->log.level);
	return 0;
}

static const struct vcfg_section sections[] = {
	{ "scheduler", "The work-stealing scheduler that runs every task." },
	{ "io", "The per-worker I/O driver." },
	{ "server", "The HTTP/1.1 front end: listeners, limits and timeouts." },
	{ "stages", "The parse, exec and write stages and the bounded channels between them." },
	{ "jobs", "Limits and slicing of the job kinds." },
	{ "control", "The UNIX control socket that voltctl talks to." },
	{ "log", "Logging." },
	{ "modules", "Where the modules' files are, the blocking pool, and the budget every kind's steps are held "
		     "to. Each [module.NAME] section after it loads module NAME." },
};

/*
 * The schema: one row per key, in file order, every fact about the key
 * written once (see doc/config.md, "Adding a key"). Positional:
 * section, name, type, default as written in the file, min, max, F(field
 * of struct vcfg). Then by name, only what applies: .unit ("ms", "s",
 * "us", "bytes"), .flags (VCFG_F_*), .choices (ENUM, and .choice_base when
 * the first choice is not stored as 0), .apply (the live
 * setter above; none = restart only, or VCFG_F_RELOAD), and .doc (one line,
 * lower case, no final period).
 */
static const struct vcfg_key schema[] = {
	/* [scheduler] */
	{ "scheduler", "workers", VCFG_UINT, "auto", 1, VRT_MAX_WORKERS, F(scheduler.workers),
	  .flags = VCFG_F_AUTO,
	  .doc = "worker threads; auto = online CPUs" },
	{ "scheduler", "stealing", VCFG_BOOL, "on", 0, 1, F(scheduler.stealing),
	  .apply = live_stealing,
	  .doc = "idle workers steal half of a busy worker's queue" },
	{ "scheduler", "global_interval_min", VCFG_UINT, "8", 1, VRT_GLOBAL_INTERVAL_MAX, F(scheduler.global_interval_min),
	  .apply = live_global_interval,
	  .doc = "lower bound of the adaptive injection-queue check interval (ticks)" },
	{ "scheduler", "global_interval_max", VCFG_UINT, "255", 1, VRT_GLOBAL_INTERVAL_MAX, F(scheduler.global_interval_max),
	  .apply = live_global_interval,
	  .doc = "upper bound of the adaptive injection-queue check interval (ticks)" },
	{ "scheduler", "global_batch_max", VCFG_UINT, "64", 1, VRT_GLOBAL_BATCH_MAX, F(scheduler.global_batch_max),
	  .doc = "most tasks a worker takes from the injection queue at once" },
	{ "scheduler", "lifo_slot", VCFG_BOOL, "on", 0, 1, F(scheduler.lifo_slot),
	  .doc = "run the task a worker just spawned or woke next" },
	{ "scheduler", "lifo_poll_cap", VCFG_UINT, "3", 1, VRT_LIFO_POLL_CAP_MAX, F(scheduler.lifo_poll_cap),
	  .apply = live_lifo_poll_cap,
	  .doc = "most LIFO-slot polls in a row before the local queue is served" },
	{ "scheduler", "budget", VCFG_UINT, "128", 1, VRT_BUDGET_MAX, F(scheduler.budget),
	  .apply = live_budget,
	  .doc = "channel and I/O operations a task may do per poll before it yields" },
	{ "scheduler", "park_timeout_ms", VCFG_UINT, "2", 1, VRT_PARK_TIMEOUT_MS_MAX, F(scheduler.park_timeout_ms),
	  .unit = "ms",
	  .doc = "longest sleep of an idle worker while another worker is awake (its queue may hold a task it did not announce); with every worker idle, none" },
	{ "scheduler", "io_poll_interval", VCFG_UINT, "61", 0, VRT_IO_POLL_INTERVAL_MAX, F(scheduler.io_poll_interval),
	  .doc = "polls between two looks at I/O completions while a worker is busy; 0 = only before parking" },
	{ "scheduler", "io_reap_us", VCFG_UINT, "100", 0, VRT_IO_REAP_US_MAX, F(scheduler.io_reap_us),
	  .unit = "us", .apply = live_io_reap_us,
	  .doc = "at the end of a slice, look at I/O completions if none were reaped for this long; 0 = by io_poll_interval only" },
	{ "scheduler", "gather", VCFG_BOOL, "on", 0, 1, F(scheduler.gather),
	  .apply = live_gather,
	  .doc = "work stays on the worker that has it (no sibling woken, no stealing, new connections to busy workers) until one is saturated or held up" },
	/* [io] */
	{ "io", "backend", VCFG_ENUM, "auto", 0, 0, F(io.backend),
	  .choices = backend_names,
	  .doc = "I/O backend: uring, libev, or auto (io_uring when usable, else libev)" },
	{ "io", "ring_entries", VCFG_UINT, "4096", VIO_RING_ENTRIES_MIN, VIO_RING_ENTRIES_MAX, F(io.ring_entries),
	  .flags = VCFG_F_POW2,
	  .doc = "submission queue entries of each worker's io_uring (power of two)" },
	{ "io", "recv_buffer_size", VCFG_UINT, "16384", VIO_RECV_BUFFER_SIZE_MIN, VIO_RECV_BUFFER_SIZE_MAX,
	  F(io.recv_buffer_size),
	  .unit = "bytes",
	  .doc = "bytes per receive buffer" },
	{ "io", "recv_buffers", VCFG_UINT, "256", VIO_RECV_BUFFERS_MIN, VIO_RECV_BUFFERS_MAX, F(io.recv_buffers),
	  .flags = VCFG_F_POW2,
	  .doc = "receive buffers per worker (power of two)" },
	{ "io", "recv_multishot", VCFG_BOOL, "on", 0, 1, F(io.recv_multishot),
	  .doc = "io_uring: one multishot receive per connection into provided buffers; off = a receive per read" },
	{ "io", "accept_multishot", VCFG_BOOL, "on", 0, 1, F(io.accept_multishot),
	  .doc = "io_uring: one multishot accept per listener; off = an accept per connection" },
	{ "io", "fixed_files", VCFG_BOOL, "on", 0, 1, F(io.fixed_files),
	  .doc = "io_uring: a connection's receives and sends on the worker that holds its descriptor in its registered-file table use that table; off = regular descriptors only (libev ignores it)" },
	{ "io", "accept_pause_ms", VCFG_UINT, "100", 1, VIO_ACCEPT_PAUSE_MS_MAX, F(io.accept_pause_ms),
	  .unit = "ms",
	  .doc = "how long a listener pauses after running out of file descriptors (EMFILE, ENFILE)" },
	/* [server] */
	{ "server", "listen", VCFG_LISTEN, "127.0.0.1:8080", 0, 0, F(server.listen),
	  .doc = "addresses to listen on, separated by spaces or commas (IPv4 a.b.c.d:port, IPv6 [addr]:port)" },
	{ "server", "backlog", VCFG_UINT, "1024", 1, 65535, F(server.backlog),
	  .doc = "listen(2) backlog of each listening socket" },
	{ "server", "max_connections", VCFG_UINT, "10000", 1, 1000000, F(server.max_connections),
	  .doc = "open client connections at most; accepting pauses at the limit" },
	{ "server", "header_timeout_ms", VCFG_UINT, "10000", 1, 3600000, F(server.header_timeout_ms),
	  .unit = "ms", .apply = live_server,
	  .doc = "time to receive a request head before 408" },
	{ "server", "body_timeout_ms", VCFG_UINT, "30000", 1, 3600000, F(server.body_timeout_ms),
	  .unit = "ms", .apply = live_server,
	  .doc = "time to receive a request body before 408" },
	{ "server", "idle_timeout_ms", VCFG_UINT, "60000", 1, 3600000, F(server.idle_timeout_ms),
	  .unit = "ms", .apply = live_server,
	  .doc = "idle keep-alive connections are closed after this" },
	{ "server", "send_timeout_ms", VCFG_UINT, "60000", 1, 3600000, F(server.send_timeout_ms),
	  .unit = "ms", .apply = live_server,
	  .doc = "a response that makes no progress (no byte acknowledged by the client) for this long is cut" },
	{ "server", "max_header_bytes", VCFG_UINT, "16384", 256, 1048576, F(server.max_header_bytes),
	  .unit = "bytes",
	  .doc = "largest request head (431 above, 414 for the URI alone)" },
	{ "server", "max_body_bytes", VCFG_UINT, "1048576", 0, 1073741824, F(server.max_body_bytes),
	  .unit = "bytes",
	  .doc = "largest request body (413 above)" },
	{ "server", "max_pipeline", VCFG_UINT, "64", 1, VSRV_MAX_PIPELINE, F(server.max_pipeline),
	  .doc = "requests in flight per connection" },
	{ "server", "max_inflight_bytes", VCFG_U64, "auto", 1048576, 1ull << 40, F(server.max_inflight_bytes),
	  .unit = "bytes", .flags = VCFG_F_AUTO,
	  .doc = "body bytes held for requests and replies at once; over it as when jobs is full (wait or 503); "
		  "auto = RAM/4, 64 MiB..4 GiB" },
	{ "server", "drain_timeout_ms", VCFG_UINT, "10000", 1, 3600000, F(server.drain_timeout_ms),
	  .unit = "ms",
	  .doc = "on SIGTERM, time to finish in-flight requests before connections are cut" },
	{ "server", "shutdown_delay_ms", VCFG_UINT, "0", 0, 3600000, F(life.shutdown_delay_ms),
	  .unit = "ms",
	  .doc = "on SIGTERM, time spent not ready (/readyz 503) but still serving before the listeners close" },
	{ "server", "agent_listen", VCFG_ADDR, "off", 0, 0, F(life.agent_listen),
	  .doc = "address:port answering HAProxy's agent-check (up ready, or drain); off = none" },
	/* [stages] */
	{ "stages", "exec_tasks", VCFG_UINT, "auto", 1, 4096, F(server.exec_tasks),
	  .flags = VCFG_F_AUTO,
	  .doc = "executor tasks; auto = 4 per worker" },
	{ "stages", "write_tasks", VCFG_UINT, "auto", 1, 4096, F(server.write_tasks),
	  .flags = VCFG_F_AUTO,
	  .doc = "writer tasks; auto = 2 per worker" },
	{ "stages", "jobs_capacity", VCFG_UINT, "1024", 1, 1048576, F(server.jobs_capacity),
	  .doc = "capacity of the jobs channels (parse -> exec), all workers' together" },
	{ "stages", "replies_capacity", VCFG_UINT, "1024", 1, 1048576, F(server.replies_capacity),
	  .doc = "capacity of the replies channels (exec -> write), all workers' together" },
	{ "stages", "on_full", VCFG_ENUM, "wait", 0, 0, F(server.on_full),
	  .choices = on_full_names,
	  .doc = "when jobs is full: wait (stop reading: back pressure) or shed (503 at once); "
		 "codel: as shed, and 503 while the jobs' wait in the queue stands above codel_target_ms" },
	{ "stages", "codel_target_ms", VCFG_UINT, "5", 1, 60000, F(server.codel_target_ms),
	  .unit = "ms", .apply = live_server,
	  .doc = "on_full = codel: the wait in the jobs queue a job may stand; above it for a whole interval, jobs are refused" },
	{ "stages", "codel_interval_ms", VCFG_UINT, "100", 1, 60000, F(server.codel_interval_ms),
	  .unit = "ms", .apply = live_server,
	  .doc = "on_full = codel: how long the least wait must stay above codel_target_ms before jobs are refused" },
	{ "stages", "retry_after_s", VCFG_UINT, "1", 0, 3600, F(server.retry_after_s),
	  .unit = "s", .apply = live_server,
	  .doc = "Retry-After seconds of a shed 503" },
	{ "stages", "heavy_lane", VCFG_BOOL, "on", 0, 1, F(server.heavy_lane),
	  .apply = live_server,
	  .doc = "a job that outlasts its first slice runs on the heavy lane: first come first served, "
		 "one per worker at a time; off: its executor keeps it, taking turns" },
	{ "stages", "heavy_share", VCFG_UINT, "90", 1, 100, F(server.heavy_share),
	  .unit = "percent", .apply = live_server,
	  .doc = "while jobs wait in the lane, or (6 at most) while the CPUs are saturated (2+ workers, stealing on), "
		 "a runner takes slices in a row until it has this share of its worker" },
	{ "stages", "heavy_wait_ms", VCFG_UINT, "10", 0, 60000, F(server.heavy_wait_ms),
	  .unit = "ms", .apply = live_server,
	  .doc = "while the lane's first job has waited this long, a job that outlasts its slice stays "
		 "with its executor and runners ignore heavy_share; 0 = the lane takes every job" },
	{ "stages", "heavy_spread_us", VCFG_UINT, "1000", 0, 60000000, F(server.heavy_spread_us),
	  .unit = "us", .apply = live_server,
	  .doc = "a job entering the lane while its worker's runner is busy waits this long for it before "
		 "an idle runner of another worker takes it; 0 = at once" },
	/* [jobs]: the built-in module's keys (spin_max_n, sleep_max_ms,
	 * declared in src/jobs/builtin.c) come first, made from its
	 * declaration (schema_init). */
	{ "jobs", "slice_us", VCFG_UINT, "50", 1, 100000, F(server.slice_us),
	  .unit = "us",
	  .doc = "work a long job does before it yields its worker" },
	/* [control] */
	{ "control", "socket", VCFG_STRING, "/run/voltd/control.sock", 1, 107, F(control.socket),
	  .doc = "path of the UNIX control socket" },
	{ "control", "mode", VCFG_MODE, "0660", 0, 0777, F(control.mode),
	  .doc = "permissions of the control socket (octal)" },
	{ "control", "group", VCFG_STRING, "none", 0, 63, F(control.group),
	  .flags = VCFG_F_NONE,
	  .doc = "group owning the control socket; none keeps the daemon's group" },
	{ "control", "stall_warn_ms", VCFG_UINT, "100", 0, VRT_STALL_WARN_MS_MAX, F(scheduler.stall_warn_ms),
	  .unit = "ms", .apply = live_stall_warn_ms,
	  .doc = "a worker stuck this long in one poll is reported stalled; 0 = off (turning it on again needs a restart)" },
	{ "control", "stall_fail_ms", VCFG_UINT, "5000", 10, 3600000, F(life.stall_fail_ms),
	  .unit = "ms",
	  .doc = "a worker stalled this long fails /livez and stops the systemd watchdog pings" },
	{ "control", "operator_group", VCFG_STRING, "none", 0, 63, F(control.operator_group),
	  .flags = VCFG_F_NONE | VCFG_F_RELOAD,
	  .doc = "members of this group may also set and clear through the control socket; none = nobody" },
	{ "control", "max_clients", VCFG_UINT, "64", 1, 4096, F(control.max_clients),
	  .flags = VCFG_F_RELOAD,
	  .doc = "control socket connections open at once; more are refused with an error "
		  "(root and voltd's user get 2 more)" },
	{ "control", "metrics_max_clients", VCFG_UINT, "16", 1, 4096, F(control.metrics_max_clients),
	  .flags = VCFG_F_RELOAD,
	  .doc = "metrics_listen connections open at once, apart from the control socket's; more get a 503" },
	{ "control", "client_timeout_ms", VCFG_UINT, "60000", 100, 3600000, F(control.client_timeout_ms),
	  .unit = "ms", .flags = VCFG_F_RELOAD,
	  .doc = "deadline for each command line (its bytes and its reply) or metrics request; "
		  "the connection is closed at it" },
	{ "control", "metrics_listen", VCFG_ADDR, "off", 0, 0, F(control.metrics_listen),
	  .doc = "address:port of an HTTP listener answering GET /metrics (Prometheus); off = none" },
	/* [log] */
	{ "log", "level", VCFG_ENUM, "info", 0, 0, F(log.level),
	  .choices = level_names, .choice_base = LOG_ERR, .apply = live_log_level,
	  .doc = "lowest level logged: err, warning, notice, info or debug" },
	{ "log", "access", VCFG_BOOL, "off", 0, 1, F(server.access_log),
	  .apply = live_server,
	  .doc = "a line per response at level info: method, target, status, bytes, duration, worker" },
	/* [modules] */
	{ "modules", "dir", VCFG_STRING, VOLTD_MODULEDIR, 1, VCFG_PATH_LEN - 1, F(modules.dir),
	  .def_doc = "$(libdir)/voltd/modules",
	  .doc = "directory of the modules' files: a module section's path is relative to it" },
	{ "modules", "blocking_threads", VCFG_UINT, "4", 1, VSRV_BLOCKING_THREADS_MAX, F(server.blocking_threads),
	  .doc = "threads that run the blocking kinds' jobs, never a worker (started only when a kind is blocking)" },
	{ "modules", "blocking_queue", VCFG_UINT, "256", 1, 1048576, F(server.blocking_queue),
	  .doc = "capacity of the blocking pool's queue; when full, stages.on_full applies as for jobs" },
	{ "modules", "overrun_factor", VCFG_UINT, "20", 0, 1000000, F(server.overrun_factor),
	  .apply = live_server,
	  .doc = "a step of a kind that is not blocking running longer than this many slice_us is an overrun "
		 "(counted per kind, logged); 0 = none" },
	{ "modules", "quarantine_overruns", VCFG_UINT, "0", 0, 1000000, F(server.quarantine_overruns),
	  .apply = live_server,
	  .doc = "this many overruns of one kind within quarantine_window_ms quarantine it: its requests get "
		 "503 with Retry-After until voltctl clear quarantine or a reload; 0 = never" },
	{ "modules", "quarantine_window_ms", VCFG_UINT, "10000", 1, 3600000, F(server.quarantine_window_ms),
	  .unit = "ms", .apply = live_server,
	  .doc = "the window quarantine_overruns counts in" },
};

static_assert(VB_ARRAY_SIZE(schema) <= VCFG_MAX_KEYS, "raise VCFG_MAX_KEYS");

/* ------------------------------------------------------------ the rows in use */

/*
 * The schema in use: the table above with the built-in module's keys at
 * the start of [jobs], then each loaded module's section and rows
 * (cfg_modules.c appends them while the modules load, before any thread
 * starts). Append-only, so a row's index (cfg->source) never changes.
 */
#define MAX_SECTIONS (VB_ARRAY_SIZE(sections) + VCFG_MAX_MODULES)

static struct vcfg_key rows[VCFG_MAX_KEYS];
static size_t n_rows;
static struct vcfg_section secs[MAX_SECTIONS];
static size_t n_secs;
static size_t dyn_used; /* bytes of struct vcfg's dyn given to rows */

static void schema_init(void)
{
	struct vcfg_key builtin[VCFG_MAX_KEYS];
	int nb;

	if (n_rows)
		return;
	nb = vcfg__module_rows(vjob_mod_builtin(), VCFG_BUILTIN_SECTION, builtin, VB_ARRAY_SIZE(builtin));
	VB_BUG_ON(nb < 0);
	memcpy(secs, sections, sizeof(sections));
	n_secs = VB_ARRAY_SIZE(sections);
	for (size_t i = 0; i < VB_ARRAY_SIZE(schema); i++) {
		int rc = 0;
		if (strcmp(schema[i].section, VCFG_BUILTIN_SECTION) == 0 &&
		    (i == 0 || strcmp(schema[i - 1].section, VCFG_BUILTIN_SECTION) != 0))
			rc = vcfg__add_rows(builtin, (size_t)nb);
		if (rc == 0)
			rc = vcfg__add_rows(&schema[i], 1);
		VB_BUG_ON(rc < 0); /* VCFG_MAX_KEYS and VCFG_DYN_BYTES hold them */
	}
}

int vcfg__add_rows(const struct vcfg_key *r, size_t n)
{
	size_t used = dyn_used;

	if (n_rows + n > VCFG_MAX_KEYS)
		return -ENOSPC;
	for (size_t i = 0; i < n; i++) {
		rows[n_rows + i] = r[i];
		if (!r[i].mod)
			continue;
		/* Every field 8-byte aligned: int64_t, bool, char[]. */
		size_t size = (vcfg__type(&r[i])->size(&r[i]) + 7) & ~(size_t)7;
		if (size == 0 || used + size > VCFG_DYN_BYTES)
			return -ENOSPC;
		rows[n_rows + i].offset = offsetof(struct vcfg, dyn) + used;
		used += size;
	}
	n_rows += n;
	dyn_used = used;
	return 0;
}

int vcfg__add_section(const char *name, const char *doc)
{
	schema_init();
	if (n_secs == MAX_SECTIONS)
		return -ENOSPC;
	secs[n_secs++] = (struct vcfg_section){ name, doc };
	return 0;
}

bool vcfg__module_section(const char *section)
{
	return strncmp(section, "module.", 7) == 0;
}

const struct vcfg_key *vcfg_schema(size_t *n)
{
	schema_init();
	*n = n_rows;
	return rows;
}

const struct vcfg_section *vcfg_sections(size_t *n)
{
	schema_init();
	*n = n_secs;
	return secs;
}

const struct vcfg_key *vcfg_key_find(const char *section, const char *name)
{
	schema_init();
	for (size_t i = 0; i < n_rows; i++)
		if (strcmp(rows[i].section, section) == 0 && strcmp(rows[i].name, name) == 0)
			return &rows[i];
	return NULL;
}

size_t vcfg_key_index(const struct vcfg_key *k)
{
	VB_BUG_ON(k < rows || k >= rows + n_rows);
	return (size_t)(k - rows);
}

/* "section.key": a key has no dot, a section may (module.NAME). */
const struct vcfg_key *vcfg_key_named(const char *key)
{
	char section[64];
	const char *dot = strrchr(key, '.');

	if (!dot || (size_t)(dot - key) >= sizeof(section))
		return NULL;
	memcpy(section, key, (size_t)(dot - key));
	section[dot - key] = '\0';
	return vcfg_key_find(section, dot + 1);
}
