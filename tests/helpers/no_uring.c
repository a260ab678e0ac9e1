/* SPDX-License-Identifier: MIT */
/*
 * tests/helpers/no_uring.c: run a program where io_uring cannot be set up,
 * the way a container's seccomp profile does it:
 *
 *     no_uring PROGRAM [ARGS...]
 *
 * installs a seccomp filter that makes io_uring_setup(2) fail with EPERM
 * (every other system call is allowed), then execs PROGRAM. The filter is
 * inherited across exec and fork. Exit status 99 if the filter cannot be
 * installed or PROGRAM cannot be run. Single-threaded; no state.
 */
#include "config.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define NU_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NU_ARCH AUDIT_ARCH_AARCH64
#elif defined(__i386__)
#define NU_ARCH AUDIT_ARCH_I386
#else
#error "no_uring: add this architecture's AUDIT_ARCH_ value"
#endif

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif

int main(int argc, char **argv)
{
	struct sock_filter filter[] = {
		/* A foreign ABI (e.g. x32 tricks): refuse to guess, allow. */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NU_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {
		.len = (unsigned short)(sizeof(filter) / sizeof(filter[0])),
		.filter = filter,
	};

	if (argc < 2) {
		fprintf(stderr, "usage: %s PROGRAM [ARGS...]\n", argv[0]);
		return 99;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) {
		fprintf(stderr, "no_uring: seccomp: %s\n", strerror(errno));
		return 99;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "no_uring: %s: %s\n", argv[1], strerror(errno));
	return 99;
}
