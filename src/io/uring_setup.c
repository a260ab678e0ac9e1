/* SPDX-License-Identifier: MIT */
/*
 * io/uring_setup.c: the io_uring backend's set-up (the backend is described
 * in uring.h): the probe that chooses the ring's flags and says what the
 * kernel offers, a worker's ring, eventfd and provided-buffer ring, its
 * sparse registered-file table, and the worker's start (the enable that
 * makes the worker thread the ring's single issuer) and stop (cancel and
 * reap everything in flight).
 *
 * Threading: the probe, worker_init and worker_fini run on the control
 * thread (the ring disabled, or the workers gone); worker_start and
 * worker_stop on the ring's worker thread.
 */
#include "config.h"

#include "io/uring.h"
#include "base/time.h"

#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Kernel 6.12's min-timeout wait (io_uring_getevents_arg.min_wait_usec,
 * `pad` in liburing 2.3's header). */
#ifndef IORING_FEAT_MIN_TIMEOUT
#define IORING_FEAT_MIN_TIMEOUT (1U << 15)
#endif

/* Test hook (internal.h): feature bits to hide from the probe and from
 * liburing, as an older kernel would not report them. Set before vio_new. */
uint32_t vio__uring_hide_features;

/* ------------------------------------------------------------ the probe */

static const struct {
	uint8_t op;
	const char *name;
} required_ops[] = {
	{ IORING_OP_RECV, "RECV" },
	{ IORING_OP_SEND, "SEND" },
	{ IORING_OP_SENDMSG, "SENDMSG" },
	{ IORING_OP_ACCEPT, "ACCEPT" },
	{ IORING_OP_CLOSE, "CLOSE" },
	{ IORING_OP_ASYNC_CANCEL, "ASYNC_CANCEL" },
	{ IORING_OP_READ, "READ" },
};

/* fixed_files: can this kernel keep a sparse registered-file table, update
 * it from the SQ without a CQE on success, and close a slot? NULL (yes) or
 * what it lacks. */
static const char *fixed_files_lack(struct io_uring *ring, const struct io_uring_params *p,
				    const struct io_uring_probe *probe)
{
	if (!(p->features & IORING_FEAT_CQE_SKIP))
		return "IORING_FEAT_CQE_SKIP";
	if (!io_uring_opcode_supported(probe, IORING_OP_FILES_UPDATE))
		return "IORING_OP_FILES_UPDATE";
	/* Sparse tables (5.19) come after closing a slot (5.15). */
	if (io_uring_register_files_sparse(ring, 1) < 0)
		return "sparse registered files";
	io_uring_unregister_files(ring);
	return NULL;
}

/* Setup flags, best first; the probe keeps the first the kernel accepts.
 * A single issuer ring starts disabled so the worker thread enables it. */
static const unsigned flag_ladder[] = {
	IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
		IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_R_DISABLED,
	IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN |
		IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_R_DISABLED,
	IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
	IORING_SETUP_COOP_TASKRUN,
	0,
};

/*
 * CQ size: every in-flight request can post its final CQE, every provided
 * buffer one more, between two reaps. 8 x the SQ plus the buffers covers
 * the busy case; the kernel's cap is 64 Ki. FEAT_NODROP (required) keeps a
 * CQE that would not fit; cq_overflow in the stats counts such moments.
 */
static unsigned cq_entries(const struct vio_config *cfg)
{
	unsigned want = cfg->ring_entries * 8 + cfg->recv_buffers, n = 1;

	while (n < want && n < 65536)
		n <<= 1;
	return n;
}

static int ring_init(const struct vio_config *cfg, unsigned flags, struct io_uring *ring,
		     struct io_uring_params *p)
{
	memset(p, 0, sizeof(*p));
	p->flags = flags | IORING_SETUP_CQSIZE;
	p->cq_entries = cq_entries(cfg);
	return io_uring_queue_init_params(cfg->ring_entries, ring, p);
}

static void flags_text(unsigned f, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s%s",
		 f & IORING_SETUP_SINGLE_ISSUER ? "single_issuer," : "",
		 f & IORING_SETUP_DEFER_TASKRUN ? "defer_taskrun," :
		 f & IORING_SETUP_COOP_TASKRUN ? "coop_taskrun," : "",
		 f & IORING_SETUP_TASKRUN_FLAG ? "taskrun_flag," : "",
		 f & IORING_SETUP_SUBMIT_ALL ? "submit_all" : "");
}

/* Register a buffer ring of `entries` at `br`: what liburing >= 2.4 calls
 * io_uring_setup_buf_ring, by hand. */
static int buf_ring_register(struct io_uring *ring, struct io_uring_buf_ring *br,
			     unsigned entries)
{
	struct io_uring_buf_reg reg;

	memset(&reg, 0, sizeof(reg));
	reg.ring_addr = (uint64_t)(uintptr_t)br;
	reg.ring_entries = entries;
	reg.bgid = BGID;
	io_uring_buf_ring_init(br);
	return io_uring_register_buf_ring(ring, &reg, 0);
}

/* The park's wait with quiet sends (ur_wait) needs the kernel's
 * min-timeout wait; without it a keep-alive request costs two enters. */
static const char *min_timeout_text(const struct io_uring_params *p)
{
	return p->features & IORING_FEAT_MIN_TIMEOUT ? "; min-timeout wait" : "";
}

int vio__uring_probe(struct vio *io, char *why, size_t whylen)
{
	const struct vio_config *cfg = &io->cfg;
	struct io_uring ring;
	struct io_uring_params p;
	struct io_uring_probe *probe;
	char ftext[96], fixed_text[64];
	const char *lack = NULL;
	unsigned i, flags = 0;
	int r = -EINVAL;

	for (i = 0; i < VB_ARRAY_SIZE(flag_ladder); i++) {
		flags = flag_ladder[i];
		r = ring_init(cfg, flags, &ring, &p);
		if (r != -EINVAL)
			break;
	}
	if (r < 0) {
		snprintf(why, whylen, "io_uring_setup: %s", strerror(-r));
		return r;
	}
	p.features &= ~vio__uring_hide_features;
	/* Every feature the backend relies on, or libev: NODROP (a CQE is
	 * never lost when the CQ is full) and EXT_ARG (the park's timed wait
	 * passes its timeout to io_uring_enter; without it liburing queues a
	 * timeout request of its own whose CQE is not ours, 5.6-5.10). */
	if (!(p.features & IORING_FEAT_NODROP)) {
		snprintf(why, whylen, "kernel lacks IORING_FEAT_NODROP");
		r = -EOPNOTSUPP;
		goto out;
	}
	if (!(p.features & IORING_FEAT_EXT_ARG)) {
		snprintf(why, whylen, "kernel lacks IORING_FEAT_EXT_ARG (timed waits)");
		r = -EOPNOTSUPP;
		goto out;
	}
	probe = io_uring_get_probe_ring(&ring);
	if (!probe) {
		snprintf(why, whylen, "io_uring opcode probe failed");
		r = -EOPNOTSUPP;
		goto out;
	}
	for (i = 0; i < VB_ARRAY_SIZE(required_ops); i++) {
		if (!io_uring_opcode_supported(probe, required_ops[i].op)) {
			snprintf(why, whylen, "kernel lacks IORING_OP_%s", required_ops[i].name);
			r = -EOPNOTSUPP;
			break;
		}
	}
	if (r != -EOPNOTSUPP && cfg->fixed_files)
		lack = fixed_files_lack(&ring, &p, probe);
	io_uring_free_probe(probe);
	if (r < 0)
		goto out;
	r = 0;
	io->uring_flags = flags;
	io->pbuf_ok = false;
	if (cfg->recv_buffers && cfg->recv_multishot) {
		long page = sysconf(_SC_PAGESIZE);
		void *br = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (br != MAP_FAILED) {
			io->pbuf_ok = buf_ring_register(&ring, br, 8) == 0;
			if (io->pbuf_ok)
				io_uring_unregister_buf_ring(&ring, BGID);
			munmap(br, (size_t)page);
		}
	}
	io->fixed_ok = cfg->fixed_files && !lack;
	if (io->fixed_ok)
		snprintf(fixed_text, sizeof(fixed_text), "; fixed files");
	else if (cfg->fixed_files)
		snprintf(fixed_text, sizeof(fixed_text), "; no fixed files (kernel lacks %s)", lack);
	else
		snprintf(fixed_text, sizeof(fixed_text), "; fixed files off");
	flags_text(flags, ftext, sizeof(ftext));
	if (io->pbuf_ok)
		snprintf(why, whylen, "%s; sq %u, cq %u; multishot recv, %u x %u B buffers/worker%s%s",
			 ftext, p.sq_entries, p.cq_entries, cfg->recv_buffers,
			 cfg->recv_buffer_size, min_timeout_text(&p), fixed_text);
	else
		snprintf(why, whylen, "%s; sq %u, cq %u; plain recv%s%s%s", ftext, p.sq_entries,
			 p.cq_entries,
			 cfg->recv_buffers && cfg->recv_multishot ? " (no buffer rings)" : "",
			 min_timeout_text(&p), fixed_text);
out:
	io_uring_queue_exit(&ring);
	return r;
}

/* ------------------------------------------------------------ lifecycle */

static int bufs_init(struct vio_worker *w)
{
	struct vio_uring_w *uw = uring_worker(w);
	const struct vio_config *cfg = &w->io->cfg;
	unsigned n = cfg->recv_buffers;
	long page = sysconf(_SC_PAGESIZE);
	void *mem;

	uw->buf_bytes = (size_t)n * cfg->recv_buffer_size;
	mem = mmap(NULL, uw->buf_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return -errno;
	w->buf_base = mem;
	uw->br_bytes = ((size_t)n * sizeof(struct io_uring_buf) + (size_t)page - 1) &
		       ~((size_t)page - 1);
	mem = mmap(NULL, uw->br_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		goto err_base;
	uw->br = mem;
	w->bufs = calloc(n, sizeof(*w->bufs));
	if (!w->bufs)
		goto err_br;
	uw->br_mask = (unsigned)io_uring_buf_ring_mask(n);
	if (buf_ring_register(&uw->ring, uw->br, n) < 0)
		goto err_meta;
	for (unsigned i = 0; i < n; i++) {
		w->bufs[i].w = w;
		w->bufs[i].bid = (uint16_t)i;
		io_uring_buf_ring_add(uw->br, w->buf_base + (size_t)i * cfg->recv_buffer_size,
				      cfg->recv_buffer_size, (unsigned short)i, (int)uw->br_mask,
				      (int)i);
	}
	io_uring_buf_ring_advance(uw->br, (int)n);
	w->buf_size = cfg->recv_buffer_size;
	w->buf_count = n;
	return 0;

err_meta:
	free(w->bufs);
	w->bufs = NULL;
err_br:
	munmap(uw->br, uw->br_bytes);
	uw->br = NULL;
err_base:
	munmap(w->buf_base, uw->buf_bytes);
	w->buf_base = NULL;
	return -ENOMEM;
}

int vio__uring_worker_init(struct vio_worker *w)
{
	struct vio_uring_w *uw = calloc(1, sizeof(*uw));
	struct io_uring_params p;
	int r;

	if (!uw)
		return -ENOMEM;
	w->be = uw;
	r = ring_init(&w->io->cfg, w->io->uring_flags, &uw->ring, &p);
	if (r < 0)
		goto err_free;
	uw->ring.features &= ~vio__uring_hide_features; /* what liburing acts on */
	uw->min_wait = (uw->ring.features & IORING_FEAT_MIN_TIMEOUT) != 0;
	uw->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (uw->efd < 0) {
		r = -errno;
		goto err_ring;
	}
	/* Without buffers (registration refused), receives are plain. */
	if (w->io->pbuf_ok && bufs_init(w) < 0)
		vb_warn("io: worker %u: no provided-buffer ring; plain recv", w->id);
	return 0;

err_ring:
	io_uring_queue_exit(&uw->ring);
err_free:
	free(uw);
	w->be = NULL;
	return r;
}

void vio__uring_worker_fini(struct vio_worker *w)
{
	struct vio_uring_w *uw = uring_worker(w);

	if (!uw)
		return;
	io_uring_queue_exit(&uw->ring); /* the kernel cancels what is left */
	close(uw->efd);
	free(uw->cq_stash);
	free(uw->fixed_held);
	free(w->fixed_reqs);
	w->fixed_reqs = NULL;
	if (w->buf_base) {
		munmap(uw->br, uw->br_bytes);
		munmap(w->buf_base, uw->buf_bytes);
		free(w->bufs);
	}
	free(uw);
	w->be = NULL;
}

/* The sparse table: one slot per descriptor number the process may have
 * (RLIMIT_NOFILE now, at most VIO_FIXED_FILES_MAX). On the worker thread,
 * the ring's issuer. Without it, every descriptor is used as it is. */
static void fixed_table_init(struct vio_worker *w)
{
	struct vio_uring_w *uw = uring_worker(w);
	struct rlimit rl;
	uint32_t n = VIO_FIXED_FILES_MAX;
	int r;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < n)
		n = (uint32_t)rl.rlim_cur;
	uw->fixed_held = calloc(n, sizeof(*uw->fixed_held));
	w->fixed_reqs = calloc(n, sizeof(*w->fixed_reqs));
	r = uw->fixed_held && w->fixed_reqs ? io_uring_register_files_sparse(&uw->ring, n) : -ENOMEM;
	if (r < 0) {
		vb_warn("io: worker %u: no registered-file table (%s); regular descriptors",
			w->id, strerror(-r));
		free(uw->fixed_held);
		free(w->fixed_reqs);
		uw->fixed_held = NULL;
		w->fixed_reqs = NULL;
		return;
	}
	uw->fixed_slots = n;
}

int vio__uring_worker_start(struct vio_worker *w)
{
	struct vio_uring_w *uw = uring_worker(w);

	if (w->io->uring_flags & IORING_SETUP_R_DISABLED) {
		/* liburing 2.3 declares io_uring_enable_rings but does not
		 * export it: register by hand. This thread becomes the issuer. */
		if (syscall(__NR_io_uring_register, uw->ring.ring_fd,
			    IORING_REGISTER_ENABLE_RINGS, NULL, 0) < 0)
			return -errno;
	}
	uw->stopping = false;
	if (w->io->fixed_ok && !uw->fixed_held)
		fixed_table_init(w);
	return 0;
}

/* Cancel everything still in flight and reap it, so every task reference
 * the ring holds is dropped. Bounded: a request the kernel does not cancel
 * within a second is left to the ring's teardown. */
void vio__uring_worker_stop(struct vio_worker *w)
{
	struct vio_uring_w *uw = uring_worker(w);
	int64_t end = vb_now_ns() + 1000 * VB_NS_PER_MS;

	uw->stopping = true;
	if (uw->inflight) {
		struct io_uring_sqe *sqe = vio__uring_get_sqe(w);

		io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
		io_uring_sqe_set_data64(sqe, user_data(NULL, TAG_IGNORE));
		uw->inflight++;
	}
	while (uw->inflight && vb_now_ns() < end) {
		struct __kernel_timespec ts = { .tv_sec = 0, .tv_nsec = 10 * VB_NS_PER_MS };

		vio__uring_enter(w, true, 1, IORING_ENTER_GETEVENTS, &ts, NULL);
		vio__uring_reap(w);
	}
	if (uw->inflight)
		vb_warn("io: worker %u stopped with %u requests in flight", w->id, uw->inflight);
}
