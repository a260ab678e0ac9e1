/* SPDX-License-Identifier: MIT */
/*
 * base/log.h: leveled logging to stderr. Under systemd (JOURNAL_STREAM set)
 * each line starts with the sd-daemon "<N>" prefix so journald keeps the
 * level; on a terminal it carries a timestamp and the level name.
 * Thread-safe: each message is one write(2) of a line built on the stack.
 * vb_log_set_level may be called at any time (relaxed: a stale level for a
 * few messages is harmless).
 */
#ifndef VOLTD_BASE_LOG_H
#define VOLTD_BASE_LOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <syslog.h>

void vb_log_init(bool force_prefix);
/* From now on log through syslog(3) (a daemon that left its terminal). */
void vb_log_to_syslog(const char *ident);
void vb_log_set_level(int level);
int vb_log_get_level(void);
/* Level by name ("err", "warning", "notice", "info", "debug"); -1 if unknown. */
int vb_log_level_parse(const char *name);
const char *vb_log_level_name(int level);

void vb_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Do stderr lines start with the sd-daemon "<N>" prefix (under systemd)?
 * A plain read: async-signal-safe, for a line a signal handler writes
 * itself. */
bool vb_log_journal(void);

/* An audit line (who changed what): at notice priority whatever the level
 * set by vb_log_set_level, so no `set log.level` can silence it. */
void vb_log_audit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define vb_err(...)     vb_log(LOG_ERR, __VA_ARGS__)
#define vb_warn(...)    vb_log(LOG_WARNING, __VA_ARGS__)
#define vb_notice(...)  vb_log(LOG_NOTICE, __VA_ARGS__)
#define vb_info(...)    vb_log(LOG_INFO, __VA_ARGS__)
#define vb_debug(...)   vb_log(LOG_DEBUG, __VA_ARGS__)

/*
 * Rate limit for repeated errors: at most `burst` messages per `interval_ns`;
 * the first message after a suppressed stretch says how many were dropped.
 * Any thread; lock-free (a CAS decides who opens a new window).
 */
struct vb_ratelimit {
	int64_t interval_ns;
	uint32_t burst;
	_Atomic int64_t window_start;
	_Atomic uint32_t printed;
	_Atomic uint32_t suppressed;
};
#define VB_RATELIMIT_INIT(interval_ms, burst_) \
	{ .interval_ns = (int64_t)(interval_ms) * 1000000, .burst = (burst_) }

void vb_log_rl(struct vb_ratelimit *rl, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
