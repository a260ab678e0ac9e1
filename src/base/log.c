/* SPDX-License-Identifier: MIT */
/*
 * base/log.c: see log.h.
 *
 * Ordering: the level and the journal flag are relaxed atomics (configuration
 * values; no data is published through them). The rate limiter's counters are
 * relaxed too: an approximate count of suppressed lines is acceptable.
 */
#include "base/log.h"
#include "base/compiler.h"
#include "base/time.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Atomic int log_level = LOG_INFO;
static bool log_journal;
static bool log_syslog;

static const char *const level_names[] = {
	[LOG_EMERG] = "emerg", [LOG_ALERT] = "alert", [LOG_CRIT] = "crit",
	[LOG_ERR] = "err", [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
	[LOG_INFO] = "info", [LOG_DEBUG] = "debug",
};

void vb_log_init(bool force_prefix)
{
	log_journal = force_prefix || getenv("JOURNAL_STREAM") != NULL;
}

bool vb_log_journal(void)
{
	return log_journal;
}

void vb_log_set_level(int level)
{
	atomic_store_explicit(&log_level, level, memory_order_relaxed);
}

int vb_log_get_level(void)
{
	return atomic_load_explicit(&log_level, memory_order_relaxed);
}

int vb_log_level_parse(const char *name)
{
	for (int i = LOG_ERR; i <= LOG_DEBUG; i++)
		if (strcmp(name, level_names[i]) == 0)
			return i;
	return -1;
}

const char *vb_log_level_name(int level)
{
	return level >= 0 && level <= LOG_DEBUG ? level_names[level] : "?";
}

void vb_log_to_syslog(const char *ident)
{
	openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	log_syslog = true;
}

/* Write one line at `level`, whatever the level threshold. */
static void emit(int level, const char *fmt, va_list ap)
{
	char buf[4096]; /* the server stats line is ~1.5 KiB */
	size_t n;

	if (log_syslog) {
		vsyslog(level, fmt, ap);
		return;
	}
	if (log_journal) {
		n = (size_t)snprintf(buf, sizeof(buf), "<%d>", level);
	} else {
		struct timespec ts;
		struct tm tm;
		clock_gettime(CLOCK_REALTIME, &ts);
		localtime_r(&ts.tv_sec, &tm);
		n = strftime(buf, sizeof(buf), "%H:%M:%S", &tm);
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, ".%03ld %s: ",
				      ts.tv_nsec / 1000000, vb_log_level_name(level));
	}
	int m = vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	n += (size_t)m;
	if (n > sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	/* One write per line keeps lines whole between threads. */
	ssize_t w = write(STDERR_FILENO, buf, n);
	(void)w;
}

static void vlog(int level, const char *fmt, va_list ap)
{
	if (level > atomic_load_explicit(&log_level, memory_order_relaxed))
		return;
	emit(level, fmt, ap);
}

void vb_log_audit(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	emit(LOG_NOTICE, fmt, ap);
	va_end(ap);
}

void vb_log(int level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(level, fmt, ap);
	va_end(ap);
}

void vb_log_rl(struct vb_ratelimit *rl, int level, const char *fmt, ...)
{
	int64_t now = vb_now_ns();
	int64_t start = atomic_load_explicit(&rl->window_start, memory_order_relaxed);

	if (now - start >= rl->interval_ns &&
	    atomic_compare_exchange_strong_explicit(&rl->window_start, &start, now,
						    memory_order_relaxed, memory_order_relaxed)) {
		uint32_t dropped = atomic_exchange_explicit(&rl->suppressed, 0, memory_order_relaxed);
		atomic_store_explicit(&rl->printed, 0, memory_order_relaxed);
		if (dropped)
			vb_log(level, "(%u similar messages suppressed)", dropped);
	}
	if (atomic_fetch_add_explicit(&rl->printed, 1, memory_order_relaxed) >= rl->burst) {
		atomic_fetch_add_explicit(&rl->suppressed, 1, memory_order_relaxed);
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	vlog(level, fmt, ap);
	va_end(ap);
}

void vb_bug(const char *file, int line, const char *expr)
{
	vb_log(LOG_CRIT, "BUG at %s:%d: %s", file, line, expr);
	abort();
}
