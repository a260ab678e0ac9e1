/* SPDX-License-Identifier: MIT */
/*
 * jobs/job.h: the job kinds (echo, spin, sleep, hash, gzip) behind one
 * interface, the jobs requests become, and the routing table from
 * path and method to kind. No sockets, no HTTP framing, no global state.
 *
 * A job runs in slices. vjob_new() validates the input and may finish the
 * job at once (every 400: vjob_done() is then true and
 * the parse stage can answer without queueing). Otherwise the exec stage
 * calls vjob_step() with a deadline about [jobs] slice_us away; the kind does
 * a bounded amount of work and returns
 *   VJOB_MORE  - slice used up, state kept in the job: yield, step again;
 *   VJOB_SLEEP - nothing to do before vjob_wake_ns(): wait on a timer (the
 *                job never blocks a thread), then step again;
 *   VJOB_DONE  - vjob_result() holds status, content type and body.
 * Failures inside a kind (out of memory, a library error) become a 503/500
 * result, so the caller only ever sees these three answers.
 *
 * Threading: kinds, the registry and the routing table are immutable: any
 * thread, any time. A job is used by one thread at a time; it may move
 * between threads (workers) between calls.
 *
 * Adding a kind: one file kind_<name>.c defining `const struct vjob_kind
 * vjob_kind_<name>` (see internal.h for the helpers), its line in
 * registry.c, and its line in local.mk.
 */
#ifndef VOLTD_JOBS_JOB_H
#define VOLTD_JOBS_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Settings from [jobs]; public fields. The server fills them from
 * voltd.conf's [jobs] keys (src/voltd/cfg_schema.c, the only place their defaults
 * are written); tests start from tcfg_jobs (tests/helpers/test_config.h). */
struct vjob_config {
	uint64_t spin_max_n;   /* [jobs] spin_max_n: largest n of /v1/spin */
	uint64_t sleep_max_ms; /* [jobs] sleep_max_ms: largest ms of /v1/sleep */
	uint32_t slice_us;     /* [jobs] slice_us: work per vjob_step call */
};

/* The deadline to pass to vjob_step for a slice starting at now_ns
 * (CLOCK_MONOTONIC nanoseconds, as vb_now_ns()). */
static inline int64_t vjob_slice_deadline(const struct vjob_config *c, int64_t now_ns)
{
	return now_ns + (int64_t)c->slice_us * 1000;
}

enum vjob_step {
	VJOB_DONE = 0,
	VJOB_MORE = 1,
	VJOB_SLEEP = 2,
};

struct vjob;

/*
 * A kind. name, path and allow are public (read-only): the server labels its
 * per-kind statistics with name and answers 405 with allow. The rest is
 * private to src/jobs.
 */
struct vjob_kind {
	const char *name;   /* "spin" */
	const char *path;   /* "/v1/spin" */
	const char *allow;  /* the methods, as an Allow value: "GET, HEAD" */
	size_t state_size;  /* private: per-job state, zeroed by vjob_new */
	/* private: validate, set up; VJOB_DONE when finished already. */
	int (*start)(struct vjob *job, const struct vjob_config *cfg);
	/* private: one slice; VJOB_* or -errno. */
	int (*step)(struct vjob *job, int64_t deadline_ns);
	/* private: release what start/step acquired (may be NULL); called
	 * once, when the job finishes or is freed unfinished. */
	void (*fini)(struct vjob *job);
	/* private: warm a library up (may be NULL); see vjob_warm_up. */
	void (*warm_up)(void);
};

/* What the request brings to a job. */
struct vjob_input {
	const char *query;  /* the query string (no '?'); copied by vjob_new */
	size_t query_len;
	uint8_t *body;      /* malloc'd body: ownership moves to the job, */
	size_t body_len;    /* even when vjob_new fails */
};

/* The answer; fields public, read-only, valid until vjob_free. */
struct vjob_result {
	int status;               /* 200, 400, 503, ... */
	const char *content_type; /* static string */
	const uint8_t *body;
	size_t body_len;
};

/* Create a job of `kind` and run its validation. 0 or -ENOMEM. */
int vjob_new(const struct vjob_kind *kind, const struct vjob_config *cfg,
	     struct vjob_input *in, struct vjob **out);
/* Free a job, finished or not (NULL is fine). */
void vjob_free(struct vjob *job);

/*
 * A job in the caller's memory, so that a caller that keeps job memory for
 * reuse (the server, per worker) costs no allocation per request: a job
 * that fits `size` bytes (its state, its query copy, a result body of up to
 * VJOB_TEXT bytes inline) is made in `mem`, a larger one is allocated as by
 * vjob_new. vjob_free then leaves `mem` to its owner. mem must be aligned
 * for max_align_t; NULL (size 0) is vjob_new.
 */
#define VJOB_BLOCK 512
#define VJOB_TEXT 136          /* a sha512 digest line */
int vjob_new_at(void *mem, size_t size, const struct vjob_kind *kind,
		const struct vjob_config *cfg, struct vjob_input *in, struct vjob **out);

/* Run one slice until about deadline_ns (see the top of the file). On a
 * finished job: VJOB_DONE again, no work. */
enum vjob_step vjob_step(struct vjob *job, int64_t deadline_ns);

bool vjob_done(const struct vjob *job);
/* After VJOB_SLEEP: when to step again (vb_now_ns() clock). */
int64_t vjob_wake_ns(const struct vjob *job);
/* When done: the result; NULL before. */
const struct vjob_result *vjob_result(const struct vjob *job);
const struct vjob_kind *vjob_kind_of(const struct vjob *job);
/* vjob_step calls so far (slices run). */
uint32_t vjob_slices(const struct vjob *job);

/* ------------------------------------------------------------ registry */

/* Optional, once at start-up, any thread: let the libraries behind the kinds
 * do their lazy one-time set-up now (OpenSSL 3 spends several milliseconds
 * on its first digest), not inside the first job's slice on a worker. */
void vjob_warm_up(void);

/* Kinds in a fixed order: index i in [0, vjob_kind_count()) is stable for
 * the life of the program (per-kind statistics arrays). */
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

/* Route a request: exact path match (path_len bytes, no query), then the
 * method (e.g. "GET", case-sensitive as HTTP methods are). */
enum vjob_route vjob_route(const char *path, size_t path_len, const char *method,
			   const struct vjob_kind **kind);

#endif
