/* SPDX-License-Identifier: MIT */
/*
 * server/stages.c: the job as it travels (allocation, gauges, encoding, the
 * hand-over to its connection) and the two middle stages: exec tasks take
 * jobs from `jobs` and run the kind's slices, yielding between slices (a
 * job that outlasts its first slice moves to the heavy lane, lane.c, whose
 * runners are exec tasks too, taking from the lane instead of `jobs`) and
 * parking VJOB_SLEEP jobs in a heap on one timer armed for the earliest
 * (as many as arrive: a sleeping job holds no executor capacity, so
 * max_connections x max_pipeline sleepers never stop other jobs; dead
 * ones are swept every VSRV_SLEEP_SWEEP_NS); writer tasks take finished jobs from
 * `replies`, encode the head and deposit the job in its connection's
 * reorder slot. Both channels are sets with a member per worker: a task
 * takes from and sends to the member of the worker it runs on, and takes
 * from another member's only when that one asked for help or its wakeup
 * named it (chan.h), so on the common path a job's hand-overs write no line
 * another worker writes.
 *
 * Threading: each task's state is private to it (one poll at a time); a job
 * is touched by one thread at a time, handed over by the channels (their
 * send/recv order the job's contents) and by the slot below.
 *
 * Ordering
 * Shared: conn->busy->slots[i] (a writer stores a job; the connection task
 * exchanges it out; drop() sweeps; the busy block stays while any of the
 * connection's jobs is in flight, and the channels order the task's write
 * of conn->busy before the job reaches a writer), conn->dead (the
 * connection task sets it once; exec and writers read it).
 * [S1] writer: slot store (release) publishes the encoded job; pairs with
 *      [S2], the connection's exchange (acquire) in conn.c, and with the
 *      runtime's acq_rel reference drop before drop() sweeps the slots.
 * conn->dead is read relaxed: it is advice (skip work for a connection that
 * is gone); a job that misses it is deposited and swept instead.
 */
#include "config.h"
#include "server/internal.h"
#include "base/time.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- jobs */

void vsrv__job_stage(struct vsrv *srv, struct vsrv_job *job, enum vsrv_jstage to)
{
	static const enum vsrv_counter gauge[] = {
		[VSRV_J_PARSE] = VSRV_C_stage_parse,
		[VSRV_J_EXEC] = VSRV_C_stage_exec,
		[VSRV_J_WRITE] = VSRV_C_stage_write,
		[VSRV_J_SEND] = VSRV_C_stage_send,
	};
	struct vsrv_wstats *ws = vsrv__ws(srv);

	if (job->stage == to)
		return;
	/* Relaxed: gauges, summed by the snapshot (uint64 wrap-around sums). */
	if (job->stage != VSRV_J_NONE)
		atomic_fetch_sub_explicit(&ws->c[gauge[job->stage]], 1, memory_order_relaxed);
	if (to != VSRV_J_NONE)
		atomic_fetch_add_explicit(&ws->c[gauge[to]], 1, memory_order_relaxed);
	job->stage = (uint8_t)to;
}

struct vsrv_job *vsrv__job_new(struct vsrv *srv, const struct vsrv_reply_to *to)
{
	/* Only the fields before head[] need zeroing; head[] is written by
	 * encode. */
	struct vsrv_job *job = vsrv__job_alloc(srv);

	if (!job)
		return NULL;
	memset(job, 0, offsetof(struct vsrv_job, head));
	job->to = *to;
	return job;
}

void vsrv__job_free(struct vsrv *srv, struct vsrv_job *job)
{
	vsrv__job_stage(srv, job, VSRV_J_NONE);
	if (job->held)
		vsrv__hold(srv, -(int64_t)job->held);
	vjob_free(job->vj);
	vsrv__req_put(srv, job->req);
	if (job->conn)
		vrt_task_unref(&job->conn->task); /* may drop the connection */
	vsrv__spare_put(srv, VSRV_SPARE_JOB, job);
}

/* A job refused by codel when taken (admit.c): 503 with Retry-After and
 * the status text, as the connection's own 503 (output.c). */
static void job_encode_refused(struct vsrv *srv, struct vsrv_job *job)
{
	struct vhttp_response r;
	unsigned retry_after_s = vsrv__live(srv, retry_after_s);
	int n;

	vsrv__reply_init(srv, &r, &job->to, 503);
	if (retry_after_s)
		r.retry_after_s = (int)retry_after_s;
	n = vhttp_response_text(&r, NULL, job->head, sizeof(job->head));
	VB_BUG_ON(n < 0); /* our own heads always fit VHTTP_HEAD_MAX */
	if (job->to.head_only) {
		const char *end = memmem(job->head, (size_t)n, "\r\n\r\n", 4);

		n = end ? (int)(end + 4 - job->head) : n;
	}
	job->status = 503;
	job->body = NULL;
	job->body_len = 0;
	job->to.close = r.close;
	job->head_len = (uint16_t)n;
}

void vsrv__job_encode(struct vsrv *srv, struct vsrv_job *job)
{
	const struct vjob_result *res;
	struct vhttp_response r;
	bool no_body;
	int n;

	if (job->refused) {
		job_encode_refused(srv, job);
		return;
	}
	res = vjob_result(job->vj);
	/* A drain that starts right after this misses one "Connection:
	 * close"; the connection still closes after it. */
	vsrv__reply_init(srv, &r, &job->to, res->status);
	r.content_length = res->body_len;
	r.fields = res->hdrs;
	r.fields_len = res->hdrs_len;
	job->xhdrs = NULL;
	job->xhdrs_len = 0;
	n = vhttp_response_head(&r, job->head, sizeof(job->head));
	if (n == -ENOSPC && res->hdrs_len) {
		/* The kind's fields (up to VOLTD_HEADERS_MAX) do not fit with
		 * voltd's own: they go out after the head, as they are, with
		 * the final "\r\n" the result keeps after them. */
		r.open = true;
		n = vhttp_response_head(&r, job->head, sizeof(job->head));
		job->xhdrs = res->hdrs;
		job->xhdrs_len = res->hdrs_len + 2;
	}
	/* voltd's own fields always fit VHTTP_HEAD_MAX. */
	VB_BUG_ON(n < 0);
	no_body = job->to.head_only || !vhttp_status_has_body(res->status);
	job->status = res->status;
	job->body = no_body ? NULL : res->body;
	job->body_len = no_body ? 0 : res->body_len;
	/* A large reply is held until sent: the budget counts the larger of
	 * request and reply body (echo's are one buffer). */
	if (res->body_len >= VSRV_HOLD_MIN && res->body_len > job->held) {
		vsrv__hold(srv, (int64_t)(res->body_len - job->held));
		job->held = res->body_len;
	}
	job->to.close = r.close;
	job->head_len = (uint16_t)n;
}

void vsrv__job_deposit(struct vsrv *srv, struct vsrv_job *job)
{
	struct vsrv_conn *c = job->conn;

	vsrv__job_stage(srv, job, VSRV_J_SEND);
	vsrv__trace_job(job, VSRV_TP_DEPOSIT);
	job->conn = NULL; /* the slot owns the job now, without a reference */
	/* [S1] release: publishes the encoded job; pairs with [S2]. */
	atomic_store_explicit(&c->busy->slots[job->to.seq & c->srv->slot_mask], job, memory_order_release);
	vrt_task_wake(&c->task);   /* we still hold the job's reference */
	vrt_task_unref(&c->task);  /* may run drop(), which sweeps the slot */
}

/* A job whose connection is gone: count and free it. */
static void job_drop(struct vsrv *srv, struct vsrv_job *job)
{
	VSRV_INC(srv, results_dropped);
	vsrv__job_free(srv, job);
}

static bool conn_dead(const struct vsrv_job *job)
{
	/* Relaxed: advice only, see the Ordering block. */
	return atomic_load_explicit(&job->conn->dead, memory_order_relaxed);
}

/* ---------------------------------------------------------------- exec */

static void runq_push(struct vsrv_exec *x, struct vsrv_job *job)
{
	job->next = NULL;
	if (x->runq_tail)
		x->runq_tail->next = job;
	else
		x->runq = job;
	x->runq_tail = job;
}

static struct vsrv_job *runq_pop(struct vsrv_exec *x)
{
	struct vsrv_job *job = x->runq;

	if (job) {
		x->runq = job->next;
		if (!x->runq)
			x->runq_tail = NULL;
		job->next = NULL;
	}
	return job;
}

/* The sleepers: a binary min-heap on the wake time, as large as needed
 * (their number is bounded by max_connections x max_pipeline), so a task
 * never stops taking jobs because it holds sleeping ones. */
static int64_t sleeper_at(const struct vsrv_exec *x, unsigned i)
{
	return vjob_wake_ns(x->sleepers[i]->vj);
}

static void sleeper_swap(struct vsrv_exec *x, unsigned a, unsigned b)
{
	struct vsrv_job *t = x->sleepers[a];

	x->sleepers[a] = x->sleepers[b];
	x->sleepers[b] = t;
}

static void sleeper_down(struct vsrv_exec *x, unsigned i)
{
	for (;;) {
		unsigned l = 2 * i + 1, m = i;

		if (l < x->nsleep && sleeper_at(x, l) < sleeper_at(x, m))
			m = l;
		if (l + 1 < x->nsleep && sleeper_at(x, l + 1) < sleeper_at(x, m))
			m = l + 1;
		if (m == i)
			return;
		sleeper_swap(x, i, m);
		i = m;
	}
}

/* Park a sleeping job. false: no memory to grow the heap. */
static bool sleeper_push(struct vsrv_exec *x, struct vsrv_job *job)
{
	unsigned i = x->nsleep;

	if (x->nsleep == x->sleep_cap) {
		unsigned cap = x->sleep_cap ? 2 * x->sleep_cap : VSRV_SLEEPERS_MIN;
		struct vsrv_job **n = realloc(x->sleepers, cap * sizeof(*n));

		if (!n)
			return false;
		x->sleepers = n;
		x->sleep_cap = cap;
	}
	x->sleepers[x->nsleep++] = job;
	while (i && sleeper_at(x, (i - 1) / 2) > sleeper_at(x, i)) {
		sleeper_swap(x, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
	return true;
}

static struct vsrv_job *sleeper_pop(struct vsrv_exec *x)
{
	struct vsrv_job *job = x->sleepers[0];

	x->sleepers[0] = x->sleepers[--x->nsleep];
	sleeper_down(x, 0);
	return job;
}

/* Drop the sleepers whose connection is gone (they would otherwise keep
 * their connection's memory until their wake time), then restore the heap. */
static void sleepers_sweep(struct vsrv_exec *x, int64_t now)
{
	unsigned n = 0;

	for (unsigned i = 0; i < x->nsleep; i++) {
		if (conn_dead(x->sleepers[i]))
			job_drop(x->srv, x->sleepers[i]);
		else
			x->sleepers[n++] = x->sleepers[i];
	}
	x->nsleep = n;
	for (unsigned i = n / 2; i-- > 0;)
		sleeper_down(x, i);
	x->sweep_at = now + VSRV_SLEEP_SWEEP_NS;
}

/* Move sleepers whose time has come on (and sweep now and then). */
static void exec_wake_sleepers(struct vsrv_exec *x, int64_t now)
{
	if (now >= x->sweep_at || x->recv_closed)
		sleepers_sweep(x, now);
	while (x->nsleep && sleeper_at(x, 0) <= now) {
		struct vsrv_job *job = sleeper_pop(x);

		if (conn_dead(job))
			job_drop(x->srv, job);
		else
			runq_push(x, job);
	}
}

/* Withdraw a registered receive: a value we would be woken for is then
 * offered to another waiting executor instead of sitting in the channel. */
static void exec_stop_waiting(struct vsrv_exec *x)
{
	if (x->jobs_waiting) {
		vch_waiter_cancel(&x->jobs_waiter);
		x->jobs_waiting = false;
	}
}

/* About to wait: make sure the timer wakes us for the earliest sleeper
 * (or the next sweep). An earlier armed time is kept (its wakeup
 * re-arms); a fired or later one is replaced. */
static enum vrt_poll exec_sleep(struct vsrv_exec *x, int64_t now)
{
	int64_t want;

	if (!x->nsleep)
		return VRT_PENDING;
	want = sleeper_at(x, 0);
	if (x->sweep_at < want)
		want = x->sweep_at;
	if (x->tmr_at && x->tmr_at > now && x->tmr_at <= want)
		return VRT_PENDING;
	if (vio_timer_arm(&x->tmr, want) < 0)
		return VRT_YIELD; /* no memory for the timer heap: look again soon */
	x->tmr_at = want;
	return VRT_PENDING;
}

static void exec_release_all(struct vsrv_exec *x)
{
	struct vsrv_job *job;

	vch_waiter_cancel(&x->jobs_waiter);
	vch_waiter_cancel(&x->replies_waiter);
	while ((job = runq_pop(x)))
		job_drop(x->srv, job);
	while (x->nsleep)
		job_drop(x->srv, x->sleepers[--x->nsleep]);
	vio_timer_disarm(&x->tmr);
	x->tmr_at = 0;
	if (x->out) {
		job_drop(x->srv, x->out);
		x->out = NULL;
	}
}

/* codel: a job taken after waiting `waited` in a queue whose admission
 * state is `a`; too long in an overloaded queue: answered 503 unrun
 * (admit.c), as the executor's next reply. */
static bool exec_codel_refuses(struct vsrv_exec *x, struct vsrv_admit *a, struct vsrv_job *job, int64_t waited,
			       int64_t now)
{
	struct vsrv *srv = x->srv;

	if (srv->cfg.on_full != VSRV_ON_FULL_CODEL || !vsrv__admit_sample_on(srv, a, waited, now))
		return false;
	VSRV_INC(srv, delay_shed);
	VSRV_INC(srv, shed);
	job->refused = true;
	x->out = job;
	return true;
}

static enum vrt_poll exec_poll(struct vrt_task *t)
{
	struct vsrv_exec *x = vb_container_of(t, struct vsrv_exec, task);
	struct vsrv *srv = x->srv;
	enum vch_status st;
	uint64_t v;
	unsigned turn = 0; /* a runner's slices in a row in this poll */
	unsigned ran = 0;  /* of them, its current job's */

	if (vrt_task_is_cancelled(t)) {
		exec_release_all(x);
		return VRT_READY;
	}
	if (x->lane_w >= 0 && vsrv__lane_away(srv, x))
		return VRT_PENDING; /* woken again on its own worker */
	for (;;) {
		if (x->out) {
			/* The gauge moves first: once sent, the job is a
			 * writer's and we may not touch it. */
			vsrv__job_stage(srv, x->out, VSRV_J_WRITE);
			st = vch_set_send_poll(srv->replies, vsrv__home(srv), &x->replies_waiter, vch_val(x->out));
			if (st != VCH_OK)
				vsrv__job_stage(srv, x->out, VSRV_J_EXEC);
			if (st == VCH_PENDING)
				return exec_sleep(x, vb_now_ns());
			if (st == VCH_YIELD)
				return VRT_YIELD;
			if (st == VCH_CLOSED)
				job_drop(srv, x->out); /* shutting down */
			x->out = NULL;
		}
		int64_t now = vb_now_ns();
		if (x->nsleep)
			exec_wake_sleepers(x, now);
		if (!x->runq) {
			if (x->recv_closed) {
				exec_stop_waiting(x);
				if (x->recv_closed && x->nsleep == 0) {
					vio_timer_disarm(&x->tmr);
					return VRT_READY;
				}
				return exec_sleep(x, now); /* the timer wakes us */
			}
			if (x->lane_w >= 0) {
				/* A runner: the lane is its source. */
				struct vsrv_job *next = vsrv__lane_take(srv, x);

				if (!next) {
					if (x->recv_closed)
						continue;
					return exec_sleep(x, now);
				}
				/* codel: the wait in the lane, with a state of
				 * its own: a heavy backlog stands here, not in
				 * `jobs`. */
				if (exec_codel_refuses(x, &srv->lane.admit, next, now - next->lane_t, now))
					continue;
				runq_push(x, next);
				vrt_service_reset();
				ran = 0;
				goto step;
			}
			st = vch_set_recv_poll(srv->jobs, vsrv__home(srv), &x->jobs_waiter, &v);
			if (st == VCH_PENDING) {
				x->jobs_waiting = true;
				return exec_sleep(x, now);
			}
			x->jobs_waiting = false;
			if (st == VCH_YIELD)
				return VRT_YIELD;
			if (st == VCH_CLOSED) {
				x->recv_closed = true;
				continue;
			}
			struct vsrv_job *taken = vch_ptr(v);
			vsrv__trace_job(taken, VSRV_TP_EXEC);
			/* codel: how long it waited in `jobs`. */
			if (exec_codel_refuses(x, &srv->admit, taken, now - taken->to.t0, now))
				continue;
			runq_push(x, taken);
			/* A new job: the slices of the last one do not make
			 * this executor a continuation. */
			vrt_service_reset();
		}
		/* Busy with our own jobs: a wakeup for the channel belongs to
		 * another executor. */
		exec_stop_waiting(x);
step:;

		struct vsrv_job *job = runq_pop(x);
		if (conn_dead(job)) {
			job_drop(srv, job);
			continue;
		}
		/* The job kind (with its module and version) names this poll
		 * in a stall report. */
		const struct vjob_kind *kind = vjob_kind_of(job->vj);
		vrt_poll_label(kind->label);
		enum vjob_step js = vjob_step(job->vj, vjob_slice_deadline(&srv->jcfg, now));
		/* Every step timed: the clock read above, and one after. */
		int64_t end = vb_now_ns();
		vsrv__kind_slice(srv, kind, end - now);
		if (x->lane_w >= 0)
			vsrv__lane_account(x, end, end - now);
		vsrv__trace_job_slice(job, now, js == VJOB_DONE);
		switch (js) {
		case VJOB_DONE:
			x->out = job;
			break;
		case VJOB_MORE:
			/* Slice used up. An executor hands the job to the lane
			 * (lane.c) and takes the next; a runner, or an executor
			 * the lane refuses (off, stopping), keeps it. Either
			 * way everything else runs first, but a runner whose
			 * lane has jobs waiting first takes more slices in a
			 * row (lane.c, "Turns"). */
			if (x->lane_w < 0 && vsrv__lane_put(srv, job))
				return VRT_YIELD;
			runq_push(x, job);
			if (x->lane_w >= 0) {
				ran++;
				switch (vsrv__lane_more(srv, x, end, vsrv__lane_saturated(srv), &turn)) {
				case VSRV_LANE_TURN:
					VSRV_INC(srv, lane_turn_slices);
					continue;
				case VSRV_LANE_RUN:
					VSRV_INC(srv, lane_run_slices);
					continue;
				case VSRV_LANE_YIELD:
					break;
				}
				/* Its turn as a continuation counts these
				 * slices, not this one poll. */
				vrt_service_slices(ran);
			}
			return VRT_YIELD;
		case VJOB_SLEEP:
			if (!x->nsleep)
				x->sweep_at = now + VSRV_SLEEP_SWEEP_NS;
			if (!sleeper_push(x, job)) {
				/* No memory for the heap: step it again soon. */
				runq_push(x, job);
				return VRT_YIELD;
			}
			break;
		}
	}
}

struct vsrv_exec *vsrv__exec_new(struct vsrv *srv, int lane_w)
{
	struct vsrv_exec *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	vrt_task_init(&x->task, lane_w < 0 ? &vsrv__exec_vt : &vsrv__lane_vt);
	x->srv = srv;
	x->lane_w = lane_w;
	vch_waiter_init(&x->jobs_waiter);
	vch_waiter_init(&x->replies_waiter);
	vio_timer_init(&x->tmr);
	return x;
}

static void exec_drop(struct vrt_task *t)
{
	struct vsrv_exec *x = vb_container_of(t, struct vsrv_exec, task);

	free(x->sleepers);
	free(x);
}

const struct vrt_task_vtable vsrv__exec_vt = { .poll = exec_poll, .drop = exec_drop, .name = "exec" };
const struct vrt_task_vtable vsrv__lane_vt = { .poll = exec_poll, .drop = exec_drop, .name = "lane" };

/* --------------------------------------------------------------- write */

static enum vrt_poll writer_poll(struct vrt_task *t)
{
	struct vsrv_writer *wr = vb_container_of(t, struct vsrv_writer, task);
	struct vsrv *srv = wr->srv;
	uint64_t v;

	if (vrt_task_is_cancelled(t)) {
		vch_waiter_cancel(&wr->replies_waiter);
		return VRT_READY;
	}
	for (;;) {
		enum vch_status st = vch_set_recv_poll(srv->replies, vsrv__home(srv), &wr->replies_waiter, &v);

		if (st == VCH_PENDING)
			return VRT_PENDING;
		if (st == VCH_YIELD)
			return VRT_YIELD;
		if (st == VCH_CLOSED)
			return VRT_READY;
		struct vsrv_job *job = vch_ptr(v);
		if (conn_dead(job)) {
			job_drop(srv, job);
			continue;
		}
		vsrv__trace_job(job, VSRV_TP_WRITER);
		vsrv__job_encode(srv, job);
		vsrv__job_deposit(srv, job);
	}
}

static void writer_drop(struct vrt_task *t)
{
	free(vb_container_of(t, struct vsrv_writer, task));
}

const struct vrt_task_vtable vsrv__writer_vt = { .poll = writer_poll, .drop = writer_drop, .name = "writer" };
