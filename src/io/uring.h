/* SPDX-License-Identifier: MIT */
/*
 * io/uring.h: the io_uring backend's private header, shared by its two
 * files: uring_setup.c (the probe, a worker's ring, provided-buffer ring and
 * registered-file table, the worker's start and stop) and uring.c (the hot
 * path: submission, registered files in use, operations, listeners,
 * completions, the loop). Only these three files include liburing.h.
 *
 * The backend: one ring per worker, created on the control thread disabled
 * (IORING_SETUP_R_DISABLED) so that the worker thread that enables it
 * becomes its single issuer; a provided-buffer ring (group 0) per worker for
 * multishot recv, registered by hand (liburing 2.3 has no
 * io_uring_setup_buf_ring); an eventfd read kept armed while the worker
 * sleeps so that unpark ends io_uring_enter. With fixed_files, a sparse
 * registered-file table per ring: a connection's descriptor is put at slot
 * fd by its first operation's worker (fixed_install), whose later receives and
 * sends on this ring then say IOSQE_FIXED_FILE; the slot is cleared on this
 * ring before the descriptor closes (fixed_clear). An update is an SQE that
 * rides the next enter (no system call of its own) and posts a CQE only
 * when it fails (IOSQE_CQE_SKIP_SUCCESS); the SQ is issued in order, so an
 * update is in the table before any later SQE of the ring looks it up.
 *
 * Threading: struct vio_uring_w belongs to its worker thread, except while
 * the control thread creates or frees it (ring disabled, or workers gone).
 */
#ifndef VOLTD_IO_URING_H
#define VOLTD_IO_URING_H

#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>

#include "io/internal.h"

/* user_data: a pointer (8-byte aligned) with a tag in the low bits. */
enum {
	TAG_OP = 0,     /* struct vio_op, one-shot */
	TAG_MS = 1,     /* struct vio_op, multishot recv */
	TAG_LSOCK = 2,  /* struct vio_lsock, accept */
	TAG_WAKE = 3,   /* the eventfd read */
	TAG_IGNORE = 4, /* cancel requests: result not needed */
	TAG_FIXED = 5,  /* a registered-file update that failed (slot << 3) */
};
#define TAG_MASK 7u

/* The provided-buffer group of every worker's ring. */
#define BGID 0

struct vio_uring_w {
	struct io_uring ring;
	int efd;
	uint64_t efd_val;
	bool efd_armed;
	bool stopping;              /* worker_stop: cancel and drain */
	uint32_t inflight;          /* requests whose final CQE is due */
	uint64_t io_cqes;           /* CQEs other than wakeups and cancel results */
	/* CQEs taken off the CQ but not yet dispatched, in CQ order: the
	 * reap dispatches from here; vio__uring_get_sqe only appends (see
	 * stash_cqes in uring.c). */
	struct io_uring_cqe *cq_stash;
	unsigned stash_head, stash_tail, stash_cap;
	bool dispatching;           /* inside cqe_dispatch (nesting is a bug) */
	bool min_wait;              /* the kernel has IORING_FEAT_MIN_TIMEOUT */
	bool submit_due;            /* a poll left SQEs queued: the next flush submits them */
	int64_t sq_since;           /* when the oldest unsubmitted SQE was taken */
	int64_t reap_ns;            /* when the current reap began */
	int64_t collected_ns;       /* when the last enter that collected completions returned */
	uint64_t test_rng;          /* vio__uring_test_eagain_permille's draws */
	struct io_uring_buf_ring *br;
	size_t br_bytes, buf_bytes;
	unsigned br_mask;
	/* Registered-file table: fixed_held[fd] says slot fd holds descriptor
	 * fd (set when its install is queued, cleared when its clear is); the
	 * descriptor stays open while it is set (see socket.c). NULL: none. */
	uint8_t *fixed_held;
	uint32_t fixed_slots;
};

/* The io_uring backend's state of worker w. */
static inline struct vio_uring_w *uring_worker(struct vio_worker *w)
{
	return w->be;
}

/* An SQE's user_data: p with `tag` in its low bits (the tags above). */
static inline uint64_t user_data(const void *p, unsigned tag)
{
	return (uint64_t)(uintptr_t)p | tag;
}

/* uring_setup.c: a worker's ring from creation to teardown (vio__uring_ops). */
int vio__uring_worker_init(struct vio_worker *w);
void vio__uring_worker_fini(struct vio_worker *w);
int vio__uring_worker_start(struct vio_worker *w);
void vio__uring_worker_stop(struct vio_worker *w);

/* uring.c, used by the worker's stop to cancel and reap what is in flight.
 * An SQE, flushing a full SQ first (never drops a request). */
struct io_uring_sqe *vio__uring_get_sqe(struct vio_worker *w);
/* Every io_uring_enter of the backend (see uring.c). */
int vio__uring_enter(struct vio_worker *w, bool submit, unsigned min_complete, unsigned flags,
		     const struct __kernel_timespec *ts, unsigned *quiet);
/* Dispatch every CQE waiting, in CQ order. */
void vio__uring_reap(struct vio_worker *w);

#endif
