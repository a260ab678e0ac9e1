/* SPDX-License-Identifier: MIT */
/*
 * tests/helpers/malloc_count.c: an LD_PRELOAD interposer that counts heap
 * allocations (malloc, calloc, realloc, the aligned kinds) of the process
 * it is loaded into, for tests that assert how many a request costs
 * (tests/integration/test_alloc.py). The counts live in a file
 * (VOLTD_MALLOC_COUNT=PATH, created by the test, at least 4096 bytes)
 * mapped shared, so the test reads them at any moment without a word to
 * the process: its first 64-bit word counts every allocation. The real
 * allocator is glibc's (__libc_* entry points, so no dlsym
 * bootstrap). Allocations before the constructor ran are not counted.
 *
 * Threading: any thread; relaxed fetch_add: a count read by another
 * process, nothing is published through it.
 */
#include <fcntl.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);

static _Atomic uint64_t *counts;

__attribute__((constructor)) static void count_init(void)
{
	const char *path = getenv("VOLTD_MALLOC_COUNT");
	int fd;
	void *m;

	if (!path || (fd = open(path, O_RDWR | O_CLOEXEC)) < 0)
		return;
	m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m != MAP_FAILED)
		counts = m;
}

static void count(void)
{
	/* Relaxed: a statistic read by another process. */
	if (counts)
		atomic_fetch_add_explicit(&counts[0], 1, memory_order_relaxed);
}

void *malloc(size_t n)
{
	count();
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
	count();
	return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
	count();
	return __libc_realloc(p, n);
}

void *memalign(size_t align, size_t n)
{
	count();
	return __libc_memalign(align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
	count();
	return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
	void *p;

	count();
	if (align < sizeof(void *) || (align & (align - 1)))
		return 22; /* EINVAL */
	p = __libc_memalign(align, n);
	if (!p && n)
		return 12; /* ENOMEM */
	*out = p;
	return 0;
}
