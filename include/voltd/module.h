/* SPDX-License-Identifier: MIT */
/*
 * <voltd/module.h>: the voltd job-module ABI, the only surface a module sees.
 *
 * A module is a shared object that serves job kinds: each kind owns a
 * route, and every request on it becomes a job that voltd runs in slices
 * on its work-stealing workers (or, for a blocking kind, on its pool of
 * blocking threads). The module exports one symbol, VOLTD_MODULE_ENTRY,
 * written by the VOLTD_MODULE() macro below; it imports no voltd symbol:
 * every voltd function it calls is a pointer in the host table
 * (struct voltd_host), reached through the global `voltd` that the macro
 * defines. voltd(8) loads it from a [module.NAME] section of voltd.conf(5);
 * voltd-module(7) is the guide. C11 (and C++), libc headers only.
 *
 * Versions. VOLTD_MODULE_ABI_MAJOR changes only when something published
 * here changes meaning or layout; a voltd refuses a module of another
 * major. A minor only appends: host-table entries, descriptor fields,
 * flags, step codes, key types. So a module built against an older minor
 * loads on a newer voltd, and one built against a newer minor loads on an
 * older voltd when it says it can (VOLTD_MODULE_HEAD_RUNS_ON) and tests
 * each newer entry with VOLTD_HAS before it calls it.
 *
 * The descriptors below are read by voltd through the sizes the module was
 * built with (struct voltd_module's *_size fields), so fields appended by a
 * later minor read as zero from an older module. Every field a module does
 * not set must be zero: use designated initialisers.
 *
 * The job contract, one line each (voltd-module(7) explains them):
 *  - A job's callbacks run one at a time, on one thread at a time; between
 *    two callbacks the job may move to another thread (another worker).
 *  - start runs once, when the request has arrived whole (head and body).
 *  - A step does about one slice of work (deadline_ns is the slice's end,
 *    [jobs] slice_us after it began) and returns VOLTD_STEP_MORE to be
 *    stepped again after other work has run, VOLTD_STEP_SLEEP after
 *    voltd->sleep_until() to be stepped again at that time, or
 *    VOLTD_STEP_DONE with the response set; any negative value is -errno
 *    and answers 500 (503 for -ENOMEM) in the module's stead.
 *  - fini runs exactly once per job that start did not refuse with -errno:
 *    after the step that returned DONE or failed, or when the job is
 *    abandoned (its client left, the daemon stops). Release there.
 *  - A step on a worker never blocks (no blocking I/O, no sleep, no wait on
 *    a lock another job may hold): it would stall every job of that worker.
 *    Work that must block goes in a kind flagged VOLTD_KIND_BLOCKING.
 *  - A HEAD request is answered with the head of the response its kind sets
 *    (its Content-Length that of the body), no body sent; a status 204 or
 *    304 sends neither Content-Length nor body.
 *  - Keep no pointer into the job (its state excepted) beyond the callback
 *    that got it: request strings and buffers live while the job does, but
 *    are read only through the host calls, from the job's callbacks.
 *  - No thread-local state from one callback to the next: the next may run
 *    elsewhere. Per-thread data is indexed by voltd->thread_index().
 *  - Host calls are made from the module's callbacks, on the calling
 *    thread. No host call may be made from a thread of the module's own.
 *  - A module is never unloaded: its code and static data live until the
 *    process exits. Replacing its file in place (cp over it) corrupts the
 *    running process; install a new file by rename (install(1), dpkg).
 *  - A module runs inside voltd with its privileges, its memory and its
 *    descriptors: a crash in a step is voltd's crash (the log line names
 *    the module and the kind; systemd restarts the service).
 */
#ifndef VOLTD_MODULE_H
#define VOLTD_MODULE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VOLTD_MODULE_ABI_MAJOR 1
#define VOLTD_MODULE_ABI_MINOR 0

/* The one symbol voltd looks up. Its name carries the major, so a voltd of
 * another major finds no symbol of its own and says which major the file
 * was built for. */
#define VOLTD_MODULE_ENTRY voltd_module_v1
#define VOLTD_MODULE_ENTRY_NAME "voltd_module_v1"

struct voltd_job;   /* one request's job; opaque */
struct voltd_mod;   /* one loaded module; opaque */
struct voltd_host;

/* ------------------------------------------------------------------ steps */

/* What start and step return (or a negative errno). */
enum voltd_step {
	VOLTD_STEP_DONE = 0,   /* the response is set: send it */
	VOLTD_STEP_MORE = 1,   /* slice used up: step again after other work */
	VOLTD_STEP_SLEEP = 2,  /* step again at the time given to sleep_until */
	/* 3 is reserved for a wait on an I/O operation that a later minor
	 * adds (with the host calls that arm one); a 1.0 module never
	 * returns it, and voltd answers 500 for any value it does not know. */
};

/* --------------------------------------------------------------- counters */

/* A counter a kind declares: a monotonic count the kind adds to with
 * voltd->count(), shown per kind in `voltctl stats kinds`, its JSON and
 * Prometheus (labels module, kind, counter). An array of these ends with
 * an entry whose name is NULL; at most VOLTD_COUNTERS_MAX per kind. */
struct voltd_counter {
	const char *name;      /* [a-z0-9_], 1..32 bytes; unique in the kind */
	const char *help;      /* one line, shown with the value */
};
#define VOLTD_COUNTERS_MAX 16

/* ------------------------------------------------------------------ kinds */

/* Flags of a kind. */
#define VOLTD_KIND_BLOCKING (1u << 0) /* every callback (start, step, fini)
				       * runs on a thread of the blocking pool
				       * ([modules] blocking_threads), never
				       * on a worker: they may block; the
				       * thread keeps the job to its end */
#define VOLTD_KIND_PREFIX (1u << 1)   /* route is a prefix, not an exact path */

/*
 * A job kind. An array of these ends with an entry whose name is NULL.
 * Static data of the module: voltd keeps the pointers it finds here.
 */
struct voltd_kind {
	/* [a-z0-9_], 1..32 bytes; unique among every kind voltd serves (the
	 * built-in ones included): the kind's name in stats, logs and
	 * `voltctl modules`. */
	const char *name;
	/* The route: a path starting with '/', matched exactly ("/v1/count"),
	 * or as a prefix with VOLTD_KIND_PREFIX ("/v1/img/" then serves
	 * "/v1/img/a.png"). No two kinds may claim the same route, and no
	 * kind a path voltd answers itself (/healthz, /readyz, /livez); an
	 * exact route wins over a prefix, a longer prefix over a shorter. */
	const char *route;
	/* The methods it serves, as an Allow header value ("GET, HEAD",
	 * "POST"); any other method on the route is answered 405 with it. */
	const char *methods;
	uint32_t flags;        /* VOLTD_KIND_* */
	/* Bytes of per-job state, zeroed, aligned for any type, passed to
	 * every callback; 0 for none. Jobs whose state is small (voltd-module(7)
	 * gives the figure) cost no allocation. */
	uint32_t state_size;
	/* Optional. Once, on the job's thread, when the request is whole:
	 * check the input, set up. VOLTD_STEP_DONE answers at once (a 400,
	 * say) and step never runs; MORE or SLEEP go on to step. */
	int (*start)(struct voltd_job *job, void *state);
	/* Required. One slice until about deadline_ns (CLOCK_MONOTONIC, as
	 * voltd->now_ns()); see the contract at the top of this file. */
	int (*step)(struct voltd_job *job, void *state, int64_t deadline_ns);
	/* Optional. Once per job, see the contract: release what start and
	 * step took. The response may not be changed here. */
	void (*fini)(struct voltd_job *job, void *state);
	/* Optional: the kind's counters (see struct voltd_counter). */
	const struct voltd_counter *counters;
	/* Optional: one line saying what the kind does. */
	const char *doc;
};

/* ------------------------------------------------------------------- keys */

/* Types of a module's configuration keys. */
#define VOLTD_KEY_BOOL 1   /* on|off|true|false|yes|no|1|0; read as 1 or 0 */
#define VOLTD_KEY_INT  2   /* a decimal in [min, max]; read as int64_t */
#define VOLTD_KEY_STRING 3 /* text of at most max bytes; never live */

/* Flags of a key. */
#define VOLTD_KEY_LIVE (1u << 0) /* `voltctl set` and a reload change it
				  * while voltd runs (not for STRING keys);
				  * otherwise a change needs a restart */

/*
 * A key of the module's [module.NAME] section, declared by the module and
 * checked by voltd like its own keys: `voltd -t` checks it, `voltd -T` and
 * `voltctl config` print it with its source, errors read
 * "FILE:LINE: module.NAME.KEY: problem". An array of these ends with an
 * entry whose name is NULL. "path" is voltd's own key of every module
 * section (the module's file) and may not be declared; voltd adds no other
 * key to a module's section, in any minor.
 */
struct voltd_key {
	const char *name;      /* [a-z0-9_], 1..32 bytes */
	uint32_t type;         /* VOLTD_KEY_* */
	uint32_t flags;        /* VOLTD_KEY_* flags */
	const char *def;       /* the default, as written in voltd.conf; must pass the checks */
	int64_t min, max;      /* INT: bounds; STRING: max is the longest value (min unused) */
	const char *unit;      /* INT: "ms", "us", "s" or "bytes", printed with the
				* value (no suffix is parsed); NULL: a count */
	const char *doc;       /* one line, lower case, no final period */
};

/* --------------------------------------------------------------- module */

/* Flags voltd passes to init. */
#define VOLTD_INIT_CHECK (1u << 0) /* `voltd -t`: check the keys, acquire nothing,
				    * start no thread; the module will not serve */

/* The module's descriptor: static const data, returned by the entry. */
struct voltd_module {
	/* Set by VOLTD_MODULE_HEAD: the sizes and ABI it was built with. */
	uint32_t size;          /* sizeof(struct voltd_module) */
	uint16_t abi_major;     /* VOLTD_MODULE_ABI_MAJOR */
	uint16_t abi_minor;     /* VOLTD_MODULE_ABI_MINOR */
	uint16_t min_minor;     /* the oldest voltd minor it runs on */
	uint16_t kind_size;     /* sizeof(struct voltd_kind) */
	uint16_t key_size;      /* sizeof(struct voltd_key) */
	uint16_t counter_size;  /* sizeof(struct voltd_counter) */

	const char *name;       /* [a-z0-9_], 1..32 bytes: the NAME of [module.NAME] */
	const char *version;    /* the module's own version, shown by voltctl modules */
	const struct voltd_kind *kinds; /* at least one */
	const struct voltd_key *keys;   /* optional */
	/*
	 * Optional. Once, on the main thread, after the keys are checked and
	 * before any job (and before voltd's workers start): read the keys,
	 * set up. *data is what voltd->mod_data() returns later. 0, or -errno
	 * with a one-line reason in err (errlen bytes): voltd then refuses to
	 * start (exit 78) and prints the reason with the file and the line.
	 */
	int (*init)(struct voltd_mod *mod, uint32_t flags, void **data, char *err,
		    size_t errlen);
	/* Optional. Once, on the main thread, when voltd exits after its
	 * drain (every job is finished or abandoned, fini run). Never on a
	 * reload: modules are never unloaded. */
	void (*shutdown)(struct voltd_mod *mod, void *data);
};

#define VOLTD_MODULE_HEAD_RUNS_ON(oldest_minor)                                   \
	.size = sizeof(struct voltd_module), .abi_major = VOLTD_MODULE_ABI_MAJOR, \
	.abi_minor = VOLTD_MODULE_ABI_MINOR, .min_minor = (oldest_minor),          \
	.kind_size = sizeof(struct voltd_kind), .key_size = sizeof(struct voltd_key), \
	.counter_size = sizeof(struct voltd_counter)
/* The first line of every descriptor: struct voltd_module m = {
 * VOLTD_MODULE_HEAD, .name = ..., ... }. It runs on this minor and later;
 * a module that guards every newer call with VOLTD_HAS writes
 * VOLTD_MODULE_HEAD_RUNS_ON(n) to run on minor n and later too. */
#define VOLTD_MODULE_HEAD VOLTD_MODULE_HEAD_RUNS_ON(VOLTD_MODULE_ABI_MINOR)

/* ------------------------------------------------------------------ host */

/* Log levels (syslog's numbers). */
#define VOLTD_LOG_ERR 3
#define VOLTD_LOG_WARNING 4
#define VOLTD_LOG_NOTICE 5
#define VOLTD_LOG_INFO 6
#define VOLTD_LOG_DEBUG 7

/* How voltd->set_body takes its bytes. */
#define VOLTD_BODY_COPY   0 /* copied before the call returns */
#define VOLTD_BODY_STATIC 1 /* static data of the module: never freed, never changed */
#define VOLTD_BODY_MALLOC 2 /* from malloc(3): voltd frees it, also when the job fails */

/* The most bytes of response header fields a job may add (each counted as
 * "Name: value\r\n"). */
#define VOLTD_HEADERS_MAX 4096

#if defined(__GNUC__)
#define VOLTD__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define VOLTD__PRINTF(f, a)
#endif

/*
 * voltd's functions, append-only. "job" calls are made from a job's
 * callbacks (start, step, fini) for that job; "any" calls from any
 * callback of the module (init and shutdown included); "init" calls only
 * from init. A call made elsewhere is a bug in the module.
 */
struct voltd_host {
	uint32_t size;          /* sizeof(struct voltd_host) in the running voltd */
	uint16_t abi_major;     /* VOLTD_MODULE_ABI_MAJOR of the running voltd */
	uint16_t abi_minor;     /* its minor: the entries it has */
	const char *version;    /* the running voltd's version, "0.2.0" */

	/* --- the request (job) --- */
	/* The method, NUL-terminated ("GET"). */
	const char *(*method)(const struct voltd_job *job);
	/* The path without the query, percent-encoding kept; *len its length. */
	const char *(*path)(const struct voltd_job *job, size_t *len);
	/* The query after '?' ("" when none), percent-encoding kept. */
	const char *(*query)(const struct voltd_job *job, size_t *len);
	/* The first value of query parameter `name` (as sent, not decoded):
	 * 0 with *val and *len set, -ENOENT when absent. */
	int (*query_param)(const struct voltd_job *job, const char *name, const char **val,
			   size_t *len);
	/* The value of `name` as a strict decimal: 0, -ENOENT when absent,
	 * -EINVAL when not digits only or given more than once (n=1&n=2 is
	 * ambiguous), -ERANGE above UINT64_MAX. */
	int (*query_u64)(const struct voltd_job *job, const char *name, uint64_t *out);
	/* The value of request header `name` (matched without regard to
	 * case; the first of several), leading and trailing blanks removed;
	 * NULL when absent. Not NUL-terminated: *len is its length. */
	const char *(*header)(const struct voltd_job *job, const char *name, size_t *len);
	/* Header field i in arrival order: 0 with the four outputs set,
	 * -ENOENT when there are i fields or fewer. */
	int (*header_at)(const struct voltd_job *job, size_t i, const char **name,
			 size_t *name_len, const char **val, size_t *val_len);
	/* The request body (chunked coding already removed); NULL and 0 when
	 * empty or taken. */
	const uint8_t *(*body)(const struct voltd_job *job, size_t *len);
	/* Take the body: a malloc(3) buffer that is now the module's (to
	 * free(3), or to hand back with VOLTD_BODY_MALLOC). NULL when empty. */
	void *(*body_take)(struct voltd_job *job, size_t *len);

	/* --- the response (job; start or step, before it returns DONE) --- */
	/* 200..599 (the default is 200): 0 or -EINVAL. */
	int (*set_status)(struct voltd_job *job, int status);
	/* Add a header field. 0; -EINVAL for a name that is not a token, a
	 * value with a control character but HTAB (CR, LF, ...), or a field
	 * voltd writes itself (Date,
	 * Server, Content-Length, Transfer-Encoding, Connection, Keep-Alive,
	 * Upgrade, TE, Trailer, Proxy-*); -E2BIG past VOLTD_HEADERS_MAX;
	 * -ENOMEM. Content-Type is set here (none when not set; a second one
	 * replaces the first). */
	int (*set_header)(struct voltd_job *job, const char *name, const char *value);
	/* The body, len bytes at data, taken as `how` says (VOLTD_BODY_*);
	 * replaces an earlier body. 0, -ENOMEM (COPY only; a MALLOC buffer
	 * is freed even then) or -EINVAL. */
	int (*set_body)(struct voltd_job *job, const void *data, size_t len, uint32_t how);
	/* Room for a body of len bytes that becomes the body: write it before
	 * the step returns. Short ones are the job's own memory (no
	 * allocation). NULL: no memory. */
	void *(*body_alloc)(struct voltd_job *job, size_t len);
	/* Status, Content-Type (NULL: none) and body in one call; returns
	 * VOLTD_STEP_DONE, or -errno as the calls above: `return
	 * voltd->respond(job, 200, "text/plain", buf, n, VOLTD_BODY_COPY);` */
	int (*respond)(struct voltd_job *job, int status, const char *content_type,
		       const void *data, size_t len, uint32_t how);
	/* Status and a text/plain body formatted as printf(3) does; returns
	 * VOLTD_STEP_DONE, -ENOMEM, or -EINVAL as set_status. */
	int (*respondf)(struct voltd_job *job, int status, const char *fmt, ...)
		VOLTD__PRINTF(3, 4);

	/* --- time (any) and sleeping (job) --- */
	/* CLOCK_MONOTONIC in nanoseconds: the clock of deadline_ns. */
	int64_t (*now_ns)(void);
	/* Step this job again at wake_ns (or soon after); the step then
	 * returns VOLTD_STEP_SLEEP. The job holds no thread while it sleeps
	 * (but a blocking kind's: its pool thread sleeps with it). */
	void (*sleep_until)(struct voltd_job *job, int64_t wake_ns);

	/* --- the module (any unless said) --- */
	/* The module a job's kind belongs to. */
	struct voltd_mod *(*mod_of)(const struct voltd_job *job);
	/* What init stored in *data (NULL without init). */
	void *(*mod_data)(const struct voltd_mod *mod);
	/* The current value of key number `key` (its index in the module's
	 * keys array) of type BOOL or INT. Live keys may change between two
	 * calls: read once per job where it matters. */
	int64_t (*key_int)(const struct voltd_mod *mod, uint32_t key);
	/* The value of a STRING key: NUL-terminated, unchanged while voltd runs. */
	const char *(*key_str)(const struct voltd_mod *mod, uint32_t key);
	/* Add n to counter number `counter` (its index in the job's kind's
	 * counters array). Job; costs no more than a relaxed add. */
	void (*count)(struct voltd_job *job, uint32_t counter, uint64_t n);
	/* The calling thread's index in [0, thread_count()): workers first,
	 * then the blocking threads, then one index for every other thread
	 * (init and shutdown run on the main thread). Stable during one
	 * callback only. */
	unsigned (*thread_index)(void);
	/* How many indexes thread_index() may return; fixed once init runs. */
	unsigned (*thread_count)(void);
	/* A log line (VOLTD_LOG_*), prefixed with the module's name; it never
	 * blocks, and repeated lines are rate-limited. */
	void (*log)(const struct voltd_mod *mod, int level, const char *fmt, ...)
		VOLTD__PRINTF(3, 4);
};

/* Does the running voltd have host entry `fn`? Needed only before calling
 * an entry newer than the module's VOLTD_MODULE_HEAD_RUNS_ON minor. */
#define VOLTD_HAS(fn)                                                             \
	(voltd->size >= offsetof(struct voltd_host, fn) + sizeof(voltd->fn) &&   \
	 voltd->fn != NULL)

/* ------------------------------------------------------------------ entry */

#if defined(__GNUC__)
#define VOLTD__HIDDEN __attribute__((visibility("hidden")))
#define VOLTD__EXPORT __attribute__((visibility("default")))
#else
#define VOLTD__HIDDEN
#define VOLTD__EXPORT
#endif

/* The host table, set before any callback of the module runs; every file
 * of the module reads it. Defined (hidden) by VOLTD_MODULE(). */
extern VOLTD__HIDDEN const struct voltd_host *voltd;

/*
 * In exactly one file of the module, after its descriptor:
 *     VOLTD_MODULE(my_module)
 * defines `voltd` and the entry. voltd calls the entry once, first, with
 * its host table; the entry does nothing else, so a module voltd refuses
 * has run none of its own code (constructors aside: have none).
 */
#define VOLTD_MODULE(descriptor)                                                  \
	VOLTD__HIDDEN const struct voltd_host *voltd;                             \
	VOLTD__EXPORT const struct voltd_module *VOLTD_MODULE_ENTRY(              \
		const struct voltd_host *host);                                   \
	VOLTD__EXPORT const struct voltd_module *VOLTD_MODULE_ENTRY(              \
		const struct voltd_host *host)                                    \
	{                                                                         \
		voltd = host;                                                     \
		return &(descriptor);                                             \
	}

#ifdef __cplusplus
}
#endif

#endif
