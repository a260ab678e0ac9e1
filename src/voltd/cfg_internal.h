/* SPDX-License-Identifier: MIT */
/*
 * voltd/cfg_internal.h: what the configuration's files share and nobody
 * else uses (private to src/voltd's cfg*.c and schema_gen.c):
 *  - the value types, one row of operations per enum vcfg_type
 *    (cfg_types.c): how a key's text is parsed into its field, formatted
 *    back, how many bytes of struct vcfg it holds, and how the
 *    documentation names its values. The engine (cfg.c) and the generator
 *    reach every type through this table and never switch on the type;
 *  - the rows the schema grows by (cfg_schema.c): the modules' keys, made
 *    by cfg_modules.c.
 * Single-threaded, as cfg.h.
 */
#ifndef VOLTD_VOLTD_CFG_INTERNAL_H
#define VOLTD_VOLTD_CFG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "voltd/cfg.h"

struct vcfg_type_ops {
	/* Store the key's value from its text: into its field of cfg (and,
	 * for LISTEN, the listen fields beside it). 0, or -EINVAL (-ENOMEM)
	 * with the problem in why ("'x' is not a boolean ..."): the engine
	 * writes it after "WHERE: section.key: ". Nothing is changed on
	 * failure. */
	int (*parse)(struct vcfg *cfg, const struct vcfg_key *k, const char *value, char *why, size_t len);
	/* The value's text as voltd.conf writes it, NUL-terminated in buf. */
	void (*format)(const struct vcfg *cfg, const struct vcfg_key *k, char *buf, size_t len);
	/* Bytes of the field, for a copy of its value; 0 when the value is
	 * not one field (no live or reload-only key may have such a type). */
	size_t (*size)(const struct vcfg_key *k);
	/* What the documentation says its values are: "on or off",
	 * "auto or 1..256", "1..3600000 ms", "wait | shed". */
	void (*describe)(const struct vcfg_key *k, char *buf, size_t len);
};

/* The operations of k's type. */
const struct vcfg_type_ops *vcfg__type(const struct vcfg_key *k);

/* The field of key k in cfg. */
static inline void *vcfg__field(struct vcfg *cfg, const struct vcfg_key *k)
{
	return (char *)cfg + k->offset;
}

static inline const void *vcfg__cfield(const struct vcfg *cfg, const struct vcfg_key *k)
{
	return (const char *)cfg + k->offset;
}

/* The nearest known "section.key" to section and key (or the nearest
 * section when key is NULL) into buf, when close enough to be a typo;
 * NULL when none is. */
const char *vcfg__suggest(const char *section, const char *key, char *buf, size_t len);
/* Append one formatted error to e (NULL: count nothing); out of memory
 * loses the message, not the count. cfg.c. */
void vcfg__add_err(struct vb_strlist *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* An assignment of a module's section that waits for its module. */
struct vcfg__pending {
	int line;             /* in the file; 0 for -s */
	const char *where;    /* "FILE:LINE" or "-s" */
	const char *section;  /* "module.NAME" */
	const char *key, *value;
};
/* The next pending assignment of cfg after *pos (0 to start), in the order
 * they were made; false after the last. */
bool vcfg__pending_next(const struct vcfg *cfg, size_t *pos, struct vcfg__pending *out);

/* The built-in module's keys are rows of this section (voltd.conf's
 * [jobs], as before the built-in kinds were a module). */
#define VCFG_BUILTIN_SECTION "jobs"

/* Append rows to the schema (a module's keys, after its section): a row
 * with .mod gets its field in struct vcfg's dyn (its .offset is set
 * here). Before the daemon's threads start. 0, or -ENOSPC when the rows or
 * dyn are full. */
int vcfg__add_rows(const struct vcfg_key *rows, size_t n);
/* Append a section (its strings must live as long as the process). 0 or
 * -ENOSPC. */
int vcfg__add_section(const char *name, const char *doc);
/* Is section a module's (module.NAME)? */
bool vcfg__module_section(const char *section);

/* The rows of module m's declared keys, in section (which must live as
 * long as the process), into out (room rows at most): their number, or
 * -ENOSPC. The built-in module's are made while the schema is built. */
int vcfg__module_rows(struct vjob_mod *m, const char *section, struct vcfg_key *out, size_t room);
/* The setter of every live module key: pushes each to its module. */
int vcfg__live_modules(const struct vcfg_live *to, const struct vcfg *cfg);

#endif
