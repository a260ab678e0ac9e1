/* SPDX-License-Identifier: MIT */
/*
 * voltctl/main.c: `voltctl [-s SOCKET] [--json | --prom] COMMAND [ARGS...]`:
 * sends COMMAND ARGS as one line to voltd's control socket and prints the
 * reply as tables (default), the raw JSON line (--json) or Prometheus text
 * (--prom, or the `metrics` command). `top` is a live view (top.c). The
 * socket: -s, else $VOLTD_CONTROL, else control.socket's default from the
 * configuration schema (src/voltd/cfg_schema.c, the only place it is written,
 * through the generated voltd-defaults.h).
 * Exit codes: client.h and voltctl(1). Single-threaded.
 */
#include "config.h"
#include "voltctl/client.h"
#include "voltctl/render.h"
#include "voltctl/voltctl.h"
#include "voltd-defaults.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *fp)
{
	fprintf(fp,
		"usage: voltctl [-s SOCKET] [-t MS] [--json | --prom] COMMAND [ARGS...]\n"
		"       voltctl [-s SOCKET] [-t MS] top [-b] [-n N] [-d SECONDS]\n"
		"\n"
		"Talks to voltd's control socket (-s, else $VOLTD_CONTROL, else %s).\n"
		"  -s, --socket PATH  the control socket\n"
		"  -j, --json         print the daemon's JSON reply as it came\n"
		"  -p, --prom         print Prometheus text (the `metrics` command)\n"
		"  -t, --timeout MS   wait at most MS for a reply (default 10000)\n"
		"  -h, --help         this text; `voltctl help` lists the daemon's commands\n"
		"  -V, --version      voltctl's version\n"
		"Commands: `voltctl help` lists the daemon's, with their arguments (each\n"
		"written once, in the daemon's command table; voltctl(1)); top is voltctl's own.\n"
		"Exit: 0 ok, 1 refused or failed, 2 usage, 69 daemon unreachable, 75 busy, 77 permission denied.\n",
		VOLTD_DEFAULT_CONTROL_SOCKET);
}

/* The command line to send: argv joined by single spaces. NULL (usage)
 * when an argument holds a newline or is empty. */
static char *join_args(int argc, char **argv)
{
	size_t n = 1;
	char *s, *p;

	for (int i = 0; i < argc; i++) {
		if (!*argv[i] || strpbrk(argv[i], "\n\r"))
			return NULL;
		n += strlen(argv[i]) + 1;
	}
	s = p = malloc(n);
	if (!s)
		return NULL;
	for (int i = 0; i < argc; i++) {
		size_t l = strlen(argv[i]);
		if (i)
			*p++ = ' ';
		memcpy(p, argv[i], l);
		p += l;
	}
	*p = '\0';
	return s;
}

static void print_error(const json_t *reply)
{
	const char *msg = json_string_value(json_object_get(reply, "error"));
	const char *need = json_string_value(json_object_get(reply, "need"));
	json_t *errs = json_object_get(reply, "errors"), *e;
	size_t i;

	fprintf(stderr, "voltctl: %s\n", msg ? msg : "the daemon refused the command");
	if (need)
		fprintf(stderr, "voltctl: this needs the '%s' level (see voltctl(1), PERMISSIONS)\n", need);
	json_array_foreach(errs, i, e)
		if (json_is_string(e))
			fprintf(stderr, "  %s\n", json_string_value(e));
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "prom", no_argument, NULL, 'p' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = getenv("VOLTD_CONTROL");
	bool json = false, prom = false;
	struct vcli_conn c;
	json_t *reply = NULL;
	char *line, *raw = NULL, err[512];
	int opt, rc;

	if (!path || !*path)
		path = VOLTD_DEFAULT_CONTROL_SOCKET;
	/* '+': options end at COMMAND, so its ARGS may start with '-'. */
	while ((opt = getopt_long(argc, argv, "+s:jpt:hV", opts, NULL)) != -1) {
		switch (opt) {
		case 's': path = optarg; break;
		case 't': {
			char *end;
			long ms = strtol(optarg, &end, 10);
			if (end == optarg || *end || ms < 1 || ms > 86400000) {
				fprintf(stderr, "voltctl: --timeout takes milliseconds, 1..86400000: '%s'\n", optarg);
				return VCLI_USAGE;
			}
			vcli_timeout_ms = (int)ms;
			break;
		}
		case 'j': json = true; break;
		case 'p': prom = true; break;
		case 'h': usage(stdout); return VCLI_OK;
		case 'V': printf("voltctl %s\n", PACKAGE_VERSION); return VCLI_OK;
		default: usage(stderr); return VCLI_USAGE;
		}
	}
	argc -= optind;
	argv += optind;
	if (json && prom) {
		fprintf(stderr, "voltctl: --json and --prom exclude each other\n");
		return VCLI_USAGE;
	}
	if (argc == 0 && !prom) {
		usage(stderr);
		return VCLI_USAGE;
	}
	if (argc > 0 && strcmp(argv[0], "top") == 0) {
		if (json || prom) {
			fprintf(stderr, "voltctl: top takes -b for plain text, not --json or --prom\n");
			return VCLI_USAGE;
		}
		return vcli_top(path, argc, argv);
	}
	if (prom && argc > 0 && strcmp(argv[0], "metrics") != 0) {
		fprintf(stderr, "voltctl: --prom prints the `metrics` command's text; not with '%s'\n", argv[0]);
		return VCLI_USAGE;
	}
	line = prom && argc == 0 ? strdup("metrics") : join_args(argc, argv);
	if (!line) {
		fprintf(stderr, "voltctl: arguments must be non-empty and hold no newline\n");
		return VCLI_USAGE;
	}
	rc = vcli_connect(&c, path, err, sizeof(err));
	if (rc != VCLI_OK) {
		fprintf(stderr, "voltctl: %s\n", err);
		free(line);
		return rc;
	}
	rc = vcli_call(&c, line, &reply, &raw, err, sizeof(err));
	vcli_close(&c);
	free(line);
	if (rc != VCLI_OK) {
		fprintf(stderr, "voltctl: %s\n", err);
		return rc;
	}
	if (json)
		printf("%s\n", raw);
	if (!json_is_true(json_object_get(reply, "ok"))) {
		if (!json)
			print_error(reply);
		rc = vcli_error_exit(reply);
	} else if (!json) {
		const char *text = json_string_value(json_object_get(reply, "text"));
		const char *schema = json_string_value(json_object_get(reply, "schema"));

		if (text && schema && strcmp(schema, "voltd.metrics.v1") == 0) {
			fputs(text, stdout);
		} else if (schema && strcmp(schema, "voltd.schema.v1") == 0) {
			/* JSON Schemas are JSON: indented, not tabulated. */
			char *s = json_dumps(json_object_get(reply, "schemas"), JSON_INDENT(2) | JSON_SORT_KEYS);
			if (s)
				printf("%s\n", s);
			free(s);
		} else {
			vcli_render(stdout, reply);
		}
	}
	free(raw);
	json_decref(reply);
	if (fflush(stdout) != 0 && rc == VCLI_OK)
		rc = VCLI_FAILED;
	return rc;
}
