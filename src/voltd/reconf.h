/* SPDX-License-Identifier: MIT */
/*
 * voltd/reconf.h: the daemon's reconfiguration, its side of the control
 * socket (src/ctl is the socket itself): the hooks src/ctl calls (config,
 * set, reload, drain) and the reload SIGHUP shares.
 * Threading: see reconf.c (one mutex serialises configuration changes).
 */
#ifndef VOLTD_VOLTD_RECONF_H
#define VOLTD_VOLTD_RECONF_H

#include <pthread.h>

#include "ctl/ctl.h"
#include "voltd/cfg.h"

struct vrt;
struct vsrv;
struct vd_life;

/* Read the configuration again (defaults, file, -s): errors added. */
typedef int vd_reconf_load_fn(void *ctx, struct vcfg *next, struct vb_strlist *err);

struct vd_reconf {
	pthread_mutex_t mu;   /* guards *cfg, rt, srv */
	struct vcfg *cfg;     /* the running configuration (main's) */
	struct vrt *rt;
	struct vsrv *srv;
	struct vd_life *life;  /* drain / undrain (NULL: not running) */
	struct vctl *ctl;      /* the control plane (reload-only keys) */
	vd_reconf_load_fn *load;
	void *load_ctx;
	/* every reload's outcome (SIGHUP and `reload`), under mu */
	uint64_t reloads[VCTL_RELOAD_RESULTS];
	char refusal[256];    /* the last reload's first error; "" when accepted */
	/* Keys whose socket socket activation replaced: `config` shows
	 * value with source "socket activation". Set before the control
	 * thread starts, read-only after. */
	struct {
		size_t key;
		char value[VCFG_MAX_LISTEN * 64];
	} inherited[2];
	unsigned n_inherited;
	/* config_get's strings (valid until the next hook call) */
	char key[160], value[VCFG_MAX_LISTEN * 64], source[VCFG_SOURCE_LEN];
};

void vd_reconf_init(struct vd_reconf *d, struct vcfg *cfg, vd_reconf_load_fn *load, void *load_ctx);
void vd_reconf_fini(struct vd_reconf *d);
/* The runtime and server to tune and drain (NULL: not running). */
void vd_reconf_attach(struct vd_reconf *d, struct vrt *rt, struct vsrv *srv);
/* The drain sequence that `drain` and `undrain` drive (NULL: none). */
void vd_reconf_attach_life(struct vd_reconf *d, struct vd_life *life);
/* Socket activation replaced the socket of key ("server.listen",
 * "control.socket") by one bound to value: `config` shows it. Before the
 * control thread starts. */
void vd_reconf_inherited(struct vd_reconf *d, const char *key, const char *value);
/* The control plane a reload reconfigures (NULL: none). */
void vd_reconf_attach_ctl(struct vd_reconf *d, struct vctl *ctl);
/* The control plane's settings from the configuration (fd = -1). */
int vd_reconf_config(const struct vcfg *cfg, struct vctl_config *out);
/* Fill the hooks (ctx = d); version facts are the caller's to add. */
void vd_reconf_hooks(struct vd_reconf *d, struct vctl_hooks *h);
/* Re-read the file; apply live keys; list what changed (see ctl.h). */
int vd_reconf_reload(struct vd_reconf *d, struct vb_strlist *changed, struct vb_strlist *restart,
		  struct vb_strlist *errors);
/* "last reload refused: FILE:LINE: key: problem" while the last reload was
 * refused, else "" (for STATUS=). Any thread. */
void vd_reconf_reload_note(struct vd_reconf *d, char *buf, size_t len);
/* Log a reload's outcome, each line prefixed by `who`. */
void vd_reconf_log_reload(const char *who, int rc, const struct vb_strlist *changed,
		       const struct vb_strlist *restart, const struct vb_strlist *errors);

#endif
