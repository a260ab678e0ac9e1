/* SPDX-License-Identifier: MIT */
/*
 * voltctl/client.h: a connection to voltd's control socket: one command
 * line out, one JSON reply line back (doc/control.md), parsed with
 * jansson. Single-threaded; the caller owns the struct and every json_t
 * it receives.
 */
#ifndef VOLTD_VOLTCTL_CLIENT_H
#define VOLTD_VOLTCTL_CLIENT_H

#include <jansson.h>
#include <stddef.h>

/* voltctl's exit codes (voltctl(1)). */
enum vcli_exit {
	VCLI_OK = 0,
	VCLI_FAILED = 1,        /* the daemon refused or failed the command */
	VCLI_USAGE = 2,         /* bad command line (ours or the daemon's verdict) */
	VCLI_UNREACHABLE = 69,  /* EX_UNAVAILABLE: no daemon answers on the socket */
	VCLI_BUSY = 75,         /* EX_TEMPFAIL: the daemon has too many clients; try again */
	VCLI_PERMISSION = 77,   /* EX_NOPERM: the socket or the command is denied */
};

/* How long a reply may take (voltctl --timeout): the daemon answers from
 * its own thread, so this only bounds a hung peer. Set before connecting. */
#define VCLI_TIMEOUT_MS 10000
extern int vcli_timeout_ms;

struct vcli_conn {
	int fd;
	int timeout_ms;
	char *buf;              /* bytes read past the last reply line */
	size_t len, cap;
	const char *path;
};

/* Connect to the socket at `path`. VCLI_OK, or VCLI_UNREACHABLE /
 * VCLI_PERMISSION with a message in err. */
int vcli_connect(struct vcli_conn *c, const char *path, char *err, size_t errlen);
void vcli_close(struct vcli_conn *c);

/*
 * Send `line` (no newline) and read one reply. On VCLI_OK *reply is the
 * parsed object (the caller json_decref's it) and *raw, if not NULL, the
 * reply line as received (malloc'd, no newline; the caller frees it). On
 * failure (the connection broke, the reply is not a JSON object) the
 * result is VCLI_UNREACHABLE with a message in err.
 */
int vcli_call(struct vcli_conn *c, const char *line, json_t **reply, char **raw,
	      char *err, size_t errlen);

/* The exit code an ok:false reply maps to: its "code" "permission" -> 77,
 * "usage" / "unknown_command" -> 2, "busy" -> 75, anything else -> 1. */
int vcli_error_exit(const json_t *reply);

#endif
