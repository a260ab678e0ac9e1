/* SPDX-License-Identifier: MIT */
/*
 * jobs/job.c: the job object and its lifecycle (see job.h): made from the
 * request's views, stepped through the kind's callbacks, failed for it
 * (500, 503), freed with fini run once when owed. The calls a kind makes on
 * its job are in host.c. No shared state: a job is touched by one thread at
 * a time; each thread notes the kind whose callback it runs (a
 * thread-local, for the fatal-signal report of crash.c).
 */
#include "jobs/internal.h"
#include "base/compiler.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static size_t state_bytes(const struct vjob_kind *kind)
{
	return ((size_t)kind->def.state_size + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1);
}

size_t vjob_state_free(void)
{
	return VJOB_BLOCK - sizeof(struct vjob);
}

/* Initial-exec: read by a signal handler, which must not take the
 * dynamic TLS path (it may allocate). */
static __thread const struct vjob_kind *running __attribute__((tls_model("initial-exec")));

const struct vjob_kind *vjob__running(void)
{
	return running;
}

static int call_start(struct vjob *job)
{
	const struct vjob_kind *was = running;
	int rc;

	running = job->kind;
	rc = job->kind->def.start((struct voltd_job *)job, job->state);
	running = was;
	return rc;
}

static int call_step(struct vjob *job, int64_t deadline_ns)
{
	const struct vjob_kind *was = running;
	int rc;

	running = job->kind;
	rc = job->kind->def.step((struct voltd_job *)job, job->state, deadline_ns);
	running = was;
	return rc;
}

static void run_fini(struct vjob *job)
{
	if (!job->fini_owed)
		return;
	job->fini_owed = false;
	if (job->kind->def.fini) {
		const struct vjob_kind *was = running;

		job->in_fini = true;
		running = job->kind;
		job->kind->def.fini((struct voltd_job *)job, job->state);
		running = was;
		job->in_fini = false;
	}
}

void vjob__response_reset(struct vjob *job)
{
	if (job->body_owned)
		free((void *)job->res.body);
	job->body_owned = false;
	job->res.body = NULL;
	job->res.body_len = 0;
	job->res.hdrs_len = 0;
	job->res.status = 200;
}

/* The job is answered: the header block gets its final "\r\n" (room for it
 * is always kept). */
static void finish(struct vjob *job)
{
	char *h = (char *)job->res.hdrs;

	h[job->res.hdrs_len] = '\r';
	h[job->res.hdrs_len + 1] = '\n';
	job->done = true;
}

void vjob__fail(struct vjob *job, int err)
{
	static const char oom[] = "out of memory\n", internal[] = "internal error\n";
	static const char ctype[] = "Content-Type: text/plain\r\n";
	char *h = (char *)job->res.hdrs;

	VB_BUG_ON(job->done);
	/* Release the kind's state (a zlib stream) before answering. */
	run_fini(job);
	vjob__response_reset(job);
	job->error = err;
	job->res.status = err == -ENOMEM ? 503 : 500;
	job->res.body = (const uint8_t *)(err == -ENOMEM ? oom : internal);
	job->res.body_len = err == -ENOMEM ? sizeof(oom) - 1 : sizeof(internal) - 1;
	static_assert(sizeof(ctype) - 1 + 2 <= VJOB_HDRS, "the inline header room holds Content-Type: text/plain");
	memcpy(h, ctype, sizeof(ctype) - 1);
	job->res.hdrs_len = sizeof(ctype) - 1;
	finish(job);
}

/* What start or step returned: DONE (fini follows at once: release library
 * state such as a zlib stream of ~256 KiB now, not when the response has
 * been sent), MORE or SLEEP go on, anything else fails the job. */
static enum vjob_step after(struct vjob *job, int rc)
{
	switch (rc) {
	case VOLTD_STEP_DONE:
		run_fini(job);
		finish(job);
		return VJOB_DONE;
	case VOLTD_STEP_MORE:
		return VJOB_MORE;
	case VOLTD_STEP_SLEEP:
		return VJOB_SLEEP;
	default:
		vjob__fail(job, rc < 0 ? rc : -EPROTO);
		return VJOB_DONE;
	}
}

int vjob_new(const struct vjob_kind *kind, struct vjob_input *in, struct vjob **out)
{
	return vjob_new_at(NULL, 0, kind, in, out);
}

int vjob_new_at(void *mem, size_t size, const struct vjob_kind *kind, struct vjob_input *in,
		struct vjob **out)
{
	size_t need = sizeof(struct vjob) + state_bytes(kind);
	struct vjob *job = mem && need <= size ? memset(mem, 0, need) : calloc(1, need);

	*out = NULL;
	if (!job) {
		free(in->body);
		in->body = NULL;
		return -ENOMEM;
	}
	job->in_mem = job == mem;
	job->kind = kind;
	job->method = in->method ? in->method : "";
	job->path = in->path ? in->path : "";
	job->path_len = in->path_len;
	job->query = in->query ? in->query : "";
	job->query_len = in->query_len;
	job->fields = in->fields ? in->fields : "";
	job->fields_len = in->fields_len;
	job->n_fields = in->n_fields;
	job->in_body = in->body;
	job->in_len = in->body ? in->body_len : 0;
	in->body = NULL;
	job->res.status = 200;
	job->res.hdrs = job->hdrs_inline;
	job->hdrs_cap = VJOB_HDRS;
	*out = job;

	/* A blocking kind's callbacks all run on the pool's thread: start in
	 * the first vjob_step. fini is owed only once a callback ran, so a
	 * job refused or dropped before it reached the pool runs none. */
	if (kind->blocking) {
		job->start_owed = true;
		return 0;
	}
	/* fini is owed unless start refuses with -errno. */
	job->fini_owed = true;
	if (!kind->def.start)
		return 0;
	int rc = call_start(job);
	if (rc < 0)
		job->fini_owed = false;
	if (after(job, rc) == VJOB_SLEEP)
		job->sleep_pending = true;
	return 0;
}

void vjob_free(struct vjob *job)
{
	if (!job)
		return;
	run_fini(job);
	if (job->body_owned)
		free((void *)job->res.body);
	free(job->hdrs_heap);
	free(job->in_body);
	if (!job->in_mem)
		free(job);
}

enum vjob_step vjob_step(struct vjob *job, int64_t deadline_ns)
{
	if (job->done)
		return VJOB_DONE;
	if (job->start_owed) {
		job->start_owed = false;
		job->fini_owed = true;
		if (job->kind->def.start) {
			int rc = call_start(job);

			if (rc < 0)
				job->fini_owed = false;
			return after(job, rc);
		}
	}
	if (job->sleep_pending) {
		/* start asked for a sleep: park first, step when it ends. */
		job->sleep_pending = false;
		return VJOB_SLEEP;
	}
	job->slices++;
	return after(job, call_step(job, deadline_ns));
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

int vjob_error(const struct vjob *job)
{
	return job->error;
}
