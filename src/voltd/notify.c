/* SPDX-License-Identifier: MIT */
/*
 * voltd/notify.c: see notify.h.
 */
#include "config.h"
#include "voltd/notify.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdbool.h>
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

uint64_t vd_watchdog_usec(void)
{
	uint64_t usec = 0;

	return sd_watchdog_enabled(0, &usec) > 0 ? usec : 0;
}

int vd_listen_fds(struct vd_listen_fd *out, unsigned max)
{
	char **names = NULL;
	int n = sd_listen_fds_with_names(1, &names);

	if (n <= 0)
		return n;
	for (int i = 0; i < n; i++) {
		if ((unsigned)i < max) {
			out[i].fd = SD_LISTEN_FDS_START + i;
			snprintf(out[i].name, sizeof(out[i].name), "%s",
				 names && names[i] ? names[i] : "unknown");
		} else {
			close(SD_LISTEN_FDS_START + i);
		}
		if (names)
			free(names[i]);
	}
	free(names);
	return n > (int)max ? -E2BIG : n;
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

/* $NAME as a whole number, or false. */
static bool env_u64(const char *name, uint64_t *out)
{
	const char *s = getenv(name);
	char *end;

	if (!s || !*s)
		return false;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

/* Meant for this process (the variable is absent or names our pid)? */
static bool env_pid_is_us(const char *name, bool absent_ok)
{
	uint64_t pid;

	if (!getenv(name))
		return absent_ok;
	return env_u64(name, &pid) && pid == (uint64_t)getpid();
}

uint64_t vd_watchdog_usec(void)
{
	uint64_t usec;

	if (!env_u64("WATCHDOG_USEC", &usec) || usec == 0 || !env_pid_is_us("WATCHDOG_PID", true))
		return 0;
	return usec;
}

int vd_listen_fds(struct vd_listen_fd *out, unsigned max)
{
	const char *names = getenv("LISTEN_FDNAMES");
	uint64_t n;
	int rc;

	if (!env_pid_is_us("LISTEN_PID", false) || !env_u64("LISTEN_FDS", &n) || n == 0) {
		rc = 0;
		goto unset;
	}
	if (n > 1024) {
		rc = -EINVAL;
		goto unset;
	}
	for (unsigned i = 0; i < n; i++) {
		int fd = VD_LISTEN_FDS_START + (int)i;
		const char *colon = names ? strchr(names, ':') : NULL;
		size_t len = names ? (colon ? (size_t)(colon - names) : strlen(names)) : 0;

		if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
			rc = -errno;
			goto unset;
		}
		if (i < max) {
			out[i].fd = fd;
			snprintf(out[i].name, sizeof(out[i].name), "%.*s", (int)len,
				 len ? names : "unknown");
		} else {
			close(fd);
		}
		names = colon ? colon + 1 : NULL;
	}
	rc = n > max ? -E2BIG : (int)n;
unset:
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	return rc;
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

bool vd_notify_enabled(void)
{
	const char *path = getenv("NOTIFY_SOCKET");

	return path && *path;
}
