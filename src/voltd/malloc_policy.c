/* SPDX-License-Identifier: MIT */
/*
 * voltd/malloc_policy.c: see malloc_policy.h. Once a second, on the main thread, the
 * free pages of malloc's arenas go back to the system (malloc_trim) when
 * the server freed something since the last look (connections closed,
 * responses sent): after a burst of slow clients leaves, RSS goes back to
 * its baseline, and an idle daemon trims nothing.
 */
#include "config.h"
#include "voltd/malloc_policy.h"
#include "base/time.h"
#include "server/server.h"

#include <malloc.h>

#define TRIM_PERIOD_NS (1000 * VB_NS_PER_MS)

void vd_mem_policy(void)
{
	/* Setting the threshold also stops glibc from raising it after each
	 * large free (its dynamic threshold kept 146 MB of freed 1 MiB
	 * bodies after 200 slow clients left). */
	mallopt(M_MMAP_THRESHOLD, 64 * 1024);
	mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
}

void vd_mem_trim(struct vd_trim *t, struct vsrv *srv, int64_t now_ns)
{
	if (now_ns < t->next_ns)
		return;
	t->next_ns = now_ns + TRIM_PERIOD_NS;
	uint64_t mark = vsrv_freed_mark(srv);
	if (mark == t->mark)
		return;
	t->mark = mark;
	malloc_trim(0);
}
