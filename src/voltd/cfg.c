/* SPDX-License-Identifier: MIT */
/*
 * voltd/cfg.c: the schema table and everything it drives: parsing with
 * inih, per-key checks, overrides, cross-key rules, formatting and the
 * effective-config dump. Single-threaded (see cfg.h).
 */
#include "config.h"
#include "voltd/cfg.h"
#include "base/compiler.h"
#include "base/log.h"
#include "base/query.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <ini.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

static const char *const backend_names[] = { "auto", "uring", "libev", NULL };
static const char *const on_full_names[] = { "wait", "shed", "codel", NULL };
/* Indexed by syslog level - LOG_ERR. */
static const char *const level_names[] = { "err", "warning", "notice", "info", "debug", NULL };

#define F(f) .offset = offsetof(struct vcfg, f), .field = #f
/* ENUM keys store the index of their name: the layers' enums follow the lists. */
static_assert(VIO_BACKEND_AUTO == 0 && VIO_BACKEND_URING == 1 && VIO_BACKEND_LIBEV == 2,
	      "backend_names follows enum vio_backend");
static_assert(VSRV_ON_FULL_WAIT == 0 && VSRV_ON_FULL_SHED == 1 && VSRV_ON_FULL_CODEL == 2,
	      "on_full_names follows enum vsrv_on_full");
static_assert(sizeof(enum vio_backend) == sizeof(int) && sizeof(enum vsrv_on_full) == sizeof(int),
	      "ENUM keys are stored as int");
#define U32MAX 4294967295u

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

/* -EINVAL when the runtime started without its monitor: the daemon keeps
 * the running value then (voltd/control.c: monitor_off). */
static int live_stall_warn_ms(const struct vcfg_live *to, const struct vcfg *c)
{
	return to->rt ? vrt_set_stall_warn_ms(to->rt, c->scheduler.stall_warn_ms) : 0;
}

/* The [server], [stages] and [jobs] keys read per request (server.h). */
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
};

/*
 * The schema: one row per key, in file order, every fact about the key
 * written once (see doc/ARCHITECTURE.md, "Adding a key"). Positional:
 * section, name, type, default as written in the file, min, max, F(field
 * of struct vcfg). Then by name, only what applies: .unit ("ms", "s",
 * "us", "bytes"), .flags (VCFG_F_*), .choices (ENUM), .apply (the live
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
	  .doc = "capacity of the jobs channel (parse -> exec)" },
	{ "stages", "replies_capacity", VCFG_UINT, "1024", 1, 1048576, F(server.replies_capacity),
	  .doc = "capacity of the replies channel (exec -> write)" },
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
	/* [jobs] */
	{ "jobs", "spin_max_n", VCFG_U64, "1000000000", 1, 1000000000000ull, F(server.spin_max_n),
	  .apply = live_server,
	  .doc = "largest n of /v1/spin (400 above)" },
	{ "jobs", "sleep_max_ms", VCFG_UINT, "60000", 1, 3600000, F(server.sleep_max_ms),
	  .unit = "ms", .apply = live_server,
	  .doc = "largest ms of /v1/sleep (400 above)" },
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
	  .choices = level_names, .apply = live_log_level,
	  .doc = "lowest level logged: err, warning, notice, info or debug" },
	{ "log", "access", VCFG_BOOL, "off", 0, 1, F(server.access_log),
	  .apply = live_server,
	  .doc = "a line per response at level info: method, target, status, bytes, duration, worker" },
};

static_assert(VB_ARRAY_SIZE(schema) <= VCFG_MAX_KEYS, "raise VCFG_MAX_KEYS");

const struct vcfg_key *vcfg_schema(size_t *n)
{
	*n = VB_ARRAY_SIZE(schema);
	return schema;
}

const struct vcfg_section *vcfg_sections(size_t *n)
{
	*n = VB_ARRAY_SIZE(sections);
	return sections;
}

const struct vcfg_key *vcfg_key_find(const char *section, const char *name)
{
	for (size_t i = 0; i < VB_ARRAY_SIZE(schema); i++)
		if (strcmp(schema[i].section, section) == 0 && strcmp(schema[i].name, name) == 0)
			return &schema[i];
	return NULL;
}

const struct vcfg_key *vcfg_key_named(const char *key)
{
	char section[64];
	const char *dot = strchr(key, '.');

	if (!dot || (size_t)(dot - key) >= sizeof(section))
		return NULL;
	memcpy(section, key, (size_t)(dot - key));
	section[dot - key] = '\0';
	return vcfg_key_find(section, dot + 1);
}

/* ------------------------------------------------------------------ errors */

static void add_err(struct vb_strlist *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_err(struct vb_strlist *e, const char *fmt, ...)
{
	va_list ap;

	if (!e)
		return;
	va_start(ap, fmt);
	(void)vb_strlist_vadd(e, fmt, ap); /* out of memory: the message is lost, the count is not */
	va_end(ap);
}

/* ------------------------------------------------------------------ values */

/* A whole decimal number: digits only, no sign or space, no overflow. */
static bool parse_u64(const char *s, uint64_t *out)
{
	return vb_parse_u64(s, strlen(s), out) == 0;
}

static_assert(sizeof(((struct vcfg_addr *)0)->text) == sizeof(((struct vcfg *)0)->listen_text[0]),
	      "one text size for an address");

static int parse_listen_one(const char *tok, struct vcfg_addr *l)
{
	char host[64];
	const char *colon, *port_s;
	uint64_t port;

	memset(l, 0, sizeof(*l));
	if (tok[0] == '[') {
		const char *rb = strchr(tok, ']');
		if (!rb || rb[1] != ':' || (size_t)(rb - tok - 1) >= sizeof(host))
			return -EINVAL;
		memcpy(host, tok + 1, (size_t)(rb - tok - 1));
		host[rb - tok - 1] = '\0';
		port_s = rb + 2;
	} else {
		colon = strrchr(tok, ':');
		if (!colon || (size_t)(colon - tok) >= sizeof(host))
			return -EINVAL;
		memcpy(host, tok, (size_t)(colon - tok));
		host[colon - tok] = '\0';
		port_s = colon + 1;
	}
	if (!parse_u64(port_s, &port) || port > 65535)
		return -EINVAL;
	if (tok[0] == '[') {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&l->addr;
		if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1)
			return -EINVAL;
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		l->len = sizeof(*a6);
		snprintf(l->text, sizeof(l->text), "[%s]:%u", host, (unsigned)port);
	} else {
		struct sockaddr_in *a4 = (struct sockaddr_in *)&l->addr;
		if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
			return -EINVAL;
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		l->len = sizeof(*a4);
		snprintf(l->text, sizeof(l->text), "%s:%u", host, (unsigned)port);
	}
	return 0;
}

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

#define KEYFMT "%s: %s.%s: "

static int set_value(struct vcfg *cfg, const struct vcfg_key *k, const char *value,
		     const char *where, struct vb_strlist *err);

int vcfg_set(struct vcfg *cfg, const struct vcfg_key *k, const char *value,
	     const char *where, struct vb_strlist *err)
{
	int rc = set_value(cfg, k, value, where, err);
	if (rc == 0) {
		/* A long FILE:LINE is cut: the source is for people. */
		char *dst = cfg->source[k - schema];
		size_t len = strnlen(where, sizeof(cfg->source[0]) - 1);
		memcpy(dst, where, len);
		dst[len] = '\0';
	}
	return rc;
}

static int set_value(struct vcfg *cfg, const struct vcfg_key *k, const char *value,
		     const char *where, struct vb_strlist *err)
{
	char *field = (char *)cfg + k->offset;
	uint64_t v;

	switch (k->type) {
	case VCFG_BOOL: {
		static const char *const yes[] = { "on", "yes", "true", "1" };
		static const char *const no[] = { "off", "no", "false", "0" };
		for (size_t i = 0; i < VB_ARRAY_SIZE(yes); i++) {
			if (strcasecmp(value, yes[i]) == 0) {
				*(bool *)field = true;
				return 0;
			}
			if (strcasecmp(value, no[i]) == 0) {
				*(bool *)field = false;
				return 0;
			}
		}
		add_err(err, KEYFMT "'%s' is not a boolean (use on or off)", where, k->section, k->name, value);
		return -EINVAL;
	}
	case VCFG_UINT:
	case VCFG_U64:
		if ((k->flags & VCFG_F_AUTO) && strcmp(value, "auto") == 0) {
			v = VCFG_AUTO;
		} else if (!parse_u64(value, &v)) {
			add_err(err, KEYFMT "'%s' is not a whole number%s", where, k->section, k->name, value,
				(k->flags & VCFG_F_AUTO) ? " or auto" : "");
			return -EINVAL;
		} else if (v < k->min || v > k->max) {
			add_err(err, KEYFMT "%s is out of bounds [%llu, %llu]", where, k->section, k->name, value,
				(unsigned long long)k->min, (unsigned long long)k->max);
			return -EINVAL;
		} else if ((k->flags & VCFG_F_POW2) && !is_pow2(v)) {
			add_err(err, KEYFMT "%s is not a power of two (bounds [%llu, %llu])", where, k->section,
				k->name, value, (unsigned long long)k->min, (unsigned long long)k->max);
			return -EINVAL;
		}
		if (k->type == VCFG_U64)
			*(uint64_t *)field = v;
		else
			*(unsigned *)field = (unsigned)v;
		return 0;
	case VCFG_ENUM:
		for (unsigned i = 0; k->choices[i]; i++) {
			if (strcasecmp(value, k->choices[i]) == 0) {
				/* log.level is stored as its syslog level */
				*(int *)field = (int)i + (k->choices == level_names ? LOG_ERR : 0);
				return 0;
			}
		}
		{
			char list[128] = "";
			size_t off = 0;
			for (unsigned i = 0; k->choices[i] && off < sizeof(list); i++)
				off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s",
							i ? ", " : "", k->choices[i]);
			add_err(err, KEYFMT "'%s' is not one of: %s", where, k->section, k->name, value, list);
		}
		return -EINVAL;
	case VCFG_STRING: {
		size_t len = strlen(value);
		if (len < k->min || len > k->max) {
			add_err(err, KEYFMT "length %zu is out of bounds [%llu, %llu]", where, k->section, k->name,
				len, (unsigned long long)k->min, (unsigned long long)k->max);
			return -EINVAL;
		}
		if ((k->flags & VCFG_F_NONE) && strcmp(value, "none") == 0)
			len = 0;
		memcpy(field, value, len);
		field[len] = '\0';
		return 0;
	}
	case VCFG_MODE: {
		char *end;
		errno = 0;
		unsigned long m = strtoul(value, &end, 8);
		if (errno || *end || !*value || value[0] == '-' || m > k->max) {
			add_err(err, KEYFMT "'%s' is not an octal mode in [0, 0777]", where, k->section, k->name, value);
			return -EINVAL;
		}
		*(unsigned *)field = (unsigned)m;
		return 0;
	}
	case VCFG_ADDR: {
		struct vcfg_addr *l = (struct vcfg_addr *)field;
		if (strcmp(value, "off") == 0) {
			memset(l, 0, sizeof(*l));
			return 0;
		}
		if (parse_listen_one(value, l) < 0) {
			memset(l, 0, sizeof(*l));
			add_err(err, KEYFMT "'%s' is not off or an address:port (e.g. 127.0.0.1:9100 or [::1]:9100)",
				where, k->section, k->name, value);
			return -EINVAL;
		}
		return 0;
	}
	case VCFG_LISTEN: {
		struct vcfg_addr tmp[VCFG_MAX_LISTEN];
		unsigned n = 0;
		char *copy = strdup(value), *save = NULL;
		int rc = 0;
		if (!copy)
			return -ENOMEM;
		for (char *tok = strtok_r(copy, " ,\t", &save); tok; tok = strtok_r(NULL, " ,\t", &save)) {
			if (n == VCFG_MAX_LISTEN) {
				add_err(err, KEYFMT "more than %d addresses", where, k->section, k->name, VCFG_MAX_LISTEN);
				rc = -EINVAL;
				break;
			}
			if (parse_listen_one(tok, &tmp[n]) < 0) {
				add_err(err, KEYFMT "'%s' is not an address:port (e.g. 127.0.0.1:8080 or [::1]:8080)",
					where, k->section, k->name, tok);
				rc = -EINVAL;
				break;
			}
			n++;
		}
		free(copy);
		if (rc == 0 && n == 0) {
			add_err(err, KEYFMT "needs at least one address", where, k->section, k->name);
			rc = -EINVAL;
		}
		if (rc == 0) {
			for (unsigned i = 0; i < n; i++) {
				cfg->server.listen[i].addr = tmp[i].addr;
				cfg->server.listen[i].len = tmp[i].len;
				memcpy(cfg->listen_text[i], tmp[i].text, sizeof(cfg->listen_text[i]));
			}
			cfg->server.n_listen = n;
		}
		return rc;
	}
	}
	return -EINVAL;
}

void vcfg_defaults(struct vcfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < VB_ARRAY_SIZE(schema); i++) {
		int rc = vcfg_set(cfg, &schema[i], schema[i].def, "default", NULL);
		VB_BUG_ON(rc != 0);
	}
}

void vcfg_format(const struct vcfg *cfg, const struct vcfg_key *k, char *buf, size_t len)
{
	const char *field = (const char *)cfg + k->offset;

	switch (k->type) {
	case VCFG_BOOL:
		snprintf(buf, len, "%s", *(const bool *)field ? "on" : "off");
		break;
	case VCFG_UINT:
		if ((k->flags & VCFG_F_AUTO) && *(const unsigned *)field == VCFG_AUTO)
			snprintf(buf, len, "auto");
		else
			snprintf(buf, len, "%u", *(const unsigned *)field);
		break;
	case VCFG_U64:
		if ((k->flags & VCFG_F_AUTO) && *(const uint64_t *)field == VCFG_AUTO)
			snprintf(buf, len, "auto");
		else
			snprintf(buf, len, "%llu", (unsigned long long)*(const uint64_t *)field);
		break;
	case VCFG_ENUM: {
		int v = *(const int *)field - (k->choices == level_names ? LOG_ERR : 0);
		snprintf(buf, len, "%s", k->choices[v]);
		break;
	}
	case VCFG_STRING:
		snprintf(buf, len, "%s", ((k->flags & VCFG_F_NONE) && !*field) ? "none" : field);
		break;
	case VCFG_ADDR: {
		const struct vcfg_addr *l = (const struct vcfg_addr *)field;
		snprintf(buf, len, "%s", l->len ? l->text : "off");
		break;
	}
	case VCFG_MODE:
		snprintf(buf, len, "0%o", *(const unsigned *)field);
		break;
	case VCFG_LISTEN: {
		size_t off = 0;
		buf[0] = '\0';
		for (unsigned i = 0; i < cfg->server.n_listen && off < len; i++)
			off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? " " : "",
						cfg->listen_text[i]);
		break;
	}
	}
}

void vcfg_dump(const struct vcfg *cfg, FILE *fp)
{
	const char *section = "";
	char buf[VCFG_MAX_LISTEN * 64];

	for (size_t i = 0; i < VB_ARRAY_SIZE(schema); i++) {
		if (strcmp(section, schema[i].section) != 0) {
			section = schema[i].section;
			fprintf(fp, "%s[%s]\n", i ? "\n" : "", section);
		}
		vcfg_format(cfg, &schema[i], buf, sizeof(buf));
		fprintf(fp, "%s = %s\n", schema[i].name, buf);
	}
}

/* ------------------------------------------------------------------ suggestions */

static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t row[64];

	if (la >= VB_ARRAY_SIZE(row) || lb >= VB_ARRAY_SIZE(row))
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t prev = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t cur = row[j];
			size_t sub = prev + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
			size_t best = row[j] + 1 < row[j - 1] + 1 ? row[j] + 1 : row[j - 1] + 1;
			row[j] = best < sub ? best : sub;
			prev = cur;
		}
	}
	return row[lb];
}

/* The nearest known "section.key" (or section name when key is NULL), when
 * it is close enough to be a plausible typo. */
static const char *suggest(const char *section, const char *key, char *buf, size_t len)
{
	size_t best = SIZE_MAX, best_d = SIZE_MAX;
	const struct vcfg_key *bk = NULL;

	for (size_t i = 0; i < VB_ARRAY_SIZE(schema); i++) {
		/* A key is matched by name; the same section wins a tie. */
		const char *have = key ? key : section;
		const char *want = key ? schema[i].name : schema[i].section;
		size_t d = edit_distance(have, want);
		size_t score = 2 * d + (key && strcmp(section, schema[i].section) != 0);
		if (score < best) {
			best = score;
			best_d = d;
			bk = &schema[i];
		}
	}
	if (!bk || best_d > strlen(key ? key : section) / 3 + 1)
		return NULL;
	if (key)
		snprintf(buf, len, "%s.%s", bk->section, bk->name);
	else
		snprintf(buf, len, "%s", bk->section);
	return buf;
}

/* ------------------------------------------------------------------ files */

struct load_ctx {
	struct vcfg *cfg;
	struct vb_strlist *err;
	const char *name;
	int errors;
	/* line reader state */
	FILE *fp;
	const char *text;
	int line;
	bool too_long;
	/* duplicate detection: line each key was set on, 0 = not yet */
	int set_line[64];
};

static char *read_line(char *str, int num, void *stream)
{
	struct load_ctx *c = stream;
	size_t n = 0;
	int ch;

	if (c->fp) {
		ch = fgetc(c->fp);
		if (ch == EOF)
			return NULL;
		while (ch != EOF) {
			if (n + 2 < (size_t)num)
				str[n++] = (char)ch;
			else if (ch != '\n' && ch != '\r')
				c->too_long = true;
			if (ch == '\n')
				break;
			ch = fgetc(c->fp);
		}
	} else {
		if (!*c->text)
			return NULL;
		while (*c->text) {
			ch = *c->text++;
			if (n + 2 < (size_t)num)
				str[n++] = (char)ch;
			else if (ch != '\n' && ch != '\r')
				c->too_long = true;
			if (ch == '\n')
				break;
		}
	}
	str[n] = '\0';
	c->line++;
	if (c->too_long) {
		add_err(c->err, "%s:%d: line longer than %d characters", c->name, c->line, num - 3);
		c->errors++;
		c->too_long = false;
		str[0] = '\0'; /* skip it */
	}
	return str;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
	struct load_ctx *c = user;
	char where[PATH_MAX + 16], sug[96];
	const struct vcfg_key *k = vcfg_key_find(section, name);

	snprintf(where, sizeof(where), "%s:%d", c->name, c->line);
	if (!k) {
		bool section_known = false;
		for (size_t i = 0; i < VB_ARRAY_SIZE(schema); i++)
			section_known |= strcmp(schema[i].section, section) == 0;
		if (!*section) {
			const char *s = suggest("", name, sug, sizeof(sug));
			add_err(c->err, "%s: %s: key outside any [section]%s%s%s", where, name,
				s ? " (did you mean " : "", s ? s : "", s ? "?)" : "");
		} else if (!section_known) {
			const char *s = suggest(section, NULL, sug, sizeof(sug));
			add_err(c->err, "%s: %s.%s: unknown section [%s]%s%s%s", where, section, name, section,
				s ? " (did you mean [" : "", s ? s : "", s ? "]?)" : "");
		} else {
			const char *s = suggest(section, name, sug, sizeof(sug));
			add_err(c->err, "%s: %s.%s: unknown key%s%s%s", where, section, name,
				s ? " (did you mean " : "", s ? s : "", s ? "?)" : "");
		}
		c->errors++;
		return 1;
	}
	size_t idx = (size_t)(k - schema);
	if (c->set_line[idx]) {
		add_err(c->err, "%s: %s.%s: duplicate key (first set on line %d)", where, section, name,
			c->set_line[idx]);
		c->errors++;
		return 1;
	}
	c->set_line[idx] = c->line;
	if (vcfg_set(c->cfg, k, value, where, c->err) < 0)
		c->errors++;
	return 1;
}

static int load(struct load_ctx *c)
{
	static_assert(VB_ARRAY_SIZE(schema) <= VB_ARRAY_SIZE(((struct load_ctx *)0)->set_line),
		      "set_line too small for the schema");
#if HAVE_DECL_INI_ALLOW_MULTILINE
	ini_allow_multiline = false;
#endif
	int rc = ini_parse_stream(read_line, c, on_key, c);
	if (rc > 0) {
		/* inih reports the first line it could not parse. */
		add_err(c->err, "%s:%d: syntax error: expected '[section]' or 'key = value'", c->name, rc);
		c->errors++;
	} else if (rc < 0) {
		add_err(c->err, "%s: cannot parse (out of memory)", c->name);
		c->errors++;
	}
	if (c->errors == 0)
		c->errors += vcfg_validate(c->cfg, c->name, c->err);
	return c->errors;
}

int vcfg_load_file(struct vcfg *cfg, const char *path, struct vb_strlist *err)
{
	struct load_ctx c = { .cfg = cfg, .err = err, .name = path };

	c.fp = fopen(path, "re");
	if (!c.fp) {
		add_err(err, "%s: cannot open: %s", path, strerror(errno));
		return 1;
	}
	int n = load(&c);
	fclose(c.fp);
	return n;
}

int vcfg_load_string(struct vcfg *cfg, const char *name, const char *text, struct vb_strlist *err)
{
	struct load_ctx c = { .cfg = cfg, .err = err, .name = name, .text = text };
	return load(&c);
}

int vcfg_override(struct vcfg *cfg, const char *assignment, struct vb_strlist *err)
{
	char section[64], key[64], sug[96];
	const char *dot = strchr(assignment, '.');
	const char *eq = strchr(assignment, '=');

	if (!dot || !eq || dot > eq || (size_t)(dot - assignment) >= sizeof(section) ||
	    (size_t)(eq - dot - 1) >= sizeof(key)) {
		add_err(err, "-s %s: expected SECTION.KEY=VALUE", assignment);
		return 1;
	}
	memcpy(section, assignment, (size_t)(dot - assignment));
	section[dot - assignment] = '\0';
	memcpy(key, dot + 1, (size_t)(eq - dot - 1));
	key[eq - dot - 1] = '\0';
	const struct vcfg_key *k = vcfg_key_find(section, key);
	if (!k) {
		const char *s = suggest(section, key, sug, sizeof(sug));
		add_err(err, "-s: %s.%s: unknown key%s%s%s", section, key, s ? " (did you mean " : "",
			s ? s : "", s ? "?)" : "");
		return 1;
	}
	return vcfg_set(cfg, k, eq + 1, "-s", err) < 0 ? 1 : 0;
}

int vcfg_validate(const struct vcfg *cfg, const char *where, struct vb_strlist *err)
{
	int n = 0;

	if (cfg->scheduler.global_interval_min > cfg->scheduler.global_interval_max) {
		add_err(err, "%s: scheduler.global_interval_min: %u is greater than scheduler.global_interval_max (%u)",
			where, cfg->scheduler.global_interval_min, cfg->scheduler.global_interval_max);
		n++;
	}
	for (unsigned i = 0; i < cfg->server.n_listen; i++)
		for (unsigned j = 0; j < i; j++)
			if (strcmp(cfg->listen_text[i], cfg->listen_text[j]) == 0) {
				add_err(err, "%s: server.listen: %s is listed twice", where, cfg->listen_text[i]);
				n++;
			}
	return n;
}

/* Where a key's value came from ("FILE:LINE", "-s", "default"). */
static const char *source_of(const struct vcfg *cfg, const char *section, const char *name)
{
	const struct vcfg_key *k = vcfg_key_find(section, name);
	return k ? cfg->source[k - schema] : "?";
}

static int check_group(const struct vcfg *cfg, const char *name, const char *value, struct vb_strlist *err)
{
	struct group gr, *res = NULL;
	char *buf = NULL;
	size_t len = 4096;
	int rc;

	if (!*value)
		return 0;
	/* A group with many members needs a larger buffer (ERANGE). */
	do {
		char *b = realloc(buf, len);
		if (!b) {
			rc = ENOMEM;
			break;
		}
		buf = b;
		rc = getgrnam_r(value, &gr, buf, len, &res);
		len *= 2;
	} while (rc == ERANGE && len <= (1u << 24));
	free(buf);
	if (res)
		return 0;
	add_err(err, KEYFMT "no group '%s' on this machine%s%s", source_of(cfg, "control", name), "control", name,
		value, rc ? ": " : "", rc ? strerror(rc) : "");
	return 1;
}

/* One listening address a start binds, for the overlap check. */
struct bound {
	const struct sockaddr_storage *ss;
	const char *section, *name, *text;
};

static uint16_t addr_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
}

static bool addr_any(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ((const struct sockaddr_in *)ss)->sin_addr.s_addr == htonl(INADDR_ANY);
	return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)ss)->sin6_addr);
}

/* Would binding both fail (EADDRINUSE)? Port 0 never clashes. [::] also
 * takes the IPv4 port (Linux binds it dual-stack by default). */
static bool addr_clash(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (addr_port(a) == 0 || addr_port(a) != addr_port(b))
		return false;
	if (a->ss_family != b->ss_family)
		return (a->ss_family == AF_INET6 && addr_any(a)) || (b->ss_family == AF_INET6 && addr_any(b));
	if (addr_any(a) || addr_any(b))
		return true;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
		      sizeof(struct in6_addr)) == 0;
}

int vcfg_check_host(const struct vcfg *cfg, struct vb_strlist *err)
{
	struct bound b[VCFG_MAX_LISTEN + 2];
	unsigned n = 0;
	int errors = 0;

	errors += check_group(cfg, "group", cfg->control.group, err);
	errors += check_group(cfg, "operator_group", cfg->control.operator_group, err);
	for (unsigned i = 0; i < cfg->server.n_listen; i++)
		b[n++] = (struct bound){ &cfg->server.listen[i].addr, "server", "listen", cfg->listen_text[i] };
	if (cfg->life.agent_listen.len)
		b[n++] = (struct bound){ &cfg->life.agent_listen.addr, "server", "agent_listen",
					 cfg->life.agent_listen.text };
	if (cfg->control.metrics_listen.len)
		b[n++] = (struct bound){ &cfg->control.metrics_listen.addr, "control", "metrics_listen",
					 cfg->control.metrics_listen.text };
	/* server.listen against itself is vcfg_validate's (listed twice). */
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = 0; j < i; j++) {
			if (strcmp(b[i].name, b[j].name) == 0 || !addr_clash(b[i].ss, b[j].ss))
				continue;
			add_err(err, KEYFMT "%s overlaps %s.%s = %s (%s): both cannot listen", source_of(cfg, b[i].section, b[i].name),
				b[i].section, b[i].name, b[i].text, b[j].section, b[j].name, b[j].text,
				source_of(cfg, b[j].section, b[j].name));
			errors++;
		}
	return errors;
}

static size_t field_size(const struct vcfg_key *k)
{
	switch (k->type) {
	case VCFG_BOOL: return sizeof(bool);
	case VCFG_U64: return sizeof(uint64_t);
	case VCFG_ENUM: return sizeof(int);
	case VCFG_UINT:
	case VCFG_MODE: return sizeof(unsigned);
	case VCFG_STRING: return k->max + 1; /* a char array of max + 1 */
	case VCFG_LISTEN:
	case VCFG_ADDR:
		return 0; /* no live key has these types */
	}
	return 0;
}

static void copy_keys(struct vcfg *dst, const struct vcfg *src, bool reload)
{
	for (size_t i = 0; i < VB_ARRAY_SIZE(schema); i++) {
		bool copy = schema[i].apply || (reload && (schema[i].flags & VCFG_F_RELOAD));
		size_t n = copy ? field_size(&schema[i]) : 0;
		VB_BUG_ON(copy && n == 0);
		memcpy((char *)dst + schema[i].offset, (const char *)src + schema[i].offset, n);
		if (n)
			memcpy(dst->source[i], src->source[i], sizeof(dst->source[i]));
	}
}

void vcfg_copy_live(struct vcfg *dst, const struct vcfg *src)
{
	copy_keys(dst, src, false);
}

void vcfg_copy_reload(struct vcfg *dst, const struct vcfg *src)
{
	copy_keys(dst, src, true);
}

int vcfg_apply_live(const struct vcfg *cfg, const struct vcfg_live *to)
{
	int first = 0;

	for (size_t i = 0; i < VB_ARRAY_SIZE(schema); i++) {
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++)
			seen = schema[j].apply == schema[i].apply;
		if (!schema[i].apply || seen)
			continue;
		int rc = schema[i].apply(to, cfg);
		if (rc < 0 && first == 0)
			first = rc;
	}
	return first;
}

void vcfg_resolve(struct vcfg *cfg)
{
	if (cfg->scheduler.workers == VCFG_AUTO) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		cfg->scheduler.workers = n < 1 ? 1 : n > VRT_MAX_WORKERS ? VRT_MAX_WORKERS : (unsigned)n;
	}
	if (cfg->server.exec_tasks == VCFG_AUTO)
		cfg->server.exec_tasks = 4 * cfg->scheduler.workers;
	if (cfg->server.write_tasks == VCFG_AUTO)
		cfg->server.write_tasks = 2 * cfg->scheduler.workers;
	if (cfg->server.max_inflight_bytes == VCFG_AUTO) {
		long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
		uint64_t q = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz / 4 : 256ull << 20;
		cfg->server.max_inflight_bytes = q > (4ull << 30) ? 4ull << 30 : q < (64ull << 20) ? 64ull << 20 : q;
	}
}
