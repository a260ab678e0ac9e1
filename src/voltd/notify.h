/* SPDX-License-Identifier: MIT */
/*
 * voltd/notify.h: the service manager notification protocol (sd_notify).
 * With libsystemd it calls sd_notify(3); built --without-systemd it speaks
 * the same datagram protocol itself on $NOTIFY_SOCKET. A no-op outside
 * systemd. Any thread.
 */
#ifndef VOLTD_VOLTD_NOTIFY_H
#define VOLTD_VOLTD_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>

/* Send "KEY=VALUE\n..." state; returns > 0 sent, 0 not under systemd, -errno. */
int vd_notify(const char *state);
int vd_notifyf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Is there a service manager to notify ($NOTIFY_SOCKET set)? */
bool vd_notify_enabled(void);
/* "systemd (libsystemd)" or "systemd (built-in notify)" for -V. */
const char *vd_notify_impl(void);

/* The watchdog interval systemd asks for (WATCHDOG_USEC, when WATCHDOG_PID
 * is absent or ours), 0 when none. Ping at half of it. Main thread. */
uint64_t vd_watchdog_usec(void);

/* Socket activation (sd_listen_fds(3)): inherited descriptors start at 3. */
#define VD_LISTEN_FDS_START 3
struct vd_listen_fd {
	int fd;
	char name[64]; /* from LISTEN_FDNAMES; "unknown" when unnamed */
};
/* The descriptors passed with LISTEN_FDS / LISTEN_PID / LISTEN_FDNAMES,
 * marked close-on-exec; the variables are removed from the environment.
 * Returns how many (0: not socket-activated), -E2BIG when more than max
 * were passed (the extra ones are closed), -EINVAL on a bad LISTEN_FDS.
 * Main thread, before any other thread starts. */
int vd_listen_fds(struct vd_listen_fd *out, unsigned max);

#endif
