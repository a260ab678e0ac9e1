/* SPDX-License-Identifier: MIT */
/*
 * base/futex.h: thin wrappers over futex(2) on a 32-bit atomic word, private
 * to the process, and a one-shot event built on it for plain threads.
 * Any thread may wait or wake; wait can return spuriously (callers loop).
 */
#ifndef VOLTD_BASE_FUTEX_H
#define VOLTD_BASE_FUTEX_H

#include <stdatomic.h>
#include <stdint.h>

/* Sleep while *word == expected, at most timeout_ns (< 0: no limit).
 * Returns 0 when woken or the value differed, -ETIMEDOUT, or -EINTR. */
int vb_futex_wait(_Atomic uint32_t *word, uint32_t expected, int64_t timeout_ns);
/* Wake up to n waiters of word; returns how many were woken. */
int vb_futex_wake(_Atomic uint32_t *word, int n);

/*
 * struct vb_event: a binary event for threads. set() from any thread; wait()
 * blocks until set, then consumes it (auto-reset). One waiter at a time.
 * Fields private; exposed for embedding.
 */
struct vb_event {
	_Atomic uint32_t state; /* 0 clear, 1 set, 2 clear with a waiter asleep */
};

static inline void vb_event_init(struct vb_event *e)
{
	atomic_init(&e->state, 0);
}
void vb_event_set(struct vb_event *e);
/* Returns 0 when the event was set, -ETIMEDOUT after timeout_ns (< 0: none). */
int vb_event_wait(struct vb_event *e, int64_t timeout_ns);

#endif
