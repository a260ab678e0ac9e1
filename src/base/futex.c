/* SPDX-License-Identifier: MIT */
/*
 * base/futex.c: futex(2) wrappers and the thread event.
 *
 * Ordering:
 *   vb_event.state: written by the setter (exchange to 1) and the waiter
 *   (exchange to 0, CAS 0->2).
 *   [E1] set's exchange is release: the setter's earlier writes are visible to
 *        the waiter whose acquire exchange [E2] consumes the 1.
 */
#include "base/futex.h"
#include "base/time.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int vb_futex_wait(_Atomic uint32_t *word, uint32_t expected, int64_t timeout_ns)
{
	struct timespec ts, *tp = NULL;

	if (timeout_ns >= 0) {
		ts.tv_sec = timeout_ns / 1000000000;
		ts.tv_nsec = timeout_ns % 1000000000;
		tp = &ts;
	}
	if (syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, tp, NULL, 0) == 0)
		return 0;
	if (errno == EAGAIN)
		return 0;
	return -errno;
}

int vb_futex_wake(_Atomic uint32_t *word, int n)
{
	long r = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
	return r < 0 ? -errno : (int)r;
}

void vb_event_set(struct vb_event *e)
{
	/* [E1] release: publishes the setter's writes; pairs with [E2]. */
	if (atomic_exchange_explicit(&e->state, 1, memory_order_release) == 2)
		vb_futex_wake(&e->state, 1);
}

int vb_event_wait(struct vb_event *e, int64_t timeout_ns)
{
	int64_t deadline = timeout_ns < 0 ? -1 : vb_now_ns() + timeout_ns;

	for (;;) {
		uint32_t zero = 0;
		/* [E2] acquire: consumes a set and sees what [E1] published. */
		if (atomic_exchange_explicit(&e->state, 0, memory_order_acquire) == 1)
			return 0;
		/* Announce the sleeper; relaxed: the futex syscall re-reads the
		 * word under the kernel's lock, and [E2] above gives ordering. */
		if (!atomic_compare_exchange_strong_explicit(&e->state, &zero, 2,
				memory_order_relaxed, memory_order_relaxed) && zero == 1)
			continue;
		int64_t left = -1;
		if (deadline >= 0) {
			left = deadline - vb_now_ns();
			if (left <= 0) {
				/* Take back the sleeper mark unless a set raced in. [E2] pairs with [E1]. */
				if (atomic_exchange_explicit(&e->state, 0, memory_order_acquire) == 1)
					return 0;
				return -ETIMEDOUT;
			}
		}
		vb_futex_wait(&e->state, 2, left);
	}
}
