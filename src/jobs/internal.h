/* SPDX-License-Identifier: MIT */
/*
 * jobs/internal.h: what the files of src/jobs share: the job object (a
 * module sees it as the opaque struct voltd_job), the module object (struct
 * voltd_mod to a module), the host table, and the registry's insides.
 * Private to src/jobs (tests excepted). Threading as job.h: a job is
 * touched by one thread at a time; modules and the registry are built on
 * the main thread and immutable once frozen, but for the key values.
 */
#ifndef VOLTD_JOBS_INTERNAL_H
#define VOLTD_JOBS_INTERNAL_H

#include "jobs/job.h"
#include "base/log.h"

#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

/* ----------------------------------------------------------------- job */

struct vjob {
	const struct vjob_kind *kind;
	/* The request (views, see struct vjob_input). */
	const char *method;
	const char *path, *query, *fields;
	size_t path_len, query_len, fields_len;
	uint32_t n_fields;
	uint32_t hcur_i, hcur_off;  /* header_at: field hcur_i starts at fields + hcur_off */
	uint8_t *in_body;           /* owned until body_take */
	size_t in_len;
	/* The response. res.hdrs is hdrs_inline or hdrs_heap. */
	struct vjob_result res;
	char *hdrs_heap;
	uint32_t hdrs_cap;          /* of res.hdrs, the final "\r\n" included */
	bool body_owned;            /* res.body is malloc'd: freed with the job */
	bool done;
	bool in_mem;                /* made in the caller's memory (vjob_new_at): not freed */
	bool fini_owed;             /* start did not refuse: fini runs once */
	bool in_fini;               /* fini runs: the response may not change */
	bool sleep_pending;         /* start returned SLEEP: the first step parks */
	bool start_owed;            /* a blocking kind's: the first vjob_step runs start */
	uint32_t slices;
	int error;                  /* vjob_error's */
	int64_t wake_ns;            /* sleep_until's */
	char text[VJOB_TEXT];       /* a short body (body_alloc, COPY, respondf) */
	char hdrs_inline[VJOB_HDRS];
	alignas(max_align_t) unsigned char state[]; /* kind->def.state_size bytes */
};

static inline struct vjob *vjob__of(struct voltd_job *j)
{
	return (struct vjob *)j;
}

static inline const struct vjob *vjob__of_const(const struct voltd_job *j)
{
	return (const struct vjob *)j;
}

/* The kind whose callback (start, step, fini) the calling thread runs
 * now, or NULL: a thread-local the fatal-signal handler reads (crash.c). */
const struct vjob_kind *vjob__running(void);

/* Answer for a kind that failed (-errno, or a step code voltd does not
 * know): fini first when owed, the kind's response dropped, then 503 for
 * -ENOMEM and 500 otherwise. */
void vjob__fail(struct vjob *job, int err);
/* Drop the response set so far (body and header fields). */
void vjob__response_reset(struct vjob *job);

/* -------------------------------------------------------------- module */

/* A key: voltd's copy of the declaration and its value. INT and BOOL
 * values are atomics: `voltctl set` writes a live one while jobs read it
 * (relaxed: a value on its own, nothing published with it). A STRING's
 * text is set before the module starts and never changes after. */
struct vjob_key {
	struct voltd_key def;
	_Atomic int64_t ival;
	char *sval;
};

struct vjob_mod {
	const char *name;           /* the descriptor's (the module's static data) */
	const char *version;
	char *path;                 /* as opened; "(built in)" for the built-in one */
	bool builtin;
	bool started;
	void *dl;                   /* dlopen handle, never closed; NULL built in */
	struct voltd_module desc;   /* zero-extended copy of the descriptor */
	struct vjob_kind *kinds;
	size_t n_kinds;
	struct vjob_key *keys;
	size_t n_keys;
	void *data;                 /* what init stored */
	/* The file at load, for vjob_mod_file_changed. */
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	char build_id[65];          /* hex, "" when none */
	/* log(): repeated lines are rate-limited per module. */
	struct vb_ratelimit log_rl;
};

static inline struct vjob_mod *vjob__mod_of(struct voltd_mod *m)
{
	return (struct vjob_mod *)m;
}

static inline const struct vjob_mod *vjob__mod_of_const(const struct voltd_mod *m)
{
	return (const struct vjob_mod *)m;
}

/* The host table every module gets (host.c). */
extern const struct voltd_host vjob__host;

/* Check a descriptor and build the module object (module.c): the checks of
 * vjob_mod_open after the entry, for a file's descriptor and for the
 * built-in one alike. path is the file ("(built in)"), dl its handle. */
int vjob__mod_new(const char *name, const char *path, void *dl, const struct voltd_module *desc,
		  struct vjob_mod **out, char *err, size_t errlen);

/* The built-in module's entry (builtin.c). */
const struct voltd_module *vjob__builtin_entry(const struct voltd_host *host);

/* ------------------------------------------------------------ registry */

/* The paths the server answers itself (server/request.c's routes): no
 * kind may claim one. */
bool vjob__route_reserved(const char *path, size_t len);
/* Does a kind registered so far (or one of `pending`, n of them, the
 * module's own earlier kinds) clash with k: its name, or its route? NULL,
 * or what it clashes with, described in why. */
const struct vjob_kind *vjob__registry_clash(const struct vjob_kind *k, const struct vjob_kind *pending,
					     size_t n, char *why, size_t len);
/* Register a started module's kinds (after the checks). 0 or -ENOMEM. */
int vjob__registry_add(struct vjob_mod *m);
/* Append a started module to the list (registry.c keeps it). */
int vjob__modules_add(struct vjob_mod *m);
bool vjob__frozen(void);

/* Threads (registry.c): the workers' number, and the calling thread's
 * index in [0, vjob__thread_count()). */
unsigned vjob__thread_index(void);
unsigned vjob__thread_count(void);
/* count(): add n to counter c of the job's kind (c checked). */
void vjob__count(const struct vjob_kind *k, uint32_t c, uint64_t n);

/* log.c: a module's log line; never blocks a worker (see log.c). At most
 * VJOB_LOG_BURST lines per VJOB_LOG_WINDOW_MS per module (its log_rl). */
#define VJOB_LOG_BURST 10
#define VJOB_LOG_WINDOW_MS 5000
void vjob__log(const struct vjob_mod *m, int level, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));
/* The writer thread of the workers' lines: started by the freeze, stopped
 * (what is queued written first) by vjob_mod_shutdown_all. */
void vjob__log_start(void);
void vjob__log_stop(void);

#endif
