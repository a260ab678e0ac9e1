/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_voltctl_render.c: voltctl's generic renderer on replies
 * it has never seen: scalars as key/value lines, an array of objects as a
 * table, a wide and short one transposed (one column per element), an
 * object of objects as rows named by their keys, nested objects as dotted
 * names, durations with units, modules with their kinds one block each,
 * and a field nobody told voltctl about shows up. Single-threaded; plain asserts (exit 1 on the first difference).
 */
#include "voltctl/render.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static char *render(const char *json)
{
	json_error_t e;
	json_t *j = json_loads(json, 0, &e);
	char *buf = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&buf, &len);

	if (!j || !fp) {
		fprintf(stderr, "bad test input: %s\n", e.text);
		exit(99);
	}
	vcli_render(fp, j);
	fclose(fp);
	json_decref(j);
	return buf;
}

static void expect(const char *json, const char *want)
{
	char *got = render(json);

	if (strcmp(got, want) != 0) {
		fprintf(stderr, "input: %s\nwant:\n%s\ngot:\n%s\n", json, want, got);
		failures++;
	}
	free(got);
}

int main(void)
{
	/* schema and ok are left out; scalars aligned; units; a new field. */
	expect("{\"schema\":\"voltd.x.v1\",\"ok\":true,\"pid\":7,\"uptime_seconds\":2.5,"
	       "\"brand_new\":\"shown\",\"flag\":false,\"none\":null,\"wait_ns\":1500}",
	       "pid                  7\n"
	       "uptime_seconds   2.5 s\n"
	       "brand_new       shown\n"
	       "flag            no\n"
	       "none            -\n"
	       "wait_ns         1.5 us\n");
	/* D16: a long string does not push the numbers of its column to the
	 * right: numbers align among themselves, strings start at the column. */
	expect("{\"version\":\"0.1.0\",\"workers\":12,\"backend_reason\":\"io_uring works here: every feature "
	       "that voltd needs was probed at start\"}",
	       "version         0.1.0\n"
	       "workers            12\n"
	       "backend_reason  io_uring works here: every feature that voltd needs was probed at start\n");
	/* An array of narrow objects: a table with a header. */
	expect("{\"keys\":[{\"key\":\"a.b\",\"value\":\"1\"},{\"key\":\"c.d\",\"value\":\"22\"}]}",
	       "\nkeys\n"
	       "  key  value\n"
	       "  ----------\n"
	       "  a.b      1\n"
	       "  c.d     22\n");
	/* Wide and short: transposed, one column per element. */
	expect("{\"workers\":[{\"worker\":0,\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8},"
	       "{\"worker\":1,\"a\":10,\"b\":20,\"c\":30,\"d\":40,\"e\":50,\"f\":60,\"g\":70,\"h\":80}]}",
	       "\nworkers\n"
	       "  worker  0   1\n"
	       "  -------------\n"
	       "  a       1  10\n"
	       "  b       2  20\n"
	       "  c       3  30\n"
	       "  d       4  40\n"
	       "  e       5  50\n"
	       "  f       6  60\n"
	       "  g       7  70\n"
	       "  h       8  80\n");
	/* An object of objects: rows named by key, nested objects dotted. */
	expect("{\"channels\":{\"jobs\":{\"len\":1,\"lat\":{\"p50_seconds\":0.002}},"
	       "\"replies\":{\"len\":0,\"lat\":{\"p50_seconds\":0}}}}",
	       "\nchannels\n"
	       "  name     len  lat.p50_seconds\n"
	       "  -----------------------------\n"
	       "  jobs       1             2 ms\n"
	       "  replies    0                0\n");
	/* A nested plain object: its own indented section. */
	expect("{\"server\":{\"requests\":3,\"responses\":{\"2xx\":3}}}",
	       "\nserver\n"
	       "  requests  3\n"
	       "\n"
	       "  responses\n"
	       "    2xx  3\n");
	/* An array of objects that hold arrays of objects (modules and their
	 * kinds): a block per object, titled by its name; an object in a cell
	 * by its name (a kind's counters). */
	expect("{\"abi\":\"1.0\",\"modules\":[{\"name\":\"geo\",\"kinds\":[{\"name\":\"resize\",\"flags\":[\"blocking\"],"
	       "\"counters\":[{\"name\":\"a\",\"help\":\"x\"},{\"name\":\"b\",\"help\":\"y\"}]}]},"
	       "{\"name\":\"two\",\"kinds\":[{\"name\":\"k\",\"flags\":[],\"counters\":[]}]}]}",
	       "abi  1.0\n"
	       "\n"
	       "modules\n"
	       "  geo\n"
	       "    name  geo\n"
	       "\n"
	       "    kinds\n"
	       "      name    flags     counters\n"
	       "      --------------------------\n"
	       "      resize  blocking  a, b\n"
	       "\n"
	       "  two\n"
	       "    name  two\n"
	       "\n"
	       "    kinds\n"
	       "      name  flags  counters\n"
	       "      ---------------------\n"
	       "      k            \n");
	if (failures) {
		fprintf(stderr, "test_voltctl_render: %d failures\n", failures);
		return 1;
	}
	printf("test_voltctl_render: ok\n");
	return 0;
}
