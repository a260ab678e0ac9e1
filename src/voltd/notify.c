/* SPDX-License-Identifier: MIT */
/*
 * voltd/notify.c: see notify.h.
 */
#include "config.h"
#include "voltd/notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#ifdef HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>

int vd_notify(const char *state)
{
	return sd_notify(0, state);
}

const char *vd_notify_impl(void)
{
	return "systemd (libsystemd)";
}
#else
int vd_notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len;
	int fd, rc;

	if (!path || !*path)
		return 0;
	len = strlen(path);
	if (len >= sizeof(sa.sun_path) || (path[0] != '/' && path[0] != '@'))
		return -EINVAL;
	memcpy(sa.sun_path, path, len);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0'; /* abstract namespace */
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = (int)sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa,
			 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len));
	rc = rc < 0 ? -errno : 1;
	close(fd);
	return rc;
}

const char *vd_notify_impl(void)
{
	return "systemd (built-in notify)";
}
#endif

int vd_notifyf(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return vd_notify(buf);
}
