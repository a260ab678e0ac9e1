/* SPDX-License-Identifier: MIT */
/*
 * voltctl/client.c: see client.h.
 */
#include "voltctl/client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* A reply line longer than this is not voltd's (stats are ~20 KiB). */
#define MAX_REPLY (64u << 20)

int vcli_timeout_ms = VCLI_TIMEOUT_MS;

int vcli_connect(struct vcli_conn *c, const char *path, char *err, size_t errlen)
{
	struct sockaddr_un a;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->path = path;
	c->timeout_ms = vcli_timeout_ms;
	if (strlen(path) >= sizeof(a.sun_path)) {
		snprintf(err, errlen, "%s: socket path too long", path);
		return VCLI_UNREACHABLE;
	}
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	memcpy(a.sun_path, path, strlen(path) + 1);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot connect to %s: %s%s", path, strerror(e),
			 e == EACCES || e == EPERM ? "" : " (is voltd running? -s SOCKET or VOLTD_CONTROL)");
		vcli_close(c);
		return e == EACCES || e == EPERM ? VCLI_PERMISSION : VCLI_UNREACHABLE;
	}
	return VCLI_OK;
}

void vcli_close(struct vcli_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->buf);
	c->buf = NULL;
	c->len = c->cap = 0;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Read until buf holds a '\n'; returns its index or -1 (message in err). */
static long read_line(struct vcli_conn *c, char *err, size_t errlen)
{
	for (;;) {
		char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		ssize_t n;

		if (nl)
			return nl - c->buf;
		if (c->len == MAX_REPLY) {
			snprintf(err, errlen, "%s: reply longer than %u bytes", c->path, MAX_REPLY);
			return -1;
		}
		if (c->cap - c->len < 65536) {
			size_t cap = c->cap ? c->cap * 2 : 65536;
			char *b;
			if (cap > MAX_REPLY)
				cap = MAX_REPLY;
			b = realloc(c->buf, cap);
			if (!b) {
				snprintf(err, errlen, "out of memory");
				return -1;
			}
			c->buf = b;
			c->cap = cap;
		}
		int pr = poll(&p, 1, c->timeout_ms);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr == 0) {
			snprintf(err, errlen, "%s: no reply within %d ms", c->path, c->timeout_ms);
			return -1;
		}
		n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(err, errlen, "%s: connection closed before the reply%s%s", c->path,
				 n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
			return -1;
		}
		c->len += (size_t)n;
	}
}

int vcli_call(struct vcli_conn *c, const char *line, json_t **reply, char **raw,
	      char *err, size_t errlen)
{
	size_t n = strlen(line);
	char *msg = malloc(n + 1);
	json_error_t je;
	long end;

	*reply = NULL;
	if (raw)
		*raw = NULL;
	if (!msg) {
		snprintf(err, errlen, "out of memory");
		return VCLI_FAILED;
	}
	memcpy(msg, line, n);
	msg[n] = '\n';
	int sent = send_all(c->fd, msg, n + 1), send_errno = errno;
	free(msg);
	/* A send that failed may follow a line voltd wrote before it closed
	 * (a connection refused as busy): read it before giving up. */
	end = read_line(c, err, errlen);
	if (end < 0) {
		if (sent < 0)
			snprintf(err, errlen, "%s: cannot send: %s", c->path, strerror(send_errno));
		return VCLI_UNREACHABLE;
	}
	*reply = json_loadb(c->buf, (size_t)end, 0, &je);
	if (!*reply || !json_is_object(*reply)) {
		snprintf(err, errlen, "%s: the reply is not a JSON object: %s", c->path,
			 *reply ? "another JSON value" : je.text);
		json_decref(*reply);
		*reply = NULL;
		return VCLI_UNREACHABLE;
	}
	if (raw) {
		*raw = strndup(c->buf, (size_t)end);
	}
	memmove(c->buf, c->buf + end + 1, c->len - (size_t)end - 1);
	c->len -= (size_t)end + 1;
	return VCLI_OK;
}

int vcli_error_exit(const json_t *reply)
{
	const char *code = json_string_value(json_object_get(reply, "code"));

	if (code && strcmp(code, "permission") == 0)
		return VCLI_PERMISSION;
	if (code && (strcmp(code, "usage") == 0 || strcmp(code, "unknown_command") == 0))
		return VCLI_USAGE;
	if (code && strcmp(code, "busy") == 0)
		return VCLI_BUSY;
	return VCLI_FAILED;
}
