/* SPDX-License-Identifier: MIT */
/*
 * modtest/main.c: voltd-modtest, a job module's test harness. It runs one
 * request through one kind without a daemon: the module is opened, its
 * keys set and its init run by the jobs layer's own calls (the loader and
 * the checks voltd uses, after voltd's built-in module, so a clash with a
 * built-in kind is refused as voltd refuses it); the request is routed as
 * voltd routes it; start and the step loop run on this thread with slices
 * of [jobs] slice_us and real sleeps. The response goes to stdout (status
 * line, the kind's header fields, Content-Length, body), what was seen to
 * stderr (slices, sleeps, the slowest step, the kind's counters). No
 * sockets, no workers, no configuration file. voltd-modtest(1) is its page.
 *
 * Exit: 0 answered; 1 the job failed (the kind returned -errno or a code
 * voltd does not know: voltd answers 500/503 in its stead) or a step ran
 * longer than --max-step-us; 2 usage; 78 the module was refused (loading,
 * a key, its init), as voltd -t exits.
 *
 * Threading: one thread, the harness's own; to the module it is the thread
 * voltd uses for anything that is not a worker (thread_index() is the last).
 */
#include "config.h"
#include "voltd-defaults.h"
#include "base/log.h"
#include "base/time.h"
#include "http/response.h"
#include "jobs/job.h"

#include <errno.h>
#include <getopt.h>
#include <stdalign.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <time.h>

#define EXIT_USAGE 2
#define MAX_HEADERS 64
#define MAX_SETS 64

struct opts {
	const char *file, *kind, *name;
	const char *query, *path, *method, *body_file, *out_file;
	const char *headers[MAX_HEADERS];
	size_t n_headers;
	const char *sets[MAX_SETS];
	size_t n_sets;
	uint32_t slice_us;
	int64_t max_step_us; /* -1: no limit */
	int log_level;
	int check;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: voltd-modtest [OPTION]... MODULE.so KIND\n"
		"       voltd-modtest --check [OPTION]... MODULE.so\n"
		"Run one request through job kind KIND of module MODULE.so, without a daemon:\n"
		"the response on stdout, slices, sleeps, the slowest step and the kind's\n"
		"counters on stderr.\n"
		"  --query Q          the request's query (without '?')\n"
		"  --path P           the request's path (default: the kind's route)\n"
		"  --method M         its method (default: the first the kind serves)\n"
		"  --header 'N: V'    a request header field (repeatable)\n"
		"  --body FILE        the request body (- for stdin)\n"
		"  --set KEY=VALUE    a key of the module's section (repeatable)\n"
		"  --name NAME        the module's NAME, as [module.NAME] (default: the file's\n"
		"                     name without .so)\n"
		"  --slice-us N       the slice (default %s, [jobs] slice_us's)\n"
		"  --max-step-us N    exit 1 when start or a step runs longer than N us\n"
		"  --out FILE         write the body to FILE instead of stdout\n"
		"  --log-level LEVEL  the module's log lines shown (default info)\n"
		"  --check            load, set the keys, init as voltd -t does; no request\n"
		"  -h, --help         this text;  -V, --version  the version\n"
		"Exit: 0 answered, 1 the job failed or a step was over --max-step-us,\n"
		"2 usage, 78 the module refused. voltd-modtest(1) says more.\n",
		VOLTD_DEFAULT_SLICE_US);
}

static int bad_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "voltd-modtest: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(voltd-modtest --help lists the options)\n");
	return EXIT_USAGE;
}

/* A decimal in [min, max], or -1. */
static int64_t number(const char *s, int64_t min, int64_t max)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	return v;
}

static int parse(int argc, char **argv, struct opts *o)
{
	enum { O_QUERY = 256, O_PATH, O_METHOD, O_HEADER, O_BODY, O_SET, O_NAME, O_SLICE, O_MAXSTEP,
	       O_OUT, O_LOG, O_CHECK };
	static const struct option longs[] = {
		{ "query", required_argument, NULL, O_QUERY },
		{ "path", required_argument, NULL, O_PATH },
		{ "method", required_argument, NULL, O_METHOD },
		{ "header", required_argument, NULL, O_HEADER },
		{ "body", required_argument, NULL, O_BODY },
		{ "set", required_argument, NULL, O_SET },
		{ "name", required_argument, NULL, O_NAME },
		{ "slice-us", required_argument, NULL, O_SLICE },
		{ "max-step-us", required_argument, NULL, O_MAXSTEP },
		{ "out", required_argument, NULL, O_OUT },
		{ "log-level", required_argument, NULL, O_LOG },
		{ "check", no_argument, NULL, O_CHECK },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	int c;

	o->slice_us = (uint32_t)number(VOLTD_DEFAULT_SLICE_US, 1, UINT32_MAX);
	o->max_step_us = -1;
	o->log_level = LOG_INFO;
	while ((c = getopt_long(argc, argv, "hV", longs, NULL)) != -1) {
		switch (c) {
		case O_QUERY: o->query = optarg; break;
		case O_PATH: o->path = optarg; break;
		case O_METHOD: o->method = optarg; break;
		case O_BODY: o->body_file = optarg; break;
		case O_NAME: o->name = optarg; break;
		case O_OUT: o->out_file = optarg; break;
		case O_CHECK: o->check = 1; break;
		case O_HEADER:
			if (o->n_headers == MAX_HEADERS)
				return bad_usage("more than %s --header", "64");
			o->headers[o->n_headers++] = optarg;
			break;
		case O_SET:
			if (o->n_sets == MAX_SETS)
				return bad_usage("more than %s --set", "64");
			o->sets[o->n_sets++] = optarg;
			break;
		case O_SLICE: {
			int64_t v = number(optarg, 1, 100000);
			if (v < 0)
				return bad_usage("--slice-us %s: not a number of microseconds in [1, 100000]", optarg);
			o->slice_us = (uint32_t)v;
			break;
		}
		case O_MAXSTEP:
			o->max_step_us = number(optarg, 1, INT64_MAX / 1000);
			if (o->max_step_us < 0)
				return bad_usage("--max-step-us %s: not a positive number of microseconds", optarg);
			break;
		case O_LOG:
			o->log_level = vb_log_level_parse(optarg);
			if (o->log_level < 0)
				return bad_usage("--log-level %s: not err, warning, notice, info or debug", optarg);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("voltd-modtest %s (module ABI %d.%d)\n", PACKAGE_VERSION, VOLTD_MODULE_ABI_MAJOR,
			       VOLTD_MODULE_ABI_MINOR);
			exit(0);
		default:
			fprintf(stderr, "(voltd-modtest --help lists the options)\n");
			return EXIT_USAGE;
		}
	}
	if (optind + (o->check ? 1 : 2) != argc)
		return bad_usage("%s", o->check ? "--check takes one argument, MODULE.so"
						: "takes two arguments, MODULE.so and KIND");
	o->file = argv[optind];
	o->kind = o->check ? NULL : argv[optind + 1];
	return 0;
}

/* The module's NAME from its file: "dir/count.so" -> "count". */
static int name_from_file(const char *file, char *out, size_t len)
{
	const char *base = strrchr(file, '/');
	size_t n;

	base = base ? base + 1 : file;
	n = strlen(base);
	if (n > 3 && strcmp(base + n - 3, ".so") == 0)
		n -= 3;
	if (n == 0 || n >= len)
		return -1;
	memcpy(out, base, n);
	out[n] = '\0';
	return 0;
}

/* Open the module, set its keys, init it (after the built-in module, as
 * voltd does). 0, or EX_CONFIG with the refusal printed. */
static int load(const struct opts *o, const char *name, struct vjob_mod **out)
{
	char err[1024];
	struct vjob_mod *m;
	int rc;

	rc = vjob_mod_start(vjob_mod_builtin(), o->check ? VOLTD_INIT_CHECK : 0, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "voltd-modtest: the built-in module: %s\n", err);
		return EX_SOFTWARE;
	}
	rc = vjob_mod_open(name, o->file, &m, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "voltd-modtest: module.%s: %s\n", name, err);
		return EX_CONFIG;
	}
	for (size_t i = 0; i < o->n_sets; i++) {
		const char *eq = strchr(o->sets[i], '=');
		char key[64];
		int k;

		if (!eq || eq == o->sets[i] || (size_t)(eq - o->sets[i]) >= sizeof(key)) {
			fprintf(stderr, "voltd-modtest: --set %s: not KEY=VALUE\n", o->sets[i]);
			rc = EXIT_USAGE;
			goto refused;
		}
		memcpy(key, o->sets[i], (size_t)(eq - o->sets[i]));
		key[eq - o->sets[i]] = '\0';
		k = vjob_mod_key_find(m, key);
		if (k < 0) {
			fprintf(stderr, "voltd-modtest: module.%s.%s: unknown key (the module declares", name, key);
			for (size_t j = 0; j < vjob_mod_key_count(m); j++)
				fprintf(stderr, "%s %s", j ? "," : "", vjob_mod_key(m, j)->name);
			fprintf(stderr, "%s)\n", vjob_mod_key_count(m) ? "" : " none");
			rc = EX_CONFIG;
			goto refused;
		}
		if (vjob_mod_key_set(m, (size_t)k, eq + 1, err, sizeof(err)) < 0) {
			fprintf(stderr, "voltd-modtest: module.%s.%s: %s\n", name, key, err);
			rc = EX_CONFIG;
			goto refused;
		}
	}
	rc = vjob_mod_start(m, o->check ? VOLTD_INIT_CHECK : 0, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "voltd-modtest: module.%s: %s\n", name, err);
		rc = EX_CONFIG;
		goto refused;
	}
	vjob_registry_freeze();
	fprintf(stderr, "module: %s %s (%s), ABI %d.%u, runs on %d.%u%s%s\n", name, vjob_mod_version(m),
		vjob_mod_path(m), VOLTD_MODULE_ABI_MAJOR, vjob_mod_abi_minor(m), VOLTD_MODULE_ABI_MAJOR,
		vjob_mod_min_minor(m), *vjob_mod_build_id(m) ? ", build id " : "", vjob_mod_build_id(m));
	*out = m;
	return 0;
refused:
	vjob_mod_close(m); /* opened, not started: freed (its file stays mapped) */
	return rc;
}

/* The whole of a file ("-": stdin) in a malloc'd buffer: 0, or -errno. */
static int slurp(const char *file, uint8_t **out, size_t *len)
{
	FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "rb");
	uint8_t *buf = NULL;
	size_t cap = 0, n = 0;
	int e = ENOMEM;

	if (!f)
		return -errno;
	for (;;) {
		if (n == cap) {
			uint8_t *b = realloc(buf, cap ? cap * 2 : 65536);
			if (!b)
				goto fail;
			buf = b;
			cap = cap ? cap * 2 : 65536;
		}
		size_t got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (got == 0)
			break;
	}
	if (ferror(f)) {
		e = errno ? errno : EIO;
		goto fail;
	}
	if (f != stdin)
		fclose(f);
	*out = buf;
	*len = n;
	return 0;
fail:
	free(buf);
	if (f != stdin)
		fclose(f);
	return -e;
}

/* The header fields as the HTTP parser keeps them: "name:value\n" each,
 * the value's blanks trimmed. 0, or EXIT_USAGE with the problem printed. */
static int fields(const struct opts *o, char **out, size_t *len)
{
	size_t cap = 1, n = 0;
	char *buf;

	for (size_t i = 0; i < o->n_headers; i++)
		cap += strlen(o->headers[i]) + 2;
	buf = malloc(cap);
	if (!buf)
		return EX_OSERR;
	for (size_t i = 0; i < o->n_headers; i++) {
		const char *h = o->headers[i], *colon = strchr(h, ':'), *v, *end;

		if (!colon || colon == h)
			goto bad;
		for (const char *p = h; p < colon; p++)
			if (*p <= ' ' || *p >= 0x7f || strchr("\"(),/:;<=>?@[\\]{}", *p))
				goto bad;
		for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
			;
		for (end = v + strlen(v); end > v && (end[-1] == ' ' || end[-1] == '\t'); end--)
			;
		for (const char *p = v; p < end; p++)
			if ((unsigned char)*p < ' ' && *p != '\t')
				goto bad;
		memcpy(buf + n, h, (size_t)(colon - h) + 1);
		n += (size_t)(colon - h) + 1;
		memcpy(buf + n, v, (size_t)(end - v));
		n += (size_t)(end - v);
		buf[n++] = '\n';
		continue;
bad:
		free(buf);
		fprintf(stderr, "voltd-modtest: --header '%s': not 'Name: value' (a token, a colon, a value without control characters)\n", h);
		return EXIT_USAGE;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

/* The first method of an Allow value, in buf. */
static const char *first_method(const char *allow, char *buf, size_t len)
{
	size_t n = strcspn(allow, ", ");

	if (n == 0 || n >= len)
		return "GET";
	memcpy(buf, allow, n);
	buf[n] = '\0';
	return buf;
}

static void sleep_until(int64_t wake_ns)
{
	struct timespec ts = { .tv_sec = wake_ns / 1000000000, .tv_nsec = wake_ns % 1000000000 };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* The response as voltd sends it, less Date, Server and Connection. */
static int print_response(const struct opts *o, const char *method, const struct vjob_result *r)
{
	FILE *body_to = stdout;

	printf("HTTP/1.1 %d %s\n", r->status, vhttp_status_reason(r->status));
	for (size_t i = 0; i < r->hdrs_len; i++)
		if (r->hdrs[i] != '\r')
			putchar(r->hdrs[i]);
	/* As voltd sends it: a status without a body (204, 304) has no
	 * Content-Length either; HEAD gets the Content-Length of the body it
	 * does not get. */
	if (!vhttp_status_has_body(r->status)) {
		printf("\n");
		return fflush(stdout) == 0 ? 0 : EX_IOERR;
	}
	printf("Content-Length: %zu\n\n", r->body_len);
	if (strcmp(method, "HEAD") == 0 || !r->body_len)
		return fflush(stdout) == 0 ? 0 : EX_IOERR;
	if (o->out_file) {
		body_to = fopen(o->out_file, "wb");
		if (!body_to) {
			fprintf(stderr, "voltd-modtest: --out %s: %s\n", o->out_file, strerror(errno));
			return EX_CANTCREAT;
		}
	}
	if (fwrite(r->body, 1, r->body_len, body_to) != r->body_len || fflush(body_to) != 0) {
		fprintf(stderr, "voltd-modtest: writing the body: %s\n", strerror(errno));
		return EX_IOERR;
	}
	if (body_to != stdout && fclose(body_to) != 0)
		return EX_IOERR;
	return 0;
}

/* The slowest call of the kind (start is call 0), and the first over
 * --max-step-us. */
struct timing {
	int64_t slowest, over;
	unsigned slowest_at, over_at;
};

static void timed(const struct opts *o, int64_t took, unsigned at, struct timing *tm)
{
	if (took > tm->slowest) {
		tm->slowest = took;
		tm->slowest_at = at;
	}
	if (o->max_step_us > 0 && took > o->max_step_us * 1000 && !tm->over) {
		tm->over = took;
		tm->over_at = at;
	}
}

static int run(const struct opts *o, const struct vjob_kind *kind)
{
	alignas(max_align_t) static unsigned char block[VJOB_BLOCK];
	struct vjob_config cfg = { .slice_us = o->slice_us };
	struct vjob_input in = { 0 };
	char mbuf[32], *hdrs = NULL;
	const struct vjob_kind *routed;
	struct vjob *job;
	struct timing tm = { 0 };
	int64_t t;
	unsigned steps = 0, sleeps = 0;
	int rc;

	in.method = o->method ? o->method : first_method(kind->allow, mbuf, sizeof(mbuf));
	in.path = o->path ? o->path : kind->path;
	in.path_len = strlen(in.path);
	in.query = o->query ? o->query : "";
	in.query_len = strlen(in.query);
	switch (vjob_route(in.path, in.path_len, in.method, &routed)) {
	case VJOB_ROUTE_OK:
		if (routed == kind)
			break;
		fprintf(stderr, "voltd-modtest: %s %s is routed to kind %s, not %s\n", in.method, in.path,
			routed->name, kind->name);
		return EXIT_USAGE;
	case VJOB_ROUTE_BAD_METHOD:
		fprintf(stderr, "voltd-modtest: kind %s does not serve %s (voltd answers 405, Allow: %s)\n",
			routed->name, in.method, routed->allow);
		return EXIT_USAGE;
	default:
		fprintf(stderr, "voltd-modtest: no kind serves %s (voltd answers 404)\n", in.path);
		return EXIT_USAGE;
	}
	rc = fields(o, &hdrs, &in.fields_len);
	if (rc)
		return rc;
	in.fields = hdrs;
	in.n_fields = (uint32_t)o->n_headers;
	if (o->body_file) {
		rc = slurp(o->body_file, &in.body, &in.body_len);
		if (rc < 0) {
			fprintf(stderr, "voltd-modtest: --body %s: %s\n", o->body_file, strerror(-rc));
			free(hdrs);
			return EX_NOINPUT;
		}
	}
	fprintf(stderr, "request: %s %s%s%s, kind %s\n", in.method, in.path, *in.query ? "?" : "", in.query,
		kind->name);

	/* start runs in vjob_new_at: it is "step 0" below. The job goes in a
	 * block as the server's reused ones, when its state fits. */
	t = vb_now_ns();
	rc = vjob_new_at(block, sizeof(block), kind, &in, &job);
	if (rc < 0) {
		fprintf(stderr, "voltd-modtest: no memory for the job\n");
		free(hdrs);
		return EX_OSERR;
	}
	timed(o, vb_now_ns() - t, 0, &tm);
	while (!vjob_done(job)) {
		enum vjob_step r;

		t = vb_now_ns();
		r = vjob_step(job, vjob_slice_deadline(&cfg, t));
		timed(o, vb_now_ns() - t, ++steps, &tm);
		if (r == VJOB_SLEEP) {
			sleeps++;
			sleep_until(vjob_wake_ns(job));
		}
	}

	rc = print_response(o, in.method, vjob_result(job));
	fprintf(stderr, "slices: %u\nsleeps: %u\n", vjob_slices(job), sleeps);
	if ((void *)job == (void *)block)
		fprintf(stderr, "job: in a reused job block (a state of up to %zu bytes fits: no allocation)\n",
			vjob_state_free());
	else
		fprintf(stderr, "job: allocated (its state is above the %zu bytes that fit a reused job block)\n",
			vjob_state_free());
	fprintf(stderr, "slowest step: %.3f ms (%s", (double)tm.slowest / 1e6, tm.slowest_at ? "step " : "start");
	if (tm.slowest_at)
		fprintf(stderr, "%u of %u", tm.slowest_at, steps);
	fprintf(stderr, "; slice %" PRIu32 " us)\n", o->slice_us);
	for (unsigned i = 0; i < vjob_kind_counter_count(kind); i++)
		fprintf(stderr, "counter %s.%s: %" PRIu64 "\n", kind->name, vjob_kind_counter_decl(kind, i).name,
			vjob_kind_counter(kind, i));
	if (vjob_error(job)) {
		fprintf(stderr, "failed: kind %s returned %d (%s): voltd answers %d in its stead\n", kind->name,
			vjob_error(job), strerror(-vjob_error(job)), vjob_result(job)->status);
		rc = rc ? rc : 1;
	}
	if (tm.over) {
		fprintf(stderr, "over budget: %s", tm.over_at ? "step " : "start");
		if (tm.over_at)
			fprintf(stderr, "%u", tm.over_at);
		fprintf(stderr, " ran %.3f ms, above --max-step-us %" PRId64 "\n", (double)tm.over / 1e6,
			o->max_step_us);
		rc = rc ? rc : 1;
	}
	vjob_free(job);
	free(hdrs);
	return rc;
}

int main(int argc, char **argv)
{
	struct opts o = { 0 };
	char name[64];
	struct vjob_mod *m = NULL;
	const struct vjob_kind *kind;
	int rc = parse(argc, argv, &o);

	if (rc)
		return rc;
	vb_log_init(false);
	vb_log_set_level(o.log_level);
	if (!o.name && name_from_file(o.file, name, sizeof(name)) < 0)
		return bad_usage("%s: no module name in the file's name: give --name", o.file);
	rc = load(&o, o.name ? o.name : name, &m);
	if (rc) {
		vjob_mod_shutdown_all(); /* the built-in module's */
		return rc;
	}
	if (o.check) {
		fprintf(stderr, "module OK\n");
		vjob_mod_shutdown_all();
		return 0;
	}
	kind = vjob_kind_by_name(o.kind);
	if (!kind) {
		fprintf(stderr, "voltd-modtest: no kind %s; module %s serves", o.kind, vjob_mod_name(m));
		for (size_t i = 0; i < vjob_mod_kind_count(m); i++)
			fprintf(stderr, "%s %s", i ? "," : "", vjob_mod_kind(m, i)->name);
		fprintf(stderr, "\n");
		vjob_mod_shutdown_all();
		return EXIT_USAGE;
	}
	rc = run(&o, kind);
	vjob_mod_shutdown_all();
	return rc;
}
