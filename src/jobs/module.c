/* SPDX-License-Identifier: MIT */
/*
 * jobs/module.c: modules: the loader (a file's ELF header, dlopen, the
 * entry, the ABI), the descriptor's checks (kinds, routes, counters, keys),
 * the module object with its keys' values, start (init, then the kinds
 * registered) and shutdown. Each refusal is one line, "PATH: what was
 * expected against what was found", and leaves nothing registered.
 *
 * Threading: open, start and shutdown on the main thread before the
 * workers start or after they stopped; the accessors at any time; a live
 * key's value is an atomic (struct vjob_key). A module file is never
 * closed (dlclose is never called): its code and data live until exit.
 */
#include "config.h"
#include "jobs/internal.h"
#include "base/compiler.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* What module ABI 1.0 lays out: a descriptor or stride shorter than this
 * cannot be a 1.0 one ("too small"). The ends of the last 1.0 fields, so
 * they stay when a minor appends (jobs/abi.c pins the offsets). */
#define END(type, f) (offsetof(struct type, f) + sizeof(((struct type *)0)->f))
#define MODULE_SIZE_1_0 END(voltd_module, shutdown)
#define KIND_SIZE_1_0 END(voltd_kind, doc)
#define KEY_SIZE_1_0 END(voltd_key, doc)
#define COUNTER_SIZE_1_0 END(voltd_counter, help)
/* The fields every major keeps where they are: size, then abi_major, to
 * say which major a descriptor was built for. */
#define HEAD_SIZE END(voltd_module, counter_size)

#define NAME_MAX_LEN 32
#define ROUTE_MAX_LEN 256
#define VERSION_MAX_LEN 64
#define STATE_MAX (16u << 20)
#define STRING_KEY_MAX (64u << 10)

static void errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* [a-z0-9_], 1..32 bytes: module, kind, key and counter names. */
static bool good_name(const char *s)
{
	size_t n = 0;

	if (!s)
		return false;
	for (; s[n]; n++)
		if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_'))
			return false;
	return n >= 1 && n <= NAME_MAX_LEN;
}

/* One line of printable text (a version, a doc or help line). */
static bool good_line(const char *s, size_t max)
{
	size_t n = 0;

	for (; s[n]; n++)
		if ((unsigned char)s[n] < 0x20 || s[n] == 0x7f)
			return false;
	return n <= max;
}

/* A route: '/' then visible ASCII but '?' and '#' (what a request's path
 * can be), at most ROUTE_MAX_LEN bytes. */
static bool good_route(const char *s)
{
	size_t n = 0;

	if (!s || s[0] != '/')
		return false;
	for (; s[n]; n++)
		if (s[n] <= 0x20 || s[n] >= 0x7f || s[n] == '?' || s[n] == '#')
			return false;
	return n <= ROUTE_MAX_LEN;
}

/* An Allow value: HTTP methods (tokens) separated by commas and spaces. */
static bool good_methods(const char *s)
{
	size_t tokens = 0;

	if (!s)
		return false;
	while (*s) {
		while (*s == ' ' || *s == ',')
			s++;
		size_t n = 0;
		for (; s[n] && s[n] != ',' && s[n] != ' '; n++)
			if (!((s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= 'a' && s[n] <= 'z') ||
			      (s[n] >= '0' && s[n] <= '9') || strchr("!#$%&'*+-.^_`|~", s[n])))
				return false;
		tokens += n > 0;
		s += n;
	}
	return tokens > 0;
}

/* ---------------------------------------------------------------- keys */

/* Parse text as key k's value: 0 with *iv or *sv (malloc'd), or -EINVAL
 * with the problem in why (the config engine's wording). */
static int key_parse(const struct voltd_key *k, const char *text, int64_t *iv, char **sv, char *why,
		     size_t len)
{
	static const char *const yes[] = { "on", "yes", "true", "1" };
	static const char *const no[] = { "off", "no", "false", "0" };

	switch (k->type) {
	case VOLTD_KEY_BOOL:
		for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
			if (strcasecmp(text, yes[i]) == 0 || strcasecmp(text, no[i]) == 0) {
				*iv = strcasecmp(text, yes[i]) == 0;
				return 0;
			}
		}
		errf(why, len, "'%s' is not a boolean (use on or off)", text);
		return -EINVAL;
	case VOLTD_KEY_INT: {
		const char *d = text + (text[0] == '-');
		uint64_t mag = 0;
		bool over = false;

		if (!*d)
			goto not_number;
		for (const char *p = d; *p; p++) {
			if (*p < '0' || *p > '9')
				goto not_number;
			over |= mag > (UINT64_MAX - 9) / 10;
			mag = mag * 10 + (uint64_t)(*p - '0');
		}
		if (over || mag > (uint64_t)INT64_MAX + (text[0] == '-'))
			goto bounds;
		*iv = text[0] == '-' ? (int64_t)(0 - mag) : (int64_t)mag;
		if (*iv < k->min || *iv > k->max)
			goto bounds;
		return 0;
not_number:
		errf(why, len, "'%s' is not a whole number", text);
		return -EINVAL;
bounds:
		errf(why, len, "%s is out of bounds [%" PRId64 ", %" PRId64 "]", text, k->min, k->max);
		return -EINVAL;
	}
	case VOLTD_KEY_STRING:
		if (strlen(text) > (uint64_t)k->max) {
			errf(why, len, "'%.40s%s' is longer than %" PRId64 " bytes", text, strlen(text) > 40 ? "..." : "",
			     k->max);
			return -EINVAL;
		}
		if (!(*sv = strdup(text))) {
			errf(why, len, "out of memory");
			return -ENOMEM;
		}
		return 0;
	default:
		errf(why, len, "a key of unknown type %u", k->type);
		return -EINVAL;
	}
}

/* Check a key's declaration (and that its default passes its checks). */
static int key_check(const struct vjob_key *keys, size_t i, char *why, size_t len)
{
	const struct voltd_key *k = &keys[i].def;
	static const char *const units[] = { "ms", "us", "s", "bytes" };
	int64_t iv;
	char *sv = NULL;

	if (!good_name(k->name)) {
		errf(why, len, "key %zu: name \"%.40s\": not 1..32 of [a-z0-9_]", i, k->name ? k->name : "(null)");
		return -EINVAL;
	}
	if (strcmp(k->name, "path") == 0) {
		errf(why, len, "key \"path\": voltd's own key of every module section (the module's file)");
		return -EINVAL;
	}
	for (size_t j = 0; j < i; j++) {
		if (strcmp(keys[j].def.name, k->name) == 0) {
			errf(why, len, "key \"%s\": declared twice", k->name);
			return -EINVAL;
		}
	}
	if (k->type < VOLTD_KEY_BOOL || k->type > VOLTD_KEY_STRING) {
		errf(why, len, "key \"%s\": type %u, expected VOLTD_KEY_BOOL, _INT or _STRING (1..3)", k->name,
		     k->type);
		return -EINVAL;
	}
	if (k->flags & ~VOLTD_KEY_LIVE) {
		errf(why, len, "key \"%s\": unknown flags 0x%x (this voltd knows VOLTD_KEY_LIVE)", k->name,
		     k->flags & ~VOLTD_KEY_LIVE);
		return -EINVAL;
	}
	if (k->type == VOLTD_KEY_STRING && (k->flags & VOLTD_KEY_LIVE)) {
		errf(why, len, "key \"%s\": a STRING key is never live (VOLTD_KEY_LIVE)", k->name);
		return -EINVAL;
	}
	if (k->type == VOLTD_KEY_INT && k->min > k->max) {
		errf(why, len, "key \"%s\": min %" PRId64 " above max %" PRId64, k->name, k->min, k->max);
		return -EINVAL;
	}
	if (k->type == VOLTD_KEY_STRING && (k->max < 0 || k->max > STRING_KEY_MAX)) {
		errf(why, len, "key \"%s\": max %" PRId64 " (the longest value) not in [0, %u]", k->name, k->max,
		     STRING_KEY_MAX);
		return -EINVAL;
	}
	if (k->unit) {
		size_t u = 0;
		while (u < sizeof(units) / sizeof(units[0]) && strcmp(units[u], k->unit) != 0)
			u++;
		if (k->type != VOLTD_KEY_INT || u == sizeof(units) / sizeof(units[0])) {
			errf(why, len, "key \"%s\": unit \"%.20s\": only an INT key has one, ms, us, s or bytes",
			     k->name, k->unit);
			return -EINVAL;
		}
	}
	if (k->doc && !good_line(k->doc, 512)) {
		errf(why, len, "key \"%s\": doc: one line of at most 512 printable bytes", k->name);
		return -EINVAL;
	}
	if (!k->def) {
		errf(why, len, "key \"%s\": no default (.def, as written in voltd.conf)", k->name);
		return -EINVAL;
	}
	char pwhy[160];
	if (key_parse(k, k->def, &iv, &sv, pwhy, sizeof(pwhy)) < 0) {
		errf(why, len, "key \"%s\": default: %s", k->name, pwhy);
		return -EINVAL;
	}
	free(sv);
	return 0;
}

static void key_store(struct vjob_key *key, int64_t iv, char *sv)
{
	if (key->def.type == VOLTD_KEY_STRING) {
		free(key->sval);
		key->sval = sv;
	} else {
		/* Relaxed: a value on its own (struct vjob_key). */
		atomic_store_explicit(&key->ival, iv, memory_order_relaxed);
	}
}

size_t vjob_mod_key_count(const struct vjob_mod *m)
{
	return m->n_keys;
}

const struct voltd_key *vjob_mod_key(const struct vjob_mod *m, size_t i)
{
	return i < m->n_keys ? &m->keys[i].def : NULL;
}

int vjob_mod_key_find(const struct vjob_mod *m, const char *name)
{
	for (size_t i = 0; i < m->n_keys; i++)
		if (strcmp(m->keys[i].def.name, name) == 0)
			return (int)i;
	return -1;
}

int vjob_mod_key_set(struct vjob_mod *m, size_t i, const char *text, char *err, size_t errlen)
{
	int64_t iv = 0;
	char *sv = NULL;
	int rc;

	if (i >= m->n_keys) {
		errf(err, errlen, "no such key");
		return -EINVAL;
	}
	struct vjob_key *key = &m->keys[i];
	if (m->started && !(key->def.flags & VOLTD_KEY_LIVE)) {
		errf(err, errlen, "not live: a change needs a restart");
		return -EBUSY;
	}
	rc = key_parse(&key->def, text, &iv, &sv, err, errlen);
	if (rc < 0)
		return rc;
	key_store(key, iv, sv);
	return 0;
}

void vjob_mod_key_format(const struct vjob_mod *m, size_t i, char *buf, size_t len)
{
	if (!len)
		return;
	buf[0] = '\0';
	if (i >= m->n_keys)
		return;
	const struct vjob_key *key = &m->keys[i];
	/* Relaxed: a value on its own (struct vjob_key). */
	int64_t v = atomic_load_explicit(&key->ival, memory_order_relaxed);
	switch (key->def.type) {
	case VOLTD_KEY_BOOL:
		snprintf(buf, len, "%s", v ? "on" : "off");
		break;
	case VOLTD_KEY_INT:
		snprintf(buf, len, "%" PRId64, v);
		break;
	default:
		snprintf(buf, len, "%s", key->sval ? key->sval : "");
		break;
	}
}

/* ----------------------------------------------------------- descriptor */

static void mod_free(struct vjob_mod *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n_keys; i++)
		free(m->keys[i].sval);
	free(m->keys);
	for (size_t i = 0; m->kinds && i < m->n_kinds; i++) {
		free((char *)m->kinds[i].label);
		free((char *)m->kinds[i].crash_text);
	}
	free(m->kinds);
	if (!m->builtin)
		free(m->path);
	free(m);
}

void vjob_mod_close(struct vjob_mod *m)
{
	if (m && !m->started && !m->builtin)
		mod_free(m);
}

/* Check kind i (read through the module's stride into k). */
static int kind_check(struct vjob_mod *m, size_t i, size_t counter_size, char *why, size_t len)
{
	struct vjob_kind *k = &m->kinds[i];
	const struct voltd_kind *d = &k->def;
	const uint32_t known = VOLTD_KIND_BLOCKING | VOLTD_KIND_PREFIX;
	char clash[200];

	if (!good_name(d->name)) {
		errf(why, len, "kind %zu: name \"%.40s\": not 1..32 of [a-z0-9_]", i, d->name);
		return -EINVAL;
	}
	if (!d->step) {
		errf(why, len, "kind \"%s\": no step (the one callback a kind must have)", d->name);
		return -EINVAL;
	}
	if (!good_route(d->route)) {
		errf(why, len, "kind \"%s\": route \"%.60s\": not a path ('/' then up to %d bytes of visible "
			       "ASCII but '?' and '#')", d->name, d->route ? d->route : "(null)", ROUTE_MAX_LEN);
		return -EINVAL;
	}
	if (!good_methods(d->methods)) {
		errf(why, len, "kind \"%s\": methods \"%.40s\": not a list of HTTP methods (\"GET, HEAD\")", d->name,
		     d->methods ? d->methods : "(null)");
		return -EINVAL;
	}
	if (d->flags & ~known) {
		errf(why, len, "kind \"%s\": unknown flags 0x%x (this voltd knows VOLTD_KIND_BLOCKING and "
			       "VOLTD_KIND_PREFIX)", d->name, d->flags & ~known);
		return -EINVAL;
	}
	if (d->state_size > STATE_MAX) {
		errf(why, len, "kind \"%s\": state_size %u above %u bytes", d->name, d->state_size, STATE_MAX);
		return -EINVAL;
	}
	if (d->doc && !good_line(d->doc, 512)) {
		errf(why, len, "kind \"%s\": doc: one line of at most 512 printable bytes", d->name);
		return -EINVAL;
	}
	k->name = d->name;
	k->path = d->route;
	k->path_len = strlen(d->route);
	k->allow = d->methods;
	k->prefix = d->flags & VOLTD_KIND_PREFIX;
	k->blocking = d->flags & VOLTD_KIND_BLOCKING;
	k->has_start = d->start != NULL;
	k->mod = m;
	/* Made now, for the life of the program: the stall report names the
	 * kind with its module and version, the fatal-signal report (a
	 * signal handler, which may not format) with its file too. */
	char *label = NULL, *crash = NULL;
	if (asprintf(&label, "%s, module %s %s", d->name, m->name, m->version) < 0 ||
	    asprintf(&crash, " in kind %s of module %s %s (%s)", d->name, m->name, m->version, m->path) < 0) {
		free(label);
		errf(why, len, "out of memory");
		return -ENOMEM;
	}
	k->label = label;
	k->crash_text = crash;
	/* Counters, read through the module's stride. */
	for (const char *c = (const char *)d->counters; c; c += counter_size) {
		struct voltd_counter ctr = { 0 };
		memcpy(&ctr, c, counter_size < sizeof(ctr) ? counter_size : sizeof(ctr));
		if (!ctr.name)
			break;
		if (k->n_counters == VOLTD_COUNTERS_MAX) {
			errf(why, len, "kind \"%s\": more than %d counters", d->name, VOLTD_COUNTERS_MAX);
			return -EINVAL;
		}
		if (!good_name(ctr.name)) {
			errf(why, len, "kind \"%s\": counter %u: name \"%.40s\": not 1..32 of [a-z0-9_]", d->name,
			     k->n_counters, ctr.name);
			return -EINVAL;
		}
		if (!ctr.help || !good_line(ctr.help, 512)) {
			errf(why, len, "kind \"%s\": counter \"%s\": help: one line of at most 512 printable bytes",
			     d->name, ctr.name);
			return -EINVAL;
		}
		for (unsigned j = 0; j < k->n_counters; j++) {
			struct voltd_counter o = { 0 };
			memcpy(&o, (const char *)d->counters + j * counter_size,
			       counter_size < sizeof(o) ? counter_size : sizeof(o));
			if (strcmp(o.name, ctr.name) == 0) {
				errf(why, len, "kind \"%s\": counter \"%s\" declared twice", d->name, ctr.name);
				return -EINVAL;
			}
		}
		k->n_counters++;
	}
	if (vjob__route_reserved(k->path, k->path_len)) {
		errf(why, len, "kind \"%s\": route \"%s\" is voltd's own (the server answers /healthz, /readyz "
			       "and /livez)", d->name, k->path);
		return -EEXIST;
	}
	if (vjob__registry_clash(k, m->kinds, i, clash, sizeof(clash))) {
		errf(why, len, "kind \"%s\": %s", d->name, clash);
		return -EEXIST;
	}
	return 0;
}

int vjob__mod_new(const char *name, const char *path, void *dl, const struct voltd_module *desc,
		  struct vjob_mod **out, char *err, size_t errlen)
{
	struct vjob_mod *m;
	char why[400];
	int rc = -EINVAL;

	*out = NULL;
	if (!desc) {
		errf(err, errlen, "%s: its entry returned no descriptor", path);
		return -EINVAL;
	}
	if (desc->size < HEAD_SIZE) {
		errf(err, errlen, "%s: descriptor too small: %" PRIu32 " bytes, module ABI 1.0's is %zu", path,
		     desc->size, (size_t)MODULE_SIZE_1_0);
		return -EINVAL;
	}
	if (desc->abi_major != VOLTD_MODULE_ABI_MAJOR) {
		errf(err, errlen, "%s: built for module ABI %u.%u, this voltd (%s) speaks %d.%d; rebuild it against "
				  "voltd-dev %s", path, desc->abi_major, desc->abi_minor, PACKAGE_VERSION,
		     VOLTD_MODULE_ABI_MAJOR, VOLTD_MODULE_ABI_MINOR, PACKAGE_VERSION);
		return -EPROTO;
	}
	if (desc->min_minor > VOLTD_MODULE_ABI_MINOR) {
		errf(err, errlen, "%s: needs module ABI %d.%u or later (built against %d.%u), this voltd (%s) "
				  "speaks %d.%d; upgrade voltd, or rebuild the module against voltd-dev %s",
		     path, VOLTD_MODULE_ABI_MAJOR, desc->min_minor, VOLTD_MODULE_ABI_MAJOR, desc->abi_minor,
		     PACKAGE_VERSION, VOLTD_MODULE_ABI_MAJOR, VOLTD_MODULE_ABI_MINOR, PACKAGE_VERSION);
		return -EPROTO;
	}
	if (desc->size < MODULE_SIZE_1_0) {
		errf(err, errlen, "%s: descriptor too small: %" PRIu32 " bytes, module ABI 1.0's is %zu", path,
		     desc->size, (size_t)MODULE_SIZE_1_0);
		return -EINVAL;
	}
	static const struct {
		const char *what;
		size_t want;
	} strides[] = { { "kind_size", KIND_SIZE_1_0 }, { "key_size", KEY_SIZE_1_0 },
			{ "counter_size", COUNTER_SIZE_1_0 } };
	const uint16_t have[] = { desc->kind_size, desc->key_size, desc->counter_size };
	for (size_t i = 0; i < 3; i++) {
		if (have[i] < strides[i].want) {
			errf(err, errlen, "%s: descriptor too small: %s %u, module ABI 1.0's is %zu", path,
			     strides[i].what, have[i], strides[i].want);
			return -EINVAL;
		}
	}

	if (!(m = calloc(1, sizeof(*m))))
		goto nomem;
	m->builtin = dl == NULL;
	m->dl = dl;
	memcpy(&m->desc, desc, desc->size < sizeof(m->desc) ? desc->size : sizeof(m->desc));
	m->log_rl = (struct vb_ratelimit)VB_RATELIMIT_INIT(VJOB_LOG_WINDOW_MS, VJOB_LOG_BURST);
	if (!(m->path = m->builtin ? (char *)path : strdup(path)))
		goto nomem;

	if (!good_name(m->desc.name)) {
		errf(err, errlen, "%s: module name \"%.40s\": not 1..32 of [a-z0-9_]", path,
		     m->desc.name ? m->desc.name : "(null)");
		goto fail;
	}
	if (strcmp(m->desc.name, name) != 0) {
		errf(err, errlen, "%s: module name \"%s\", expected \"%s\" (the NAME of [module.NAME])", path,
		     m->desc.name, name);
		goto fail;
	}
	for (size_t i = 0; i < vjob_mod_count(); i++) {
		if (strcmp(vjob_mod_name(vjob_mod_at(i)), name) == 0) {
			errf(err, errlen, "%s: a module named %s is loaded already (%s)", path, name,
			     vjob_mod_path(vjob_mod_at(i)));
			rc = -EEXIST;
			goto fail;
		}
	}
	if (!m->builtin && strcmp(name, "voltd") == 0) {
		errf(err, errlen, "%s: module name \"voltd\" is the built-in module's", path);
		rc = -EEXIST;
		goto fail;
	}
	m->name = m->desc.name;
	if (!m->desc.version || !*m->desc.version || !good_line(m->desc.version, VERSION_MAX_LEN)) {
		errf(err, errlen, "%s: version \"%.40s\": expected one line of 1..%d printable bytes", path,
		     m->desc.version ? m->desc.version : "(null)", VERSION_MAX_LEN);
		goto fail;
	}
	m->version = m->desc.version;

	/* Kinds, read through the module's stride. */
	const char *kd = (const char *)m->desc.kinds;
	for (size_t n = 0; kd; n++) {
		struct voltd_kind d = { 0 };
		memcpy(&d, kd + n * desc->kind_size, desc->kind_size < sizeof(d) ? desc->kind_size : sizeof(d));
		if (!d.name)
			break;
		m->n_kinds = n + 1;
	}
	if (!m->n_kinds) {
		errf(err, errlen, "%s: no kinds (the descriptor's .kinds: at least one, ended by a NULL name)", path);
		goto fail;
	}
	if (!(m->kinds = calloc(m->n_kinds, sizeof(*m->kinds))))
		goto nomem;
	for (size_t i = 0; i < m->n_kinds; i++) {
		memcpy(&m->kinds[i].def, kd + i * desc->kind_size,
		       desc->kind_size < sizeof(m->kinds[i].def) ? desc->kind_size : sizeof(m->kinds[i].def));
		if ((rc = kind_check(m, i, desc->counter_size, why, sizeof(why))) < 0) {
			errf(err, errlen, "%s: %s", path, why);
			goto fail;
		}
	}
	rc = -EINVAL;

	/* Keys, read through the module's stride; each takes its default. */
	const char *yd = (const char *)m->desc.keys;
	for (size_t n = 0; yd; n++) {
		struct voltd_key d = { 0 };
		memcpy(&d, yd + n * desc->key_size, desc->key_size < sizeof(d) ? desc->key_size : sizeof(d));
		if (!d.name)
			break;
		m->n_keys = n + 1;
	}
	if (m->n_keys && !(m->keys = calloc(m->n_keys, sizeof(*m->keys))))
		goto nomem;
	for (size_t i = 0; i < m->n_keys; i++) {
		struct vjob_key *key = &m->keys[i];
		int64_t iv = 0;
		char *sv = NULL;

		memcpy(&key->def, yd + i * desc->key_size,
		       desc->key_size < sizeof(key->def) ? desc->key_size : sizeof(key->def));
		if (key_check(m->keys, i, why, sizeof(why)) < 0) {
			errf(err, errlen, "%s: %s", path, why);
			goto fail;
		}
		if (key_parse(&key->def, key->def.def, &iv, &sv, why, sizeof(why)) < 0)
			goto nomem; /* it passed key_check: only memory can fail */
		atomic_init(&key->ival, 0);
		key_store(key, iv, sv);
	}
	*out = m;
	return 0;

nomem:
	errf(err, errlen, "%s: out of memory", path);
	rc = -ENOMEM;
fail:
	mod_free(m);
	return rc;
}

/* ---------------------------------------------------------------- files */

/* The ELF header of the file at path, checked against this voltd's own
 * (class, byte order, machine): a shared object voltd could load. */
static int elf_check(const char *path, int fd, char *err, size_t errlen)
{
	ElfW(Ehdr) eh, self;
	ssize_t n = pread(fd, &eh, sizeof(eh), 0);
	int sfd;

	if (n >= 8 && memcmp(&eh, "!<arch>\n", 8) == 0) {
		errf(err, errlen, "%s: not an ELF shared object: an ar archive (.a); link the module with -shared",
		     path);
		return -ENOEXEC;
	}
	if (n < (ssize_t)EI_NIDENT || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
		errf(err, errlen, "%s: not an ELF shared object (no ELF header: %s)", path,
		     n < 0 ? strerror(errno) : "a script, text or data?");
		return -ENOEXEC;
	}
	if (eh.e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32)) {
		errf(err, errlen, "%s: built for %s code, this voltd runs %d-bit code", path,
		     eh.e_ident[EI_CLASS] == ELFCLASS32 ? "32-bit" : eh.e_ident[EI_CLASS] == ELFCLASS64 ? "64-bit" : "unknown",
		     (int)sizeof(void *) * 8);
		return -ENOEXEC;
	}
	if (n < (ssize_t)sizeof(eh)) {
		errf(err, errlen, "%s: not an ELF shared object (its ELF header is cut short)", path);
		return -ENOEXEC;
	}
	/* The machine and byte order of this voltd: its own executable's. */
	sfd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (sfd >= 0 && pread(sfd, &self, sizeof(self), 0) == (ssize_t)sizeof(self) &&
	    (eh.e_machine != self.e_machine || eh.e_ident[EI_DATA] != self.e_ident[EI_DATA])) {
		errf(err, errlen, "%s: built for ELF machine %u (%s-endian), this voltd runs on machine %u (%s-endian)",
		     path, eh.e_machine, eh.e_ident[EI_DATA] == ELFDATA2MSB ? "big" : "little", self.e_machine,
		     self.e_ident[EI_DATA] == ELFDATA2MSB ? "big" : "little");
		close(sfd);
		return -ENOEXEC;
	}
	if (sfd >= 0)
		close(sfd);
	if (eh.e_type != ET_DYN) {
		errf(err, errlen, "%s: not an ELF shared object: %s; link the module with -shared", path,
		     eh.e_type == ET_REL ? "an object file (.o)" : eh.e_type == ET_EXEC ? "an executable" : "another ELF type");
		return -ENOEXEC;
	}
	return 0;
}

/* The GNU build id of the object dlopen mapped (its PT_NOTE segments). */
struct build_id_find {
	ElfW(Addr) base;
	const char *name;
	char *out;
	size_t len;
};

static int build_id_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct build_id_find *f = arg;

	(void)size;
	if (info->dlpi_addr != f->base || !info->dlpi_name || strcmp(info->dlpi_name, f->name) != 0)
		return 0;
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
			const char *name = p + sizeof(*nh);
			const unsigned char *desc = (const unsigned char *)name + ((nh->n_namesz + 3) & ~3u);
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
				size_t n = nh->n_descsz < (f->len - 1) / 2 ? nh->n_descsz : (f->len - 1) / 2;
				for (size_t b = 0; b < n; b++)
					snprintf(f->out + 2 * b, 3, "%02x", desc[b]);
				return 1;
			}
			p = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
		}
	}
	return 1;
}

static void build_id(void *dl, char *out, size_t len)
{
	struct link_map *lm = NULL;

	out[0] = '\0';
	if (dlinfo(dl, RTLD_DI_LINKMAP, &lm) != 0 || !lm)
		return;
	struct build_id_find f = { .base = lm->l_addr, .name = lm->l_name, .out = out, .len = len };
	dl_iterate_phdr(build_id_cb, &f);
}

int vjob_mod_open(const char *name, const char *path, struct vjob_mod **out, char *err, size_t errlen)
{
	const struct voltd_module *(*entry)(const struct voltd_host *);
	struct stat st;
	char dlpath[4096];
	void *dl;
	int fd, rc;

	*out = NULL;
	if (vjob__frozen()) {
		errf(err, errlen, "%s: the registry is frozen (modules load at start only)", path);
		return -EBUSY;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		rc = -errno;
		errf(err, errlen, "%s: %s", path, rc == -ENOENT ? "no such file" : strerror(-rc));
		if (fd >= 0)
			close(fd);
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		errf(err, errlen, "%s: not a regular file", path);
		return -EINVAL;
	}
	rc = elf_check(path, fd, err, errlen);
	close(fd);
	if (rc < 0)
		return rc;
	/* dlopen searches the library path for a name without '/'. */
	snprintf(dlpath, sizeof(dlpath), "%s%s", strchr(path, '/') ? "" : "./", path);
	dlerror();
	if (!(dl = dlopen(dlpath, RTLD_NOW | RTLD_LOCAL))) {
		const char *e = dlerror();
		errf(err, errlen, "%s: cannot load it: %s", path, e ? e : "dlopen failed");
		return -ENOEXEC;
	}
	/* From here the file stays mapped, whatever the outcome: voltd never
	 * calls dlclose (a module's constructors ran; its code may be
	 * referenced by what they did). */
	*(void **)&entry = dlsym(dl, VOLTD_MODULE_ENTRY_NAME);
	if (!entry) {
		for (int major = 0; major <= 9; major++) {
			char sym[32];
			if (major == VOLTD_MODULE_ABI_MAJOR)
				continue;
			snprintf(sym, sizeof(sym), "voltd_module_v%d", major);
			if (dlsym(dl, sym)) {
				errf(err, errlen, "%s: built for module ABI %d.x (it has %s, not %s), this voltd (%s) "
						  "speaks %d.%d; rebuild it against voltd-dev %s", path, major, sym,
				     VOLTD_MODULE_ENTRY_NAME, PACKAGE_VERSION, VOLTD_MODULE_ABI_MAJOR,
				     VOLTD_MODULE_ABI_MINOR, PACKAGE_VERSION);
				return -EPROTO;
			}
		}
		errf(err, errlen, "%s: not a voltd module: no symbol %s (VOLTD_MODULE(descriptor) in one of its "
				  "files defines it)", path, VOLTD_MODULE_ENTRY_NAME);
		return -ENOEXEC;
	}
	rc = vjob__mod_new(name, path, dl, entry(&vjob__host), out, err, errlen);
	if (rc < 0)
		return rc;
	(*out)->dev = st.st_dev;
	(*out)->ino = st.st_ino;
	(*out)->size = st.st_size;
	(*out)->mtime = st.st_mtim;
	build_id(dl, (*out)->build_id, sizeof((*out)->build_id));
	return 0;
}

struct vjob_mod *vjob_mod_builtin(void)
{
	static struct vjob_mod *builtin;
	char err[256];

	if (!builtin) {
		int rc = vjob__mod_new("voltd", "(built in)", NULL, vjob__builtin_entry(&vjob__host), &builtin,
				       err, sizeof(err));
		/* Its descriptor is voltd's own: a refusal is a bug of this build. */
		if (rc < 0)
			vb_err("jobs: the built-in module: %s", err);
		VB_BUG_ON(rc < 0);
	}
	return builtin;
}

int vjob_mod_start(struct vjob_mod *m, uint32_t flags, char *err, size_t errlen)
{
	char clash[200];
	int rc;

	if (m->started || vjob__frozen()) {
		errf(err, errlen, "%s: %s", m->path, m->started ? "started already" : "the registry is frozen");
		return -EBUSY;
	}
	/* Modules started since this one was opened: check again. */
	for (size_t i = 0; i < m->n_kinds; i++) {
		if (vjob__registry_clash(&m->kinds[i], m->kinds, i, clash, sizeof(clash))) {
			errf(err, errlen, "%s: kind \"%s\": %s", m->path, m->kinds[i].name, clash);
			return -EEXIST;
		}
	}
	if (m->desc.init) {
		char why[256] = "";
		rc = m->desc.init((struct voltd_mod *)m, flags, &m->data, why, sizeof(why));
		if (rc < 0) {
			why[sizeof(why) - 1] = '\0';
			errf(err, errlen, "%s: init failed: %s", m->path, *why ? why : strerror(-rc));
			return rc;
		}
	}
	rc = vjob__modules_add(m);
	if (rc == 0)
		rc = vjob__registry_add(m);
	if (rc < 0) {
		errf(err, errlen, "%s: out of memory", m->path);
		return rc;
	}
	m->started = true;
	return 0;
}

void vjob_mod_shutdown_all(void)
{
	for (size_t i = vjob_mod_count(); i-- > 0;) {
		struct vjob_mod *m = (struct vjob_mod *)vjob_mod_at(i);
		if (m->desc.shutdown)
			m->desc.shutdown((struct voltd_mod *)m, m->data);
	}
	vjob__log_stop();
}

/* ------------------------------------------------------------ accessors */

const char *vjob_mod_name(const struct vjob_mod *m)
{
	return m->name;
}

const char *vjob_mod_version(const struct vjob_mod *m)
{
	return m->version;
}

const char *vjob_mod_path(const struct vjob_mod *m)
{
	return m->path;
}

const char *vjob_mod_build_id(const struct vjob_mod *m)
{
	return m->build_id;
}

int vjob_mod_file_changed(const struct vjob_mod *m)
{
	struct stat st;

	if (m->builtin)
		return 0;
	if (stat(m->path, &st) < 0)
		return 1;
	return st.st_dev != m->dev || st.st_ino != m->ino || st.st_size != m->size ||
	       st.st_mtim.tv_sec != m->mtime.tv_sec || st.st_mtim.tv_nsec != m->mtime.tv_nsec;
}

unsigned vjob_mod_abi_minor(const struct vjob_mod *m)
{
	return m->desc.abi_minor;
}

unsigned vjob_mod_min_minor(const struct vjob_mod *m)
{
	return m->desc.min_minor;
}

size_t vjob_mod_kind_count(const struct vjob_mod *m)
{
	return m->n_kinds;
}

const struct vjob_kind *vjob_mod_kind(const struct vjob_mod *m, size_t i)
{
	return i < m->n_kinds ? &m->kinds[i] : NULL;
}
