/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_io_conn.c: one connection's operations, each against a
 * plain blocking socket on the other end of a loopback TCP pair: deadlines
 * that cancel a pending recv or a partial send, a cancelled reading task
 * (locally and from another worker: the mailbox path) whose memory is
 * freed only after its last completion, vectored send of header + body,
 * a quiet send (its completion does not wake the task; without quiet it
 * does), half-close, reset, close with a receive pending, a reader that
 * stalls while the peer floods it (multishot throttle), a task spawned
 * behind a long poll by a reader its driver woke is stolen by the sibling
 * that slept with no bound (the owed wake-up), a close on another worker
 * than the one whose registered-file table holds the descriptor reaches the
 * peer while that worker is inside one long poll, waits that ended on two
 * workers leave no epoll registration of the descriptor behind (its number
 * then serves another socket on both). Run once per backend.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/helpers/io_harness.h"
#include "tests/helpers/test_config.h"
#include "base/time.h"
#include "io/internal.h" /* vio__test_park_unbounded */

#define MS VB_NS_PER_MS

/* cmocka's asserts longjmp to the test thread: tasks check with this. */
#define TASK_CHECK(cond) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "%s:%d: task check failed: %s\n", __FILE__, __LINE__, #cond); \
			abort(); \
		} \
	} while (0)

struct ct {
	struct ioh_task base;
	struct vio_conn c;
	struct vio_op tx;   /* lent to c for good */
	struct vio_timer dl; /* c's deadline */
	struct vio_timer tm;
	int step;
	int home;
	_Atomic int pending_seen;
	_Atomic int moved;
	_Atomic int polls;
	struct ioh_leave leave, leave2; /* leave2: fixed_steal's second move */
	ssize_t res;
	int close_res;
	int64_t t0, t1;
	size_t len;
	struct iovec iov[2];
	char *big;
	bool abandon;       /* fixed_steal: end with vio_conn_abandon */
	bool moved_seen;    /* return_to_parked: home seen asleep */
	int first_w;        /* fixed_steal: worker of the first operation */
	int second_w;       /* two_waits: worker of the second wait */
	bool waited;        /* two_waits: this step's receive went pending */
	_Atomic int waits, parked, go; /* two_waits */
	char got[2];        /* two_waits: the byte each receive got */
	char buf[4096];
};

static void ct_fini(struct ioh_task *t)
{
	free(((struct ct *)t)->big);
}

static struct ct *ct_new(enum vrt_poll (*fn)(struct ioh_task *), int fd)
{
	struct ct *t = ioh_task_new(sizeof(struct ct), fn, ct_fini);

	vio_conn_init(&t->c, fd);
	vio_conn_tx_lend(&t->c, &t->tx);
	vio_timer_init(&t->dl);
	vio_timer_init(&t->tm);
	return t;
}

static void ct_join(struct ct *t)
{
	vrt_task_join_wait(&t->base.t);
}

/* Wait until at least `n` tasks were dropped (their memory freed). */
static bool wait_drops(uint64_t n, unsigned ms)
{
	int64_t end = vb_now_ns() + (int64_t)ms * MS;

	while (ioh_drops() < n) {
		if (vb_now_ns() > end)
			return false;
		usleep(500);
	}
	return true;
}

/* The test thread waits for a task's flag. Acquire pairs with the task's
 * release store ([F1] below): what the task did before is visible. */
static void wait_flag(_Atomic int *f)
{
	while (!atomic_load_explicit(f, memory_order_acquire))
		usleep(200);
}

/* The common end of a test: drop the handle, close the peer, stop. */
static void ct_finish(struct ioh *h, struct ct *t, int peer)
{
	vrt_task_unref(&t->base.t);
	close(peer);
	ioh_stop(h);
}

/* Read until EOF (or error): returns bytes read, -errno on error, with a
 * timeout so a socket that is never closed fails the test. */
static ssize_t drain_to_eof(int fd, unsigned ms)
{
	char buf[65536];
	ssize_t total = 0;
	int64_t end = vb_now_ns() + (int64_t)ms * MS;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int left = (int)((end - vb_now_ns()) / MS);

		if (left <= 0 || poll(&p, 1, left) <= 0)
			return -ETIMEDOUT;
		ssize_t r = recv(fd, buf, sizeof(buf), 0);
		if (r == 0)
			return total;
		if (r < 0)
			return errno == ECONNRESET ? total : -errno;
		total += r;
	}
}

static void two_workers(struct ioh *h)
{
	ioh_start(h, 2, NULL, NULL);
}

/* ------------------------------------------------ deadline on recv */

static enum vrt_poll recv_deadline_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	enum vrt_poll p;

	switch (t->step) {
	case 0:
		t->t0 = vb_now_ns();
		TASK_CHECK(vio_conn_set_deadline(&t->c, &t->dl, t->t0 + 50 * MS) == 0);
		t->step = 1;
		/* fall through */
	case 1:
		p = vio_conn_recv(&t->c, t->buf, sizeof(t->buf), &t->res);
		if (p != VRT_READY)
			return p;
		t->t1 = vb_now_ns();
		t->step = 2;
		/* fall through */
	default:
		p = vio_conn_close(&t->c, &t->close_res);
		return p;
	}
}

static void test_recv_deadline(void **state)
{
	struct ioh h;
	int fds[2];
	struct ct *t;

	(void)state;
	two_workers(&h);
	assert_int_equal(ioh_tcp_pair(fds), 0);
	t = ct_new(recv_deadline_poll, fds[0]);
	ioh_spawn(&h, &t->base, true);
	ct_join(t);
	assert_int_equal(t->res, -ETIMEDOUT);
	assert_true(t->t1 - t->t0 >= 50 * MS); /* not before the deadline; how soon after is a figure */
	print_message("bound: test_io_conn recv_deadline_ms %.1f < 1000\n", (double)(t->t1 - t->t0) / 1e6);
	assert_int_equal(t->close_res, 0);
	assert_int_equal(drain_to_eof(fds[1], 2000), 0);
	ct_finish(&h, t, fds[1]);
}

/* ------------------------------------------ cancel a reading task */

static enum vrt_poll cancel_reader_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	enum vrt_poll p;

	if (vrt_task_is_cancelled(&self->t)) {
		vio_conn_abandon(&t->c);
		return VRT_READY;
	}
	p = vio_conn_recv(&t->c, t->buf, sizeof(t->buf), &t->res);
	if (p == VRT_PENDING) /* [F1] release: pairs with wait_flag's acquire */
		atomic_store_explicit(&t->pending_seen, 1, memory_order_release);
	return p;
}

static void test_cancel_reading_task(void **state)
{
	struct ioh h;
	int fds[2];
	struct ct *t;
	uint64_t drops;

	(void)state;
	two_workers(&h);
	assert_int_equal(ioh_tcp_pair(fds), 0);
	t = ct_new(cancel_reader_poll, fds[0]);
	ioh_spawn(&h, &t->base, true);
	wait_flag(&t->pending_seen);
	drops = ioh_drops();
	vrt_task_cancel(&t->base.t);
	ct_join(t);
	vrt_task_unref(&t->base.t);
	/* Freed once the cancelled receive's last completion is reaped. */
	assert_true(wait_drops(drops + 1, 2000));
	/* ... and its socket closed: the peer sees EOF. */
	assert_int_equal(drain_to_eof(fds[1], 2000), 0);
	close(fds[1]);
	ioh_stop(&h);
}

/* A task cancels a receive submitted on another worker's ring: the request
 * goes through that worker's mailbox. */
static enum vrt_poll remote_cancel_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	enum vrt_poll p;

	if (t->step == 0) {
		t->home = vrt_worker_id();
		t->step = 1;
	}
	if (t->step == 1) {
		if (t->big) /* a send larger than the socket buffers: partial */
			p = vio_conn_send(&t->c, t->big, t->len, &t->res);
		else
			p = vio_conn_recv(&t->c, t->buf, sizeof(t->buf), &t->res);
		if (p == VRT_READY)
			return VRT_READY; /* unexpected: the test checks `moved` */
		t->step = 2;
	}
	p = ioh_leave_worker(&t->base, &t->leave); /* until another worker runs us */
	if (p != VRT_READY)
		return p;
	atomic_store_explicit(&t->moved, 1, memory_order_relaxed); /* read after the join */
	vio_conn_abandon(&t->c);
	return VRT_READY;
}

static void remote_cancel(bool send)
{
	struct ioh h;
	int fds[2], sndbuf = 65536;
	struct ct *t;
	uint64_t drops;
	ssize_t got;

	two_workers(&h);
	assert_int_equal(ioh_tcp_pair(fds), 0);
	/* A fixed send buffer (no autotuning): QUIET_LEN cannot fit. */
	setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	t = ct_new(remote_cancel_poll, fds[0]);
	if (send) {
		t->len = 16u << 20;
		t->big = calloc(1, t->len);
	}
	drops = ioh_drops();
	ioh_spawn(&h, &t->base, true);
	ct_join(t);
	assert_int_equal(atomic_load(&t->moved), 1);
	vrt_task_unref(&t->base.t);
	assert_true(wait_drops(drops + 1, 2000));
	got = drain_to_eof(fds[1], 3000);
	assert_true(got >= 0);
	if (send)
		assert_true(got < (ssize_t)(16u << 20)); /* stopped part-way */
	close(fds[1]);
	ioh_stop(&h);
}

static void test_remote_cancel_recv(void **state)
{
	(void)state;
	remote_cancel(false);
}

static void test_remote_cancel_send(void **state)
{
	(void)state;
	remote_cancel(true);
}

/* ------------------------------------- deadline on a partial send */

static enum vrt_poll send_deadline_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	enum vrt_poll p;

	if (t->step == 0) {
		t->t0 = vb_now_ns();
		TASK_CHECK(vio_conn_set_deadline(&t->c, &t->dl, t->t0 + 100 * MS) == 0);
		t->step = 1;
	}
	if (t->step == 1) {
		p = vio_conn_send(&t->c, t->big, t->len, &t->res);
		if (p != VRT_READY)
			return p;
		t->t1 = vb_now_ns();
		t->step = 2;
	}
	return vio_conn_close(&t->c, &t->close_res);
}

static void test_send_deadline_partial(void **state)
{
	struct ioh h;
	struct vio_worker_stats ws[2];
	int fds[2], sndbuf = 65536;
	struct ct *t;
	uint64_t partial = 0;

	(void)state;
	two_workers(&h);
	assert_int_equal(ioh_tcp_pair(fds), 0);
	/* A fixed send buffer (no autotuning): QUIET_LEN cannot fit. */
	setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	t = ct_new(send_deadline_poll, fds[0]);
	t->len = 16u << 20;
	t->big = calloc(1, t->len);
	ioh_spawn(&h, &t->base, true);
	ct_join(t);
	assert_int_equal(t->res, -ETIMEDOUT);
	assert_true(t->t1 - t->t0 >= 100 * MS); /* not before the deadline; how soon after is a figure */
	print_message("bound: test_io_conn send_deadline_ms %.1f < 2000\n", (double)(t->t1 - t->t0) / 1e6);
	vio_stats_snapshot(h.io, ws, 2);
	for (int i = 0; i < 2; i++)
		partial += ws[i].send_partial;
	assert_true(partial >= 1);
	vrt_task_unref(&t->base.t);
	assert_true(drain_to_eof(fds[1], 3000) >= 0);
	close(fds[1]);
	ioh_stop(&h);
}

/* ------------------------------- the send op, lent only while it sends */

/* The send's operation is the caller's while no send is under way: taken
 * back idle, lent again for a send that waits on a full socket (it cannot
 * be taken meanwhile), taken back after. Then, with none lent, a receive
 * waits and the task abandons the connection: the peer sees the end. */
static enum vrt_poll tx_lend_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	enum vrt_poll p;

	if (t->step == 0) {
		TASK_CHECK(vio_conn_tx_take(&t->c) == &t->tx);
		TASK_CHECK(vio_conn_tx_take(&t->c) == NULL); /* none lent */
		vio_conn_tx_lend(&t->c, &t->tx);
		t->step = 1;
	}
	if (t->step == 1) {
		p = vio_conn_send(&t->c, t->big, t->len, &t->res);
		if (p == VRT_PENDING) {
			TASK_CHECK(vio_conn_tx_take(&t->c) == NULL); /* under way */
			/* Release: pairs with wait_flag's acquire [F1]. */
			atomic_store_explicit(&t->pending_seen, 1, memory_order_release);
		}
		if (p != VRT_READY)
			return p;
		TASK_CHECK(vio_conn_tx_take(&t->c) == &t->tx);
		TASK_CHECK(vio_timer_arm(&t->tm, vb_now_ns() + 20 * MS) == 0);
		t->step = 2;
	}
	p = vio_conn_recv(&t->c, t->buf, sizeof(t->buf), &t->res);
	if (p == VRT_READY)
		return VRT_READY; /* unexpected: the test sees step 2 and res */
	if (!vio_timer_expired(&t->tm))
		return p;
	t->step = 3;
	vio_conn_abandon(&t->c);
	return VRT_READY;
}

static void test_tx_lent_only_while_sending(void **state)
{
	struct ioh h;
	int fds[2], sndbuf = 65536;
	struct ct *t;

	(void)state;
	two_workers(&h);
	assert_int_equal(ioh_tcp_pair(fds), 0);
	setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	t = ct_new(tx_lend_poll, fds[0]);
	t->len = 4u << 20;
	t->big = calloc(1, t->len);
	ioh_spawn(&h, &t->base, true);
	wait_flag(&t->pending_seen);
	assert_int_equal(drain_to_eof(fds[1], 5000), (ssize_t)t->len);
	ct_join(t);
	assert_int_equal(t->step, 3);
	assert_int_equal(t->res, (ssize_t)t->len);
	ct_finish(&h, t, fds[1]);
}

/* -------------------------------------------- vectored send */

static enum vrt_poll sendv_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	enum vrt_poll p;

	if (t->step == 0) {
		p = vio_conn_sendv(&t->c, t->iov, 2, &t->res);
		if (p != VRT_READY)
			return p;
		t->step = 1;
	}
	return vio_conn_close(&t->c, &t->close_res);
}

static void test_sendv_header_body(void **state)
{
	static const char hdr[] = "HTTP/1.1 200 OK\r\n\r\n";
	size_t body = 3u << 20, total = sizeof(hdr) - 1 + body, got = 0;
	struct ioh h;
	int fds[2];
	struct ct *t;
	char *rx = malloc(total + 1);

	(void)state;
	two_workers(&h);
	assert_int_equal(ioh_tcp_pair(fds), 0);
	t = ct_new(sendv_poll, fds[0]);
	t->big = malloc(body);
	for (size_t i = 0; i < body; i++)
		t->big[i] = (char)(i * 7 + (i >> 12));
	t->iov[0].iov_base = (void *)hdr;
	t->iov[0].iov_len = sizeof(hdr) - 1;
	t->iov[1].iov_base = t->big;
	t->iov[1].iov_len = body;
	ioh_spawn(&h, &t->base, true);
	for (;;) {
		ssize_t r = recv(fds[1], rx + got, total + 1 - got, 0);
		assert_true(r >= 0);
		if (r == 0)
			break;
		got += (size_t)r;
	}
	ct_join(t);
	assert_int_equal(t->res, (ssize_t)total);
	assert_int_equal(got, total);
	assert_memory_equal(rx, hdr, sizeof(hdr) - 1);
	for (size_t i = 0; i < body; i++)
		if (rx[sizeof(hdr) - 1 + i] != (char)(i * 7 + (i >> 12)))
			fail_msg("body byte %zu differs", i);
	vrt_task_unref(&t->base.t);
	free(rx);
	close(fds[1]);
	ioh_stop(&h);
}

/* ------------------------------------------------ quiet send */

#define QUIET_LEN (2u << 20)

static enum vrt_poll quiet_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	enum vrt_poll p;

	/* Relaxed: the test thread only counts polls; [F1] orders the rest. */
	atomic_fetch_add_explicit(&t->polls, 1, memory_order_relaxed);
	for (;;) {
		switch (t->step) {
		case 0: /* a send the peer does not read yet: quiet */
		case 2: /* the same, quiet asked and withdrawn: it must wake us */
			p = vio_conn_send(&t->c, t->big, QUIET_LEN, &t->res);
			TASK_CHECK(p == VRT_PENDING); /* far more than the socket buffers */
			TASK_CHECK(!vio_conn_tx_quiet(&t->c, true));
			if (t->step == 2)
				TASK_CHECK(!vio_conn_tx_quiet(&t->c, false));
			t->step++;
			/* [F1] release: pairs with wait_flag's acquire. */
			atomic_store_explicit(t->step == 1 ? &t->pending_seen : &t->moved, 1,
					      memory_order_release);
			return VRT_PENDING;
		case 1:
		case 3: /* collect */
			p = vio_conn_send(&t->c, t->big, QUIET_LEN, &t->res);
			if (p != VRT_READY)
				return p;
			TASK_CHECK(t->res == (ssize_t)QUIET_LEN);
			if (t->step == 3) /* polls until the second send was collected */
				t->t1 = atomic_load_explicit(&t->polls, memory_order_relaxed);
			/* Done: a finished send is reported as such. */
			TASK_CHECK(!vio_conn_tx_quiet(&t->c, false));
			t->step++;
			continue;
		default:
			return vio_conn_close(&t->c, &t->close_res);
		}
	}
}

static void read_exactly(int fd, size_t len)
{
	char buf[65536];

	while (len) {
		ssize_t r = recv(fd, buf, len < sizeof(buf) ? len : sizeof(buf), 0);
		assert_true(r > 0);
		len -= (size_t)r;
	}
}

static void test_quiet_send(void **state)
{
	struct ioh h;
	int fds[2], sndbuf = 65536;
	struct ct *t;

	(void)state;
	two_workers(&h);
	assert_int_equal(ioh_tcp_pair(fds), 0);
	/* A fixed send buffer (no autotuning): QUIET_LEN cannot fit. */
	setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	t = ct_new(quiet_poll, fds[0]);
	t->big = calloc(1, QUIET_LEN);
	ioh_spawn(&h, &t->base, true);
	wait_flag(&t->pending_seen);
	read_exactly(fds[1], QUIET_LEN);
	/* The send finished (every byte arrived) without waking the task. */
	usleep(100 * 1000);
	assert_int_equal(atomic_load_explicit(&t->polls, memory_order_relaxed), 1);
	vrt_task_wake(&t->base.t); /* it collects, then sends again, not quiet */
	wait_flag(&t->moved);
	read_exactly(fds[1], QUIET_LEN);
	ct_join(t);
	assert_int_equal(t->t1, 3); /* woken by the completion alone */
	assert_int_equal(t->close_res, 0);
	ct_finish(&h, t, fds[1]);
}

/* -------------------------------------------- half-close, reset */

static enum vrt_poll half_close_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	enum vrt_poll p;

	for (;;) {
		switch (t->step) {
		case 0: /* read until the peer's EOF */
			p = vio_conn_recv(&t->c, t->buf, sizeof(t->buf), &t->res);
			if (p != VRT_READY)
				return p;
			if (t->res > 0) {
				t->len += (size_t)t->res;
				continue;
			}
			t->step = 1;
			continue;
		case 1: /* our side is still open for writing */
			p = vio_conn_send(&t->c, "bye", 3, &t->res);
			if (p != VRT_READY)
				return p;
			t->step = 2;
			continue;
		default:
			return vio_conn_close(&t->c, &t->close_res);
		}
	}
}

static void test_half_close(void **state)
{
	struct ioh h;
	int fds[2];
	struct ct *t;
	char buf[8];

	(void)state;
	two_workers(&h);
	assert_int_equal(ioh_tcp_pair(fds), 0);
	t = ct_new(half_close_poll, fds[0]);
	ioh_spawn(&h, &t->base, true);
	assert_int_equal(send(fds[1], "hello", 5, 0), 5);
	shutdown(fds[1], SHUT_WR);
	assert_int_equal(recv(fds[1], buf, 3, MSG_WAITALL), 3);
	assert_memory_equal(buf, "bye", 3);
	assert_int_equal(drain_to_eof(fds[1], 2000), 0);
	ct_join(t);
	assert_int_equal(t->len, 5);
	assert_int_equal(t->res, 3);
	assert_int_equal(t->close_res, 0);
	ct_finish(&h, t, fds[1]);
}

static enum vrt_poll recv_once_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	enum vrt_poll p;

	if (t->step == 0) {
		p = vio_conn_recv(&t->c, t->buf, sizeof(t->buf), &t->res);
		if (p == VRT_PENDING) /* [F1] release: pairs with wait_flag's acquire */
			atomic_store_explicit(&t->pending_seen, 1, memory_order_release);
		if (p != VRT_READY)
			return p;
		t->step = 1;
	}
	return vio_conn_close(&t->c, &t->close_res);
}

static void test_reset(void **state)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	struct ioh h;
	int fds[2];
	struct ct *t;

	(void)state;
	two_workers(&h);
	assert_int_equal(ioh_tcp_pair(fds), 0);
	t = ct_new(recv_once_poll, fds[0]);
	ioh_spawn(&h, &t->base, true);
	wait_flag(&t->pending_seen);
	setsockopt(fds[1], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fds[1]);
	ct_join(t);
	assert_int_equal(t->res, -ECONNRESET);
	vrt_task_unref(&t->base.t);
	ioh_stop(&h);
}

/* ------------------------------------ close with a receive pending */

static enum vrt_poll close_pending_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	enum vrt_poll p;

	if (t->step == 0) {
		TASK_CHECK(vio_timer_arm(&t->tm, vb_now_ns() + 20 * MS) == 0);
		t->step = 1;
	}
	if (t->step == 1) {
		p = vio_conn_recv(&t->c, t->buf, sizeof(t->buf), &t->res);
		if (p == VRT_READY)
			return VRT_READY; /* unexpected: checked by the test */
		if (!vio_timer_expired(&t->tm))
			return p;
		t->step = 2; /* the timer woke us: close with the recv pending */
	}
	return vio_conn_close(&t->c, &t->close_res);
}

static void test_close_with_recv_pending(void **state)
{
	struct ioh h;
	int fds[2];
	struct ct *t;

	(void)state;
	two_workers(&h);
	assert_int_equal(ioh_tcp_pair(fds), 0);
	t = ct_new(close_pending_poll, fds[0]);
	ioh_spawn(&h, &t->base, true);
	ct_join(t);
	assert_int_equal(t->step, 2);
	assert_int_equal(t->close_res, 0);
	assert_int_equal(drain_to_eof(fds[1], 2000), 0);
	ct_finish(&h, t, fds[1]);
}

/* ------------------------- close while a quiet send is in flight */

#define QCLOSE_LEN 100

/* In one poll: a small send (it fits the socket buffer, so it will
 * succeed), marked quiet, then the close, which finds the send in flight
 * and asks for its cancel. On io_uring nothing is submitted before the
 * poll ends, so the send succeeds after the close asked: its completion
 * is quiet and a success. The server did this when a connection was reset
 * while its keep-alive answer was out (test_client_faults resets, uring,
 * few buffers: a connection stayed CLOSING for good). */
static enum vrt_poll close_quiet_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	static const char msg[QCLOSE_LEN];

	if (t->step == 0) {
		enum vrt_poll p = vio_conn_send(&t->c, msg, sizeof(msg), &t->res);

		t->step = 1;
		if (p == VRT_PENDING) {
			/* false: nothing has ended yet (io_uring: not even submitted) */
			if (!vio_conn_tx_quiet(&t->c, true))
				atomic_store_explicit(&t->pending_seen, 1, memory_order_relaxed);
		} else {
			TASK_CHECK(p == VRT_READY && t->res == QCLOSE_LEN); /* libev: sent at once */
		}
	}
	return vio_conn_close(&t->c, &t->close_res);
}

static void test_close_collects_quiet_send(void **state)
{
	struct ioh h;
	int fds[2];
	struct ct *t;

	(void)state;
	two_workers(&h);
	assert_int_equal(ioh_tcp_pair(fds), 0);
	t = ct_new(close_quiet_poll, fds[0]);
	ioh_spawn(&h, &t->base, true);
	/* The close happens: the peer gets the bytes and then EOF (5 s: a
	 * bound on a hang, not a speed; before the fix it never came). */
	assert_int_equal(drain_to_eof(fds[1], 5000), QCLOSE_LEN);
	ct_join(t);
	print_message("# the send was %s when the close asked\n",
		      atomic_load_explicit(&t->pending_seen, memory_order_relaxed) ? "in flight, quiet"
										     : "done already");
	if (strcmp(vio_backend_name(h.io), "uring") == 0)
		assert_int_equal(atomic_load_explicit(&t->pending_seen, memory_order_relaxed), 1);
	assert_int_equal(t->close_res, 0);
	ct_finish(&h, t, fds[1]);
}

/* ------------- abandon after a close that is in flight (defect 7) */

/* The task starts a close and, before collecting it, gives the connection
 * up (vio_conn_abandon, as a task cancelled mid-close does). The test
 * thread waits for the close to reach the kernel (the peer sees EOF), puts
 * another descriptor on the freed number, and lets the task abandon. The
 * abandon must not close that number a second time. */
static enum vrt_poll abandon_closing_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;

	if (t->step == 0) {
		enum vrt_poll p = vio_conn_close(&t->c, &t->close_res);

		t->step = 1;
		/* [F1] release: pairs with wait_flag's acquire. */
		atomic_store_explicit(&t->pending_seen, p == VRT_PENDING ? 1 : 2,
				      memory_order_release);
		if (p == VRT_READY)
			return VRT_READY; /* closed at once (libev): nothing in flight */
	}
	/* [F1] acquire: pairs with the test thread's release of `moved`. */
	if (!atomic_load_explicit(&t->moved, memory_order_acquire))
		return VRT_PENDING; /* the test wakes us once the number is reused */
	vio_conn_abandon(&t->c);
	return VRT_READY;
}

static void test_abandon_during_close(void **state)
{
	struct ioh h;
	int fds[2], fd;
	struct ct *t;

	(void)state;
	two_workers(&h);
	assert_int_equal(ioh_tcp_pair(fds), 0);
	fd = fds[0];
	t = ct_new(abandon_closing_poll, fd);
	ioh_spawn(&h, &t->base, true);
	wait_flag(&t->pending_seen);
	/* The close reached the kernel: the peer reads EOF. */
	assert_int_equal(drain_to_eof(fds[1], 2000), 0);
	/* acquire: pairs with the task's release store of pending_seen. */
	if (atomic_load_explicit(&t->pending_seen, memory_order_acquire) == 1) {
		/* Another socket takes the number the close freed. */
		int other = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		assert_true(other >= 0);
		assert_int_equal(dup2(other, fd), fd);
		close(other);
		/* [F1] release: pairs with the task's acquire. */
		atomic_store_explicit(&t->moved, 1, memory_order_release);
		vrt_task_wake(&t->base.t);
	}
	ct_join(t);
	/* The socket now on `fd` is still open. (acquire: pairs with the
	 * task's release store of pending_seen.) */
	if (atomic_load_explicit(&t->pending_seen, memory_order_acquire) == 1) {
		assert_int_not_equal(fcntl(fd, F_GETFD), -1);
		close(fd);
	}
	ct_finish(&h, t, fds[1]);
}

/* ------------- a send while the worker stays busy (defect 3) */

/* One worker, driver polled only before parking (io_poll_interval 0,
 * io_reap_us 0): the
 * sender queues a send, then a busy task keeps the worker running (it
 * yields until the test stops it; 30 s at most, a hang guard). The send
 * must reach the kernel after a task poll (ur_flush), not when the worker
 * next parks: the peer gets it while the busy task still runs (how soon is
 * a figure). */
static _Atomic int busy_stop;

static enum vrt_poll busy_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;

	if (!t->t0)
		t->t0 = vb_now_ns();
	if (atomic_load(&busy_stop) || vb_now_ns() - t->t0 > 30000 * MS)
		return VRT_READY;
	return VRT_YIELD;
}

static enum vrt_poll busy_sender_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	enum vrt_poll p;

	if (t->step == 0) {
		struct ct *b = ct_new(busy_poll, -1);

		TASK_CHECK(vrt_spawn_detached(vrt_current_rt(), &b->base.t) == 0);
		t->step = 1;
	}
	if (t->step == 1) {
		p = vio_conn_send(&t->c, "z", 1, &t->res);
		if (p != VRT_READY)
			return p;
		t->step = 2;
	}
	return vio_conn_close(&t->c, &t->close_res);
}

static void test_send_while_busy(void **state)
{
	struct ioh h;
	struct vrt_config rc;
	struct pollfd pfd;
	int fds[2];
	struct ct *t;
	int64_t t0;

	(void)state;
	tcfg_rt(&rc);
	rc.io_poll_interval = 0;
	rc.io_reap_us = 0; /* not reaped at slice boundaries either */
	ioh_start(&h, 1, NULL, &rc);
	atomic_store(&busy_stop, 0);
	assert_int_equal(ioh_tcp_pair(fds), 0);
	t = ct_new(busy_sender_poll, fds[0]);
	t0 = vb_now_ns();
	ioh_spawn(&h, &t->base, true);
	pfd.fd = fds[1];
	pfd.events = POLLIN;
	assert_int_equal(poll(&pfd, 1, 10000), 1); /* the busy task runs until busy_stop */
	print_message("# send reached the peer after %.3f ms of a busy worker\n",
		      (double)(vb_now_ns() - t0) / 1e6);
	print_message("bound: test_io_conn send_while_busy_ms %.3f < 1\n", (double)(vb_now_ns() - t0) / 1e6);
	atomic_store(&busy_stop, 1);
	ct_join(t);
	assert_int_equal(t->res, 1);
	ct_finish(&h, t, fds[1]);
}

/* ------------------ completions reaped by slice time (issue 19) */

/* One worker runs a job's 50 us slices back to back (nothing else waits,
 * so they run on at once); a byte arrives for a receive pending on the same
 * worker's driver. The worker reaps its driver at a slice boundary once
 * io_reap_us (100 us) passed since the last time, so the reader runs within
 * 3 slices of the byte being readable (counted in slices, not time); by
 * io_poll_interval (61 polls) alone it waited ~60. */
static _Atomic int slicer_done, slicer_stop;

static enum vrt_poll slicer_poll(struct ioh_task *self)
{
	int64_t end = vb_now_ns() + 50 * 1000;

	(void)self;
	while (vb_now_ns() < end)
		;
	/* release: pairs with the acquire loads of the test and the reader. */
	atomic_fetch_add_explicit(&slicer_done, 1, memory_order_release);
	/* relaxed: a stop flag; the join orders what follows. */
	return atomic_load_explicit(&slicer_stop, memory_order_relaxed) ? VRT_READY : VRT_YIELD;
}

static enum vrt_poll slice_reader_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	enum vrt_poll p = vio_conn_recv(&t->c, t->buf, sizeof(t->buf), &t->res);

	if (p == VRT_PENDING) {
		/* [F1] release: pairs with wait_flag's acquire. */
		atomic_store_explicit(&t->pending_seen, 1, memory_order_release);
		return p;
	}
	if (p == VRT_READY) {
		/* acquire: pairs with slicer_poll's release. */
		t->t1 = atomic_load_explicit(&slicer_done, memory_order_acquire);
		vio_conn_abandon(&t->c); /* the multishot receive stays armed */
	}
	return p;
}

static void test_reaped_by_slice_time(void **state)
{
	enum { ROUNDS = 10 };
	struct ioh h;
	struct vrt_config rc;
	struct ct *sl;
	int fds[2];
	int64_t worst = 0;

	(void)state;
	tcfg_rt(&rc); /* io_poll_interval 61, io_reap_us 100 */
	ioh_start(&h, 1, NULL, &rc);
	atomic_store(&slicer_done, 0);
	atomic_store(&slicer_stop, 0);
	sl = ct_new(slicer_poll, -1);
	ioh_spawn(&h, &sl->base, true);
	for (int i = 0; i < ROUNDS; i++) {
		struct pollfd pfd;
		struct ct *t;
		int before;

		assert_int_equal(ioh_tcp_pair(fds), 0);
		t = ct_new(slice_reader_poll, fds[0]);
		ioh_spawn(&h, &t->base, true);
		wait_flag(&t->pending_seen);
		assert_int_equal(send(fds[1], "x", 1, 0), 1);
		/* Readable (the kernel woke the socket's waiters, the driver's
		 * among them) before the count starts. */
		pfd.fd = fds[0];
		pfd.events = POLLIN;
		assert_int_equal(poll(&pfd, 1, 10000), 1);
		/* acquire: pairs with the slicer's release increments. */
		before = atomic_load_explicit(&slicer_done, memory_order_acquire);
		ct_join(t);
		assert_int_equal(t->res, 1);
		if (t->t1 - before > worst)
			worst = t->t1 - before;
		vrt_task_unref(&t->base.t);
		close(fds[1]);
	}
	print_message("# byte readable to its reader: at most %ld slices of 50 us (io_reap_us 100)\n",
		      (long)worst);
	assert_true(worst <= 3);
	atomic_store(&slicer_stop, 1);
	ct_join(sl);
	vrt_task_unref(&sl->base.t);
	ioh_stop(&h);
}

/* --------------------- a stalled reader while the peer floods it */

static enum vrt_poll slow_reader_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	enum vrt_poll p;

	if (t->step == 0) {
		p = vio_sleep_until(&t->tm, t->t0);
		if (p != VRT_READY)
			return p;
		t->step = 1;
	}
	for (;;) {
		p = vio_conn_recv(&t->c, t->big + t->len, (16u << 20) - t->len, &t->res);
		if (p != VRT_READY)
			return p;
		if (t->res <= 0)
			break;
		t->len += (size_t)t->res;
	}
	return vio_conn_close(&t->c, &t->close_res);
}

struct flood {
	int fd;
	size_t len;
};

static void *flood_main(void *arg)
{
	struct flood *f = arg;
	char buf[65536];
	size_t off = 0;

	while (off < f->len) {
		size_t n = f->len - off < sizeof(buf) ? f->len - off : sizeof(buf);
		for (size_t i = 0; i < n; i++)
			buf[i] = (char)((off + i) * 13 + ((off + i) >> 16));
		ssize_t w = send(f->fd, buf, n, 0);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	shutdown(f->fd, SHUT_WR);
	return NULL;
}

static void test_stalled_reader(void **state)
{
	struct ioh h;
	int fds[2];
	struct ct *t;
	struct flood f;
	pthread_t th;

	(void)state;
	two_workers(&h);
	assert_int_equal(ioh_tcp_pair(fds), 0);
	t = ct_new(slow_reader_poll, fds[0]);
	t->big = malloc(16u << 20);
	t->t0 = vb_now_ns() + 200 * MS; /* read nothing for 200 ms */
	f.fd = fds[1];
	f.len = 8u << 20;
	pthread_create(&th, NULL, flood_main, &f);
	ioh_spawn(&h, &t->base, true);
	ct_join(t);
	pthread_join(th, NULL);
	assert_int_equal(t->len, f.len);
	assert_int_equal(t->res, 0);
	for (size_t i = 0; i < f.len; i++)
		if (t->big[i] != (char)(i * 13 + (i >> 16)))
			fail_msg("byte %zu differs", i);
	ct_finish(&h, t, fds[1]);
}

/* --------------------------- a buffer given back to a sleeping owner */

/* Arms a multishot receive on its home worker, then reads the bytes on
 * the other worker: the provided buffer goes back to home's return stack
 * while home sleeps. Then waits, dormant, to be woken for its abandon. */
static struct vrt *return_rt;

/* Until worker w is seen PARKED in the same park 20 ms apart (a hang
 * guard of 20 s): it sleeps, with nothing left to wake it but what the
 * caller does next. */
static bool wait_parked_still(struct vrt *rt, int w)
{
	struct vrt_worker_stats ws[2];
	int64_t t0 = vb_now_ns();
	uint64_t parks;

	while (vb_now_ns() - t0 < 20000 * MS) {
		vrt_stats_snapshot(rt, NULL, ws, 2);
		parks = ws[w].parks;
		if (ws[w].state == VRT_WS_PARKED) {
			usleep(20000);
			vrt_stats_snapshot(rt, NULL, ws, 2);
			if (ws[w].state == VRT_WS_PARKED && ws[w].parks == parks)
				return true;
		}
		usleep(1000);
	}
	return false;
}

static enum vrt_poll return_to_parked_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	enum vrt_poll p;

	if (t->step == 0) {
		t->home = vrt_worker_id();
		p = vio_conn_recv(&t->c, t->buf, sizeof(t->buf), &t->res);
		TASK_CHECK(p == VRT_PENDING);
		t->step = 1;
		/* [F1] release: pairs with wait_flag's acquire. */
		atomic_store_explicit(&t->pending_seen, 1, memory_order_release);
		return VRT_PENDING;
	}
	if (t->step == 1) {
		p = ioh_leave_worker(&t->base, &t->leave); /* until the other worker runs us */
		if (p != VRT_READY)
			return p;
		/* The buffer goes back only once home sleeps with no bound:
		 * nothing but the return's own wake-up can give it back. */
		if (!t->moved_seen) {
			TASK_CHECK(wait_parked_still(return_rt, t->home));
			t->moved_seen = true;
		}
		p = vio_conn_recv(&t->c, t->buf, sizeof(t->buf), &t->res);
		if (p != VRT_READY)
			return p;
		TASK_CHECK(t->res == 100);
		t->step = 2;
		/* [F1] release: pairs with wait_flag's acquire. */
		atomic_store_explicit(&t->moved, 1, memory_order_release);
		return VRT_PENDING; /* the test thread wakes us */
	}
	vio_conn_abandon(&t->c);
	return VRT_READY;
}

/* A provided buffer read on another worker goes back to its owner's
 * return stack; an owner that sleeps (here with parks that never time
 * out) must still get it back, or its ring runs short while it sleeps and
 * the gauge says the buffer is held (test_echo_many's bufs_out 14 and 1).
 * The reader takes the buffer only once the owner is seen asleep in one
 * park 20 ms apart, so only the return's own wake-up ([B3]) can end that
 * park; before, the owner was still awake and took it at its next service
 * pass. io_uring only (libev has no provided buffers). */
static void test_buf_return_to_parked_owner(void **state)
{
	struct vio_worker_stats ws[2];
	struct ioh h;
	struct ct *t;
	int fds[2];
	int64_t end;

	(void)state;
	vio__test_park_unbounded = true;
	two_workers(&h);
	return_rt = h.rt;
	assert_int_equal(ioh_tcp_pair(fds), 0);
	t = ct_new(return_to_parked_poll, fds[0]);
	ioh_spawn(&h, &t->base, true);
	wait_flag(&t->pending_seen);
	memset(t->big = calloc(1, 100), 'r', 100);
	assert_int_equal(send(fds[1], t->big, 100, 0), 100);
	wait_flag(&t->moved);
	end = vb_now_ns() + 5000 * MS;
	for (;;) {
		vio_stats_snapshot(h.io, ws, 2);
		if (ws[0].bufs_out + ws[1].bufs_out == 0 || vb_now_ns() > end)
			break;
		usleep(1000);
	}
	print_message("# provided buffers out: %lu + %lu (home %d)\n", (unsigned long)ws[0].bufs_out, (unsigned long)ws[1].bufs_out,
		      t->home);
	assert_int_equal(ws[0].bufs_out + ws[1].bufs_out, 0);
	vrt_task_wake(&t->base.t);
	ct_join(t);
	ct_finish(&h, t, fds[1]);
	vio__test_park_unbounded = false;
}

/* ------- a task queued behind a long poll, after a wake-up by the driver */

static _Atomic int owed_release, owed_light_ran, owed_light_on;
static struct ct *owed_light, *owed_long;

static enum vrt_poll owed_light_poll(struct ioh_task *self)
{
	(void)self;
	atomic_store(&owed_light_on, vrt_worker_id());
	atomic_store(&owed_light_ran, 1);
	return VRT_READY;
}

/* One long poll: until the test releases it (or a hang); records whether
 * the light task ran meanwhile. */
static enum vrt_poll owed_long_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	int64_t t0 = vb_now_ns();

	while (!atomic_load(&owed_release) && vb_now_ns() - t0 < 60000 * MS)
		usleep(100);
	t->res = atomic_load(&owed_light_ran);
	return VRT_READY;
}

/* Waits for one byte; then, on the worker whose driver woke it, spawns the
 * light task (it goes to the ring when the long one takes the LIFO slot)
 * and the long one. */
static enum vrt_poll owed_reader_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	enum vrt_poll p = vio_conn_recv(&t->c, t->buf, sizeof(t->buf), &t->res);

	if (p == VRT_PENDING) {
		t->home = vrt_worker_id();
		/* [F1] release: pairs with wait_flag's acquire. */
		atomic_store_explicit(&t->pending_seen, 1, memory_order_release);
		return p;
	}
	if (p == VRT_READY) {
		t->first_w = vrt_worker_id();
		TASK_CHECK(vrt_spawn_detached(vrt_current_rt(), &owed_light->base.t) == 0);
		TASK_CHECK(vrt_spawn(vrt_current_rt(), &owed_long->base.t) == 0);
		vio_conn_abandon(&t->c);
	}
	return p;
}

/*
 * Both workers asleep with no bound (vio__test_park_unbounded), no stall
 * monitor. A byte wakes the reader through its worker's driver (which
 * unparks nobody); the reader spawns a light task into that worker's ring
 * and a long one into its LIFO slot, and the long one runs in one poll.
 * The worker owes its sibling a wake-up (it left its park by its driver),
 * so the sibling, woken once, steals the light task while the long poll
 * runs; before, the light task waited for the poll's end.
 */
static void test_driver_wake_owes_a_wake(void **state)
{
	struct vrt_worker_stats ws[2];
	struct vrt_config rc;
	struct ioh h;
	struct ct *t;
	int fds[2], ran_during, light_on, home, woke_on;
	uint64_t unparks0, parks0[2], unparked;
	unsigned a;
	int64_t t0;

	(void)state;
	vio__test_park_unbounded = true;
	tcfg_rt(&rc);
	rc.stall_warn_ms = 0; /* no rescue by the stall monitor */
	ioh_start(&h, 2, NULL, &rc);
	atomic_store(&owed_release, 0);
	atomic_store(&owed_light_ran, 0);
	atomic_store(&owed_light_on, -1);
	owed_light = ct_new(owed_light_poll, -1);
	owed_long = ct_new(owed_long_poll, -1);
	assert_int_equal(ioh_tcp_pair(fds), 0);
	t = ct_new(owed_reader_poll, fds[0]);
	ioh_spawn(&h, &t->base, true);
	wait_flag(&t->pending_seen);
	/* Both asleep, and still in the same parks a moment later. */
	t0 = vb_now_ns();
	for (;;) {
		vrt_stats_snapshot(h.rt, NULL, ws, 2);
		parks0[0] = ws[0].parks;
		parks0[1] = ws[1].parks;
		if (ws[0].state == VRT_WS_PARKED && ws[1].state == VRT_WS_PARKED) {
			usleep(20000);
			vrt_stats_snapshot(h.rt, NULL, ws, 2);
			if (ws[0].state == VRT_WS_PARKED && ws[1].state == VRT_WS_PARKED &&
			    ws[0].parks == parks0[0] && ws[1].parks == parks0[1])
				break;
		}
		assert_true(vb_now_ns() - t0 < 20000 * MS);
		usleep(1000);
	}
	a = 1 - (unsigned)t->home;
	unparks0 = ws[a].unparks;
	assert_int_equal(send(fds[1], "x", 1, 0), 1);
	/* The hang guard: before the owed wake-up the light task never ran
	 * here. */
	t0 = vb_now_ns();
	while (!atomic_load(&owed_light_ran) && vb_now_ns() - t0 < 20000 * MS)
		usleep(200);
	vrt_stats_snapshot(h.rt, NULL, ws, 2);
	unparked = ws[a].unparks - unparks0;
	atomic_store(&owed_release, 1);
	vrt_task_join_wait(&owed_long->base.t);
	ct_join(t);
	ran_during = (int)owed_long->res;
	light_on = atomic_load(&owed_light_on);
	home = t->home;
	woke_on = t->first_w;
	vrt_task_unref(&owed_long->base.t);
	ct_finish(&h, t, fds[1]);
	vio__test_park_unbounded = false;
	print_message("# reader parked on worker %d, woken on %d; light task ran during the long "
		      "poll: %d, on worker %d; the sibling unparked %lu times\n", home, woke_on,
		      ran_during, light_on, (unsigned long)unparked);
	assert_int_equal(woke_on, home);
	assert_int_equal(ran_during, 1);
	assert_int_equal(light_on, (int)a);
	assert_int_equal(unparked, 1);
}

/* ------------------ many readers that stop reading: buffers and heap */

static _Atomic int stall_stop;

/* Arms one receive and never reads again; abandons when told. */
static enum vrt_poll stalled_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	enum vrt_poll p;

	if (atomic_load(&stall_stop)) {
		vio_conn_abandon(&t->c);
		return VRT_READY;
	}
	if (t->step == 0) {
		p = vio_conn_recv(&t->c, t->buf, sizeof(t->buf), &t->res);
		TASK_CHECK(p == VRT_PENDING);
		t->step = 1;
		/* [F1] release: pairs with wait_flag's acquire. */
		atomic_store_explicit(&t->pending_seen, 1, memory_order_release);
	}
	return VRT_PENDING; /* woken by every buffer; reads nothing */
}

static uint64_t bytes_in(struct ioh *h)
{
	struct vio_worker_stats ws;

	vio_stats_snapshot(h->io, &ws, 1);
	return ws.recv_bytes;
}

/*
 * Issue 17 item 4: 400 connections on one worker whose tasks stop reading
 * while their peers flood them. With a heap budget that suffices they hold
 * at most half of the worker's provided buffers (the rest are heap copies
 * charged to the budget), and a reading connection still gets every byte
 * through its multishot receive, without ENOBUFS. With a small budget the
 * heap never passes it (copies are refused, counted) and the reader still
 * gets every byte. uring only (libev has no provided buffers).
 */
static void stalled_readers(int64_t budget)
{
	enum { N = 400 };
	struct vio_worker_stats ws0, ws1;
	struct ct **t = calloc(N, sizeof(*t));
	int (*fds)[2] = calloc(N, sizeof(*fds));
	_Atomic int64_t used = 0;
	int64_t peak = 0, end;
	uint64_t last;
	struct ioh h;
	struct ct *rd;
	struct flood f;
	pthread_t th;
	int rfd[2];

	assert_non_null(t);
	assert_non_null(fds);
	atomic_store(&stall_stop, 0);
	ioh_start(&h, 1, NULL, NULL);
	if (strcmp(vio_backend_name(h.io), "uring") != 0) {
		ioh_stop(&h);
		free(t);
		free(fds);
		skip();
	}
	vio_set_heap_budget(h.io, &used, budget);
	for (int i = 0; i < N; i++) {
		assert_int_equal(ioh_tcp_pair(fds[i]), 0);
		fcntl(fds[i][1], F_SETFL, fcntl(fds[i][1], F_GETFL) | O_NONBLOCK);
		t[i] = ct_new(stalled_poll, fds[i][0]);
		ioh_spawn(&h, &t[i]->base, true);
	}
	for (int i = 0; i < N; i++)
		wait_flag(&t[i]->pending_seen);
	/* Flood: every peer sends until its socket buffers are full. */
	{
		static char junk[65536];

		for (int round = 0; round < 4; round++)
			for (int i = 0; i < N; i++)
				while (send(fds[i][1], junk, sizeof(junk), MSG_NOSIGNAL) > 0)
					if (used > peak)
						peak = used;
	}
	/* Settled: no byte arrived for 100 ms (at most 20 s). */
	end = vb_now_ns() + 20000 * MS;
	do {
		last = bytes_in(&h);
		usleep(100 * 1000);
		if (atomic_load(&used) > peak)
			peak = atomic_load(&used);
	} while (bytes_in(&h) != last && vb_now_ns() < end);
	vio_stats_snapshot(h.io, &ws0, 1);
	print_message("# %d stalled readers, budget %ld: bufs_out %lu of 256, heap %ld (peak %ld), "
		      "copies %lu, refused %lu, enobufs %lu\n", N, (long)budget,
		      (unsigned long)ws0.bufs_out, (long)atomic_load(&used), (long)peak,
		      (unsigned long)ws0.rx_copies, (unsigned long)ws0.rx_copy_refused,
		      (unsigned long)ws0.recv_enobufs);
	assert_true(peak <= budget);
	assert_true(ws0.rx_copies > 0);
	if (budget >= (1ll << 30))
		assert_true(ws0.bufs_out <= 128); /* half of the ring */
	else
		assert_true(ws0.rx_copy_refused > 0);

	/* A reader on the same worker gets every byte. */
	assert_int_equal(ioh_tcp_pair(rfd), 0);
	rd = ct_new(slow_reader_poll, rfd[0]);
	rd->big = malloc(16u << 20);
	rd->t0 = vb_now_ns();
	f.fd = rfd[1];
	f.len = 4u << 20;
	pthread_create(&th, NULL, flood_main, &f);
	ioh_spawn(&h, &rd->base, true);
	ct_join(rd);
	pthread_join(th, NULL);
	assert_int_equal(rd->len, f.len);
	for (size_t i = 0; i < f.len; i++)
		if (rd->big[i] != (char)(i * 13 + (i >> 16)))
			fail_msg("byte %zu differs", i);
	vio_stats_snapshot(h.io, &ws1, 1);
	print_message("# the reader: enobufs +%lu, plain receives +%lu\n",
		      (unsigned long)(ws1.recv_enobufs - ws0.recv_enobufs),
		      (unsigned long)(ws1.recv_plain - ws0.recv_plain));
	if (budget >= (1ll << 30))
		assert_int_equal(ws1.recv_enobufs, ws0.recv_enobufs);
	assert_true(atomic_load(&used) <= budget);
	vrt_task_unref(&rd->base.t);
	close(rfd[1]);

	atomic_store(&stall_stop, 1);
	for (int i = 0; i < N; i++) {
		vrt_task_wake(&t[i]->base.t);
		ct_join(t[i]);
		vrt_task_unref(&t[i]->base.t);
		close(fds[i][1]);
	}
	ioh_stop(&h);
	assert_int_equal(atomic_load(&used), 0); /* every copy was freed and uncharged */
	free(t);
	free(fds);
}

static void test_stalled_readers_bounded(void **state)
{
	(void)state;
	stalled_readers(1ll << 30);
}

static void test_stalled_readers_small_budget(void **state)
{
	(void)state;
	stalled_readers(4ll << 20);
}

/* ------------------------------------------- registered (fixed) files */

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), m = strlen(tail);

	return n >= m && strcmp(s + n - m, tail) == 0;
}

/* Does h's backend use registered files? Checks that the reason says what
 * was asked: io_uring with io.fixed_files on names them (or the kernel
 * feature it lacks), off says off; libev says nothing of them. */
static bool fixed_in_use(struct ioh *h, bool asked)
{
	const char *why = vio_backend_reason(h->io);
	bool on = ends_with(why, "; fixed files");

	fprintf(stderr, "# fixed files %s: %s\n", on ? "in use" : "not in use", why);
	if (strcmp(vio_backend_name(h->io), "uring") != 0) {
		assert_null(strstr(why, "fixed files"));
		return false;
	}
	if (!asked || !ioh_fixed_files_allowed())
		assert_true(ends_with(why, "; fixed files off"));
	else
		assert_true(on || strstr(why, "; no fixed files (kernel lacks "));
	return on;
}

static void fixed_stats(struct ioh *h, struct vio_worker_stats st[2])
{
	memset(st, 0, 2 * sizeof(*st));
	vio_stats_snapshot(h->io, st, h->workers);
}

static struct vio_config fixed_cfg(bool fixed, bool multishot)
{
	struct vio_config c;

	tcfg_io(&c);
	c.backend = ioh_backend();
	c.fixed_files = fixed;
	c.recv_multishot = multishot;
	return c;
}

/* Echo one message, close. */
static enum vrt_poll fixed_echo_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	enum vrt_poll p;

	for (;;) {
		switch (t->step) {
		case 0:
			p = vio_conn_recv(&t->c, t->buf, sizeof(t->buf), &t->res);
			if (p != VRT_READY)
				return p;
			TASK_CHECK(t->res > 0);
			t->len = (size_t)t->res;
			t->step = 1;
			break;
		case 1:
			p = vio_conn_send(&t->c, t->buf, t->len, &t->res);
			if (p != VRT_READY)
				return p;
			TASK_CHECK(t->res == (ssize_t)t->len);
			t->step = 2;
			break;
		default:
			return vio_conn_close(&t->c, &t->close_res);
		}
	}
}

static void echo_once(int peer, const char *msg)
{
	char got[64];
	size_t n = strlen(msg), have = 0;

	assert_int_equal(send(peer, msg, n, 0), (ssize_t)n);
	while (have < n) {
		ssize_t r = recv(peer, got + have, sizeof(got) - have, 0);

		assert_true(r > 0);
		have += (size_t)r;
	}
	assert_memory_equal(got, msg, n);
}

/* On one worker: with io.fixed_files on (io_uring), the multishot receive
 * and the send go through the registered-file table (fixed_ops), the
 * descriptor was installed once, and the close clears its slot first: the
 * peer sees EOF (a slot left set would hold the socket open). Off (or
 * libev): nothing uses the table, the same echo and EOF. */
static void fixed_echo(bool fixed)
{
	struct vio_config c = fixed_cfg(fixed, true);
	struct vio_worker_stats st[2];
	struct ioh h;
	int fds[2];
	struct ct *t;
	bool on;

	ioh_start(&h, 1, &c, NULL);
	on = fixed_in_use(&h, fixed);
	assert_int_equal(ioh_tcp_pair(fds), 0);
	t = ct_new(fixed_echo_poll, fds[0]);
	ioh_spawn(&h, &t->base, true);
	echo_once(fds[1], "fixed");
	ct_join(t);
	assert_int_equal(t->close_res, 0);
	assert_int_equal(drain_to_eof(fds[1], 2000), 0);
	fixed_stats(&h, st);
	fprintf(stderr, "# fixed_installs %" PRIu64 ", fixed_ops %" PRIu64 "\n",
		st[0].fixed_installs, st[0].fixed_ops);
	if (on) {
		assert_int_equal(st[0].fixed_installs, 1);
		assert_true(st[0].fixed_ops >= 2); /* the receive, the send */
	} else {
		assert_int_equal(st[0].fixed_installs, 0);
		assert_int_equal(st[0].fixed_ops, 0);
	}
	assert_int_equal(st[0].fixed_update_errors, 0);
	assert_int_equal(st[0].fixed_remote_closes, 0);
	ct_finish(&h, t, fds[1]);
}

static void test_fixed_files_used(void **state)
{
	(void)state;
	fixed_echo(true);
}

static void test_fixed_files_off(void **state)
{
	(void)state;
	fixed_echo(false);
}

/*
 * A connection whose task leaves the worker of its first operation (the
 * worker whose table holds its descriptor) still works: it echoes twice,
 * the second time on another worker, whose receive and send use the
 * regular descriptor; then it ends there (close, or abandon): the peer sees
 * EOF, and the first worker clears the slot and closes the socket for it.
 * Plain receives, so that nothing stays in flight on the first worker and
 * the end runs on the other one.
 */
static enum vrt_poll fixed_steal_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	struct ioh_leave *l;
	enum vrt_poll p;

	for (;;) {
		switch (t->step) {
		case 0: /* receive (on the first worker, then on another) */
		case 3:
			if (t->step == 0 && t->first_w < 0)
				t->first_w = vrt_worker_id();
			p = vio_conn_recv(&t->c, t->buf, sizeof(t->buf), &t->res);
			if (p != VRT_READY)
				return p;
			TASK_CHECK(t->res > 0);
			t->len = (size_t)t->res;
			t->step++;
			break;
		case 1: /* echo */
		case 4:
			p = vio_conn_send(&t->c, t->buf, t->len, &t->res);
			if (p != VRT_READY)
				return p;
			TASK_CHECK(t->res == (ssize_t)t->len);
			t->step++;
			break;
		case 2: /* leave the first worker */
		case 5:
			l = t->step == 2 ? &t->leave : &t->leave2;
			/* Once started, a move goes on until it says READY (its
			 * helper waits for that), wherever the task runs. */
			if (l->state != 0 || vrt_worker_id() == t->first_w) {
				p = ioh_leave_worker(&t->base, l);
				if (p != VRT_READY)
					return p;
			}
			atomic_fetch_add_explicit(&t->moved, 1, memory_order_relaxed); /* read after the join */
			t->step++;
			break;
		default: /* end, not on the first worker */
			TASK_CHECK(vrt_worker_id() != t->first_w);
			if (t->abandon) {
				vio_conn_abandon(&t->c);
				return VRT_READY;
			}
			return vio_conn_close(&t->c, &t->close_res);
		}
	}
}

static void fixed_steal(bool fixed, bool abandon)
{
	struct vio_config c = fixed_cfg(fixed, false);
	struct vio_worker_stats st[2];
	struct ioh h;
	int fds[2], fw;
	ssize_t eof;
	struct ct *t;
	bool on;

	ioh_start(&h, 2, &c, NULL);
	on = fixed_in_use(&h, fixed);
	assert_int_equal(ioh_tcp_pair(fds), 0);
	t = ct_new(fixed_steal_poll, fds[0]);
	t->first_w = -1;
	t->abandon = abandon;
	ioh_spawn(&h, &t->base, true);
	echo_once(fds[1], "first");
	echo_once(fds[1], "second");
	ct_join(t);
	assert_int_equal(t->close_res, 0);
	eof = drain_to_eof(fds[1], 2000);
	assert_int_equal(atomic_load_explicit(&t->moved, memory_order_relaxed), 2);
	fw = t->first_w;
	assert_true(fw == 0 || fw == 1);
	/* The closer shut the socket down, so the EOF may come before the
	 * first worker ran its mailbox: wait for that (a hang guard). */
	for (int64_t t0 = vb_now_ns();; usleep(1000)) {
		fixed_stats(&h, st);
		if (!on || st[fw].fixed_remote_closes != 0)
			break;
		assert_true(vb_now_ns() - t0 < 20000 * MS);
	}
	fprintf(stderr, "# first worker %d: fixed_installs %" PRIu64 " %" PRIu64
		", fixed_ops %" PRIu64 " %" PRIu64 ", fixed_remote_closes %" PRIu64 " %" PRIu64 "\n",
		fw, st[0].fixed_installs, st[1].fixed_installs, st[0].fixed_ops, st[1].fixed_ops,
		st[0].fixed_remote_closes, st[1].fixed_remote_closes);
	/* The other worker never uses the table, whatever ran there. */
	assert_int_equal(st[1 - fw].fixed_installs, 0);
	assert_int_equal(st[1 - fw].fixed_ops, 0);
	assert_int_equal(st[1 - fw].fixed_remote_closes, 0);
	assert_true(st[1 - fw].submitted + st[1 - fw].immediate > 0);
	if (on) {
		assert_int_equal(st[fw].fixed_installs, 1);
		assert_true(st[fw].fixed_ops >= 1); /* at least the first receive */
		assert_int_equal(st[fw].fixed_remote_closes, 1);
	} else {
		assert_int_equal(st[fw].fixed_installs, 0);
		assert_int_equal(st[fw].fixed_ops, 0);
		assert_int_equal(st[fw].fixed_remote_closes, 0);
	}
	assert_int_equal(st[0].fixed_update_errors + st[1].fixed_update_errors, 0);
	assert_int_equal(eof, 0);
	ct_finish(&h, t, fds[1]);
}

static void test_fixed_files_stolen_close(void **state)
{
	(void)state;
	fixed_steal(true, false);
}

static void test_fixed_files_stolen_abandon(void **state)
{
	(void)state;
	fixed_steal(true, true);
}

static void test_fixed_files_off_stolen(void **state)
{
	(void)state;
	fixed_steal(false, false);
}

/* ------------------------------------- a receive with a lent buffer */

#define LENT_LEN 64

/*
 * vio_conn_recv_lent's buffer is the caller's for the call only: each call
 * here gets a fresh heap buffer, poisoned and freed as soon as the call
 * says it waits, so a receive that wrote into it later would be a
 * use-after-free (the ASan build runs this too) and its bytes would be
 * lost. The task reads until the end of the stream; every byte must come
 * through the buffer of the call that returned it.
 */
static enum vrt_poll lent_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;

	while (t->step == 0) {
		char *b = malloc(LENT_LEN);
		enum vrt_poll p;

		TASK_CHECK(b != NULL);
		p = vio_conn_recv_lent(&t->c, b, LENT_LEN, &t->res);
		if (p != VRT_READY) {
			memset(b, 'X', LENT_LEN);
			free(b);
			if (p == VRT_PENDING)
				/* Release: pairs with wait_flag's acquire [F1]. */
				atomic_store_explicit(&t->pending_seen, 1, memory_order_release);
			return p;
		}
		if (t->res > 0) {
			TASK_CHECK(t->len + (size_t)t->res <= sizeof(t->buf));
			memcpy(t->buf + t->len, b, (size_t)t->res);
			t->len += (size_t)t->res;
		} else {
			t->step = 1; /* the end (0), or an error */
		}
		free(b);
	}
	return vio_conn_close(&t->c, &t->close_res);
}

static void lent_case(bool multishot)
{
	static const char *const parts[] = { "hello ", "lent ", "world" };
	struct vio_config vc = fixed_cfg(true, multishot);
	struct vio_worker_stats st[2];
	struct ioh h;
	int fds[2];
	struct ct *t;

	ioh_start(&h, 2, &vc, NULL);
	assert_int_equal(ioh_tcp_pair(fds), 0);
	t = ct_new(lent_poll, fds[0]);
	ioh_spawn(&h, &t->base, true);
	for (unsigned i = 0; i < 3; i++) {
		/* Each part finds the task waiting (the first surely; the
		 * others most likely), then arrives. */
		wait_flag(&t->pending_seen);
		atomic_store_explicit(&t->pending_seen, 0, memory_order_relaxed);
		assert_int_equal(send(fds[1], parts[i], strlen(parts[i]), 0), (ssize_t)strlen(parts[i]));
		usleep(20000);
	}
	shutdown(fds[1], SHUT_WR);
	ct_join(t);
	assert_int_equal(t->res, 0);
	assert_int_equal(t->len, strlen("hello lent world"));
	assert_memory_equal(t->buf, "hello lent world", t->len);
	assert_int_equal(t->close_res, 0);
	memset(st, 0, sizeof(st));
	vio_stats_snapshot(h.io, st, 2);
	if (strcmp(vio_backend_name(h.io), "uring") == 0 && multishot)
		assert_true(st[0].recv_multishot_arms + st[1].recv_multishot_arms >= 1);
	else
		assert_true(st[0].recv_plain + st[1].recv_plain >= 3);
	ct_finish(&h, t, fds[1]);
}

static void test_recv_lent(void **state)
{
	(void)state;
	lent_case(true);
}

static void test_recv_lent_plain(void **state)
{
	(void)state;
	lent_case(false);
}

/* A lent receive's wait ends at the connection's deadline. */
static enum vrt_poll lent_deadline_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	char b[LENT_LEN];
	enum vrt_poll p;

	if (t->step == 0) {
		t->t0 = vb_now_ns();
		TASK_CHECK(vio_conn_set_deadline(&t->c, &t->dl, t->t0 + 50 * MS) == 0);
		t->step = 1;
	}
	if (t->step == 1) {
		p = vio_conn_recv_lent(&t->c, b, sizeof(b), &t->res);
		if (p != VRT_READY)
			return p;
		t->t1 = vb_now_ns();
		t->step = 2;
	}
	return vio_conn_close(&t->c, &t->close_res);
}

static void test_recv_lent_deadline(void **state)
{
	(void)state;
	for (int multishot = 1; multishot >= 0; multishot--) {
		struct vio_config vc = fixed_cfg(true, multishot);
		struct ioh h;
		int fds[2];
		struct ct *t;

		ioh_start(&h, 2, &vc, NULL);
		assert_int_equal(ioh_tcp_pair(fds), 0);
		t = ct_new(lent_deadline_poll, fds[0]);
		ioh_spawn(&h, &t->base, true);
		ct_join(t);
		assert_int_equal(t->res, -ETIMEDOUT);
		assert_true(t->t1 - t->t0 >= 50 * MS);
		assert_int_equal(t->close_res, 0);
		assert_int_equal(drain_to_eof(fds[1], 2000), 0);
		ct_finish(&h, t, fds[1]);
	}
}

/*
 * A close (or abandon) on another worker while the worker whose table
 * holds the descriptor is inside one long poll: the peer sees EOF during
 * that poll, not when it ends. The owner runs its mailbox (which clears
 * the slot and closes the descriptor) only between polls; the socket is
 * shut down by the closer. The hog holds the owner until the test
 * releases it, for longer than the test waits for EOF (a hang guard, not
 * a bound): the order is what is asserted. Plain receives, so nothing
 * stays in flight on the owner. Both backends (libev and fixed files off
 * close at once anyway).
 */
#define HOG_GUARD_NS (30000 * MS)
#define EOF_GUARD_MS 20000
static _Atomic int hog_running, hog_release, hog_done;

static enum vrt_poll hog_poll(struct ioh_task *self)
{
	int64_t t0 = vb_now_ns();

	(void)self;
	/* release: pairs with the closer's acquire load below. */
	atomic_store_explicit(&hog_running, 1, memory_order_release);
	while (!atomic_load_explicit(&hog_release, memory_order_relaxed) &&
	       vb_now_ns() - t0 < HOG_GUARD_NS)
		usleep(200);
	/* relaxed: read by the test thread as a flag, nothing published. */
	atomic_store_explicit(&hog_done, 1, memory_order_relaxed);
	return VRT_READY;
}

static enum vrt_poll close_behind_hog_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	struct ioh_task *hog;
	enum vrt_poll p;
	int64_t t0;

	for (;;) {
		switch (t->step) {
		case 0: /* the receive installs the descriptor on this worker */
			if (t->first_w < 0)
				t->first_w = vrt_worker_id();
			p = vio_conn_recv(&t->c, t->buf, sizeof(t->buf), &t->res);
			if (p != VRT_READY)
				return p;
			TASK_CHECK(t->res > 0);
			t->step = 1;
			break;
		case 1: /* the hog into this worker's LIFO slot, us to its ring */
			hog = ioh_task_new(sizeof(*hog), hog_poll, NULL);
			TASK_CHECK(vrt_spawn_detached(vrt_current_rt(), &hog->t) == 0);
			t->step = 2;
			vrt_task_wake(&self->t);
			return VRT_PENDING;
		default: /* stolen: end here while the hog holds the owner */
			if (vrt_worker_id() == t->first_w) {
				vrt_task_wake(&self->t); /* the hog first */
				return VRT_PENDING;
			}
			t0 = vb_now_ns();
			/* acquire: pairs with the hog's release store. */
			while (!atomic_load_explicit(&hog_running, memory_order_acquire))
				TASK_CHECK(vb_now_ns() - t0 < HOG_GUARD_NS);
			if (t->abandon) {
				vio_conn_abandon(&t->c);
				return VRT_READY;
			}
			return vio_conn_close(&t->c, &t->close_res);
		}
	}
}

static void close_behind_hog(bool abandon)
{
	struct vio_config c = fixed_cfg(true, false);
	struct vio_worker_stats st[2];
	struct ioh h;
	int fds[2], fw, during;
	int64_t t0, t1;
	ssize_t eof;
	struct ct *t;
	bool on;

	atomic_store(&hog_running, 0);
	atomic_store(&hog_release, 0);
	atomic_store(&hog_done, 0);
	ioh_start(&h, 2, &c, NULL);
	on = fixed_in_use(&h, true);
	assert_int_equal(ioh_tcp_pair(fds), 0);
	t = ct_new(close_behind_hog_poll, fds[0]);
	t->first_w = -1;
	t->abandon = abandon;
	ioh_spawn(&h, &t->base, true);
	assert_int_equal(send(fds[1], "x", 1, 0), 1);
	ct_join(t);
	t0 = vb_now_ns();
	eof = drain_to_eof(fds[1], EOF_GUARD_MS);
	t1 = vb_now_ns();
	/* relaxed: a flag; the hog ends only when released or after the
	 * guard, which is longer than the EOF wait. */
	during = !atomic_load_explicit(&hog_done, memory_order_relaxed);
	fw = t->first_w;
	assert_true(fw == 0 || fw == 1);
	fixed_stats(&h, st);
	atomic_store(&hog_release, 1);
	print_message("# EOF %zd after %.3f ms, the owner's poll still running: %d; "
		      "fixed_remote_closes on the owner then %" PRIu64 "\n",
		      eof, (double)(t1 - t0) / 1e6, during, st[fw].fixed_remote_closes);
	print_message("bound: test_io_conn remote_close_eof_ms %.3f < 1\n",
		      (double)(t1 - t0) / 1e6);
	assert_int_equal(eof, 0);
	assert_true(during);
	if (!abandon)
		assert_int_equal(t->close_res, 0);
	/* The owner had not run its mailbox: the EOF came from the closer. */
	assert_int_equal(st[fw].fixed_remote_closes, 0);
	/* Once the hog ends, the owner still clears the slot and closes. */
	t0 = vb_now_ns();
	do {
		assert_true(vb_now_ns() - t0 < HOG_GUARD_NS);
		usleep(1000);
		fixed_stats(&h, st);
	} while (on && st[fw].fixed_remote_closes != 1);
	assert_int_equal(st[0].fixed_update_errors + st[1].fixed_update_errors, 0);
	ct_finish(&h, t, fds[1]);
}

static void test_remote_close_behind_long_poll(void **state)
{
	(void)state;
	close_behind_hog(false);
}

static void test_remote_abandon_behind_long_poll(void **state)
{
	(void)state;
	close_behind_hog(true);
}

/*
 * Waits that ended leave no registration behind. A connection's receive
 * waits on one worker, then (the task moved) on the other, each ended by
 * its bytes; then no epoll set in the process is armed for the descriptor
 * (/proc/self/fdinfo), so no worker's loop can touch its number once the
 * task closes it there and another socket takes the number. libev removes
 * a stopped watcher's registration lazily (at the next event for it, with
 * epoll_ctl, or never: the close drops it), so the worker whose loop still
 * held it ran epoll_ctl on a descriptor another worker was closing, or
 * had closed (ThreadSanitizer: close racing epoll_ctl; epoll_ctl failed
 * with EBADF or ENOENT and libev rebuilt that worker's whole epoll set).
 * Then a new socket on the same number waits on both workers in turn and
 * gets its own bytes. Plain receives (a multishot would stay in flight on
 * the first worker). io_uring keeps no epoll set: the same echoes.
 */
static enum vrt_poll two_waits_poll(struct ioh_task *self)
{
	struct ct *t = (struct ct *)self;
	struct ioh_leave *l;
	enum vrt_poll p;

	for (;;) {
		switch (t->step) {
		case 0: /* a receive that waits, on the first worker... */
		case 2: /* ... and one on the other */
			if (t->step == 2 && !t->waited && vrt_worker_id() == t->first_w) {
				/* Back on the first worker before the receive
				 * began (a yield): leave again, once. */
				TASK_CHECK(t->leave2.state == 0);
				t->step = 1;
				break;
			}
			p = vio_conn_recv(&t->c, t->buf, sizeof(t->buf), &t->res);
			if (p == VRT_PENDING && !t->waited) {
				t->waited = true;
				/* This worker owns the wait. */
				*(t->step == 0 ? &t->first_w : &t->second_w) = vrt_worker_id();
				/* release: pairs with the test thread's acquire. */
				atomic_fetch_add_explicit(&t->waits, 1, memory_order_release);
			}
			if (p != VRT_READY)
				return p;
			TASK_CHECK(t->res == 1 && t->waited);
			t->got[t->step / 2] = t->buf[0];
			t->waited = false;
			t->step++;
			break;
		case 1: /* leave the first worker */
			l = t->leave.state == 0 || atomic_load_explicit(&t->leave.moved,
					memory_order_relaxed) == 0 ? &t->leave : &t->leave2;
			if (l->state != 0 || vrt_worker_id() == t->first_w) {
				p = ioh_leave_worker(&t->base, l);
				if (p != VRT_READY)
					return p;
			}
			t->step = 2;
			break;
		case 3: /* both waits ended: the test thread looks, then lets us close */
			t->step = 4;
			/* release: pairs with the test thread's acquire. */
			atomic_store_explicit(&t->parked, 1, memory_order_release);
			return VRT_PENDING;
		default:
			/* acquire: pairs with the test thread's release. */
			if (!atomic_load_explicit(&t->go, memory_order_acquire))
				return VRT_PENDING;
			return vio_conn_close(&t->c, &t->close_res);
		}
	}
}

/* How many epoll sets of this process are armed for descriptor fd (any
 * of IN, OUT, ERR, HUP; a one-shot registration that fired is not). */
static unsigned epoll_sets_arming(int fd)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	unsigned n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL) {
		char path[300], link[64], line[256];
		ssize_t len;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		if (len < 0)
			continue;
		link[len] = '\0';
		if (strcmp(link, "anon_inode:[eventpoll]") != 0)
			continue;
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%s", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			int tfd;
			unsigned ev;

			if (sscanf(line, "tfd: %d events: %x", &tfd, &ev) == 2 && tfd == fd &&
			    (ev & (EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP))) {
				print_message("# epoll set %s is armed for fd %d: events %x\n",
					      e->d_name, fd, ev);
				n++;
			}
		}
		fclose(f);
	}
	closedir(d);
	return n;
}

static void wait_count(_Atomic int *c, int n)
{
	/* acquire: pairs with the task's release add. */
	while (atomic_load_explicit(c, memory_order_acquire) < n)
		usleep(200);
}

/* One connection on descriptor fd through two_waits_poll: the bytes a and
 * b, each sent once its receive waits; returns the task, closed. */
static struct ct *two_waits(struct ioh *h, int fd, int peer, char a, char b)
{
	struct ct *t = ct_new(two_waits_poll, fd);
	unsigned armed;

	t->first_w = t->second_w = -1;
	ioh_spawn(h, &t->base, true);
	wait_count(&t->waits, 1);
	assert_int_equal(send(peer, &a, 1, 0), 1);
	wait_count(&t->waits, 2);
	assert_int_equal(send(peer, &b, 1, 0), 1);
	wait_flag(&t->parked);
	armed = epoll_sets_arming(fd);
	/* release: pairs with the task's acquire. */
	atomic_store_explicit(&t->go, 1, memory_order_release);
	vrt_task_wake(&t->base.t);
	ct_join(t);
	print_message("# fd %d: waits on workers %d and %d; epoll sets armed for it after: %u\n",
		      fd, t->first_w, t->second_w, armed);
	assert_true(t->first_w >= 0 && t->second_w >= 0 && t->first_w != t->second_w);
	assert_int_equal(t->got[0], a);
	assert_int_equal(t->got[1], b);
	assert_int_equal(armed, 0);
	assert_int_equal(t->close_res, 0);
	assert_int_equal(drain_to_eof(peer, 2000), 0);
	return t;
}

static void test_ended_waits_leave_no_registration(void **state)
{
	struct vio_config c = fixed_cfg(true, false);
	struct ioh h;
	int fds[2], again[2], n;
	struct ct *t, *t2;

	(void)state;
	ioh_start(&h, 2, &c, NULL);
	assert_int_equal(ioh_tcp_pair(fds), 0);
	n = fds[0];
	t = two_waits(&h, n, fds[1], 'a', 'b');
	/* A new connection on the number the task closed (with registered
	 * files the worker whose table held it closes it soon after). */
	for (int64_t t0 = vb_now_ns(); fcntl(n, F_GETFD) >= 0; usleep(1000))
		assert_true(vb_now_ns() - t0 < 20000 * MS);
	assert_int_equal(ioh_tcp_pair(again), 0);
	if (again[0] != n) {
		if (again[1] == n) { /* the client took it: move it away */
			again[1] = fcntl(n, F_DUPFD_CLOEXEC, n + 1);
			assert_true(again[1] > n);
			close(n);
		}
		assert_int_equal(dup3(again[0], n, O_CLOEXEC), n);
		close(again[0]);
	}
	t2 = two_waits(&h, n, again[1], 'c', 'd');
	vrt_task_unref(&t2->base.t);
	close(again[1]);
	ct_finish(&h, t, fds[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_recv_deadline),
		cmocka_unit_test(test_cancel_reading_task),
		cmocka_unit_test(test_remote_cancel_recv),
		cmocka_unit_test(test_remote_cancel_send),
		cmocka_unit_test(test_send_deadline_partial),
		cmocka_unit_test(test_tx_lent_only_while_sending),
		cmocka_unit_test(test_sendv_header_body),
		cmocka_unit_test(test_quiet_send),
		cmocka_unit_test(test_half_close),
		cmocka_unit_test(test_reset),
		cmocka_unit_test(test_close_with_recv_pending),
		cmocka_unit_test(test_close_collects_quiet_send),
		cmocka_unit_test(test_abandon_during_close),
		cmocka_unit_test(test_send_while_busy),
		cmocka_unit_test(test_reaped_by_slice_time),
		cmocka_unit_test(test_buf_return_to_parked_owner),
		cmocka_unit_test(test_driver_wake_owes_a_wake),
		cmocka_unit_test(test_stalled_readers_bounded),
		cmocka_unit_test(test_stalled_readers_small_budget),
		cmocka_unit_test(test_stalled_reader),
		cmocka_unit_test(test_fixed_files_used),
		cmocka_unit_test(test_fixed_files_off),
		cmocka_unit_test(test_fixed_files_stolen_close),
		cmocka_unit_test(test_fixed_files_stolen_abandon),
		cmocka_unit_test(test_fixed_files_off_stolen),
		cmocka_unit_test(test_recv_lent),
		cmocka_unit_test(test_recv_lent_plain),
		cmocka_unit_test(test_recv_lent_deadline),
		cmocka_unit_test(test_remote_close_behind_long_poll),
		cmocka_unit_test(test_remote_abandon_behind_long_poll),
		cmocka_unit_test(test_ended_waits_leave_no_registration),
	};

	ioh_watchdog(ioh_under_tsan() ? 300 : 60, "test_io_conn");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
