/* SPDX-License-Identifier: MIT */
/*
 * base/compiler.h: small compiler helpers shared by every layer: cache-line
 * size and padding, branch hints, container_of, and the poisoning of unsafe
 * string functions. No state, no threading concerns.
 */
#ifndef VOLTD_BASE_COMPILER_H
#define VOLTD_BASE_COMPILER_H

#include <stddef.h>
#include <assert.h>

/* x86-64 prefetches cache lines in adjacent pairs, so atomics written by
 * different threads are kept 128 bytes apart (as crossbeam and Tokio do). */
#define VB_CACHELINE 128
#define vb_cacheline_aligned __attribute__((aligned(VB_CACHELINE)))

#define vb_likely(x)   __builtin_expect(!!(x), 1)
#define vb_unlikely(x) __builtin_expect(!!(x), 0)

#define vb_container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

#define VB_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* CPU hint inside bounded spin loops. */
static inline void vb_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Always-on check for states where continuing is unsafe, and for internal
 * invariants: there is no debug-only assertion (doc/conventions.md). */
void vb_bug(const char *file, int line, const char *expr) __attribute__((noreturn));
#define VB_BUG_ON(cond) \
	do { if (vb_unlikely(cond)) vb_bug(__FILE__, __LINE__, #cond); } while (0)

/* Declare them first so that a later #include of these headers still works. */
#include <stdio.h>
#include <string.h>
#ifndef VOLTD_ALLOW_UNSAFE_STRING
#pragma GCC poison sprintf strcpy strcat
#endif

#endif
