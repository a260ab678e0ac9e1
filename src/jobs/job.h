/* SPDX-License-Identifier: MIT */
/*
 * jobs/job.h: the jobs layer's API to the rest of voltd: modules, their
 * kinds and keys, the registry and routing table built from them, and the
 * jobs requests become. Every job kind, the built-in ones included, is a
 * kind of a module written against <voltd/module.h>: the compiled-in
 * module "voltd" (echo, spin, sleep, hash, gzip; stall in test builds) and
 * the modules loaded from files. No sockets, no HTTP framing.
 *
 * Life of the registry (main thread, before any worker runs a job):
 *   vjob_threads_set(workers)                  how many workers; then
 *   vjob_mod_start(vjob_mod_builtin(), ...)    the built-in module first,
 *   vjob_mod_open(name, path, ...)             each module file: checks,
 *   (its keys set: vjob_mod_key_set)           registers nothing;
 *   vjob_mod_start(m, ...)                     init, then its kinds;
 *   vjob_registry_freeze()                     routing table, counters;
 *   ... workers run jobs: routing and lookups are lock-free reads of
 *   immutable tables; only live keys change (atomics) ...
 *   vjob_mod_shutdown_all()                    after the drain, at exit.
 * Modules are never unloaded (dlclose is never called).
 *
 * A job runs in slices. vjob_new() runs the kind's start, which may finish
 * the job at once (a 400: vjob_done() is then true and the parse stage can
 * answer without queueing). Otherwise the exec stage calls vjob_step() with
 * a deadline about [jobs] slice_us away; the kind does a bounded amount of
 * work and returns
 *   VJOB_MORE  - slice used up, state kept in the job: yield, step again;
 *   VJOB_SLEEP - nothing to do before vjob_wake_ns(): wait on a timer (the
 *                job never blocks a thread), then step again;
 *   VJOB_DONE  - vjob_result() holds status, header fields and body.
 * Failures inside a kind (a negative return, a step code voltd does not
 * know) become a 503 (-ENOMEM) or 500 result, so the caller only ever sees
 * these three answers.
 *
 * Threading: the module and registry calls above run on the main thread,
 * before the workers start (vjob_mod_shutdown_all after they stopped);
 * afterwards kinds, modules and the routing table are immutable: any
 * thread, any time. vjob_mod_key_set of a live key and the key readers may
 * run on any thread at once (the values are atomics). A job is used by one
 * thread at a time; it may move between threads (workers) between calls.
 */
#ifndef VOLTD_JOBS_JOB_H
#define VOLTD_JOBS_JOB_H

#include <voltd/module.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Settings from [jobs] the jobs layer reads: public fields. The server
 * fills them from voltd.conf's [jobs] keys (src/voltd/cfg_schema.c, the
 * only place their defaults are written); tests start from tcfg_jobs
 * (tests/helpers/test_config.h). The kinds' own settings are their
 * module's keys (vjob_mod_key_*). */
struct vjob_config {
	uint32_t slice_us; /* [jobs] slice_us: work per vjob_step call */
};

/* The deadline to pass to vjob_step for a slice starting at now_ns
 * (CLOCK_MONOTONIC nanoseconds, as vb_now_ns()). */
static inline int64_t vjob_slice_deadline(const struct vjob_config *c, int64_t now_ns)
{
	return now_ns + (int64_t)c->slice_us * 1000;
}

enum vjob_step {
	VJOB_DONE = VOLTD_STEP_DONE,
	VJOB_MORE = VOLTD_STEP_MORE,
	VJOB_SLEEP = VOLTD_STEP_SLEEP,
};

struct vjob;
struct vjob_mod; /* a module; to its own code, the struct voltd_mod of <voltd/module.h> */

/*
 * A registered kind: voltd's copy of a module's struct voltd_kind. The
 * fields shown are public and read-only (the server labels its per-kind
 * statistics and the stall report with name, answers 405 with allow); the
 * rest is private to src/jobs. Its strings live as long as the program
 * (a module is never unloaded).
 */
struct vjob_kind {
	const char *name;   /* "spin" */
	const char *path;   /* its route, "/v1/spin" (a prefix when prefix) */
	const char *allow;  /* the methods, as an Allow value: "GET, HEAD" */
	bool prefix;        /* path is a prefix (VOLTD_KIND_PREFIX) */
	/* VOLTD_KIND_BLOCKING: every callback (start, step, fini) runs on a
	 * thread of the server's blocking pool, never on a worker; vjob_new
	 * leaves start to the first vjob_step. */
	bool blocking;
	bool has_start;     /* it has a start (vjob_new runs it, unless blocking) */
	/* "spin, module voltd 0.2.0": the kind, its module and the module's
	 * version, as stall and watchdog reports name a poll (vrt_poll_label) */
	const char *label;
	const struct vjob_mod *mod;
	unsigned index;     /* in [0, vjob_kind_count()) */
	/* private */
	/* " in kind K of module M V (FILE)": the fatal-signal report's text
	 * (crash.c), written out by a signal handler as it is */
	const char *crash_text;
	struct voltd_kind def;      /* the module's descriptor, zero-extended */
	size_t path_len;
	unsigned n_counters;
	unsigned counter_base;      /* the first of its counters in a thread's block */
};

/* What the request brings to a job: views into memory that the caller
 * keeps, unchanged, until vjob_free (the server keeps the parsed request
 * with its job), and the body, whose ownership moves to the job. */
struct vjob_input {
	const char *method;  /* NUL-terminated, static ("GET") */
	const char *path;    /* without the query */
	size_t path_len;
	const char *query;   /* after '?', "" when none */
	size_t query_len;
	/* the head's header fields: n_fields lines "name:value\n" (the form
	 * of http/parser.h), fields_len bytes; NULL or "" when none */
	const char *fields;
	size_t fields_len;
	uint32_t n_fields;
	uint8_t *body;       /* malloc'd body: ownership moves to the job, */
	size_t body_len;     /* even when vjob_new fails */
};

/* The answer; fields public, read-only, valid until vjob_free. */
struct vjob_result {
	int status;               /* 200, 400, 503, ... */
	/* The header fields the kind set (Content-Type among them), encoded
	 * "Name: value\r\n" each, hdrs_len bytes (0: none), and always
	 * followed by "\r\n" (hdrs[hdrs_len], [hdrs_len + 1]), so that
	 * hdrs_len + 2 bytes end a head. */
	const char *hdrs;
	size_t hdrs_len;
	const uint8_t *body;
	size_t body_len;
};

/* Create a job of `kind` and run its start (a blocking kind's start runs
 * in its first vjob_step, on the pool's thread). 0 or -ENOMEM. */
int vjob_new(const struct vjob_kind *kind, struct vjob_input *in, struct vjob **out);
/* Free a job, finished or not (NULL is fine): runs fini if it is owed. */
void vjob_free(struct vjob *job);

/*
 * A job in the caller's memory, so that a caller that keeps job memory for
 * reuse (the server, per worker) costs no allocation per request: a job
 * whose state fits `size` bytes with the job itself (VJOB_STATE_FREE bytes
 * of state in VJOB_BLOCK) is made in `mem`; a short result body (up to
 * VJOB_TEXT bytes) and a few header fields (VJOB_HDRS bytes) are inline;
 * a larger job is allocated as by vjob_new. vjob_free then leaves `mem`
 * to its owner. mem must be aligned for max_align_t; NULL (size 0) is
 * vjob_new.
 */
#define VJOB_BLOCK 768
#define VJOB_TEXT 136          /* a sha512 digest line */
#define VJOB_HDRS 64           /* Content-Type: application/octet-stream, and more */
int vjob_new_at(void *mem, size_t size, const struct vjob_kind *kind, struct vjob_input *in,
		struct vjob **out);
/* Bytes of a kind's state that fit VJOB_BLOCK with the job (the figure
 * voltd-module(7) gives module authors). */
size_t vjob_state_free(void);

/* Run one slice until about deadline_ns (see the top of the file); the
 * first call on a job of a blocking kind runs its start instead (and
 * returns what start returned). On a finished job: VJOB_DONE again, no
 * work. */
enum vjob_step vjob_step(struct vjob *job, int64_t deadline_ns);

bool vjob_done(const struct vjob *job);
/* After VJOB_SLEEP: when to step again (vb_now_ns() clock). */
int64_t vjob_wake_ns(const struct vjob *job);
/* When done: the result; NULL before. */
const struct vjob_result *vjob_result(const struct vjob *job);
const struct vjob_kind *vjob_kind_of(const struct vjob *job);
/* vjob_step calls that ran the kind's step so far (slices run). */
uint32_t vjob_slices(const struct vjob *job);
/* When the kind failed the job (start or step returned -errno, or a code
 * voltd does not know: the result is then voltd's 500 or 503), what it
 * returned (-EPROTO for an unknown code); 0 otherwise. */
int vjob_error(const struct vjob *job);

/* ------------------------------------------------------------ modules */

/*
 * Open a module file: its ELF header, dlopen (RTLD_NOW | RTLD_LOCAL), the
 * entry symbol, the ABI and the descriptor, every kind's name, route
 * (against the kinds registered so far and the server's own routes) and
 * counters, every key's declaration; the keys take their defaults. name
 * is the NAME of [module.NAME]: the descriptor must say the same. Calls
 * no code of the module but its entry; registers nothing. 0 and *out, or
 * -errno with one line in err: "PATH: what was expected against what was
 * found" (the caller prefixes the config file, line and section). A file
 * refused stays mapped (never dlclose), its object is freed.
 */
int vjob_mod_open(const char *name, const char *path, struct vjob_mod **out, char *err,
		  size_t errlen);
/* Free a module opened and not started (a later check refused it); its
 * file stays mapped. NULL is fine. */
void vjob_mod_close(struct vjob_mod *m);
/* The compiled-in module "voltd" (version voltd's, file "(built in)"),
 * opened through the same checks; not started until vjob_mod_start. Its
 * keys are [jobs] spin_max_n and sleep_max_ms. */
struct vjob_mod *vjob_mod_builtin(void);
/*
 * Start a module: check its kinds against those registered meanwhile, call
 * its init (flags: VOLTD_INIT_CHECK for `voltd -t`; its keys as set so
 * far), and when init succeeds register its kinds (in descriptor order,
 * after the kinds registered before). 0, or -errno with the reason in err
 * (init's own, "init failed: REASON"), and then nothing is registered.
 * The built-in module first, each module once, before the freeze.
 */
int vjob_mod_start(struct vjob_mod *m, uint32_t flags, char *err, size_t errlen);
/* The workers' number, before the first vjob_mod_start (default 1):
 * thread_count() of the host table is workers + blocking threads + 1 (the
 * last index is any other thread: main, control). */
void vjob_threads_set(unsigned workers);
/* The blocking pool's threads ([modules] blocking_threads), before the
 * first vjob_mod_start (default 0): their thread_index() follow the
 * workers'. Each pool thread calls vjob_thread_blocking(i), i in [0, n),
 * once, before it runs a job. */
void vjob_blocking_threads_set(unsigned n);
void vjob_thread_blocking(unsigned i);
/* Install the fatal-signal report (crash.c): SIGSEGV, SIGBUS, SIGILL,
 * SIGFPE or SIGABRT while a thread runs a kind's callback writes one line
 * naming the kind, its module, version and file to stderr (write(2) of
 * text made at load: async-signal-safe), then the action the signal had
 * before (the default: the process dies by it) takes over. Once, on the
 * main thread, before any job runs. 0 or -errno. */
int vjob_crash_report_install(void);
/* The registry is complete: build the routing table and the per-thread
 * counters. Before the workers start; routing needs it. */
void vjob_registry_freeze(void);
/* Call every started module's shutdown (the last started first). At exit,
 * after the drain: every job is finished or freed. */
void vjob_mod_shutdown_all(void);

/* The started modules in start order (the built-in one first). */
size_t vjob_mod_count(void);
const struct vjob_mod *vjob_mod_at(size_t i);
const char *vjob_mod_name(const struct vjob_mod *m);
const char *vjob_mod_version(const struct vjob_mod *m);
/* The file as opened ("(built in)" for the built-in module). */
const char *vjob_mod_path(const struct vjob_mod *m);
/* The file's GNU build id in hex ("" when it has none, or built in). */
const char *vjob_mod_build_id(const struct vjob_mod *m);
/* Has the file on disk changed since it was loaded (device, inode, size or
 * mtime)? 1 yes (replaced, or gone), 0 no (always for the built-in one). */
int vjob_mod_file_changed(const struct vjob_mod *m);
/* The ABI minor the module was built against, and the oldest it runs on. */
unsigned vjob_mod_abi_minor(const struct vjob_mod *m);
unsigned vjob_mod_min_minor(const struct vjob_mod *m);
size_t vjob_mod_kind_count(const struct vjob_mod *m);
const struct vjob_kind *vjob_mod_kind(const struct vjob_mod *m, size_t i);

/* The keys the module declared, in its order: their facts (name, type,
 * flags, default, bounds, unit, doc), read-only. */
size_t vjob_mod_key_count(const struct vjob_mod *m);
const struct voltd_key *vjob_mod_key(const struct vjob_mod *m, size_t i);
/* The index of key `name`, -1 when the module declares none so named. */
int vjob_mod_key_find(const struct vjob_mod *m, const char *name);
/* Set key i from its text, as voltd.conf writes it: checked by its
 * declaration (BOOL on|off|true|false|yes|no|1|0; INT a decimal in [min,
 * max]; STRING at most max bytes). 0; -EINVAL with the problem in err
 * ("not a number", "above the maximum 100", ...); -EBUSY once the module
 * started when the key is not live (its text says it needs a restart). */
int vjob_mod_key_set(struct vjob_mod *m, size_t i, const char *text, char *err, size_t errlen);
/* Key i's current value as voltd.conf writes it (on/off, decimal, text). */
void vjob_mod_key_format(const struct vjob_mod *m, size_t i, char *buf, size_t len);

/* A kind's counter, summed over the threads (the value count() added
 * to); 0 for an index the kind does not declare. Any thread. */
uint64_t vjob_kind_counter(const struct vjob_kind *k, unsigned counter);
/* How many counters the kind declared, and counter c's declaration (a
 * zero-extended copy of the module's; all NULL past the count). */
unsigned vjob_kind_counter_count(const struct vjob_kind *k);
struct voltd_counter vjob_kind_counter_decl(const struct vjob_kind *k, unsigned counter);

/* ------------------------------------------------------------ registry */

/* Kinds in registration order: index i in [0, vjob_kind_count()) is
 * stable for the life of the program (per-kind statistics arrays). */
size_t vjob_kind_count(void);
const struct vjob_kind *vjob_kind_at(size_t i);
/* The index of a registered kind, -1 for another pointer. */
int vjob_kind_index(const struct vjob_kind *k);
/* By name ("spin"); NULL if none. */
const struct vjob_kind *vjob_kind_by_name(const char *name);

enum vjob_route {
	VJOB_ROUTE_OK = 0,      /* *kind serves this path and method */
	VJOB_ROUTE_NOT_FOUND,   /* 404; *kind NULL */
	VJOB_ROUTE_BAD_METHOD,  /* 405; *kind is the path's kind: send its allow */
};

/* Route a request (after vjob_registry_freeze): an exact route first, then
 * the longest prefix route (path_len bytes, no query); then the method
 * (e.g. "GET", case-sensitive as HTTP methods are). */
enum vjob_route vjob_route(const char *path, size_t path_len, const char *method,
			   const struct vjob_kind **kind);

#endif
