/* SPDX-License-Identifier: MIT */
/*
 * voltd/reconf.c: the daemon's reconfiguration, what it does for the
 * control socket (src/ctl):
 * the `config`, `set`, `reload` and `drain` hooks (drain and undrain are
 * voltd/life.c's first step of the drain sequence), and the reload that
 * SIGHUP runs too, so both report the same thing.
 *
 * Threading: the hooks run on the control thread, SIGHUP's reload on the
 * main thread; d->mu serialises every read and write of the running
 * configuration between them. Live values reach the runtime and the logger
 * through their own thread-safe setters (vrt_set_*, vb_log_set_level).
 */
#include "config.h"
#include "voltd/reconf.h"
#include "base/compiler.h"
#include "base/log.h"
#include "rt/rt.h"
#include "server/server.h"
#include "voltd/life.h"
#include "voltd/notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void vd_reconf_init(struct vd_reconf *d, struct vcfg *cfg, vd_reconf_load_fn *load, void *load_ctx)
{
	memset(d, 0, sizeof(*d));
	pthread_mutex_init(&d->mu, NULL);
	d->cfg = cfg;
	d->load = load;
	d->load_ctx = load_ctx;
}

void vd_reconf_fini(struct vd_reconf *d)
{
	pthread_mutex_destroy(&d->mu);
}

void vd_reconf_attach(struct vd_reconf *d, struct vrt *rt, struct vsrv *srv)
{
	pthread_mutex_lock(&d->mu);
	d->rt = rt;
	d->srv = srv;
	pthread_mutex_unlock(&d->mu);
}

void vd_reconf_attach_life(struct vd_reconf *d, struct vd_life *life)
{
	pthread_mutex_lock(&d->mu);
	d->life = life;
	pthread_mutex_unlock(&d->mu);
}

void vd_reconf_attach_ctl(struct vd_reconf *d, struct vctl *ctl)
{
	pthread_mutex_lock(&d->mu);
	d->ctl = ctl;
	pthread_mutex_unlock(&d->mu);
}

void vd_reconf_inherited(struct vd_reconf *d, const char *key, const char *value)
{
	size_t n;
	const struct vcfg_key *schema = vcfg_schema(&n);

	for (size_t i = 0; i < n && d->n_inherited < VB_ARRAY_SIZE(d->inherited); i++) {
		char name[160];
		snprintf(name, sizeof(name), "%s.%s", schema[i].section, schema[i].name);
		if (strcmp(name, key) != 0)
			continue;
		d->inherited[d->n_inherited].key = i;
		snprintf(d->inherited[d->n_inherited].value, sizeof(d->inherited[0].value), "%s", value);
		d->n_inherited++;
	}
}

/* `drain`: not ready (/readyz 503, agent "drain", Connection: close) while
 * still serving; `undrain`: ready again, unless voltd is stopping (-EBUSY). */
static int drain_hook(void *ctx, bool on)
{
	struct vd_reconf *d = ctx;
	int rc = -ENOTCONN;

	pthread_mutex_lock(&d->mu);
	if (d->life)
		rc = on ? vd_life_drain(d->life) : vd_life_undrain(d->life);
	pthread_mutex_unlock(&d->mu);
	if (rc == 0)
		vb_notice("control: %s", on ? "drained: not ready, still serving" : "undrained: ready again");
	return rc;
}

/* Push the live keys of d->cfg to their subsystems through the schema's
 * setters. A refused control.stall_warn_ms (no monitor: the running 0
 * stays) is expected: monitor_off checked it before. d->mu held. */
static void apply_live(struct vd_reconf *d)
{
	const struct vcfg_live to = { .rt = d->rt, .srv = d->srv };

	(void)vcfg_apply_live(d->cfg, &to);
}

/* Did the runtime start without its stall monitor (stall_warn_ms = 0)? Then
 * control.stall_warn_ms cannot turn on live: set refuses it, a reload
 * lists it as needing a restart. Probed by setting the running value
 * again, which changes nothing. d->mu held. */
static bool monitor_off(struct vd_reconf *d)
{
	return d->rt && vrt_set_stall_warn_ms(d->rt, d->cfg->scheduler.stall_warn_ms) < 0;
}

int vd_reconf_config(const struct vcfg *cfg, struct vctl_config *out)
{
	memset(out, 0, sizeof(*out));
	out->path = cfg->control.socket;
	out->mode = cfg->control.mode;
	out->group = cfg->control.group;
	out->operator_group = cfg->control.operator_group;
	out->max_clients = cfg->control.max_clients;
	out->metrics_max_clients = cfg->control.metrics_max_clients;
	out->client_timeout_ms = cfg->control.client_timeout_ms;
	out->metrics_addr = cfg->control.metrics_listen.addr;
	out->metrics_len = cfg->control.metrics_listen.len;
	out->fd = -1;
	return 0;
}

/* ------------------------------------------------------------ hooks */

static size_t config_count(void *ctx)
{
	size_t n;
	vcfg_schema(&n);
	return n;
}

static void config_get(void *ctx, size_t i, struct vctl_config_item *out)
{
	struct vd_reconf *d = ctx;
	size_t n;
	const struct vcfg_key *k = &vcfg_schema(&n)[i];

	snprintf(d->key, sizeof(d->key), "%s.%s", k->section, k->name);
	pthread_mutex_lock(&d->mu);
	vcfg_format(d->cfg, k, d->value, sizeof(d->value));
	snprintf(d->source, sizeof(d->source), "%s", d->cfg->source[i]);
	pthread_mutex_unlock(&d->mu);
	for (unsigned j = 0; j < d->n_inherited; j++) {
		if (d->inherited[j].key != i)
			continue;
		snprintf(d->value, sizeof(d->value), "%s", d->inherited[j].value);
		snprintf(d->source, sizeof(d->source), "socket activation");
	}
	out->key = d->key;
	out->value = d->value;
	out->def = k->def;
	out->source = d->source;
	out->apply = k->apply			  ? VCTL_APPLY_LIVE :
		     (k->flags & VCFG_F_RELOAD) ? VCTL_APPLY_RELOAD :
						  VCTL_APPLY_RESTART;
	out->doc = k->doc ? k->doc : "";
}

static int config_set(void *ctx, size_t n, char *const *keys, char *const *values, struct vb_strlist *errors)
{
	struct vd_reconf *d = ctx;
	struct vb_strlist err = { 0 };
	struct vcfg *next = malloc(sizeof(*next));
	int rc = 0;

	if (!next)
		return -ENOMEM;
	pthread_mutex_lock(&d->mu);
	*next = *d->cfg;
	for (size_t i = 0; i < n; i++) {
		const struct vcfg_key *k = vcfg_key_named(keys[i]);
		if (!k) {
			vb_strlist_add(errors, "%s: unknown key", keys[i]);
			rc = -EINVAL;
		} else if (k->flags & VCFG_F_RELOAD) {
			vb_strlist_add(errors, "%s: applies on reload only; edit the file and reload", keys[i]);
			rc = -EINVAL;
		} else if (!k->apply) {
			vb_strlist_add(errors, "%s: cannot change while running (restart-only); edit the file and restart",
				      keys[i]);
			rc = -EINVAL;
		} else if (vcfg_set(next, k, values[i], "set", &err) < 0) {
			rc = -EINVAL;
		}
	}
	if (rc == 0 && vcfg_validate(next, "set", &err) > 0)
		rc = -EINVAL;
	if (rc == 0 && next->scheduler.stall_warn_ms && monitor_off(d)) {
		vb_strlist_add(errors, "control.stall_warn_ms: the stall monitor was off at start (0); "
				       "turning it on needs a restart: edit the file and restart");
		rc = -EINVAL;
	}
	for (size_t i = 0; i < err.n; i++)
		vb_strlist_add(errors, "%s", err.msg[i]);
	if (rc == 0) {
		vcfg_copy_live(d->cfg, next);
		apply_live(d);
		for (size_t i = 0; i < n; i++)
			vb_notice("control: set %s = %s", keys[i], values[i]);
	}
	pthread_mutex_unlock(&d->mu);
	vb_strlist_fini(&err);
	free(next);
	return rc;
}

/* Count a reload's outcome and keep a refusal's first error (d->mu held).
 * The text goes into STATUS= and JSON: bytes outside printable ASCII become
 * '?', so a file with stray bytes cannot make either invalid. */
static void record_reload(struct vd_reconf *d, int rc, const struct vb_strlist *errors)
{
	if (rc == 0) {
		d->reloads[VCTL_RELOAD_OK]++;
		d->refusal[0] = '\0';
		return;
	}
	d->reloads[VCTL_RELOAD_REFUSED]++;
	snprintf(d->refusal, sizeof(d->refusal), "%s", errors->n ? errors->msg[0] : strerror(-rc));
	for (char *p = d->refusal; *p; p++)
		if (*p < 0x20 || *p > 0x7e)
			*p = '?';
}

int vd_reconf_reload(struct vd_reconf *d, struct vb_strlist *changed, struct vb_strlist *restart,
		  struct vb_strlist *errors)
{
	struct vb_strlist err = { 0 };
	struct vcfg *next = malloc(sizeof(*next));
	char a[VCFG_MAX_LISTEN * 64], b[VCFG_MAX_LISTEN * 64];
	size_t n;
	const struct vcfg_key *schema = vcfg_schema(&n);
	int rc = 0;

	pthread_mutex_lock(&d->mu);
	if (!next) {
		rc = -ENOMEM;
		goto unlock;
	}
	if (d->load(d->load_ctx, next, &err) > 0) {
		for (size_t i = 0; i < err.n; i++)
			vb_strlist_add(errors, "%s", err.msg[i]);
		rc = -EINVAL;
		goto unlock;
	}
	vcfg_resolve(next);
	/* A module is never reloaded: a change to one of its restart-only
	 * keys refuses the whole file (its sections and files were checked
	 * while it loaded). Before anything is applied. */
	if (vcfg_check_module_reload(d->cfg, next, &err) > 0) {
		for (size_t i = 0; i < err.n; i++)
			vb_strlist_add(errors, "%s", err.msg[i]);
		rc = -EINVAL;
		goto unlock;
	}
	if (d->ctl) {
		/* The control plane's reload-only keys; a bad one (an unknown
		 * group) rejects the file before anything is applied. */
		struct vctl_config cc;
		const char *why = "";
		vd_reconf_config(next, &cc);
		if (vctl_reconfigure(d->ctl, &cc, &why) < 0) {
			vb_strlist_add(errors, "control.operator_group: %s: %s", next->control.operator_group, why);
			rc = -EINVAL;
			goto unlock;
		}
	}
	bool keep_monitor_off = next->scheduler.stall_warn_ms && monitor_off(d);
	for (size_t i = 0; i < n; i++) {
		if (schema[i].mod && !schema[i].apply)
			continue; /* a module's other keys: equal, or refused above */
		vcfg_format(d->cfg, &schema[i], a, sizeof(a));
		vcfg_format(next, &schema[i], b, sizeof(b));
		if (strcmp(a, b) == 0)
			continue;
		bool stays_off = keep_monitor_off && schema[i].offset == offsetof(struct vcfg, scheduler.stall_warn_ms);
		if (stays_off) { /* the running value (0) stays, as `config` shows */
			next->scheduler.stall_warn_ms = d->cfg->scheduler.stall_warn_ms;
			memcpy(next->source[i], d->cfg->source[i], sizeof(next->source[i]));
		}
		if ((schema[i].apply || (schema[i].flags & VCFG_F_RELOAD)) && !stays_off)
			vb_strlist_add(changed, "%s.%s", schema[i].section, schema[i].name);
		else
			vb_strlist_add(restart, "%s.%s", schema[i].section, schema[i].name);
	}
	vcfg_copy_reload(d->cfg, next);
	apply_live(d);
	/* A reload accepted is an operator's word that the kinds' code or
	 * budget was looked at: quarantined kinds serve again. */
	if (d->srv)
		vsrv_quarantine_clear(d->srv);
unlock:
	record_reload(d, rc, errors);
	pthread_mutex_unlock(&d->mu);
	vb_strlist_fini(&err);
	free(next);
	return rc;
}

void vd_reconf_reload_note(struct vd_reconf *d, char *buf, size_t len)
{
	pthread_mutex_lock(&d->mu);
	snprintf(buf, len, "%s%s", *d->refusal ? "last reload refused: " : "", d->refusal);
	pthread_mutex_unlock(&d->mu);
}

static void reload_stats(void *ctx, struct vctl_reload_stats *out, char *err, size_t len)
{
	struct vd_reconf *d = ctx;

	pthread_mutex_lock(&d->mu);
	for (int i = 0; i < VCTL_RELOAD_RESULTS; i++)
		out->reloads[i] = d->reloads[i];
	out->last_reload_refused = *d->refusal != '\0';
	snprintf(err, len, "%s", d->refusal);
	pthread_mutex_unlock(&d->mu);
}

/* `reload` (voltctl reload, the unit's ExecReload=): no RELOADING=1 here,
 * systemd waits for ExecReload= itself; a refusal is in STATUS= at once
 * (voltd/life.c's next refresh keeps it there as a suffix). */
static int reload_hook(void *ctx, struct vb_strlist *changed, struct vb_strlist *restart, struct vb_strlist *errors)
{
	char note[320];
	int rc = vd_reconf_reload(ctx, changed, restart, errors);

	vd_reconf_log_reload("control: reload", rc, changed, restart, errors);
	if (rc < 0) {
		vd_reconf_reload_note(ctx, note, sizeof(note));
		vd_notifyf("STATUS=%s; running the previous configuration", note);
	}
	return rc;
}

void vd_reconf_log_reload(const char *who, int rc, const struct vb_strlist *changed,
		       const struct vb_strlist *restart, const struct vb_strlist *errors)
{
	if (rc < 0) {
		for (size_t i = 0; i < errors->n; i++)
			vb_err("%s: %s", who, errors->msg[i]);
		vb_err("%s: refused (errors, or a change a module needs a restart for); keeping the running configuration", who);
		return;
	}
	for (size_t i = 0; i < changed->n; i++)
		vb_notice("%s: %s changed (applied)", who, changed->msg[i]);
	for (size_t i = 0; i < restart->n; i++)
		vb_warn("%s: %s changed in the file but needs a restart", who, restart->msg[i]);
	vb_notice("%s: configuration re-read (%zu live keys changed, %zu need a restart)", who, changed->n,
		  restart->n);
}

void vd_reconf_hooks(struct vd_reconf *d, struct vctl_hooks *h)
{
	memset(h, 0, sizeof(*h));
	h->ctx = d;
	h->config_count = config_count;
	h->config_get = config_get;
	h->config_set = config_set;
	h->reload = reload_hook;
	h->drain = drain_hook;
	h->reload_stats = reload_stats;
}
