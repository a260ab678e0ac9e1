/* SPDX-License-Identifier: MIT */
/*
 * voltd/cfg_modules.c: the modules in voltd.conf. A [module.NAME] section
 * loads module NAME from its path key (NAME.so in [modules] dir by
 * default): this file opens it through the jobs layer (which checks the
 * file, its ABI and its descriptor and runs nothing else of it), makes the
 * keys the module declares rows of the schema (section module.NAME, after
 * voltd's own path key), sets them from the file and -s, and at start
 * gives each value to the module before its init runs. The built-in
 * module's keys are rows of [jobs]. A module is never closed: those opened
 * at start are the daemon's for its life, and a reload may change only
 * their live keys.
 *
 * Threading: the modules are opened and started, and their rows added, on
 * the main thread before the daemon's other threads exist; afterwards the
 * table below is read-only. The live setter runs under the daemon's
 * configuration lock (voltd/reconf.c).
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

/* The modules opened, in order. */
static struct opened {
	struct vjob_mod *m;
	/* sized as struct vcfg_module's name, though a name is 32 bytes at most */
	char name[sizeof(((struct vcfg_module *)0)->name)];
	char section[8 + sizeof(((struct vcfg_module *)0)->name)]; /* "module.NAME", its rows' section */
	char doc[VCFG_PATH_LEN + 192];    /* its section's line: name, version, file */
	char path_def[sizeof(((struct vcfg_module *)0)->name) + 3]; /* "NAME.so" */
	char file[VCFG_PATH_LEN];         /* the file it was opened from */
	char where[VCFG_SOURCE_LEN];      /* "FILE:LINE" of the section that loaded it */
} opened[VCFG_MAX_MODULES];
static unsigned n_opened;

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
		if (r->mod != m || r->mod_key == VCFG_MOD_PATH || (live_only && !r->apply))
			continue;
		char *text = format_alloc(cfg, r);
		int rc = text ? vjob_mod_key_set(m, r->mod_key, text, why, sizeof(why)) : -ENOMEM;
		free(text);
		if (rc < 0) {
			vcfg__add_err(err, "%s: %s.%s: %s", cfg->source[i], r->section, r->name,
				*why ? why : strerror(-rc));
			if (first == 0)
				first = rc;
		}
	}
	return first;
}

int vcfg__live_modules(const struct vcfg_live *to, const struct vcfg *cfg)
{
	int first;

	(void)to;
	first = push_keys(cfg, vjob_mod_builtin(), true, NULL);
	for (unsigned i = 0; i < n_opened; i++) {
		int rc = push_keys(cfg, opened[i].m, true, NULL);
		if (rc < 0 && first == 0)
			first = rc;
	}
	return first;
}

/* ------------------------------------------------------------------ load */

/* [a-z0-9_], 1..32 bytes: the module's name as its descriptor says it. */
static bool module_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n >= VCFG_NAME_LEN)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

static struct opened *find_opened(const char *name)
{
	for (unsigned i = 0; i < n_opened; i++)
		if (strcmp(opened[i].name, name) == 0)
			return &opened[i];
	return NULL;
}

/* Open module sec->name from file and make its rows (path, then the keys
 * it declares), their values in cfg its defaults. NULL with the error in
 * err. */
static struct opened *open_module(struct vcfg *cfg, const struct vcfg_module *sec, const char *file,
				  struct vb_strlist *err)
{
	struct opened *o = &opened[n_opened];
	struct vcfg_key rows[VCFG_MAX_KEYS];
	char why[512] = "";
	struct vjob_mod *m;
	int n, rc;

	if (n_opened == VCFG_MAX_MODULES) {
		vcfg__add_err(err, "%s: module.%s: more than %d modules", sec->where, sec->name, VCFG_MAX_MODULES);
		return NULL;
	}
	rc = vjob_mod_open(sec->name, file, &m, why, sizeof(why));
	if (rc < 0) {
		/* The message names the file, whether or not the reason does. */
		bool named = strstr(why, file) != NULL;
		vcfg__add_err(err, "%s: module.%s: %s%s%s", sec->where, sec->name, named ? "" : file, named ? "" : ": ",
			*why ? why : strerror(-rc));
		return NULL;
	}
	memset(o, 0, sizeof(*o));
	o->m = m;
	snprintf(o->name, sizeof(o->name), "%s", sec->name);
	snprintf(o->section, sizeof(o->section), "module.%s", sec->name);
	snprintf(o->path_def, sizeof(o->path_def), "%s.so", sec->name);
	snprintf(o->file, sizeof(o->file), "%s", file);
	snprintf(o->where, sizeof(o->where), "%s", sec->where);
	snprintf(o->doc, sizeof(o->doc), "The module %s %s (%s): its file, and the keys it declares.", sec->name,
		 vjob_mod_version(m), file);
	rows[0] = (struct vcfg_key){
		.section = o->section, .name = "path", .type = VCFG_STRING, .def = o->path_def,
		.min = 1, .max = VCFG_PATH_LEN - 1, .mod = m, .mod_key = VCFG_MOD_PATH,
		.doc = "the module's file: absolute, or relative to [modules] dir",
	};
	n = vcfg__module_rows(m, o->section, rows + 1, VB_ARRAY_SIZE(rows) - 1);
	size_t before;
	vcfg_schema(&before);
	if (n < 0 || vcfg__add_section(o->section, o->doc) < 0 || vcfg__add_rows(rows, (size_t)n + 1) < 0) {
		vcfg__add_err(err, "%s: module.%s: %s: its keys do not fit: voltd holds %d keys and %d bytes of "
			"module values in all", sec->where, sec->name, file, VCFG_MAX_KEYS, VCFG_DYN_BYTES);
		vjob_mod_close(m); /* its file stays mapped */
		return NULL;
	}
	n_opened++;
	size_t after;
	const struct vcfg_key *all = vcfg_schema(&after);
	for (size_t i = before; i < after; i++)
		if (vcfg_set(cfg, &all[i], all[i].def, "default", err) < 0)
			return NULL; /* the jobs layer checks the defaults: not reached */
	return o;
}

/* The file of module section sec: its path key (the last assignment, so
 * -s wins) relative to dir, or NAME.so in dir. */
static int module_file(const struct vcfg *cfg, const struct vcfg_module *sec, char *file, size_t len,
		       const char **where, struct vb_strlist *err)
{
	char section[8 + sizeof(sec->name)], path[VCFG_PATH_LEN];
	struct vcfg__pending p;
	size_t pos = 0;

	snprintf(section, sizeof(section), "module.%s", sec->name);
	snprintf(path, sizeof(path), "%s.so", sec->name);
	*where = sec->where;
	while (vcfg__pending_next(cfg, &pos, &p))
		if (strcmp(p.section, section) == 0 && strcmp(p.key, "path") == 0) {
			snprintf(path, sizeof(path), "%s", p.value);
			*where = p.where;
		}
	int n = path[0] == '/' ? snprintf(file, len, "%s", path) : snprintf(file, len, "%s/%s", cfg->modules.dir, path);
	if (!path[0] || (size_t)n >= len) {
		vcfg__add_err(err, "%s: %s.path: %s", *where, section,
			path[0] ? "the file's name is too long (with [modules] dir)" : "empty");
		return -EINVAL;
	}
	return 0;
}

static int load_module(struct vcfg *cfg, const struct vcfg_module *sec, bool may_open, struct vb_strlist *err)
{
	char file[VCFG_PATH_LEN], sug[128];
	const char *path_where;
	struct opened *o;
	struct vcfg__pending p;
	size_t pos = 0;
	int errors = 0;

	if (!module_name_ok(sec->name)) {
		vcfg__add_err(err, "%s: module.%s: not a module name (a-z, 0-9 and _, 1 to %d characters)", sec->where,
			sec->name, VCFG_NAME_LEN - 1);
		return 1;
	}
	if (strcmp(sec->name, vjob_mod_name(vjob_mod_builtin())) == 0) {
		vcfg__add_err(err, "%s: module.%s: the built-in module: its keys are set in [" VCFG_BUILTIN_SECTION "]",
			sec->where, sec->name);
		return 1;
	}
	if (module_file(cfg, sec, file, sizeof(file), &path_where, err) < 0)
		return 1;
	o = find_opened(sec->name);
	if (!o && !may_open) {
		vcfg__add_err(err, "%s: module.%s: a module is loaded at start only: restart voltd to load it "
			"(a reload cannot)", sec->where, sec->name);
		return 1;
	}
	if (!o) {
		o = open_module(cfg, sec, file, err);
		if (!o)
			return 1;
	} else if (strcmp(o->file, file) != 0) {
		vcfg__add_err(err, "%s: module.%s.path: %s is not the file module %s was loaded from (%s): a loaded "
			"module is never replaced; restart voltd to load another file", path_where, sec->name, file,
			sec->name, o->file);
		errors++;
	}
	while (vcfg__pending_next(cfg, &pos, &p)) {
		if (strcmp(p.section, o->section) != 0)
			continue;
		const struct vcfg_key *k = vcfg_key_find(p.section, p.key);
		if (!k) {
			const char *s = vcfg__suggest(p.section, p.key, sug, sizeof(sug));
			vcfg__add_err(err, "%s: %s.%s: unknown key%s%s%s", p.where, p.section, p.key,
				s ? " (did you mean " : "", s ? s : "", s ? "?)" : "");
			errors++;
		} else if (vcfg_set(cfg, k, p.value, p.where, err) < 0) {
			errors++;
		}
	}
	return errors;
}

static const struct vcfg_module *find_section(const struct vcfg *cfg, const char *name)
{
	for (unsigned i = 0; i < cfg->n_modules; i++)
		if (strcmp(cfg->module[i].name, name) == 0)
			return &cfg->module[i];
	return NULL;
}

int vcfg_load_modules(struct vcfg *cfg, bool may_open, struct vb_strlist *err)
{
	struct vcfg__pending p;
	size_t pos = 0;
	int errors = 0;

	if (cfg->too_many_modules) {
		vcfg__add_err(err, "%s: more than %d [module.NAME] sections", cfg->file, VCFG_MAX_MODULES);
		errors++;
	}
	while (vcfg__pending_next(cfg, &pos, &p))
		if (p.line == 0 && !find_section(cfg, p.section + 7)) { /* the file's have their line */
			vcfg__add_err(err, "%s: %s.%s: no [%s] section in the file (a module is loaded by its section)",
				p.where, p.section, p.key, p.section);
			errors++;
		}
	for (unsigned i = 0; i < cfg->n_modules; i++)
		errors += load_module(cfg, &cfg->module[i], may_open, err);
	for (unsigned i = 0; !may_open && i < n_opened; i++)
		if (!find_section(cfg, opened[i].name)) {
			vcfg__add_err(err, "%s: module.%s: its section is gone, but a loaded module is never unloaded: "
				"restart voltd to unload it (loaded by %s)", cfg->file, opened[i].name, opened[i].where);
			errors++;
		}
	return errors;
}

/* ------------------------------------------------------------------ start */

static int start_module(const struct vcfg *cfg, struct vjob_mod *m, const char *where, const char *file,
			uint32_t flags, struct vb_strlist *err)
{
	char why[512] = "";

	if (push_keys(cfg, m, false, err) < 0)
		return 1;
	int rc = vjob_mod_start(m, flags, why, sizeof(why));
	if (rc < 0) {
		bool named = strstr(why, file) != NULL;
		vcfg__add_err(err, "%s: module.%s: %s%s%s", where, vjob_mod_name(m), named ? "" : file, named ? "" : ": ",
			*why ? why : strerror(-rc));
		return 1;
	}
	return 0;
}

int vcfg_start_modules(const struct vcfg *cfg, uint32_t flags, struct vb_strlist *err)
{
	struct vjob_mod *b = vjob_mod_builtin();

	if (start_module(cfg, b, "[" VCFG_BUILTIN_SECTION "]", "(built in)", flags, err))
		return 1;
	for (unsigned i = 0; i < cfg->n_modules; i++) {
		const struct opened *o = find_opened(cfg->module[i].name);
		VB_BUG_ON(!o); /* vcfg_load_modules opened every section's module */
		if (start_module(cfg, o->m, cfg->module[i].where, o->file, flags, err))
			return 1;
	}
	return 0;
}

/* ------------------------------------------------------------------ reload */

int vcfg_check_module_reload(const struct vcfg *run, const struct vcfg *next, struct vb_strlist *err)
{
	size_t n;
	const struct vcfg_key *rows = vcfg_schema(&n);
	int errors = 0;

	/* A path is compared as the file it names (vcfg_load_modules). */
	for (size_t i = 0; i < n; i++) {
		const struct vcfg_key *r = &rows[i];
		if (!r->mod || r->apply || r->mod_key == VCFG_MOD_PATH)
			continue;
		char *a = format_alloc(run, r), *b = format_alloc(next, r);
		if (a && b && strcmp(a, b) != 0) {
			/* back to its default: the line is gone, the file is named */
			const char *where = strcmp(next->source[i], "default") ? next->source[i] : next->file;
			vcfg__add_err(err, "%s: %s.%s: %s -> %s: a module's restart-only key changes only at a restart "
				"(a module is never reloaded); restart voltd to apply it", where, r->section, r->name,
				a, b);
			errors++;
		}
		free(a);
		free(b);
	}
	return errors;
}
