/* SPDX-License-Identifier: MIT */
/*
 * ctl/schema.c: the `schema` command: a JSON Schema (draft-07) for every
 * reply kind, keyed by its schema name. The schemas are written once, in
 * src/ctl/schemas.json (also what tests and clients validate against); the
 * build embeds that file as a C string (ctl-schemas.inc). Control thread.
 */
#include "config.h"
#include "ctl/internal.h"

static const char schemas_text[] =
#include "ctl-schemas.inc"
	;

json_t *vctl__schemas(void)
{
	json_error_t err;
	json_t *all = json_loads(schemas_text, 0, &err);
	const char *name;
	json_t *s;

	if (!all)
		return json_object(); /* cannot happen: tests parse the same file */
	json_object_foreach(all, name, s)
		json_object_set_new(s, "$schema", json_string("http://json-schema.org/draft-07/schema#"));
	return all;
}
