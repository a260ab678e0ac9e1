/* SPDX-License-Identifier: MIT */
/*
 * ctl/commands.c: the command table (dispatch, help text and permission
 * check come from it) and every command. Control thread only.
 *
 * A command line is split on blanks; argv[0] names the command. Each reply
 * is one JSON object with "schema":"voltd.<reply>.v1" and "ok"; errors are
 * voltd.error.v1 with a "code" (doc/control.md lists them).
 */
#include "config.h"
#include "ctl/internal.h"
#include "base/compiler.h"
#include "base/log.h"
#include "base/time.h"
#include "jobs/job.h"
#include "server/server.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ARGS 128
/* A handler's answer for arguments its row's counts let through but its
 * form refuses (set's pairs, clear's one word): run() turns it into the
 * row's usage error. Compared, never dereferenced. */
static char usage_marker;
#define USAGE ((json_t *)(void *)&usage_marker)

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0 when the
 * bytes there are not one (invalid, overlong, a surrogate, past U+10FFFF,
 * or cut short by n). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* The offset of the first byte of s that is not valid UTF-8, or -1. */
static long utf8_invalid_at(const char *s)
{
	size_t n = strlen(s);

	for (size_t i = 0; i < n;) {
		size_t l = utf8_seq((const unsigned char *)s + i, n - i);
		if (!l)
			return (long)i;
		i += l;
	}
	return -1;
}

/* Make s valid UTF-8 in place: a sequence cut short at the end (by a
 * truncation) is dropped, any other invalid byte becomes '?'. */
static void utf8_clean(char *s)
{
	size_t n = strlen(s);

	for (size_t i = 0; i < n;) {
		size_t l = utf8_seq((const unsigned char *)s + i, n - i);
		if (l) {
			i += l;
			continue;
		}
		/* A lead byte whose sequence would run past the end: cut there. */
		unsigned char b = (unsigned char)s[i];
		size_t want = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc2 ? 2 : 0;
		bool tail = want && i + want > n;
		for (size_t k = i + 1; tail && k < n; k++)
			tail = ((unsigned char)s[k] & 0xc0) == 0x80;
		if (tail) {
			s[i] = '\0';
			return;
		}
		s[i++] = '?';
	}
}

/* Made once by vctl__error_init: what vctl__error returns when it cannot
 * allocate, so that a failed error can never be taken for success (a NULL
 * from a command means "ok"). Shared: vctl__error_set leaves it alone. */
static json_t *oom_error;

int vctl__error_init(void)
{
	if (!oom_error)
		oom_error = json_pack("{s:s, s:b, s:s, s:s}", "schema", "voltd.error.v1", "ok", 0, "error",
				      "out of memory", "code", "internal");
	return oom_error ? 0 : -ENOMEM;
}

json_t *vctl__error(const char *code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	json_t *e;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	utf8_clean(msg); /* arguments may be cut anywhere by the bound above */
	e = json_pack("{s:s, s:b, s:s, s:s}", "schema", "voltd.error.v1", "ok", 0, "error", msg, "code", code);
	return e ? e : json_incref(oom_error);
}

void vctl__error_set(json_t *e, const char *key, json_t *value)
{
	if (e == oom_error || !value)
		json_decref(value);
	else
		json_object_set_new(e, key, value);
}

static json_t *string_array(const struct vb_strlist *l)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < l->n; i++) {
		char *m = strdup(l->msg[i]);
		if (m)
			utf8_clean(m); /* a message may quote the caller's bytes, cut */
		json_array_append_new(a, json_string(m ? m : "?"));
		free(m);
	}
	return a;
}

/* ------------------------------------------------------------ commands */

static json_t *cmd_ping(struct vctl *ctl, const struct vctl_peer *peer, int argc, char **argv, json_t *r)
{
	json_object_set_new(r, "pid", json_integer(getpid()));
	json_object_set_new(r, "uptime_seconds", json_real((double)(vb_now_ns() - ctl->start_ns) / 1e9));
	/* What a load balancer sees: ready, drained (drain), or stopping. */
	if (ctl->srv)
		json_object_set_new(r, "state", json_string(vsrv_draining(ctl->srv) ? "stopping" :
							   vsrv_ready(ctl->srv)	   ? "ready" :
											     "draining"));
	return NULL;
}

static json_t *cmd_version(struct vctl *ctl, const struct vctl_peer *peer, int argc, char **argv, json_t *r)
{
	const struct vctl_hooks *h = &ctl->hooks;
	json_object_set_new(r, "version", json_string(h->version ? h->version : PACKAGE_VERSION));
	json_object_set_new(r, "features", json_string(h->features ? h->features : ""));
	json_object_set_new(r, "backend", json_string(h->backend ? h->backend : ""));
	json_object_set_new(r, "backend_reason", json_string(h->backend_reason ? h->backend_reason : ""));
	return NULL;
}

static json_t *cmd_help(struct vctl *ctl, const struct vctl_peer *peer, int argc, char **argv, json_t *r)
{
	json_t *a = json_array();

	for (size_t i = 0; i < vctl__n_commands; i++) {
		const struct vctl_cmd *c = &vctl__commands[i];
		json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s, s:b}", "name", c->name, "args", c->args,
						   "level", vctl__level_name(c->level), "help", c->help,
						   "allowed", peer->level >= c->level));
	}
	json_object_set_new(r, "level", json_string(vctl__level_name(peer->level)));
	json_object_set_new(r, "commands", a);
	return NULL;
}

static json_t *cmd_stats(struct vctl *ctl, const struct vctl_peer *peer, int argc, char **argv, json_t *r)
{
	if (vctl__stats_json(ctl, argc == 2 ? argv[1] : NULL, r) < 0) {
		char list[256] = "";
		size_t off = 0;
		for (unsigned i = 0; vctl__stats_sections[i] && off < sizeof(list); i++)
			off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "",
						vctl__stats_sections[i]);
		return vctl__error("invalid", "stats: no section '%s' (sections: %s)", argv[1], list);
	}
	return NULL;
}

static json_t *cmd_metrics(struct vctl *ctl, const struct vctl_peer *peer, int argc, char **argv, json_t *r)
{
	char *text = NULL;
	size_t len = 0;
	FILE *fp;

	fp = open_memstream(&text, &len);
	if (!fp)
		return vctl__error("internal", "out of memory");
	vctl__prom_write(ctl, fp);
	fclose(fp);
	json_object_set_new(r, "content_type", json_string("text/plain; version=0.0.4"));
	json_object_set_new(r, "text", json_stringn(text, len));
	free(text);
	return NULL;
}

static json_t *cmd_hist(struct vctl *ctl, const struct vctl_peer *peer, int argc, char **argv, json_t *r)
{
	int worker = -1;
	char *end;

	if (argc == 3) {
		long w = strtol(argv[2], &end, 10);
		if (*end || w < 0 || w >= VCTL_MAX_WORKERS)
			return vctl__error("usage", "hist: '%s' is not a worker number", argv[2]);
		worker = (int)w;
	}
	if (vctl__hist_json(ctl, argv[1], worker, r) < 0)
		return vctl__error("invalid", "hist: no histogram '%s'%s%s", argv[1], argc == 3 ? " for worker " : "",
				   argc == 3 ? argv[2] : "");
	return NULL;
}

/* The records a `trace dump` returns at most in one reply, by default. */
#define TRACE_DUMP_MAX 4096

static json_t *trace_record(struct vctl *ctl, const struct vsrv_trace_rec *x)
{
	json_t *t = json_array(), *w = json_array();

	for (unsigned p = 0; p < VSRV_TP_N; p++)
		json_array_append_new(t, json_integer(x->t[p]));
	for (unsigned i = 0; i < VSRV_TW_N; i++)
		json_array_append_new(w, json_integer(x->worker[i]));
	return json_pack("{s:s, s:i, s:o, s:I, s:I, s:I, s:o}", "kind", vsrv_kind_name(ctl->srv, x->kind),
			 "status", (int)x->status, "workers", w, "slices", (json_int_t)x->slices, "run_ns",
			 (json_int_t)x->run_ns, "gap_max_ns", (json_int_t)x->gap_max_ns, "t", t);
}

/* trace: the sampling and the log's counts; trace EVERY: trace one request
 * in EVERY (0: none); trace dump [MAX]: also move up to MAX finished
 * records into the reply (the log keeps the rest). */
static json_t *cmd_trace(struct vctl *ctl, const struct vctl_peer *peer, int argc, char **argv, json_t *r)
{
	struct vsrv_trace_status st;
	struct vsrv_trace_rec *recs = NULL;
	unsigned long max = 0, n = 0;
	char *end;

	if (!ctl->srv)
		return vctl__error("unsupported", "trace: no server");
	if (argc >= 2 && strcmp(argv[1], "dump") == 0) {
		max = TRACE_DUMP_MAX;
		if (argc == 3) {
			max = strtoul(argv[2], &end, 10);
			if (*end || !*argv[2] || max == 0 || max > VSRV_TRACE_LOG)
				return USAGE;
		}
		if (!(recs = malloc(max * sizeof(*recs))))
			return vctl__error("internal", "out of memory");
	} else if (argc == 2) {
		unsigned long every = strtoul(argv[1], &end, 10);

		if (*end || !*argv[1] || every > 1000000)
			return USAGE;
		if (vsrv_trace_set(ctl->srv, (unsigned)every) < 0)
			return vctl__error("internal", "trace: out of memory for the log");
	} else if (argc == 3) {
		return USAGE;
	}
	n = vsrv_trace_take(ctl->srv, recs, (unsigned)max, &st);
	json_object_set_new(r, "every", json_integer(st.every));
	json_object_set_new(r, "pending", json_integer(st.pending));
	json_object_set_new(r, "sampled", json_integer((json_int_t)st.sampled));
	json_object_set_new(r, "finished", json_integer((json_int_t)st.finished));
	json_object_set_new(r, "lost", json_integer((json_int_t)st.lost));
	json_object_set_new(r, "skipped", json_integer((json_int_t)st.skipped));
	if (recs) {
		json_t *pts = json_array(), *a = json_array();

		for (unsigned p = 0; p < VSRV_TP_N; p++)
			json_array_append_new(pts, json_string(vsrv_trace_point_name(p)));
		for (unsigned long i = 0; i < n; i++)
			json_array_append_new(a, trace_record(ctl, &recs[i]));
		json_object_set_new(r, "points", pts);
		json_object_set_new(r, "records", a);
		free(recs);
	}
	return NULL;
}

static const char *apply_name(enum vctl_apply a)
{
	return a == VCTL_APPLY_LIVE ? "live" : a == VCTL_APPLY_RELOAD ? "reload" : "restart";
}

static json_t *config_item(const struct vctl_config_item *it)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "key", it->key, "value", it->value, "default", it->def,
			 "source", it->source, "apply", apply_name(it->apply), "doc", it->doc);
}

static json_t *cmd_config(struct vctl *ctl, const struct vctl_peer *peer, int argc, char **argv, json_t *r)
{
	const struct vctl_hooks *h = &ctl->hooks;
	struct vctl_config_item it;
	json_t *a;

	if (!h->config_count || !h->config_get)
		return vctl__error("unsupported", "config: not available");
	size_t n = h->config_count(h->ctx);
	/* In the order asked (all keys in schema order when none is named);
	 * an unknown name is an error, not a gap. */
	a = json_array();
	if (argc == 1)
		for (size_t i = 0; i < n; i++) {
			h->config_get(h->ctx, i, &it);
			json_array_append_new(a, config_item(&it));
		}
	for (int j = 1; j < argc; j++) {
		bool found = false;
		for (size_t i = 0; i < n && !found; i++) {
			h->config_get(h->ctx, i, &it);
			found = strcmp(it.key, argv[j]) == 0;
		}
		if (!found) {
			json_decref(a);
			return vctl__error("invalid", "config: no key '%s' (keys are SECTION.NAME)", argv[j]);
		}
		json_array_append_new(a, config_item(&it));
	}
	json_object_set_new(r, "keys", a);
	return NULL;
}

static json_t *cmd_schema(struct vctl *ctl, const struct vctl_peer *peer, int argc, char **argv, json_t *r)
{
	json_object_set_new(r, "schemas", vctl__schemas());
	return NULL;
}

static json_t *cmd_set(struct vctl *ctl, const struct vctl_peer *peer, int argc, char **argv, json_t *r)
{
	const struct vctl_hooks *h = &ctl->hooks;
	struct vb_strlist errors = { 0 };

	if (argc < 3 || (argc - 1) % 2) /* pairs (argc < 3 also tells gcc n > 0) */
		return USAGE;
	if (!h->config_set)
		return vctl__error("unsupported", "set: not available");
	size_t n = (size_t)(argc - 1) / 2;
	char *keys[MAX_ARGS / 2], *values[MAX_ARGS / 2];
	for (size_t i = 0; i < n; i++) {
		keys[i] = argv[1 + 2 * i];
		values[i] = argv[2 + 2 * i];
	}
	if (h->config_set(h->ctx, n, keys, values, &errors) < 0) {
		json_t *e = vctl__error("invalid", "set: nothing changed: %s",
					errors.n ? errors.msg[0] : "rejected");
		vctl__error_set(e, "errors", string_array(&errors));
		vb_strlist_fini(&errors);
		return e;
	}
	vb_strlist_fini(&errors);
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++) {
		struct vctl_config_item it;
		size_t cnt = h->config_count(h->ctx);
		for (size_t k = 0; k < cnt; k++) {
			h->config_get(h->ctx, k, &it);
			if (strcmp(it.key, keys[i]) == 0)
				json_array_append_new(a, config_item(&it));
		}
	}
	json_object_set_new(r, "keys", a);
	return NULL;
}

/* clear counters: `stats` counts from zero again (and the longest-step
 * gauges); clear quarantine: every quarantined kind serves again. */
static json_t *cmd_clear(struct vctl *ctl, const struct vctl_peer *peer, int argc, char **argv, json_t *r)
{
	if (strcmp(argv[1], "counters") == 0) {
		vctl__stats_clear(ctl);
	} else if (strcmp(argv[1], "quarantine") == 0) {
		if (!ctl->srv)
			return vctl__error("unsupported", "clear quarantine: no server");
		json_object_set_new(r, "released", json_integer(vsrv_quarantine_clear(ctl->srv)));
	} else {
		return USAGE;
	}
	json_object_set_new(r, "cleared", json_string(argv[1]));
	return NULL;
}

/* The ABI as "major.minor". */
static json_t *abi_text(unsigned major, unsigned minor)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%u.%u", major, minor);
	return json_string(buf);
}

static json_t *module_kind(const struct vjob_kind *k)
{
	json_t *flags = json_array(), *counters = json_array();

	if (k->blocking)
		json_array_append_new(flags, json_string("blocking"));
	if (k->prefix)
		json_array_append_new(flags, json_string("prefix"));
	for (unsigned c = 0; c < vjob_kind_counter_count(k); c++) {
		struct voltd_counter d = vjob_kind_counter_decl(k, c);
		json_array_append_new(counters, json_pack("{s:s, s:s}", "name", d.name, "help", d.help ? d.help : ""));
	}
	return json_pack("{s:s, s:s, s:s, s:o, s:o}", "name", k->name, "route", k->path, "methods", k->allow,
			 "flags", flags, "counters", counters);
}

/* modules: every module voltd runs (the built-in one first), its file and
 * that file's identity now, its ABI, build id and kinds. */
static json_t *cmd_modules(struct vctl *ctl, const struct vctl_peer *peer, int argc, char **argv, json_t *r)
{
	json_t *a = json_array();

	json_object_set_new(r, "abi", abi_text(VOLTD_MODULE_ABI_MAJOR, VOLTD_MODULE_ABI_MINOR));
	for (size_t i = 0; i < vjob_mod_count(); i++) {
		const struct vjob_mod *m = vjob_mod_at(i);
		const char *id = vjob_mod_build_id(m);
		json_t *kinds = json_array();

		for (size_t k = 0; k < vjob_mod_kind_count(m); k++)
			json_array_append_new(kinds, module_kind(vjob_mod_kind(m, k)));
		json_array_append_new(
			a, json_pack("{s:s, s:s, s:s, s:b, s:o, s:o, s:o, s:b, s:o}", "name", vjob_mod_name(m),
				     "version", vjob_mod_version(m), "file", vjob_mod_path(m), "builtin",
				     m == vjob_mod_builtin(), "abi", abi_text(VOLTD_MODULE_ABI_MAJOR, vjob_mod_abi_minor(m)),
				     "abi_oldest", abi_text(VOLTD_MODULE_ABI_MAJOR, vjob_mod_min_minor(m)), "build_id",
				     *id ? json_string(id) : json_null(), "changed_on_disk",
				     vjob_mod_file_changed(m) != 0, "kinds", kinds));
	}
	json_object_set_new(r, "modules", a);
	return NULL;
}

static json_t *cmd_reload(struct vctl *ctl, const struct vctl_peer *peer, int argc, char **argv, json_t *r)
{
	const struct vctl_hooks *h = &ctl->hooks;
	struct vb_strlist changed = { 0 }, restart = { 0 }, errors = { 0 };
	json_t *ret = NULL;

	if (!h->reload)
		return vctl__error("unsupported", "reload: not available");
	if (h->reload(h->ctx, &changed, &restart, &errors) < 0) {
		ret = vctl__error("invalid", "reload: refused (the file has errors, or a change a module needs a restart for); the running configuration is kept");
		vctl__error_set(ret, "errors", string_array(&errors));
	} else {
		json_object_set_new(r, "changed", string_array(&changed));
		json_object_set_new(r, "restart_needed", string_array(&restart));
	}
	vb_strlist_fini(&changed);
	vb_strlist_fini(&restart);
	vb_strlist_fini(&errors);
	return ret;
}

static json_t *drain_common(struct vctl *ctl, bool on, json_t *r)
{
	const struct vctl_hooks *h = &ctl->hooks;

	if (!h->drain)
		return vctl__error("unsupported", "%s: not available", on ? "drain" : "undrain");
	int rc = h->drain(h->ctx, on);
	if (rc == -EBUSY && !on)
		return vctl__error("failed", "undrain: voltd is stopping (SIGTERM); it stays not ready until it exits");
	if (rc < 0)
		return vctl__error("failed", "%s: %s", on ? "drain" : "undrain", strerror(-rc));
	json_object_set_new(r, "draining", json_boolean(on));
	return NULL;
}

static json_t *cmd_drain(struct vctl *ctl, const struct vctl_peer *peer, int argc, char **argv, json_t *r)
{
	return drain_common(ctl, true, r);
}

static json_t *cmd_undrain(struct vctl *ctl, const struct vctl_peer *peer, int argc, char **argv, json_t *r)
{
	return drain_common(ctl, false, r);
}

/* args is the usage (help shows it, and every usage error is "usage: NAME
 * ARGS"); min and max count the words after the name (-1: no limit), and
 * run() refuses any other count before the handler runs. */
const struct vctl_cmd vctl__commands[] = {
	{ "ping", "", 0, 0, VCTL_USER, "check that voltd answers", "pong", cmd_ping },
	{ "version", "", 0, 0, VCTL_USER, "version, features and I/O backend", "version", cmd_version },
	{ "help", "", 0, 0, VCTL_USER, "the commands and the level each needs", "help", cmd_help },
	{ "stats", "[SECTION]", 0, 1, VCTL_USER, "counters and gauges of every layer (or one section)", "stats",
	  cmd_stats },
	{ "metrics", "", 0, 0, VCTL_USER, "everything in Prometheus text format 0.0.4", "metrics", cmd_metrics },
	{ "hist", "sched|poll|rx_tx|sq_wait|cq_lag [WORKER] | blocking_wait | KIND", 1, 2, VCTL_USER,
	  "a latency histogram: schedule latency, poll duration (sampled), request bytes to send submitted, SQE "
	  "queued to submitted, completions waiting to be collected (io_uring), a blocking kind's job's wait "
	  "for a pool thread, or a job kind's (echo, hash...)",
	  "hist", cmd_hist },
	{ "modules", "", 0, 0, VCTL_USER,
	  "the job modules: version, file (and whether it changed on disk since it was loaded), ABI, build id, "
	  "kinds with their routes, methods and flags", "modules", cmd_modules },
	{ "config", "[KEY...]", 0, -1, VCTL_USER, "effective configuration: value, source, live/reload/restart",
	  "config", cmd_config },
	{ "schema", "", 0, 0, VCTL_USER, "JSON Schemas of every reply", "schema", cmd_schema },
	{ "set", "KEY VALUE [KEY VALUE]...", 2, -1, VCTL_OPERATOR, "change live keys (all or none)", "set", cmd_set },
	{ "clear", "counters|quarantine", 1, 1, VCTL_OPERATOR,
	  "counters: restart the counters `stats` shows from zero; quarantine: quarantined job kinds serve again",
	  "clear", cmd_clear },
	{ "trace", "[EVERY | dump [MAX]]", 0, 2, VCTL_OPERATOR,
	  "per-request timestamps at each hand-over for one request in EVERY (0: off); dump takes the records",
	  "trace", cmd_trace },
	{ "reload", "", 0, 0, VCTL_ADMIN, "re-read the configuration file (as SIGHUP)", "reload", cmd_reload },
	{ "drain", "", 0, 0, VCTL_ADMIN, "turn not-ready (/readyz 503) for load balancers", "drain", cmd_drain },
	{ "undrain", "", 0, 0, VCTL_ADMIN, "turn ready again", "drain", cmd_undrain },
};
const size_t vctl__n_commands = VB_ARRAY_SIZE(vctl__commands);

/* The usage error of c, from its row: the one place a usage is written. */
static json_t *usage(const struct vctl_cmd *c)
{
	return vctl__error("usage", "usage: %s%s%s", c->name, *c->args ? " " : "", c->args);
}

/* Run command c, permitted: its reply, or its error. */
static json_t *run(struct vctl *ctl, const struct vctl_cmd *c, const struct vctl_peer *peer, int argc,
		   char **argv)
{
	char schema[64];
	snprintf(schema, sizeof(schema), "voltd.%s.v1", c->reply);
	if (argc - 1 < c->min_args || (c->max_args >= 0 && argc - 1 > c->max_args))
		return usage(c);
	json_t *r = json_pack("{s:s, s:b}", "schema", schema, "ok", 1);
	if (!r)
		return vctl__error("internal", "out of memory");
	json_t *err = c->run(ctl, peer, argc, argv, r);
	if (err) {
		json_decref(r);
		return err == USAGE ? usage(c) : err;
	}
	return r;
}

/* The audit line of a command that changes something (refused or not):
 * who (SO_PEERCRED's uid and pid, the level), the command line, and the
 * outcome ("ok" or the error's code). vb_log_audit: log.level cannot
 * silence it. Arguments are valid UTF-8 without control characters here,
 * so the line cannot be forged into two. */
static void audit(const struct vctl_peer *peer, int argc, char **argv, const json_t *reply)
{
	char line[1024];
	size_t off = 0;

	line[0] = '\0';
	for (int i = 0; i < argc && off < sizeof(line); i++)
		off += (size_t)snprintf(line + off, sizeof(line) - off, "%s%s", i ? " " : "", argv[i]);
	const char *code = json_string_value(json_object_get(reply, "code"));
	vb_log_audit("audit: uid=%u pid=%d level=%s: %s: %s", (unsigned)peer->uid, (int)peer->pid,
		     vctl__level_name(peer->level), line,
		     json_is_true(json_object_get(reply, "ok")) ? "ok" : code ? code : "failed");
}

json_t *vctl__execute(struct vctl *ctl, const struct vctl_peer *peer, char *line)
{
	char *argv[MAX_ARGS + 1];
	int argc = 0;
	char *save = NULL;

	for (char *tok = strtok_r(line, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		if (argc == MAX_ARGS)
			return vctl__error("usage", "more than %d words on one line", MAX_ARGS);
		argv[argc++] = tok;
	}
	if (argc == 0)
		return vctl__error("usage", "empty command (try: help)");
	/* Replies quote arguments; JSON strings are UTF-8. */
	for (int i = 0; i < argc; i++) {
		long bad = utf8_invalid_at(argv[i]);
		if (bad >= 0)
			return vctl__error("invalid", "argument %d is not valid UTF-8 (byte %ld); nothing was run",
					   i + 1, bad + 1);
	}
	const struct vctl_cmd *c = NULL;
	for (size_t i = 0; i < vctl__n_commands && !c; i++)
		if (strcmp(vctl__commands[i].name, argv[0]) == 0)
			c = &vctl__commands[i];
	if (!c) {
		return vctl__error("unknown_command", "unknown command '%.64s' (try: help)", argv[0]);
	}
	if (peer->level < c->level) {
		VCTL_COUNT(ctl, denied);
		json_t *e = vctl__error("permission", "%s needs the %s level; you (uid %u) are %s", c->name,
					vctl__level_name(c->level), (unsigned)peer->uid, vctl__level_name(peer->level));
		vctl__error_set(e, "need", json_string(vctl__level_name(c->level)));
		vctl__error_set(e, "level", json_string(vctl__level_name(peer->level)));
		audit(peer, argc, argv, e);
		return e;
	}
	json_t *reply = run(ctl, c, peer, argc, argv);
	if (c->level > VCTL_USER)
		audit(peer, argc, argv, reply);
	return reply;
}
