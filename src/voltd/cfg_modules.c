/* SPDX-License-Identifier: MIT */
/*
 * voltd/cfg_modules.c: the modules' keys in voltd.conf. A module declares
 * its keys (struct voltd_key); this file makes each a row of the schema,
 * so that it is parsed, checked, formatted, set and reloaded as voltd's
 * own keys are, gives the values to the module (before its init, and a
 * live key's at `set` and reload), and starts the module. The built-in
 * module's keys are rows of [jobs].
 *
 * Threading: the rows are made, and the modules started, on the main
 * thread before the daemon's other threads exist. The live setter runs
 * under the daemon's configuration lock (voltd/control.c).
 */
#include "config.h"
#include "voltd/cfg.h"
#include "voltd/cfg_internal.h"
#include "base/compiler.h"
#include "jobs/job.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <voltd/module.h>

static void add_err(struct vb_strlist *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_err(struct vb_strlist *e, const char *fmt, ...)
{
	va_list ap;

	if (!e)
		return;
	va_start(ap, fmt);
	(void)vb_strlist_vadd(e, fmt, ap); /* out of memory: the message is lost, the count is not */
	va_end(ap);
}

/* ------------------------------------------------------------------ rows */

int vcfg__module_rows(struct vjob_mod *m, const char *section, struct vcfg_key *out, size_t room)
{
	size_t n = vjob_mod_key_count(m);

	if (n > room)
		return -ENOSPC;
	for (size_t i = 0; i < n; i++) {
		const struct voltd_key *k = vjob_mod_key(m, i);
		struct vcfg_key *r = &out[i];
		*r = (struct vcfg_key){
			.section = section, .name = k->name, .def = k->def, .unit = k->unit, .doc = k->doc,
			.mod = m, .mod_key = (unsigned)i,
			.apply = (k->flags & VOLTD_KEY_LIVE) ? vcfg__live_modules : NULL,
		};
		switch (k->type) {
		case VOLTD_KEY_BOOL:
			r->type = VCFG_BOOL;
			r->max = 1;
			break;
		case VOLTD_KEY_INT:
			/* The row's bounds hold the int64_t bits (VCFG_I64). */
			r->type = VCFG_I64;
			r->min = (uint64_t)k->min;
			r->max = (uint64_t)k->max;
			break;
		default: /* the jobs layer refuses any other type */
			r->type = VCFG_STRING;
			r->max = (uint64_t)k->max;
			break;
		}
	}
	return (int)n;
}

/* The text of key row r's value in cfg, in a buffer from malloc (a
 * module's string may be long). NULL when out of memory. */
static char *format_alloc(const struct vcfg *cfg, const struct vcfg_key *r)
{
	size_t len = r->type == VCFG_STRING ? r->max + 1 : 64;
	char *buf = malloc(len);

	if (buf)
		vcfg_format(cfg, r, buf, len);
	return buf;
}

/* Give the values of module m's keys in cfg to the module: the live ones
 * only, or all. Returns the first failure's -errno, its message in err. */
static int push_keys(const struct vcfg *cfg, struct vjob_mod *m, bool live_only, struct vb_strlist *err)
{
	size_t n;
	const struct vcfg_key *rows = vcfg_schema(&n);
	int first = 0;

	for (size_t i = 0; i < n; i++) {
		const struct vcfg_key *r = &rows[i];
		char why[256] = "";
		if (r->mod != m || (live_only && !r->apply))
			continue;
		char *text = format_alloc(cfg, r);
		int rc = text ? vjob_mod_key_set(m, r->mod_key, text, why, sizeof(why)) : -ENOMEM;
		free(text);
		if (rc < 0) {
			add_err(err, "%s: %s.%s: %s", cfg->source[i], r->section, r->name,
				*why ? why : strerror(-rc));
			if (first == 0)
				first = rc;
		}
	}
	return first;
}

int vcfg__live_modules(const struct vcfg_live *to, const struct vcfg *cfg)
{
	(void)to;
	return push_keys(cfg, vjob_mod_builtin(), true, NULL);
}

/* ------------------------------------------------------------------ start */

int vcfg_start_modules(const struct vcfg *cfg, uint32_t flags, struct vb_strlist *err)
{
	struct vjob_mod *b = vjob_mod_builtin();
	char why[512] = "";

	if (push_keys(cfg, b, false, err) < 0)
		return 1;
	int rc = vjob_mod_start(b, flags, why, sizeof(why));
	if (rc < 0) {
		add_err(err, "[" VCFG_BUILTIN_SECTION "]: module.%s: (built in): %s", vjob_mod_name(b),
			*why ? why : strerror(-rc));
		return 1;
	}
	return 0;
}
