/* SPDX-License-Identifier: MIT */
/*
 * jobs/job.c: the job object and its lifecycle (see job.h). No shared state:
 * a job is touched by one thread at a time.
 */
#include "jobs/internal.h"
#include "base/compiler.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_result(struct vjob *job, int status, const char *ctype, const uint8_t *body,
		       size_t len, bool owned)
{
	VB_BUG_ON(job->done);
	job->res.status = status;
	job->res.content_type = ctype;
	job->res.body = body;
	job->res.body_len = len;
	job->body_owned = owned && body != (const uint8_t *)job->text;
	job->done = true;
}

int vjob__finish_static(struct vjob *job, int status, const char *ctype, const char *text)
{
	set_result(job, status, ctype, (const uint8_t *)text, strlen(text), false);
	return VJOB_DONE;
}

int vjob__finish_owned(struct vjob *job, int status, const char *ctype, uint8_t *body,
		       size_t len)
{
	set_result(job, status, ctype, body, len, true);
	return VJOB_DONE;
}

int vjob__finish_fmt(struct vjob *job, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	char *s = (char *)vjob__body_buf(job, (size_t)n + 1);
	if (!s)
		return -ENOMEM;
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return vjob__finish_owned(job, status, "text/plain", (uint8_t *)s, (size_t)n);
}

static void run_fini(struct vjob *job)
{
	if (!job->fini_done && job->kind->fini)
		job->kind->fini(job);
	job->fini_done = true;
}

/* A kind failed: answer for it. Unfinished state is released first. */
static void fail_job(struct vjob *job, int err)
{
	run_fini(job);
	if (err == -ENOMEM)
		vjob__finish_static(job, 503, "text/plain", "out of memory\n");
	else
		vjob__finish_static(job, 500, "text/plain", "internal error\n");
}

uint8_t *vjob__body_buf(struct vjob *job, size_t len)
{
	return len <= sizeof(job->text) ? (uint8_t *)job->text : malloc(len);
}

int vjob_new(const struct vjob_kind *kind, const struct vjob_config *cfg,
	     struct vjob_input *in, struct vjob **out)
{
	return vjob_new_at(NULL, 0, kind, cfg, in, out);
}

int vjob_new_at(void *mem, size_t size, const struct vjob_kind *kind,
		const struct vjob_config *cfg, struct vjob_input *in, struct vjob **out)
{
	*out = NULL;
	size_t state = (kind->state_size + alignof(max_align_t) - 1) &
		       ~(alignof(max_align_t) - 1);
	size_t need = sizeof(struct vjob) + state + in->query_len + 1;
	struct vjob *job = mem && need <= size ? memset(mem, 0, need) : calloc(1, need);
	if (!job) {
		free(in->body);
		in->body = NULL;
		return -ENOMEM;
	}
	job->in_mem = job == mem;
	job->kind = kind;
	char *q = (char *)job->state + state;
	if (in->query_len)
		memcpy(q, in->query, in->query_len);
	q[in->query_len] = '\0';
	job->query = q;
	job->query_len = in->query_len;
	job->in_body = in->body;
	job->in_len = in->body_len;
	in->body = NULL;

	int rc = kind->start(job, cfg);
	if (rc < 0)
		fail_job(job, rc);
	else if (rc == VJOB_DONE)
		run_fini(job);
	VB_BUG_ON(rc == VJOB_DONE && !job->done);
	*out = job;
	return 0;
}

void vjob_free(struct vjob *job)
{
	if (!job)
		return;
	run_fini(job);
	if (job->body_owned)
		free((void *)job->res.body);
	free(job->in_body);
	if (!job->in_mem)
		free(job);
}

enum vjob_step vjob_step(struct vjob *job, int64_t deadline_ns)
{
	if (job->done)
		return VJOB_DONE;
	job->slices++;
	int rc = job->kind->step(job, deadline_ns);
	if (rc < 0) {
		fail_job(job, rc);
		return VJOB_DONE;
	}
	if (rc == VJOB_DONE) {
		VB_BUG_ON(!job->done);
		/* Release library state (a zlib stream is ~256 KiB) now, not
		 * when the response has been sent. */
		run_fini(job);
	}
	return (enum vjob_step)rc;
}

bool vjob_done(const struct vjob *job)
{
	return job->done;
}

int64_t vjob_wake_ns(const struct vjob *job)
{
	return job->wake_ns;
}

const struct vjob_result *vjob_result(const struct vjob *job)
{
	return job->done ? &job->res : NULL;
}

const struct vjob_kind *vjob_kind_of(const struct vjob *job)
{
	return job->kind;
}

uint32_t vjob_slices(const struct vjob *job)
{
	return job->slices;
}
