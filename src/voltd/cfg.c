/* SPDX-License-Identifier: MIT */
/*
 * voltd/cfg.c: the engine that reads the schema (cfg_schema.c): loading
 * with inih, overrides, suggestions for unknown names, the cross-key
 * rules, the checks against this machine, the copy and apply of live
 * keys, defaults, formatting and the effective-config dump. Every value
 * goes through its type's operations (cfg_types.c). Single-threaded (see
 * cfg.h).
 */
#include "config.h"
#include "voltd/cfg.h"
#include "voltd/cfg_internal.h"
#include "base/compiler.h"
#include "base/log.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <ini.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------ errors */

void vcfg__add_err(struct vb_strlist *e, const char *fmt, ...)
{
	va_list ap;

	if (!e)
		return;
	va_start(ap, fmt);
	(void)vb_strlist_vadd(e, fmt, ap); /* out of memory: the message is lost, the count is not */
	va_end(ap);
}


#define KEYFMT "%s: %s.%s: "

/* ------------------------------------------------------------------ values */

int vcfg_set(struct vcfg *cfg, const struct vcfg_key *k, const char *value,
	     const char *where, struct vb_strlist *err)
{
	char why[256] = "";
	int rc = vcfg__type(k)->parse(cfg, k, value, why, sizeof(why));

	if (rc < 0) {
		vcfg__add_err(err, KEYFMT "%s", where, k->section, k->name, why);
		return rc;
	}
	/* A long FILE:LINE is cut: the source is for people. */
	char *dst = cfg->source[vcfg_key_index(k)];
	size_t len = strnlen(where, sizeof(cfg->source[0]) - 1);
	memcpy(dst, where, len);
	dst[len] = '\0';
	return 0;
}

void vcfg_defaults(struct vcfg *cfg)
{
	size_t n;
	const struct vcfg_key *schema = vcfg_schema(&n);

	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < n; i++) {
		int rc = vcfg_set(cfg, &schema[i], schema[i].def, "default", NULL);
		VB_BUG_ON(rc != 0);
	}
}

void vcfg_format(const struct vcfg *cfg, const struct vcfg_key *k, char *buf, size_t len)
{
	vcfg__type(k)->format(cfg, k, buf, len);
}

static const char *section_doc(const char *name)
{
	size_t n;
	const struct vcfg_section *s = vcfg_sections(&n);

	for (size_t i = 0; i < n; i++)
		if (strcmp(s[i].name, name) == 0)
			return s[i].doc;
	return "";
}

void vcfg_dump(const struct vcfg *cfg, FILE *fp)
{
	size_t n;
	const struct vcfg_key *schema = vcfg_schema(&n);
	const char *section = "";
	char buf[VCFG_MAX_LISTEN * 64];

	for (size_t i = 0; i < n; i++) {
		if (strcmp(section, schema[i].section) != 0) {
			section = schema[i].section;
			fprintf(fp, "%s[%s]\n", i ? "\n" : "", section);
			if (vcfg__module_section(section))
				fprintf(fp, "# %s\n", section_doc(section)); /* which module, which file */
		}
		vcfg_format(cfg, &schema[i], buf, sizeof(buf));
		/* A loaded module's key says where a value that is not its
		 * default came from: the module's section may be far away. */
		const char *src = cfg->source[i];
		bool say = vcfg__module_section(section) && *src && strcmp(src, "default") != 0;
		fprintf(fp, "%s = %s%s%s\n", schema[i].name, buf, say ? " ; " : "", say ? src : "");
	}
}

/* ------------------------------------------------------------------ suggestions */

static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t row[64];

	if (la >= VB_ARRAY_SIZE(row) || lb >= VB_ARRAY_SIZE(row))
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t prev = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t cur = row[j];
			size_t sub = prev + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
			size_t best = row[j] + 1 < row[j - 1] + 1 ? row[j] + 1 : row[j - 1] + 1;
			row[j] = best < sub ? best : sub;
			prev = cur;
		}
	}
	return row[lb];
}

/* The nearest known "section.key" (or section name when key is NULL), when
 * it is close enough to be a plausible typo. A module's section takes only
 * its own keys, and keys elsewhere are not looked for among modules'. */
const char *vcfg__suggest(const char *section, const char *key, char *buf, size_t len)
{
	size_t n, best = SIZE_MAX, best_d = SIZE_MAX;
	const struct vcfg_key *schema = vcfg_schema(&n), *bk = NULL;
	bool in_module = vcfg__module_section(section);

	for (size_t i = 0; i < n; i++) {
		if (key && in_module != vcfg__module_section(schema[i].section))
			continue;
		if (key && in_module && strcmp(section, schema[i].section) != 0)
			continue;
		/* A key is matched by name; the same section wins a tie. */
		const char *have = key ? key : section;
		const char *want = key ? schema[i].name : schema[i].section;
		size_t d = edit_distance(have, want);
		size_t score = 2 * d + (key && strcmp(section, schema[i].section) != 0);
		if (score < best) {
			best = score;
			best_d = d;
			bk = &schema[i];
		}
	}
	if (!bk || best_d > strlen(key ? key : section) / 3 + 1)
		return NULL;
	if (key)
		snprintf(buf, len, "%s.%s", bk->section, bk->name);
	else
		snprintf(buf, len, "%s", bk->section);
	return buf;
}

/* ------------------------------------------------------------------ pending */

/*
 * An assignment in a [module.NAME] section (or -s module.NAME.KEY=V) waits
 * in cfg->pending until vcfg_load_modules knows the module's keys. One
 * record: the line (an int, 0 for -s), then "where", "section", "key" and
 * "value", each NUL-terminated.
 */
static int pending_add(struct vcfg *cfg, int line, const char *where, const char *section, const char *key,
		       const char *value)
{
	const char *part[] = { where, section, key, value };
	size_t need = sizeof(line), at = cfg->pending.len;

	for (size_t i = 0; i < VB_ARRAY_SIZE(part); i++)
		need += strlen(part[i]) + 1;
	if (at + need > sizeof(cfg->pending.text))
		return -ENOSPC; /* the caller says so, with the key */
	memcpy(cfg->pending.text + at, &line, sizeof(line));
	at += sizeof(line);
	for (size_t i = 0; i < VB_ARRAY_SIZE(part); i++) {
		size_t n = strlen(part[i]) + 1;
		memcpy(cfg->pending.text + at, part[i], n);
		at += n;
	}
	cfg->pending.len = at;
	return 0;
}

bool vcfg__pending_next(const struct vcfg *cfg, size_t *pos, struct vcfg__pending *out)
{
	const char *p;

	if (*pos >= cfg->pending.len)
		return false;
	memcpy(&out->line, cfg->pending.text + *pos, sizeof(out->line));
	p = (const char *)cfg->pending.text + *pos + sizeof(out->line);
	out->where = p;
	p += strlen(p) + 1;
	out->section = p;
	p += strlen(p) + 1;
	out->key = p;
	p += strlen(p) + 1;
	out->value = p;
	p += strlen(p) + 1;
	*pos = (size_t)(p - (const char *)cfg->pending.text);
	return true;
}

/* A [module.NAME] line: the section is remembered, in file order, even
 * when no key follows (its presence loads the module). */
static void module_section_seen(struct vcfg *cfg, const char *name, const char *where)
{
	for (unsigned i = 0; i < cfg->n_modules; i++)
		if (strcmp(cfg->module[i].name, name) == 0)
			return; /* a section written twice continues the first */
	if (cfg->n_modules == VCFG_MAX_MODULES) {
		cfg->too_many_modules = true; /* vcfg_load_modules says so */
		return;
	}
	struct vcfg_module *m = &cfg->module[cfg->n_modules++];
	snprintf(m->name, sizeof(m->name), "%s", name);
	snprintf(m->where, sizeof(m->where), "%s", where);
}

/* ------------------------------------------------------------------ files */

struct load_ctx {
	struct vcfg *cfg;
	struct vb_strlist *err;
	const char *name;
	int errors;
	/* line reader state */
	FILE *fp;
	const char *text;
	int line;
	bool too_long;
	/* duplicate detection: line each key was set on, 0 = not yet */
	int set_line[VCFG_MAX_KEYS];
};

/* inih calls on_key for keys only: a [module.NAME] line with no key
 * after it is seen here, as inih will read it (the name between '[' and
 * the first ']', blanks before '[' skipped). */
static void section_line(struct load_ctx *c, const char *line)
{
	char where[VCFG_SOURCE_LEN];

	while (*line == ' ' || *line == '\t')
		line++;
	if (strncmp(line, "[module.", 8) != 0)
		return;
	const char *end = strchr(line, ']');
	if (!end)
		return; /* inih's syntax error */
	char name[sizeof(c->cfg->module[0].name)];
	snprintf(name, sizeof(name), "%.*s", (int)(end - line - 8), line + 8);
	snprintf(where, sizeof(where), "%s:%d", c->name, c->line);
	module_section_seen(c->cfg, name, where);
}

static char *read_line(char *str, int num, void *stream)
{
	struct load_ctx *c = stream;
	size_t n = 0;
	int ch;

	if (c->fp) {
		ch = fgetc(c->fp);
		if (ch == EOF)
			return NULL;
		while (ch != EOF) {
			if (n + 2 < (size_t)num)
				str[n++] = (char)ch;
			else if (ch != '\n' && ch != '\r')
				c->too_long = true;
			if (ch == '\n')
				break;
			ch = fgetc(c->fp);
		}
	} else {
		if (!*c->text)
			return NULL;
		while (*c->text) {
			ch = *c->text++;
			if (n + 2 < (size_t)num)
				str[n++] = (char)ch;
			else if (ch != '\n' && ch != '\r')
				c->too_long = true;
			if (ch == '\n')
				break;
		}
	}
	str[n] = '\0';
	c->line++;
	if (c->too_long) {
		vcfg__add_err(c->err, "%s:%d: line longer than %d characters", c->name, c->line, num - 3);
		c->errors++;
		c->too_long = false;
		str[0] = '\0'; /* skip it */
	}
	section_line(c, str);
	return str;
}

/* A key of a [module.NAME] section: kept for vcfg_load_modules, which
 * knows the module's keys; a duplicate is found here, by its line. */
static int module_key(struct load_ctx *c, const char *section, const char *name, const char *value,
		      const char *where)
{
	struct vcfg__pending p;
	size_t pos = 0;

	while (vcfg__pending_next(c->cfg, &pos, &p)) {
		if (p.line && strcmp(p.section, section) == 0 && strcmp(p.key, name) == 0) {
			vcfg__add_err(c->err, "%s: %s.%s: duplicate key (first set on line %d)", where, section, name,
				p.line);
			c->errors++;
			return 1;
		}
	}
	if (pending_add(c->cfg, c->line, where, section, name, value) < 0) {
		vcfg__add_err(c->err, "%s: %s.%s: more module keys than voltd holds (%d bytes of them)", where, section,
			name, VCFG_PENDING_BYTES);
		c->errors++;
	}
	return 1;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
	struct load_ctx *c = user;
	char where[PATH_MAX + 16], sug[96];
	const struct vcfg_key *k = vcfg_key_find(section, name);

	snprintf(where, sizeof(where), "%s:%d", c->name, c->line);
	if (vcfg__module_section(section))
		return module_key(c, section, name, value, where);
	if (!k) {
		size_t n;
		const struct vcfg_key *schema = vcfg_schema(&n);
		bool section_known = false;
		for (size_t i = 0; i < n; i++)
			section_known |= strcmp(schema[i].section, section) == 0;
		if (!*section) {
			const char *s = vcfg__suggest("", name, sug, sizeof(sug));
			vcfg__add_err(c->err, "%s: %s: key outside any [section]%s%s%s", where, name,
				s ? " (did you mean " : "", s ? s : "", s ? "?)" : "");
		} else if (!section_known) {
			const char *s = vcfg__suggest(section, NULL, sug, sizeof(sug));
			vcfg__add_err(c->err, "%s: %s.%s: unknown section [%s]%s%s%s", where, section, name, section,
				s ? " (did you mean [" : "", s ? s : "", s ? "]?)" : "");
		} else {
			const char *s = vcfg__suggest(section, name, sug, sizeof(sug));
			vcfg__add_err(c->err, "%s: %s.%s: unknown key%s%s%s", where, section, name,
				s ? " (did you mean " : "", s ? s : "", s ? "?)" : "");
		}
		c->errors++;
		return 1;
	}
	size_t idx = vcfg_key_index(k);
	if (c->set_line[idx]) {
		vcfg__add_err(c->err, "%s: %s.%s: duplicate key (first set on line %d)", where, section, name,
			c->set_line[idx]);
		c->errors++;
		return 1;
	}
	c->set_line[idx] = c->line;
	if (vcfg_set(c->cfg, k, value, where, c->err) < 0)
		c->errors++;
	return 1;
}

static int load(struct load_ctx *c)
{
#if HAVE_DECL_INI_ALLOW_MULTILINE
	ini_allow_multiline = false;
#endif
	int rc = ini_parse_stream(read_line, c, on_key, c);
	if (rc > 0) {
		/* inih reports the first line it could not parse. */
		vcfg__add_err(c->err, "%s:%d: syntax error: expected '[section]' or 'key = value'", c->name, rc);
		c->errors++;
	} else if (rc < 0) {
		vcfg__add_err(c->err, "%s: cannot parse (out of memory)", c->name);
		c->errors++;
	}
	if (c->errors == 0)
		c->errors += vcfg_validate(c->cfg, c->name, c->err);
	return c->errors;
}

int vcfg_load_file(struct vcfg *cfg, const char *path, struct vb_strlist *err)
{
	struct load_ctx c = { .cfg = cfg, .err = err, .name = path };

	snprintf(cfg->file, sizeof(cfg->file), "%s", path);
	c.fp = fopen(path, "re");
	if (!c.fp) {
		vcfg__add_err(err, "%s: cannot open: %s", path, strerror(errno));
		return 1;
	}
	int n = load(&c);
	fclose(c.fp);
	return n;
}

int vcfg_load_string(struct vcfg *cfg, const char *name, const char *text, struct vb_strlist *err)
{
	struct load_ctx c = { .cfg = cfg, .err = err, .name = name, .text = text };

	snprintf(cfg->file, sizeof(cfg->file), "%s", name);
	return load(&c);
}

int vcfg_override(struct vcfg *cfg, const char *assignment, struct vb_strlist *err)
{
	char section[64], key[64], sug[96];
	const char *eq = strchr(assignment, '=');
	const char *dot = NULL;

	/* The key is after the last dot before '=': a section may have one
	 * (module.NAME), a key never. */
	for (const char *p = assignment; eq && p < eq; p++)
		if (*p == '.')
			dot = p;
	if (!dot || !eq || (size_t)(dot - assignment) >= sizeof(section) ||
	    (size_t)(eq - dot - 1) >= sizeof(key)) {
		vcfg__add_err(err, "-s %s: expected SECTION.KEY=VALUE", assignment);
		return 1;
	}
	memcpy(section, assignment, (size_t)(dot - assignment));
	section[dot - assignment] = '\0';
	memcpy(key, dot + 1, (size_t)(eq - dot - 1));
	key[eq - dot - 1] = '\0';
	if (vcfg__module_section(section)) {
		if (pending_add(cfg, 0, "-s", section, key, eq + 1) == 0)
			return 0;
		vcfg__add_err(err, "-s: %s.%s: more module keys than voltd holds (%d bytes of them)", section, key,
			VCFG_PENDING_BYTES);
		return 1;
	}
	const struct vcfg_key *k = vcfg_key_find(section, key);
	if (!k) {
		const char *s = vcfg__suggest(section, key, sug, sizeof(sug));
		vcfg__add_err(err, "-s: %s.%s: unknown key%s%s%s", section, key, s ? " (did you mean " : "",
			s ? s : "", s ? "?)" : "");
		return 1;
	}
	return vcfg_set(cfg, k, eq + 1, "-s", err) < 0 ? 1 : 0;
}

int vcfg_validate(const struct vcfg *cfg, const char *where, struct vb_strlist *err)
{
	int n = 0;

	if (cfg->scheduler.global_interval_min > cfg->scheduler.global_interval_max) {
		vcfg__add_err(err, "%s: scheduler.global_interval_min: %u is greater than scheduler.global_interval_max (%u)",
			where, cfg->scheduler.global_interval_min, cfg->scheduler.global_interval_max);
		n++;
	}
	for (unsigned i = 0; i < cfg->server.n_listen; i++)
		for (unsigned j = 0; j < i; j++)
			if (strcmp(cfg->listen_text[i], cfg->listen_text[j]) == 0) {
				vcfg__add_err(err, "%s: server.listen: %s is listed twice", where, cfg->listen_text[i]);
				n++;
			}
	return n;
}

/* Where a key's value came from ("FILE:LINE", "-s", "default"). */
static const char *source_of(const struct vcfg *cfg, const char *section, const char *name)
{
	const struct vcfg_key *k = vcfg_key_find(section, name);
	return k ? cfg->source[vcfg_key_index(k)] : "?";
}

static int check_group(const struct vcfg *cfg, const char *name, const char *value, struct vb_strlist *err)
{
	struct group gr, *res = NULL;
	char *buf = NULL;
	size_t len = 4096;
	int rc;

	if (!*value)
		return 0;
	/* A group with many members needs a larger buffer (ERANGE). */
	do {
		char *b = realloc(buf, len);
		if (!b) {
			rc = ENOMEM;
			break;
		}
		buf = b;
		rc = getgrnam_r(value, &gr, buf, len, &res);
		len *= 2;
	} while (rc == ERANGE && len <= (1u << 24));
	free(buf);
	if (res)
		return 0;
	vcfg__add_err(err, KEYFMT "no group '%s' on this machine%s%s", source_of(cfg, "control", name), "control", name,
		value, rc ? ": " : "", rc ? strerror(rc) : "");
	return 1;
}

/* One listening address a start binds, for the overlap check. */
struct bound {
	const struct sockaddr_storage *ss;
	const char *section, *name, *text;
};

static uint16_t addr_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
}

static bool addr_any(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ((const struct sockaddr_in *)ss)->sin_addr.s_addr == htonl(INADDR_ANY);
	return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)ss)->sin6_addr);
}

/* Would binding both fail (EADDRINUSE)? Port 0 never clashes. [::] also
 * takes the IPv4 port (Linux binds it dual-stack by default). */
static bool addr_clash(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (addr_port(a) == 0 || addr_port(a) != addr_port(b))
		return false;
	if (a->ss_family != b->ss_family)
		return (a->ss_family == AF_INET6 && addr_any(a)) || (b->ss_family == AF_INET6 && addr_any(b));
	if (addr_any(a) || addr_any(b))
		return true;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
		      sizeof(struct in6_addr)) == 0;
}

int vcfg_check_host(const struct vcfg *cfg, struct vb_strlist *err)
{
	struct bound b[VCFG_MAX_LISTEN + 2];
	unsigned n = 0;
	int errors = 0;

	errors += check_group(cfg, "group", cfg->control.group, err);
	errors += check_group(cfg, "operator_group", cfg->control.operator_group, err);
	for (unsigned i = 0; i < cfg->server.n_listen; i++)
		b[n++] = (struct bound){ &cfg->server.listen[i].addr, "server", "listen", cfg->listen_text[i] };
	if (cfg->life.agent_listen.len)
		b[n++] = (struct bound){ &cfg->life.agent_listen.addr, "server", "agent_listen",
					 cfg->life.agent_listen.text };
	if (cfg->control.metrics_listen.len)
		b[n++] = (struct bound){ &cfg->control.metrics_listen.addr, "control", "metrics_listen",
					 cfg->control.metrics_listen.text };
	/* server.listen against itself is vcfg_validate's (listed twice). */
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = 0; j < i; j++) {
			if (strcmp(b[i].name, b[j].name) == 0 || !addr_clash(b[i].ss, b[j].ss))
				continue;
			vcfg__add_err(err, KEYFMT "%s overlaps %s.%s = %s (%s): both cannot listen", source_of(cfg, b[i].section, b[i].name),
				b[i].section, b[i].name, b[i].text, b[j].section, b[j].name, b[j].text,
				source_of(cfg, b[j].section, b[j].name));
			errors++;
		}
	return errors;
}

static void copy_keys(struct vcfg *dst, const struct vcfg *src, bool reload)
{
	size_t n;
	const struct vcfg_key *schema = vcfg_schema(&n);

	for (size_t i = 0; i < n; i++) {
		bool copy = schema[i].apply || (reload && (schema[i].flags & VCFG_F_RELOAD));
		size_t size = copy ? vcfg__type(&schema[i])->size(&schema[i]) : 0;
		VB_BUG_ON(copy && size == 0);
		memcpy(vcfg__field(dst, &schema[i]), vcfg__cfield(src, &schema[i]), size);
		if (size)
			memcpy(dst->source[i], src->source[i], sizeof(dst->source[i]));
	}
}

void vcfg_copy_live(struct vcfg *dst, const struct vcfg *src)
{
	copy_keys(dst, src, false);
}

void vcfg_copy_reload(struct vcfg *dst, const struct vcfg *src)
{
	copy_keys(dst, src, true);
}

int vcfg_apply_live(const struct vcfg *cfg, const struct vcfg_live *to)
{
	size_t n;
	const struct vcfg_key *schema = vcfg_schema(&n);
	int first = 0;

	for (size_t i = 0; i < n; i++) {
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++)
			seen = schema[j].apply == schema[i].apply;
		if (!schema[i].apply || seen)
			continue;
		int rc = schema[i].apply(to, cfg);
		if (rc < 0 && first == 0)
			first = rc;
	}
	return first;
}

void vcfg_resolve(struct vcfg *cfg)
{
	if (cfg->scheduler.workers == VCFG_AUTO) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		cfg->scheduler.workers = n < 1 ? 1 : n > VRT_MAX_WORKERS ? VRT_MAX_WORKERS : (unsigned)n;
	}
	if (cfg->server.exec_tasks == VCFG_AUTO)
		cfg->server.exec_tasks = 4 * cfg->scheduler.workers;
	if (cfg->server.write_tasks == VCFG_AUTO)
		cfg->server.write_tasks = 2 * cfg->scheduler.workers;
	if (cfg->server.max_inflight_bytes == VCFG_AUTO) {
		long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
		uint64_t q = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz / 4 : 256ull << 20;
		cfg->server.max_inflight_bytes = q > (4ull << 30) ? 4ull << 30 : q < (64ull << 20) ? 64ull << 20 : q;
	}
}
