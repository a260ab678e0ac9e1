/* SPDX-License-Identifier: MIT */
/*
 * server/request.c: what a parsed request becomes (doc/server.md,
 * route and queue): the server's own routes (/healthz, /readyz, /livez)
 * answered by the connection without a job; anything else routed to a job
 * kind, answered at once by the connection when the server or the kind
 * decides at once (404, 405, every 400 a kind finds), otherwise a job carrying the
 * request's struct vsrv_reply_to, offered to `jobs`, or to the blocking
 * pool's queue for a blocking kind (on_full = wait: left in pending
 * until there is room; shed: 503 with Retry-After; codel: as shed, and 503
 * while the queue's wait stands above its target, admit.c). A quarantined
 * kind (kinds.c) is answered 503 with Retry-After at once.
 *
 * Threading: the connection's task (task-private state of struct
 * vsrv_conn); once on its queue a job is an executor's (or a pool
 * thread's).
 */
#include "config.h"
#include "server/internal.h"
#include "base/time.h"

#include <string.h>

/* The server's own routes, in the order of enum vsrv_route: GET and HEAD
 * only, answered by the connection (output.c) as soon as parsed, never
 * queued: a probe must not wait behind the queue it reports on. No job
 * kind may claim their paths (the jobs layer refuses it). */
static const struct {
	const char *path;
	size_t len;
	const char *name;
} routes[VSRV_ROUTES] = {
	[VSRV_ROUTE_HEALTHZ] = { "/healthz", 8, "healthz" },
	[VSRV_ROUTE_READYZ] = { "/readyz", 7, "readyz" },
	[VSRV_ROUTE_LIVEZ] = { "/livez", 6, "livez" },
};

const char *vsrv__route_name(unsigned r)
{
	return r < VSRV_ROUTES ? routes[r].name : NULL;
}

static bool ready_for_jobs(struct vsrv *srv)
{
	VB_LINE_WRITE(srv_ready_read);
	/* Relaxed: a status bit (see vsrv__closing). */
	return !vsrv__draining(srv) && !atomic_load_explicit(&srv->unready, memory_order_relaxed) &&
	       vch_set_len(srv->jobs) < srv->ready_limit;
}

/* A blocking kind's job goes to the blocking pool's queue (blocking.c),
 * whose threads run its callbacks, never a worker; the others to `jobs`. */
static bool job_blocks(const struct vsrv_job *job)
{
	return vjob_kind_of(job->vj)->blocking;
}

/* Offer a job to `jobs`, this worker's member first (a full member
 * spills to the others: the set is full only when all are), or to the
 * blocking pool's queue. Its gauge moves to exec first: once sent, the job
 * is an executor's (or a pool thread's) and we may not touch it; if it was
 * not sent, it moves back. */
static enum vch_status send_job(struct vsrv_conn *c, struct vsrv_job *job, bool wait)
{
	struct vsrv *srv = c->srv;
	enum vch_status st;

	vsrv__job_stage(srv, job, VSRV_J_EXEC);
	if (job_blocks(job))
		st = wait ? vch_send_poll(srv->pool.q, &c->busy->pending_waiter, vch_val(job))
			  : vch_try_send(srv->pool.q, vch_val(job));
	else
		st = wait ? vch_set_send_poll(srv->jobs, vsrv__home(srv), &c->busy->pending_waiter, vch_val(job))
			  : vch_set_try_send(srv->jobs, vsrv__home(srv), vch_val(job));
	if (st != VCH_OK)
		vsrv__job_stage(srv, job, VSRV_J_PARSE);
	return st;
}

/* A job that cannot go to `jobs` (shed, or closed: shutting down): 503. */
static void refuse_job(struct vsrv_conn *c, struct vsrv_job *job)
{
	struct vsrv_reply_to to = job->to;

	vsrv__job_free(c->srv, job);
	vsrv__respond_status(c, &to, 503, NULL);
}

/* codel: does the job's queue refuse it now (admit.c)? */
static bool admit_refuses(struct vsrv *srv, const struct vsrv_job *job)
{
	if (job_blocks(job))
		return vsrv__admit_refuses_on(srv, &srv->pool.admit, srv->pool.q);
	return vsrv__admit_refuses(srv);
}

/* Put a job on its queue, or leave it in pending when it must wait
 * (true). */
static bool dispatch(struct vsrv_conn *c, struct vsrv_job *job)
{
	struct vsrv *srv = c->srv;
	enum vch_status st;

	if (srv->cfg.on_full != VSRV_ON_FULL_WAIT && job->held && vsrv__over_budget(srv)) {
		VSRV_INC(srv, budget_shed);
		VSRV_INC(srv, shed);
	} else if (srv->cfg.on_full == VSRV_ON_FULL_CODEL && admit_refuses(srv, job)) {
		/* codel: the queue's wait stands above its target (admit.c). */
		VSRV_INC(srv, delay_shed);
		VSRV_INC(srv, shed);
		if (job_blocks(job))
			VSRV_INC(srv, blocking_shed);
	} else if (srv->cfg.on_full == VSRV_ON_FULL_WAIT) {
		st = send_job(c, job, true);
		if (st == VCH_OK)
			return false;
		if (st == VCH_PENDING || st == VCH_YIELD) {
			c->busy->pending = job;
			return true;
		}
	} else {
		if (send_job(c, job, false) == VCH_OK)
			return false;
		VSRV_INC(srv, shed);
		if (job_blocks(job))
			VSRV_INC(srv, blocking_shed);
	}
	refuse_job(c, job);
	return false;
}

/* The server route of a path, or -1. */
static int own_route(const char *path, size_t len)
{
	for (unsigned r = 0; r < VSRV_ROUTES; r++)
		if (routes[r].len == len && memcmp(routes[r].path, path, len) == 0)
			return (int)r;
	return -1;
}

/* Answer a server route: /healthz "ok"; /readyz 503 while not ready for
 * jobs (jobs channel at least 90 % full, drained, or stopping); /livez 503
 * while a worker is stalled past the daemon's fail threshold. */
static void answer_route(struct vsrv_conn *c, const struct vhttp_request *req,
			 const struct vsrv_reply_to *to, unsigned r)
{
	struct vsrv *srv = c->srv;

	if (req->method != VHTTP_M_GET && req->method != VHTTP_M_HEAD) {
		vsrv__respond_status(c, to, 405, "GET, HEAD");
		return;
	}
	switch (r) {
	case VSRV_ROUTE_HEALTHZ:
		vsrv__respond_text(c, to, 200, "ok\n");
		break;
	case VSRV_ROUTE_READYZ:
		/* Only /readyz reads the jobs channels' length, which reads
		 * every member's head and tail lines, written by every send
		 * and receive of its worker. */
		if (ready_for_jobs(srv))
			vsrv__respond_text(c, to, 200, "ready\n");
		else
			vsrv__respond_text(c, to, 503, "not ready\n");
		break;
	case VSRV_ROUTE_LIVEZ:
		/* Relaxed: a status bit set by the daemon's stall check. */
		if (atomic_load_explicit(&srv->alive, memory_order_relaxed))
			vsrv__respond_text(c, to, 200, "alive\n");
		else
			vsrv__respond_text(c, to, 503, "stalled\n");
		break;
	}
}

bool vsrv__request(struct vsrv_conn *c, struct vhttp_request *req, int64_t now)
{
	struct vsrv *srv = c->srv;
	const struct vjob_kind *kind = NULL;
	struct vsrv_reply_to to = {
		.seq = c->next_seq++,
		.t0 = now,
		.kind = srv->kind_other,
		.version_minor = req->version_minor,
		.close = !req->keep_alive,
		.head_only = req->method == VHTTP_M_HEAD,
	};
	struct vsrv_job *job;
	bool waits = false;

	VSRV_INC(srv, requests);
	to.traced = vsrv__trace_begin(c, req, to.seq, now);
	vsrv__access_note(c, to.seq, req->method_name, req->target, req->target_len);
	int r = own_route(req->path, req->path_len);
	if (r >= 0) {
		to.kind = (uint32_t)r;
		answer_route(c, req, &to, (unsigned)r);
		goto out;
	}
	switch (vjob_route(req->path, req->path_len, req->method_name, &kind)) {
	case VJOB_ROUTE_NOT_FOUND:
		vsrv__respond_status(c, &to, 404, NULL);
		goto out;
	case VJOB_ROUTE_BAD_METHOD:
		to.kind = VSRV_ROUTES + (uint32_t)vjob_kind_index(kind);
		vsrv__respond_status(c, &to, 405, kind->allow);
		goto out;
	case VJOB_ROUTE_OK:
		break;
	}
	to.kind = VSRV_ROUTES + (uint32_t)vjob_kind_index(kind);
	if (vsrv__kind_quarantined(srv, kind)) {
		/* Too many overruns (kinds.c): 503 with Retry-After. */
		vsrv__respond_status(c, &to, 503, NULL);
		goto out;
	}
	/* The job first: its vjob is made inside it (vj_mem). */
	job = vsrv__job_new(srv, &to);
	if (!job) {
		vsrv__respond_status(c, &to, 503, NULL);
		goto out;
	}
	/* The job reads the request where the parser put it: the request
	 * stays with the job (vsrv__job_free releases it). */
	struct vjob_input in = {
		.method = req->method_name,
		.path = req->path,
		.path_len = req->path_len,
		.query = req->query,
		.query_len = req->query_len,
		.fields = req->fields,
		.fields_len = req->fields_len,
		.n_fields = req->n_fields,
	};
	in.body = vhttp_request_take_body(req, &in.body_len);
	size_t body_len = in.body_len;
	job->req = req;
	req = NULL;
	/* A kind's start runs here (a blocking kind's on its pool thread):
	 * timed, and named for a stall report while it runs. */
	bool timed = kind->has_start && !kind->blocking;
	int64_t t_start = timed ? vb_now_ns() : 0;
	if (timed)
		vrt_poll_label(kind->label);
	if (vjob_new_at(job->vj_mem, sizeof(job->vj_mem), kind, &in, &job->vj) < 0) {
		vsrv__job_free(srv, job);
		vsrv__respond_status(c, &to, 503, NULL);
		goto out;
	}
	if (timed) {
		vsrv__kind_slice(srv, kind, vb_now_ns() - t_start);
		vrt_poll_label(NULL);
	}
	vsrv__kind_job(srv, kind);
	if (vjob_done(job->vj)) {
		vsrv__respond_job(c, job);
		goto out;
	}
	/* In flight: the job holds a reference on its connection until it
	 * is deposited in the slot. */
	job->conn = c;
	vrt_task_ref(&c->task);
	if (body_len >= VSRV_HOLD_MIN) {
		/* The body moved from the parser (released by conn_sync_held)
		 * to the job, which holds it until the response is sent. */
		job->held = body_len;
		vsrv__hold(srv, (int64_t)body_len);
	}
	vsrv__trace_job(job, VSRV_TP_QUEUED);
	waits = dispatch(c, job);
out:
	if (req)
		vhttp_request_release(c->busy->parser, req); /* its memory for the next */
	return waits;
}

enum vch_status vsrv__request_retry(struct vsrv_conn *c)
{
	struct vsrv_job *job = c->busy->pending;
	enum vch_status st = send_job(c, job, true);

	if (st == VCH_PENDING || st == VCH_YIELD)
		return st;
	c->busy->pending = NULL;
	if (st != VCH_OK)
		refuse_job(c, job); /* closed: shutting down */
	return st;
}
