/* SPDX-License-Identifier: MIT */
/*
 * voltd/schema_gen.c: voltd-schema, the build-time generator that renders
 * the schema (cfg_schema.c) into the files that must repeat its facts, so that a
 * key's default, bounds, unit and live/reload/restart tag are written once:
 *
 *   voltd-schema defaults-h            voltd-defaults.h (voltctl's defaults)
 *   voltd-schema conf TEMPLATE         conf/voltd.conf from conf/voltd.conf.in
 *   voltd-schema man TEMPLATE          man/voltd.conf.5 from man/voltd.conf.5.in
 *   voltd-schema test-config           tests/helpers/test_config.h
 *
 * Output on stdout. A template is the hand-written prose; in it, the line
 * "@keys" (after the comment leader: "#@keys", ".\" @keys") becomes every
 * section with its keys, and "@about SECTION.KEY" ... "@end" holds more
 * prose for one key, printed after its one-line doc. `make regen` rewrites
 * the tracked outputs; tests/doc/test_schema_docs.sh fails on any drift.
 * Exit 1 with "TEMPLATE:LINE: problem" on a template it cannot use.
 */
#include "voltd/cfg.h"
#include "voltd/cfg_internal.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ABOUT 32

struct about {
	const struct vcfg_key *key;
	char *text; /* lines, each ending in '\n' */
	int line;
	bool used;
};

struct tmpl {
	const char *path;
	const char *leader; /* comment leader before "@" */
	char *before, *after; /* around the @keys line */
	struct about about[MAX_ABOUT];
	unsigned n_about;
};

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "voltd-schema: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static char *append(char *s, const char *line)
{
	size_t a = s ? strlen(s) : 0, b = strlen(line);
	char *r = realloc(s, a + b + 1);

	if (!r)
		die("out of memory");
	memcpy(r + a, line, b + 1);
	return r;
}

/* Read a template: the prose before and after "@keys", and the @about blocks. */
static void tmpl_read(struct tmpl *t, const char *path, const char *leader)
{
	FILE *fp = fopen(path, "re");
	char line[4096], directive[64];
	size_t ll = strlen(leader);
	struct about *cur = NULL;
	int n = 0, keys_line = 0;

	memset(t, 0, sizeof(*t));
	t->path = path;
	t->leader = leader;
	t->before = append(NULL, "");
	t->after = append(NULL, "");
	snprintf(directive, sizeof(directive), "%s@", leader);
	if (!fp)
		die("%s: cannot open", path);
	while (fgets(line, sizeof(line), fp)) {
		n++;
		if (strncmp(line, directive, ll + 1) != 0) {
			if (cur)
				cur->text = append(cur->text, line);
			else if (keys_line)
				t->after = append(t->after, line);
			else
				t->before = append(t->before, line);
			continue;
		}
		char *d = line + ll + 1;
		d[strcspn(d, "\n")] = '\0';
		if (strcmp(d, "keys") == 0 && !cur) {
			if (keys_line)
				die("%s:%d: a second @keys (the first is on line %d)", path, n, keys_line);
			keys_line = n;
		} else if (strncmp(d, "about ", 6) == 0 && !cur) {
			const struct vcfg_key *k = vcfg_key_named(d + 6);
			if (!k)
				die("%s:%d: @about %s: no such key in the schema (src/voltd/cfg_schema.c)", path, n, d + 6);
			for (unsigned i = 0; i < t->n_about; i++)
				if (t->about[i].key == k)
					die("%s:%d: @about %s: already on line %d", path, n, d + 6, t->about[i].line);
			if (t->n_about == MAX_ABOUT)
				die("%s:%d: more than %d @about blocks", path, n, MAX_ABOUT);
			cur = &t->about[t->n_about++];
			cur->key = k;
			cur->line = n;
			cur->text = append(NULL, "");
		} else if (strcmp(d, "end") == 0 && cur) {
			cur = NULL;
		} else {
			die("%s:%d: unexpected '%s@%s' (directives: @keys, @about SECTION.KEY ... @end)", path, n,
			    leader, d);
		}
	}
	fclose(fp);
	if (cur)
		die("%s:%d: @about without @end", path, cur->line);
	if (!keys_line)
		die("%s: no %s@keys line", path, leader);
}

static void tmpl_free(struct tmpl *t)
{
	for (unsigned i = 0; i < t->n_about; i++)
		free(t->about[i].text);
	free(t->before);
	free(t->after);
}

static const char *tmpl_about(struct tmpl *t, const struct vcfg_key *k)
{
	for (unsigned i = 0; i < t->n_about; i++)
		if (t->about[i].key == k) {
			t->about[i].used = true;
			return t->about[i].text;
		}
	return "";
}

/* ------------------------------------------------------------ facts */

/* "1..3600000 ms", "auto or 1..256", "on or off", "wait | shed", ... */
static void values(const struct vcfg_key *k, char *buf, size_t len)
{
	vcfg__type(k)->describe(k, buf, len);
}

/* The default as the documentation writes it: a build's own default
 * (modules.dir) by the variable it comes from. */
static const char *doc_default(const struct vcfg_key *k)
{
	return k->def_doc ? k->def_doc : k->def;
}

/* The doc line as a sentence: capitalised unless it starts with a name
 * (a word with '_', e.g. io_uring or metrics_listen), with a final period. */
static void sentence(const struct vcfg_key *k, char *buf, size_t len)
{
	size_t word = strcspn(k->doc, " :;,(");
	bool name = memchr(k->doc, '_', word) != NULL;

	snprintf(buf, len, "%s.", k->doc);
	if (!name)
		buf[0] = (char)toupper((unsigned char)buf[0]);
}

/* ------------------------------------------------------------ outputs */

/* roff: '-' is a hyphen only when written \-; a line may not start with '.' or '\''. */
static void man_text(const char *s)
{
	if (*s == '.' || *s == '\'')
		fputs("\\&", stdout);
	for (; *s; s++) {
		if (*s == '-')
			fputs("\\-", stdout);
		else if (*s == '\\')
			fputs("\\e", stdout);
		else
			putchar(*s);
	}
}

static void man_keys(struct tmpl *t)
{
	size_t nk, ns;
	const struct vcfg_key *k = vcfg_schema(&nk);
	const struct vcfg_section *s = vcfg_sections(&ns);
	char buf[1024];

	for (size_t i = 0; i < ns; i++) {
		printf(".SH [");
		for (const char *c = s[i].name; *c; c++)
			putchar(toupper((unsigned char)*c));
		printf("]\n");
		man_text(s[i].doc);
		putchar('\n');
		for (size_t j = 0; j < nk; j++) {
			if (strcmp(k[j].section, s[i].name) != 0)
				continue;
			printf(".TP\n.B %s\n", k[j].name);
			sentence(&k[j], buf, sizeof(buf));
			man_text(buf);
			putchar('\n');
			fputs(tmpl_about(t, &k[j]), stdout);
			values(&k[j], buf, sizeof(buf));
			printf("Values: ");
			man_text(buf);
			printf(". Default: ");
			man_text(doc_default(&k[j]));
			printf(". %s\n", k[j].apply			 ? "Live." :
					 (k[j].flags & VCFG_F_RELOAD) ? "On reload (SIGHUP or the control socket's reload), not by set." :
									 "Restart only.");
		}
	}
}

static void conf_keys(struct tmpl *t)
{
	size_t nk, ns;
	const struct vcfg_key *k = vcfg_schema(&nk);
	const struct vcfg_section *s = vcfg_sections(&ns);
	char doc[1024], val[512];

	for (size_t i = 0; i < ns; i++) {
		printf("%s[%s]\n# %s\n", i ? "\n" : "", s[i].name, s[i].doc);
		for (size_t j = 0; j < nk; j++) {
			if (strcmp(k[j].section, s[i].name) != 0)
				continue;
			sentence(&k[j], doc, sizeof(doc));
			doc[strlen(doc) - 1] = '\0'; /* the tag goes before the period */
			values(&k[j], val, sizeof(val));
			printf("# %s%s. [%s]\n%s#%s = %s\n", doc, k[j].apply			 ? " (live)" :
								   (k[j].flags & VCFG_F_RELOAD) ? " (on reload)" :
												 "",
			       val, tmpl_about(t, &k[j]), k[j].name, doc_default(&k[j]));
		}
	}
}

static void render(const char *path, const char *leader, void (*keys)(struct tmpl *))
{
	struct tmpl t;

	tmpl_read(&t, path, leader);
	fputs(t.before, stdout);
	keys(&t);
	fputs(t.after, stdout);
	for (unsigned i = 0; i < t.n_about; i++)
		if (!t.about[i].used)
			die("%s:%d: @about %s.%s: not printed", path, t.about[i].line, t.about[i].key->section,
			    t.about[i].key->name);
	tmpl_free(&t);
}

/* tcfg_rt, tcfg_io, tcfg_jobs: a section's keys set in the layer's struct,
 * whose members are named as the keys' fields in struct vcfg after prefix. */
static void test_config_fn(const char *fn, const char *type, const char *section, const char *prefix,
			   const struct vcfg *def)
{
	size_t nk;
	const struct vcfg_key *k = vcfg_schema(&nk);

	printf("\n/* The schema's [%s] values. */\nstatic inline void %s(struct %s *c)\n{\n", section, fn, type);
	for (size_t j = 0; j < nk; j++)
		if (strcmp(k[j].section, section) == 0 && (k[j].flags & VCFG_F_AUTO))
			printf("\tlong n = sysconf(_SC_NPROCESSORS_ONLN);\n\n");
	printf("\tmemset(c, 0, sizeof(*c));\n");
	for (size_t j = 0; j < nk; j++) {
		const char *field = (const char *)def + k[j].offset;
		if (strcmp(k[j].section, section) != 0 || k[j].mod)
			continue; /* a module's key is the module's to hold */
		if (strncmp(k[j].field, prefix, strlen(prefix)) != 0)
			die("%s.%s: its field %s is not in struct %s", k[j].section, k[j].name, k[j].field, type);
		const char *member = k[j].field + strlen(prefix);
		switch (k[j].type) {
		case VCFG_BOOL:
			printf("\tc->%s = %s;\n", member, *(const bool *)field ? "true" : "false");
			break;
		case VCFG_UINT:
			if ((k[j].flags & VCFG_F_AUTO) && *(const unsigned *)field == VCFG_AUTO) {
				/* "auto" counts are online CPUs (vcfg_resolve). */
				printf("\tc->%s = n < %llu ? %llu : n > %llu ? %llu : (unsigned)n; /* auto */\n", member,
				       (unsigned long long)k[j].min, (unsigned long long)k[j].min,
				       (unsigned long long)k[j].max, (unsigned long long)k[j].max);
				break;
			}
			printf("\tc->%s = %u;\n", member, *(const unsigned *)field);
			break;
		case VCFG_U64:
			printf("\tc->%s = %lluull;\n", member, (unsigned long long)*(const uint64_t *)field);
			break;
		case VCFG_ENUM:
			printf("\tc->%s = %d; /* %s */\n", member, *(const int *)field, k[j].def);
			break;
		default:
			die("%s.%s: type %d has no test_config.h form", k[j].section, k[j].name, (int)k[j].type);
		}
	}
	printf("}\n");
}

static void test_config(void)
{
	struct vcfg def;

	vcfg_defaults(&def);
	printf("/* SPDX-License-Identifier: MIT */\n"
	       "/* Generated by voltd-schema test-config (src/voltd/schema_gen.c) from the\n"
	       " * schema in src/voltd/cfg_schema.c: do not edit; `make regen` rewrites it. */\n"
	       "/*\n"
	       " * tests/helpers/test_config.h: the runtime, I/O driver and job\n"
	       " * configurations tests and benchmarks start from: the schema's\n"
	       " * [scheduler], [io] and [jobs] defaults. The lower layers build and test\n"
	       " * without the daemon layer, so they cannot link the schema; this header\n"
	       " * carries its values. Header only: include it once per program.\n"
	       " */\n"
	       "#ifndef VOLTD_TESTS_HELPERS_TEST_CONFIG_H\n#define VOLTD_TESTS_HELPERS_TEST_CONFIG_H\n\n"
	       "#include \"io/io.h\"\n#include \"jobs/job.h\"\n#include \"rt/rt.h\"\n\n"
	       "#include <string.h>\n#include <unistd.h>\n");
	test_config_fn("tcfg_rt", "vrt_config", "scheduler", "scheduler.", &def);
	test_config_fn("tcfg_io", "vio_config", "io", "io.", &def);
	test_config_fn("tcfg_jobs", "vjob_config", "jobs", "server.", &def);
	printf("\n#endif\n");
}

static void define(const char *macro, const char *section, const char *name)
{
	const char *s = vcfg_key_find(section, name)->def;

	printf("/* %s.%s's default (src/voltd/cfg_schema.c) */\n#define %s \"", section, name, macro);
	for (; *s; s++)
		printf(*s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
	printf("\"\n");
}

static void defaults_h(void)
{
	printf("/* Generated by voltd-schema defaults-h (src/voltd/schema_gen.c): do not edit. */\n"
	       "#ifndef VOLTD_DEFAULTS_H\n#define VOLTD_DEFAULTS_H\n");
	define("VOLTD_DEFAULT_CONTROL_SOCKET", "control", "socket");
	define("VOLTD_DEFAULT_SLICE_US", "jobs", "slice_us");
	printf("#endif\n");
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "defaults-h") == 0)
		defaults_h();
	else if (argc == 2 && strcmp(argv[1], "test-config") == 0)
		test_config();
	else if (argc == 3 && strcmp(argv[1], "man") == 0)
		render(argv[2], ".\\\" ", man_keys);
	else if (argc == 3 && strcmp(argv[1], "conf") == 0)
		render(argv[2], "#", conf_keys);
	else
		die("usage: voltd-schema defaults-h | test-config | man TEMPLATE | conf TEMPLATE");
	return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}
