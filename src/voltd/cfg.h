/* SPDX-License-Identifier: MIT */
/*
 * voltd/cfg.h: voltd.conf. One schema table (cfg_schema.c) drives
 * parsing (inih), validation, overrides (-s), the effective-config dump,
 * the documentation checks and the tests; the engine that reads it is
 * cfg.c, the value types cfg_types.c.
 *
 * Threading: a struct vcfg is built and validated by one thread and then
 * treated as read-only; live-tunable keys are changed through the owning
 * subsystem (e.g. vrt_set_*), never by writing a shared vcfg.
 */
#ifndef VOLTD_VOLTD_CFG_H
#define VOLTD_VOLTD_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "base/strlist.h"
#include "io/io.h"
#include "rt/rt.h"
#include "server/server.h"

#define VCFG_MAX_LISTEN VSRV_MAX_LISTEN
#define VCFG_AUTO 0 /* value of an "auto" count before it is resolved */
#define VCFG_MAX_KEYS 256  /* schema rows at most: the table's and the modules' keys */
#define VCFG_SOURCE_LEN 128
#define VCFG_MAX_MODULES 32 /* [module.NAME] sections at most */
#define VCFG_NAME_LEN 33    /* a module's name, or a key's: 1..32 bytes and the NUL */
#define VCFG_PATH_LEN 512   /* modules.dir and a module's path: at most 511 bytes */
#define VCFG_DYN_BYTES 32768     /* the values of the modules' keys (struct vcfg's dyn) */
#define VCFG_PENDING_BYTES 16384 /* module assignments waiting for their module */

/* One parsed address:port, normalised text included. Public. */
struct vcfg_addr {
	struct sockaddr_storage addr;
	socklen_t len;
	char text[80]; /* "127.0.0.1:8080", "[::1]:8080" */
};

/*
 * The configuration. The layers' config structs are embedded, so the schema
 * (cfg_schema.c) fills them directly and the daemon hands them to vrt_new, vio_new
 * and vsrv_new as they are: the schema is the only place a default is
 * written, and no field is copied by hand. Sections map onto them:
 * [scheduler] -> scheduler, [io] -> io, [server], [stages] and [jobs] ->
 * server, [modules] -> modules. The modules' keys ([jobs] spin_max_n and
 * sleep_max_ms, the built-in module's, and those of [module.NAME]) are
 * rows made from the modules' declarations, their values in dyn. Fields
 * that are not keys (park_ops, fds, ...) are zero here and set by the
 * daemon at start.
 */
struct vcfg {
	struct vrt_config scheduler;  /* workers: VCFG_AUTO = online CPUs (vcfg_resolve) */
	struct vio_config io;
	struct vsrv_config server;    /* exec_tasks, write_tasks: VCFG_AUTO = from workers */
	char listen_text[VCFG_MAX_LISTEN][80]; /* server.listen as written, normalised:
						* "127.0.0.1:8080", "[::1]:8080" */
	struct {
		char socket[108];
		unsigned mode;
		char group[64]; /* "" = none */
		char operator_group[64]; /* "" = none */
		unsigned max_clients;
		unsigned metrics_max_clients;
		unsigned client_timeout_ms;
		struct vcfg_addr metrics_listen; /* len 0 = off */
	} control;
	/* The daemon's own keys (voltd/life.c): server.shutdown_delay_ms,
	 * server.agent_listen, control.stall_fail_ms. */
	struct {
		unsigned shutdown_delay_ms;
		struct vcfg_addr agent_listen; /* len 0 = off */
		unsigned stall_fail_ms;
	} life;
	struct {
		int level; /* syslog level */
	} log;
	struct {
		char dir[VCFG_PATH_LEN];
	} modules;
	/* The [module.NAME] sections of the file, in file order: each loads
	 * module NAME (vcfg_load_modules). */
	struct vcfg_module {
		char name[64]; /* as written (a bad one is refused by vcfg_load_modules) */
		char where[VCFG_SOURCE_LEN]; /* "FILE:LINE" of its [module.NAME] line */
	} module[VCFG_MAX_MODULES];
	unsigned n_modules;
	bool too_many_modules;      /* sections past VCFG_MAX_MODULES were seen */
	char file[VCFG_SOURCE_LEN]; /* the file read ("" = none), for messages */
	/* The assignments of [module.NAME] sections (the file's, then -s's),
	 * kept until vcfg_load_modules knows the module's keys. Private. */
	struct {
		unsigned char text[VCFG_PENDING_BYTES];
		size_t len;
	} pending;
	/* The values of the modules' keys: the field of a row with .mod is at
	 * its .offset in here. */
	_Alignas(8) unsigned char dyn[VCFG_DYN_BYTES];
	/* Where each key's value came from, by schema index: "default",
	 * "FILE:LINE", "-s" or "set" (vcfg_set records it). */
	char source[VCFG_MAX_KEYS][VCFG_SOURCE_LEN];
};

enum vcfg_type {
	VCFG_BOOL, VCFG_UINT, VCFG_U64, VCFG_ENUM, VCFG_STRING, VCFG_MODE, VCFG_LISTEN,
	VCFG_ADDR, /* one address:port (struct vcfg_addr), or "off" (len 0) */
	VCFG_I64,  /* a module's INT key: int64_t, min and max hold int64_t bounds */
};

#define VCFG_F_AUTO  (1u << 1) /* accepts "auto" (stored as VCFG_AUTO) */
#define VCFG_F_POW2  (1u << 2) /* must be a power of two */
#define VCFG_F_NONE  (1u << 3) /* VCFG_STRING: "none" is stored as "" */
#define VCFG_F_RELOAD (1u << 4) /* applied by a reload (SIGHUP, `reload`), not by `set` */

struct vjob_mod;

/* What a live key's setter acts on: the running daemon's objects (NULL
 * until they exist). */
struct vcfg_live {
	struct vrt *rt;
	struct vsrv *srv;
};
/* A live key's setter: pushes cfg's value of the key to its subsystem.
 * 0 or -errno. Called with the daemon's configuration lock held. */
typedef int vcfg_apply_fn(const struct vcfg_live *to, const struct vcfg *cfg);

/*
 * One row of the schema: every fact about a key, written once. The
 * generator (src/voltd/schema_gen.c) renders the key sections of
 * voltd.conf(5), conf/voltd.conf and tests/helpers/test_config.h from
 * these rows. Public, read-only.
 */
struct vcfg_key {
	const char *section;
	const char *name;
	enum vcfg_type type;
	const char *def;               /* default, as written in voltd.conf */
	uint64_t min, max;             /* bounds of numbers; max length of strings */
	const char *unit;              /* of numbers: "ms", "s", "us", "bytes"; NULL = a count */
	unsigned flags;                /* VCFG_F_* */
	const char *const *choices;    /* VCFG_ENUM: NULL-terminated names */
	int choice_base;               /* VCFG_ENUM: the value stored for choices[0] */
	size_t offset;                 /* of the field in struct vcfg */
	const char *field;             /* its name, e.g. "scheduler.budget" (F() writes both) */
	vcfg_apply_fn *apply;          /* live (set, reload) through this setter; NULL = not live */
	const char *doc;               /* one line */
	const char *def_doc;           /* the default as the documentation writes it, when
					* def is the build's (modules.dir); NULL = def */
	/* A module's key (a row vcfg_load_modules made from its declaration,
	 * or the built-in module's in [jobs]): the module, and the key's
	 * index among its keys (VCFG_MOD_PATH: the section's path key, voltd's
	 * own). NULL for voltd's own keys. */
	struct vjob_mod *mod;
	unsigned mod_key;
};
#define VCFG_MOD_PATH (~0u)

/* One [section] of the file, in file order: its name and one line saying
 * what it configures. Public, read-only. */
struct vcfg_section {
	const char *name;
	const char *doc;
};

/* The schema, in file order; *n receives the number of rows. */
const struct vcfg_key *vcfg_schema(size_t *n);
/* The sections, in file order; *n receives their number. */
const struct vcfg_section *vcfg_sections(size_t *n);
const struct vcfg_key *vcfg_key_find(const char *section, const char *name);
/* The row's index in the schema (of cfg->source, say). */
size_t vcfg_key_index(const struct vcfg_key *k);
/* The same by "section.key"; NULL when there is no such key. */
const struct vcfg_key *vcfg_key_named(const char *key);

/*
 * Errors go to a struct vb_strlist (base/strlist.h): every problem found,
 * each one line "FILE:LINE: section.key: problem". Caller-owned;
 * vb_strlist_fini frees.
 */

/* All defaults ("auto" left as VCFG_AUTO). */
void vcfg_defaults(struct vcfg *cfg);
/* Read FILE over cfg. Returns the number of errors added (0 = fine). A file
 * that cannot be opened is one error. */
int vcfg_load_file(struct vcfg *cfg, const char *path, struct vb_strlist *err);
/* Same from a string (tests); `name` stands for the file name in messages. */
int vcfg_load_string(struct vcfg *cfg, const char *name, const char *text,
		     struct vb_strlist *err);
/* Apply "section.key=value" (the -s option). Returns errors added. */
int vcfg_override(struct vcfg *cfg, const char *assignment, struct vb_strlist *err);
/* Set one key from its text form; 0 or -EINVAL with a message in err
 * (prefixed by `where`, e.g. "FILE:LINE"). */
int vcfg_set(struct vcfg *cfg, const struct vcfg_key *k, const char *value,
	     const char *where, struct vb_strlist *err);
/* Cross-key rules. Returns errors added. */
int vcfg_validate(const struct vcfg *cfg, const char *where, struct vb_strlist *err);
/* What a start needs beyond the keys' own rules, checked against this
 * machine (voltd -t, start, reload): control.group and
 * control.operator_group name existing groups; server.listen,
 * server.agent_listen and control.metrics_listen do not overlap (the same
 * port on the same address, or on a wildcard one). Each error names the
 * key's source ("FILE:LINE: section.key: problem"). Returns errors added. */
int vcfg_check_host(const struct vcfg *cfg, struct vb_strlist *err);
/* Copy the values (and sources) of every live key (one with a setter)
 * from src; vcfg_copy_reload also those applied by a reload (VCFG_F_RELOAD). */
void vcfg_copy_live(struct vcfg *dst, const struct vcfg *src);
void vcfg_copy_reload(struct vcfg *dst, const struct vcfg *src);
/* Push every live key of cfg to its subsystem through the schema's
 * setters, each setter once. Returns 0, or the first setter's -errno (the
 * others still run). */
int vcfg_apply_live(const struct vcfg *cfg, const struct vcfg_live *to);
/* Replace "auto" counts by concrete values (workers = online CPUs, ...). */
void vcfg_resolve(struct vcfg *cfg);
/*
 * Modules. A [module.NAME] section loads module NAME: its path key is
 * voltd's (the file, relative to [modules] dir), every other key one the
 * module declared. The file's assignments in those sections (and -s
 * module.NAME.KEY=V) wait in cfg until vcfg_load_modules, called after the
 * file and the overrides: it opens each module (src/jobs: dlopen, the
 * descriptor's checks) unless may_open is false (a reload: a module loads
 * at start only and is never unloaded, so a section added or gone, or a
 * path naming another file, is an error), makes its declared keys rows of
 * the schema, and sets them from the assignments. Rows are added only
 * here, before the daemon's threads start. Returns errors added.
 */
int vcfg_load_modules(struct vcfg *cfg, bool may_open, struct vb_strlist *err);
/* Start the modules, the built-in one first, then each [module.NAME] in
 * file order: every key's value goes to its module, then the module's init
 * runs with flags (VOLTD_INIT_CHECK for voltd -t) and its kinds register.
 * Stops at the first module that fails. Returns errors added. */
int vcfg_start_modules(const struct vcfg *cfg, uint32_t flags, struct vb_strlist *err);
/* A reload from run to next that a module refuses: one of its restart-only
 * keys changed (modules are never reloaded). Returns errors added. */
int vcfg_check_module_reload(const struct vcfg *run, const struct vcfg *next, struct vb_strlist *err);
/* Text of a key's current value into buf. */
void vcfg_format(const struct vcfg *cfg, const struct vcfg_key *k, char *buf, size_t len);
/* Effective configuration, one "key = value" line each under its
 * [section], to fp; a loaded module's section starts with a comment naming
 * the module, its version and file, and each of its keys not at its
 * default ends with "; SOURCE" (an inline comment: the dump still reads
 * as a configuration). */
void vcfg_dump(const struct vcfg *cfg, FILE *fp);

#endif
