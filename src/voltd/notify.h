/* SPDX-License-Identifier: MIT */
/*
 * voltd/notify.h: the service manager notification protocol (sd_notify).
 * With libsystemd it calls sd_notify(3); built --without-systemd it speaks
 * the same datagram protocol itself on $NOTIFY_SOCKET. A no-op outside
 * systemd. Any thread.
 */
#ifndef VOLTD_VOLTD_NOTIFY_H
#define VOLTD_VOLTD_NOTIFY_H

/* Send "KEY=VALUE\n..." state; returns > 0 sent, 0 not under systemd, -errno. */
int vd_notify(const char *state);
int vd_notifyf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "systemd (libsystemd)" or "systemd (built-in notify)" for -V. */
const char *vd_notify_impl(void);

#endif
