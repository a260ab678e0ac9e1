/* SPDX-License-Identifier: MIT */
/*
 * ctl/ctl.h: the control plane: a UNIX stream socket speaking one command per
 * line and one line of JSON per reply (doc/control.md),
 * and an optional HTTP listener answering GET /metrics (Prometheus text).
 *
 * Threading contract: vctl_new, vctl_start, vctl_stop and vctl_free are
 * called by the daemon's main thread. vctl_start starts the control thread,
 * which owns every control connection and does all the work: it never runs
 * on (nor waits for) the runtime's workers, so it answers while every worker
 * is stuck; it only reads the runtime's and server's snapshots, so it cannot
 * slow the HTTP path. The hooks below run on the control thread.
 *
 * Ownership: the control plane owns its sockets; it borrows the I/O driver,
 * the runtime and the server (vctl_start .. vctl_stop), which must outlive
 * that span.
 */
#ifndef VOLTD_CTL_CTL_H
#define VOLTD_CTL_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/metric.h"
#include "base/strlist.h"

struct vio;
struct vrt;
struct vsrv;
struct vctl;
struct vctl_reload_stats;

/* Permission levels, lowest first (doc/control.md). */
enum vctl_level { VCTL_USER = 0, VCTL_OPERATOR = 1, VCTL_ADMIN = 2 };

/* Most bytes of one command line (newline included); longer lines get an
 * error reply and the connection is closed. */
#define VCTL_MAX_LINE 8192
/* Control connections admitted beyond max_clients for admin peers (root,
 * voltd's own uid), so that no other user can lock them out. */
#define VCTL_ADMIN_SLOTS 2

/* Filled by the daemon from voltd.conf; vctl_new copies it. Public. */
struct vctl_config {
	const char *path;            /* control.socket */
	unsigned mode;               /* control.mode */
	const char *group;           /* control.group; "" = leave it */
	const char *operator_group;  /* control.operator_group; "" = nobody */
	unsigned max_clients;        /* control.max_clients */
	unsigned metrics_max_clients; /* control.metrics_max_clients */
	unsigned client_timeout_ms;    /* control.client_timeout_ms */
	/* control.metrics_listen; len 0 = off */
	struct sockaddr_storage metrics_addr;
	socklen_t metrics_len;
	/* An already listening control socket (socket activation), or -1. */
	int fd;
};

/*
 * One configuration key as the `config` command shows it. Strings are owned
 * by whoever filled the item and stay valid until the next hook call.
 */
enum vctl_apply { VCTL_APPLY_LIVE, VCTL_APPLY_RELOAD, VCTL_APPLY_RESTART };
struct vctl_config_item {
	const char *key;      /* "section.name" */
	const char *value;    /* effective value, as voltd.conf writes it */
	const char *def;      /* default */
	const char *source;   /* "default", "FILE:LINE", "-s", "set", "socket activation" */
	enum vctl_apply apply;
	const char *doc;
};

/*
 * What the daemon does for the control plane. Every callback runs on the
 * control thread, never concurrently with another callback of the same
 * hooks; the daemon serialises them with its own SIGHUP handling. Any
 * callback may be NULL (the command then answers "unsupported").
 */
struct vctl_hooks {
	void *ctx;
	/* Number of configuration keys, and key i (0 <= i < n). */
	size_t (*config_count)(void *ctx);
	void (*config_get)(void *ctx, size_t i, struct vctl_config_item *out);
	/* Set n keys ("section.name") to values, all or none: 0, or < 0 with
	 * one line per problem in *errors (nothing changed). A key that cannot
	 * change live is an error. */
	int (*config_set)(void *ctx, size_t n, char *const *keys, char *const *values,
			  struct vb_strlist *errors);
	/* Re-read the configuration file as SIGHUP does. 0 with the keys
	 * whose value changed in *changed (live ones applied) and those that
	 * need a restart in *restart; < 0 with the file's "FILE:LINE: key:
	 * problem" lines in *errors (the running configuration is kept). */
	int (*reload)(void *ctx, struct vb_strlist *changed, struct vb_strlist *restart,
		      struct vb_strlist *errors);
	/* Turn not-ready (/readyz 503) or ready again. 0 or -errno. */
	int (*drain)(void *ctx, bool on);
	/* The outcomes of every reload so far (SIGHUP and `reload`), for the
	 * stats section "config" and voltd_config_*; the text of the last
	 * refusal goes to err (NUL-terminated, "" when the last reload was
	 * accepted or none ran). */
	void (*reload_stats)(void *ctx, struct vctl_reload_stats *out, char *err, size_t len);
	/* Build facts for `version` and voltd_build_info (static strings). */
	const char *version, *features;
	const char *backend, *backend_reason;
};

/* The daemon's reloads (the reload_stats hook): a counter per result
 * (vctl_reload_groups: reloads{result="ok"|"refused"}) and a gauge, 1 while
 * the running configuration is not the file's because the last reload was
 * refused (vctl_reload_metrics). Every field is a uint64_t. */
enum vctl_reload_result { VCTL_RELOAD_OK, VCTL_RELOAD_REFUSED, VCTL_RELOAD_RESULTS };
#define VCTL_RELOAD_METRICS(X) \
	X(last_reload_refused, GAUGE_SNAP, "", \
	  "1 while the last configuration reload was refused (the running configuration is not the file's)")

struct vctl_reload_stats {
	uint64_t reloads[VCTL_RELOAD_RESULTS];
	VCTL_RELOAD_METRICS(VB_METRIC_FIELD)
};
extern const struct vb_metric vctl_reload_metrics[];
extern const size_t vctl_reload_metrics_n;
extern const struct vb_metric_group vctl_reload_groups[];
extern const size_t vctl_reload_groups_n;

/* Counters and gauges of the control plane itself, one line each:
 * X(field, kind, unit, help[, name]) (base/metric.h). A slot (COUNTER,
 * GAUGE) is an atomic of the control thread (ctl/internal.h), bumped with
 * VCTL_COUNT(ctl, field) or set with VCTL_GAUGE(ctl, field, v); the table
 * vctl_metrics and vctl_stats_get are in ctl/stats.c. */
#define VCTL_METRICS(X) \
	X(connections, COUNTER, "", "control connections accepted") \
	X(clients, GAUGE, "", "control socket connections open now") \
	X(refused_busy, COUNTER, "", "control connections refused because control.max_clients were open") \
	X(metrics_clients, GAUGE, "", "control.metrics_listen connections open now") \
	X(metrics_refused_busy, COUNTER, "", \
	  "metrics connections refused (503) because control.metrics_max_clients were open") \
	X(commands, COUNTER, "", "command lines answered") \
	X(errors, COUNTER, "", "error replies (of the commands)") \
	X(denied, COUNTER, "", "commands refused for want of a permission level (of the errors)") \
	X(lines_too_long, COUNTER, "", "connections closed for a command line over the limit") \
	X(idle_closed, COUNTER, "", \
	  "connections closed at their line deadline (control.client_timeout_ms: idle, trickling or not reading)") \
	X(accept_errors, COUNTER, "", "accepts that failed for want of file descriptors or memory") \
	X(metrics_requests, COUNTER, "", "HTTP requests on control.metrics_listen") \
	X(metrics_errors, COUNTER, "", "metrics_listen requests answered 404 or 405 (anything but GET or HEAD /metrics)")

struct vctl_stats {
	VCTL_METRICS(VB_METRIC_FIELD)
};
extern const struct vb_metric vctl_metrics[];
extern const size_t vctl_metrics_n;

/*
 * Create the control socket (or adopt cfg->fd): create its directory when
 * missing, replace a stale socket file, set mode and group; bind
 * metrics_listen. Nothing is served until vctl_start. Returns 0 or -errno;
 * -EADDRINUSE when a live process answers on the socket. *why receives a
 * static explanation on failure.
 */
int vctl_new(const struct vctl_config *cfg, struct vctl **out, const char **why);

/* Start the control thread serving the I/O driver's, runtime's and
 * server's statistics and the daemon's hooks (copied). 0 or -errno. */
int vctl_start(struct vctl *ctl, struct vio *io, struct vrt *rt, struct vsrv *srv,
	       const struct vctl_hooks *hooks);

/* Apply the settings a reload may change: operator_group, max_clients,
 * metrics_max_clients, client_timeout_ms (the rest of cfg is ignored). Any thread. 0, or -ENOENT
 * when operator_group names no group (*why says so; nothing changed). */
int vctl_reconfigure(struct vctl *ctl, const struct vctl_config *cfg, const char **why);

/* Stop the control thread and close every connection. Idempotent. */
void vctl_stop(struct vctl *ctl);

/* Close the sockets and unlink the socket path (when voltd created it). */
void vctl_free(struct vctl *ctl);

/* Snapshot of the control plane's own counters. Any thread. */
void vctl_stats_get(struct vctl *ctl, struct vctl_stats *out);

/* Resolve a group name to a gid: 0 or -ENOENT. */
int vctl_group_gid(const char *name, unsigned *gid);

#endif
