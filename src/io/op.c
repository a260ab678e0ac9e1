/* SPDX-License-Identifier: MIT */
/*
 * io/op.c: the life of one awaitable operation, shared by both backends,
 * and the workers' mailboxes (cancel requests, wake-ups placed on a worker).
 *
 * A task starts an op on the worker it runs on (the owner): the op holds a
 * reference on the task, so the op's memory (inside the task's struct) and
 * the buffers the kernel reads or writes stay valid until the owner has seen
 * the last completion, even if the task finished long before. The owner
 * completes the op on its own thread, wakes the task and drops the
 * reference. A task that has since moved to another worker and wants the op
 * cancelled cannot touch the owner's ring: it queues a request on the
 * owner's mailbox.
 *
 * Ordering
 * Shared: op->state (task: start, collect, cancel request, detach; owner:
 * complete, mailbox), op->res (owner, before [IO1]), op->req.next (the
 * canceller, before [IM1]), w->mbox (any thread pushes, the owner takes all),
 * wk->posted of a vio_wake (its posters and the handler).
 * [IO1] owner, completion: fetch_xor clears INFLIGHT and sets DONE
 *      (acq_rel). Release publishes op->res and the bytes the kernel put in
 *      the task's buffer; pairs with [IO2], the task's acquire load before it
 *      collects. Acquire pairs with [IO3]/[IO4] so a canceller's or detacher's
 *      writes before its RMW are visible to the owner.
 * [IO3] canceller on another worker: fetch_or(CANCEL|MBOX) (acq_rel). The RMWs
 *      on state are totally ordered: if [IO3] saw INFLIGHT, [IO1] comes later
 *      and sees MBOX, so the owner leaves the task reference to the mailbox
 *      (the request still points at op). If [IO3] did not see INFLIGHT, the
 *      canceller withdraws MBOX and queues nothing.
 * [IO4] detach (vio_conn_abandon): fetch_or(DETACHED) (acq_rel); whichever of
 *      [IO1]/[IO4] comes second cleans up after the connection.
 * [IO5] owner, mailbox: fetch_and(~MBOX) (acq_rel): pairs with [IO2] (the task
 *      may reuse the op once it sees MBOX clear) and with [IO3].
 * [IO6] task, vio_conn_tx_quiet: fetch_or / fetch_and of QUIET (acq_rel).
 *      Ordered against [IO1] on state: if [IO1] comes first the task sees
 *      DONE in the value it got back and collects at once (the owner woke
 *      it, or will not: either way the task does not wait); otherwise [IO1]
 *      sees the task's choice. A quiet success wakes nobody; an error
 *      always wakes. vio_conn_close clears QUIET this way before its [IO2]
 *      load: a send it then waits for wakes it however it ends.
 * [IW1] vio_wake_on: exchange of wk->posted (acq_rel) makes one poster at
 *      a time own wk->req; its acquire pairs with [IW2], the handler's
 *      release store of 0 after its last read of the request.
 * [IM1] mailbox push: CAS (release) publishes the request; pairs with [IM2],
 *      the owner's exchange (acquire).
 */
#include "config.h"

#include "io/internal.h"
#include "base/lineaudit.h"

#include <errno.h>
#include <stdlib.h>

bool vio__op_start(struct vio_worker *w, struct vio_op *op)
{
	const struct vio_backend_ops *be = w->io->be;

	if (be->try_now && be->try_now(w, op)) {
		VIO_STAT_INC(w, immediate);
		return true;
	}
	op->owner = w;
	op->task = vrt_current();
	op->wflags = 0;
	vrt_task_ref(op->task);
	/* Relaxed: the owner is this thread; another thread learns that the
	 * op is in flight only through the task (the runtime orders polls) or
	 * through its own RMW on state. */
	atomic_store_explicit(&op->state, VIO_OP_INFLIGHT, memory_order_relaxed);
	VIO_STAT_INC(w, submitted);
	be->submit(w, op);
	return false;
}

void vio__op_complete(struct vio_worker *w, struct vio_op *op, int32_t res)
{
	struct vrt_task *task = op->task;
	uint32_t s;

	op->res = res;
	VIO_STAT_INC(w, completed);
	/* [IO1] acq_rel: publishes res / the received bytes; pairs with [IO2]
	 * in the task's collect; sees [IO3]/[IO4]. */
	s = atomic_fetch_xor_explicit(&op->state, VIO_OP_INFLIGHT | VIO_OP_DONE,
				      memory_order_acq_rel);
	VB_BUG_ON(!(s & VIO_OP_INFLIGHT) || (s & VIO_OP_DONE));
	if (s & VIO_OP_DETACHED)
		vio__conn_detached_done(w, op); /* the task gave it up: we still hold its ref */
	else if (!(s & VIO_OP_QUIET) || res < 0)
		vrt_task_wake(task);
	if (!(s & VIO_OP_MBOX))
		vrt_task_unref(task);
}

void vio__op_cancel(struct vio_op *op)
{
	struct vio_worker *self = vio__self();
	struct vio_worker *owner = op->owner;
	uint32_t s;

	if (self)
		VIO_STAT_INC(self, cancels);
	if (owner == self) {
		/* Relaxed: the owner is this thread, so completion cannot race;
		 * the bit only tells a partial send not to go on. */
		s = atomic_fetch_or_explicit(&op->state, VIO_OP_CANCEL, memory_order_relaxed);
		if (s & VIO_OP_INFLIGHT)
			self->io->be->cancel(self, op);
		return;
	}
	/* [IO3] acq_rel: ordered against the owner's [IO1]; see the block. */
	s = atomic_fetch_or_explicit(&op->state, VIO_OP_CANCEL | VIO_OP_MBOX,
				     memory_order_acq_rel);
	if (!(s & VIO_OP_INFLIGHT)) {
		/* Finished before we asked: nothing to queue. Relaxed: the
		 * owner is done with the op and no request refers to it. */
		if (!(s & VIO_OP_MBOX))
			atomic_fetch_and_explicit(&op->state, ~VIO_OP_MBOX, memory_order_relaxed);
		return;
	}
	if (s & VIO_OP_MBOX)
		return; /* a request is already queued */
	op->req.type = VIO_REQ_CANCEL;
	vio__mbox_post(owner, &op->req);
}

void vio__op_mbox(struct vio_worker *w, struct vio_op *op)
{
	/* Stable: while MBOX is set the task may not reuse the op. */
	struct vrt_task *task = op->task;
	uint32_t s;

	/* [IO5] acq_rel: pairs with [IO3] (the request) and [IO2] (after this
	 * the task may collect and reuse the op). */
	s = atomic_fetch_and_explicit(&op->state, ~VIO_OP_MBOX, memory_order_acq_rel);
	if (s & VIO_OP_INFLIGHT) {
		/* Still ours until its completion (same thread), which now
		 * drops the reference. */
		w->io->be->cancel(w, op);
		return;
	}
	/* It completed in between and left its reference to us. */
	if (!(s & VIO_OP_DETACHED))
		vrt_task_wake(task);
	vrt_task_unref(task);
}

bool vio__op_send_advance(struct vio_op *op, size_t n)
{
	op->done += n;
	if (op->kind == VIO_K_SEND)
		return op->done < op->len;
	/* VIO_K_SENDV: drop what was sent from the front of the array. */
	while (op->iovcnt > 0) {
		if (n < op->iov->iov_len) {
			op->iov->iov_base = (char *)op->iov->iov_base + n;
			op->iov->iov_len -= n;
			return true;
		}
		n -= op->iov->iov_len;
		op->iov++;
		op->iovcnt--;
	}
	return false;
}

/* ------------------------------------------------------------- mailbox */

void vio__mbox_post(struct vio_worker *w, struct vio_req *r)
{
	struct vio_req *head = atomic_load_explicit(&w->mbox, memory_order_relaxed);

	do {
		r->next = head;
		VB_LINE_WRITE(io_mailbox);
		/* [IM1] release: publishes r and what the poster wrote before;
		 * pairs with [IM2] in vio__mbox_run. */
	} while (!atomic_compare_exchange_weak_explicit(&w->mbox, &head, r,
							memory_order_release,
							memory_order_relaxed));
	vio__notify(w);
}

void vio__mbox_run(struct vio_worker *w)
{
	struct vio_req *r, *rev = NULL, *next;

	/* Relaxed peek: an empty mailbox is the common case; a request pushed
	 * right after is seen at the next call (the push also notifies). */
	if (!atomic_load_explicit(&w->mbox, memory_order_relaxed))
		return;
	/* [IM2] acquire: pairs with [IM1]. */
	r = atomic_exchange_explicit(&w->mbox, NULL, memory_order_acquire);
	for (; r; r = next) { /* LIFO -> FIFO */
		next = r->next;
		r->next = rev;
		rev = r;
	}
	for (r = rev; r; r = next) {
		next = r->next; /* handling may let the request be reused */
		switch (r->type) {
		case VIO_REQ_CANCEL:
			vio__op_mbox(w, vb_container_of(r, struct vio_op, req));
			break;
		case VIO_REQ_LSOCK_ARM: {
			struct vio_lsock *ls = vb_container_of(r, struct vio_lsock, arm_req);
			struct vio_lsock **v = realloc(w->lsocks, (w->nlsocks + 1) * sizeof(*v));
			VB_BUG_ON(!v); /* a few pointers at listener set-up */
			v[w->nlsocks++] = ls;
			w->lsocks = v;
			w->io->be->lsock_arm(w, ls);
			break;
		}
		case VIO_REQ_FIXED_CLOSE:
			/* r is reusable once fd is closed: nothing after this. */
			VIO_STAT_INC(w, fixed_remote_closes);
			w->io->be->fixed_close(w, (int)(r - w->fixed_reqs));
			break;
		case VIO_REQ_LSOCK_STOP: {
			struct vio_lsock *ls = vb_container_of(r, struct vio_lsock, stop_req);
			ls->stopping = true;
			w->io->be->lsock_stop(w, ls);
			break;
		}
		case VIO_REQ_WAKE: {
			struct vio_wake *wk = vb_container_of(r, struct vio_wake, req);
			struct vrt_task *t = wk->task;

			/* [IW2] release: pairs with [IW1]; from here a new post
			 * may reuse r (next was read above). */
			atomic_store_explicit(&wk->posted, 0, memory_order_release);
			vrt_task_wake(t); /* on this worker: queued here */
			vrt_task_unref(t);
			break;
		}
		default:
			VB_BUG_ON(1);
		}
	}
}

void vio_wake_init(struct vio_wake *wk, struct vrt_task *t)
{
	wk->req.next = NULL;
	wk->req.type = VIO_REQ_WAKE;
	atomic_init(&wk->posted, 0);
	wk->task = t;
}

void vio_wake_on(struct vio *io, unsigned worker, struct vio_wake *wk)
{
	struct vio_worker *w = &io->w[worker];

	VB_BUG_ON(worker >= io->nworkers);
	if (vio__self() == w) {
		vrt_task_wake(wk->task);
		return;
	}
	/* [IW1] acq_rel: one post at a time; the winner owns wk->req until
	 * the handler's [IW2] (acquire: sees the handler's last use of it). */
	if (atomic_exchange_explicit(&wk->posted, 1, memory_order_acq_rel))
		return; /* on its way: it wakes the task when it arrives */
	vrt_task_ref(wk->task);
	vio__mbox_post(w, &wk->req);
}
