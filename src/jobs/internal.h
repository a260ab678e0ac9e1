/* SPDX-License-Identifier: MIT */
/*
 * jobs/internal.h: what a kind file sees: the job object and the helpers
 * that set its result. Private to src/jobs (tests excepted). Same threading
 * as job.h: a job is touched by one thread at a time.
 */
#ifndef VOLTD_JOBS_INTERNAL_H
#define VOLTD_JOBS_INTERNAL_H

#include "jobs/job.h"

#include <stdalign.h>
#include <stddef.h>

struct vjob {
	const struct vjob_kind *kind;
	struct vjob_result res;
	bool done;
	bool body_owned;   /* res.body was malloc'd for this job */
	bool in_mem;       /* made in the caller's memory (vjob_new_at): not freed */
	bool fini_done;
	uint32_t slices;
	int64_t wake_ns;   /* set by a kind before it returns VJOB_SLEEP */
	const char *query; /* copy, inside this allocation, NUL-terminated */
	size_t query_len;
	uint8_t *in_body;  /* owned */
	size_t in_len;
	char text[VJOB_TEXT]; /* a short result's body (vjob__body_buf) */
	alignas(max_align_t) unsigned char state[]; /* kind->state_size bytes */
};

static inline void *vjob__state(struct vjob *job)
{
	return job->state;
}

/* Finish with a static body (not freed). Returns VJOB_DONE. */
int vjob__finish_static(struct vjob *job, int status, const char *ctype, const char *text);
/* Room for a result body of len bytes: the job's own text when it fits,
 * else malloc'd (NULL: no memory); finish with vjob__finish_owned. */
uint8_t *vjob__body_buf(struct vjob *job, size_t len);
/* Finish with a body from vjob__body_buf (or malloc'd); the job frees it.
 * Returns VJOB_DONE. */
int vjob__finish_owned(struct vjob *job, int status, const char *ctype, uint8_t *body,
		       size_t len);
/* Finish with text/plain printf output. VJOB_DONE or -ENOMEM. */
int vjob__finish_fmt(struct vjob *job, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
