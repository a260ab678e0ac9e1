/* SPDX-License-Identifier: MIT */
/*
 * ctl/internal.h: private to src/ctl. The control plane's state, the
 * command table and the renderers. Everything here runs on the control
 * thread except the counters, which any thread may read (relaxed loads of
 * single-writer counters: each is a statistic on its own, no ordering with
 * anything else is implied).
 */
#ifndef VOLTD_CTL_INTERNAL_H
#define VOLTD_CTL_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include "ctl/ctl.h"
#include "io/io.h"
#include "rt/rt.h"
#include "server/server.h"

struct vctl_client;

#define VCTL_MAX_WORKERS VRT_MAX_WORKERS /* scheduler.workers at most */

/* One snapshot of every layer's statistics. */
struct vctl_snap {
	struct vrt_stats rt;
	struct vrt_worker_stats workers[VCTL_MAX_WORKERS];
	struct vio_worker_stats io[VCTL_MAX_WORKERS];
	struct vsrv_stats *srv; /* large: heap */
	struct vctl_stats ctl;
	struct vctl_reload_stats reload;
	char reload_error[512]; /* the last refusal, "" when none */
	unsigned n_workers, n_io;
};
int vctl__snap_take(struct vctl *ctl, struct vctl_snap *s);
void vctl__snap_fini(struct vctl_snap *s);

/* Who is asking: from SO_PEERCRED. */
struct vctl_peer {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	enum vctl_level level;
};

struct vctl {
	struct vctl_config cfg;
	char path[108];
	bool created_path;  /* voltd bound it: unlink at vctl_free */
	int lfd;            /* control listener */
	int mfd;            /* metrics listener or -1 */
	int epfd, evfd;     /* control thread's epoll; eventfd to stop it */
	/* Settings a reload changes (vctl_reconfigure, from the main or the
	 * control thread; read by the control thread): relaxed, each stands
	 * alone. op_gid -1: no operator group. */
	_Atomic int64_t op_gid;
	_Atomic uint32_t max_clients, metrics_max_clients, client_timeout_ms;
	uid_t self_uid;
	pthread_t thread;
	bool started;
	struct vio *io;
	struct vrt *rt;
	struct vsrv *srv;
	struct vctl_hooks hooks;
	/* control thread only: the latest snapshot, the `clear counters` one */
	struct vctl_snap snap, base;
	bool have_base;
	time_t cleared_at;  /* when base was taken (Unix seconds) */
	int64_t start_ns;   /* for uptime */
	/* control thread only */
	struct vctl_client **clients;
	unsigned n_clients;         /* both kinds */
	unsigned n_control, n_metrics;
	int64_t accept_resume_ns; /* accepting paused (out of fds) until then */
	/* The slots of VCTL_METRICS (ctl.h): written by the control thread
	 * only, read by vctl_stats_get (relaxed, see above). */
	struct {
		VCTL_METRICS(VB_METRIC_SLOT)
	} counters;
};

/* Add one to a counter / set a gauge of struct vctl_stats. Single writer
 * (the control thread): a relaxed load + store suffices; readers only need
 * some recent value. */
#define VCTL_COUNT(ctl, field) vctl__add(&(ctl)->counters.field, 1)
#define VCTL_GAUGE(ctl, field, v) \
	atomic_store_explicit(&(ctl)->counters.field, (v), memory_order_relaxed)
static inline void vctl__add(_Atomic uint64_t *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

/* ------------------------------------------------------------ commands */

struct vctl_cmd {
	const char *name;
	const char *args;          /* usage after the name, "" if none */
	int min_args, max_args;    /* words after the name; max -1: no limit */
	enum vctl_level level;     /* least level that may run it */
	const char *help;          /* one line */
	const char *reply;         /* schema name of the success reply: "voltd.<reply>.v1" */
	/* Fill `reply` (an object already holding schema and ok) or return an
	 * error object (vctl__error) instead; argv[0] is the command. */
	json_t *(*run)(struct vctl *ctl, const struct vctl_peer *peer, int argc, char **argv, json_t *reply);
};

extern const struct vctl_cmd vctl__commands[];
extern const size_t vctl__n_commands;

/* Run one command line for `peer`: returns the reply (one JSON object). */
json_t *vctl__execute(struct vctl *ctl, const struct vctl_peer *peer, char *line);

/* {"schema":"voltd.error.v1","ok":false,"error":msg,"code":code}. Never
 * NULL (a command returning NULL succeeded): msg is made valid UTF-8 (cut
 * at a character boundary, invalid bytes as '?'); out of memory, a shared
 * "internal" error made by vctl__error_init (vctl_new) is returned. */
json_t *vctl__error(const char *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int vctl__error_init(void);
/* Add key: value (reference stolen) to an error from vctl__error. */
void vctl__error_set(json_t *e, const char *key, json_t *value);

const char *vctl__level_name(enum vctl_level l);

/* ------------------------------------------------------------ renderers */

/* `stats [SECTION]`: adds the sections to reply; -ENOENT for an unknown section. */
int vctl__stats_json(struct vctl *ctl, const char *section, json_t *reply);
/* Names of the stats sections, NULL-terminated. */
extern const char *const vctl__stats_sections[];
/* `hist NAME [WORKER]`: adds the histogram of NAME (a job kind, sched or
 * poll; worker -1 = all) to reply; < 0 when unknown. */
int vctl__hist_json(struct vctl *ctl, const char *name, int worker, json_t *reply);
/* `clear counters`: stats shows counters from now on (metrics stay cumulative). */
void vctl__stats_clear(struct vctl *ctl);
/* Prometheus text format 0.0.4 of everything, to fp. */
void vctl__prom_write(struct vctl *ctl, FILE *fp);

/* The JSON Schemas of every reply kind, keyed by schema name (new ref). */
json_t *vctl__schemas(void);

/* The level of a connected peer (SO_PEERCRED + groups). */
int vctl__peer_get(struct vctl *ctl, int fd, struct vctl_peer *out);

#endif
