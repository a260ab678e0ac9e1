/* SPDX-License-Identifier: MIT */
/*
 * voltctl/voltctl.h: what main.c and top.c share. Single-threaded.
 */
#ifndef VOLTD_VOLTCTL_VOLTCTL_H
#define VOLTD_VOLTCTL_VOLTCTL_H

#include "voltctl/client.h"

/* `voltctl [-s SOCKET] top [-b] [-n N] [-d SECONDS]`: argv[0] is "top".
 * Returns an exit code (client.h). */
int vcli_top(const char *socket_path, int argc, char **argv);

#endif
