/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_cfg.c: the configuration schema, parser and validator:
 * a good file, every kind of error with its message, overrides, every
 * default, every key in man/voltd.conf.5 and conf/voltd.conf, the layers'
 * bounds against the schema's, every live key through its setter to a
 * running runtime, server, logger and module, and a loaded module's keys
 * (tests/modules/cfgmod.c) checked, set and reloaded like voltd's own.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "base/log.h"
#include "jobs/job.h"
#include "voltd/cfg.h"
#include "voltd/reconf.h"
#include <voltd/module.h>
#include "tests/helpers/test_config.h"

/* A row of a module loaded from a [module.NAME] section (not the built-in
 * one, whose keys are documented rows of [jobs]). */
static bool is_loaded_module(const struct vcfg_key *k)
{
	return strncmp(k->section, "module.", 7) == 0;
}

static int load(struct vcfg *cfg, const char *text, struct vb_strlist *err)
{
	vcfg_defaults(cfg);
	return vcfg_load_string(cfg, "t.conf", text, err);
}

/* Exactly one error, and it contains `want`. */
static void expect_one_error(const char *text, const char *want)
{
	struct vcfg cfg;
	struct vb_strlist err = { 0 };
	int n = load(&cfg, text, &err);

	if (n != 1 || err.n != 1 || !strstr(err.msg[0], want)) {
		for (size_t i = 0; i < err.n; i++)
			print_error("got: %s\n", err.msg[i]);
		print_error("want one error containing: %s\n", want);
		fail();
	}
	vb_strlist_fini(&err);
}

static void test_good_file(void **state)
{
	struct vcfg cfg;
	struct vb_strlist err = { 0 };
	const char *text =
		"# comment\n"
		"[scheduler]\n"
		"workers = 3\n"
		"stealing = off\n"
		"global_interval_min = 10\n"
		"global_interval_max = 20\n"
		"budget = 64 ; inline comment\n"
		"\n"
		"[io]\n"
		"backend = libev\n"
		"ring_entries = 1024\n"
		"[server]\n"
		"listen = 127.0.0.1:9000, [::1]:9001\n"
		"max_body_bytes = 0\n"
		"[stages]\n"
		"on_full = shed\n"
		"exec_tasks = 7\n"
		"[jobs]\n"
		"spin_max_n = 5000000000\n"
		"[control]\n"
		"socket = /tmp/x.sock\n"
		"mode = 0600\n"
		"group = adm\n"
		"[log]\n"
		"level = debug\n";

	(void)state;
	assert_int_equal(load(&cfg, text, &err), 0);
	assert_int_equal(err.n, 0);
	assert_int_equal(cfg.scheduler.workers, 3);
	assert_false(cfg.scheduler.stealing);
	assert_int_equal(cfg.scheduler.global_interval_min, 10);
	assert_int_equal(cfg.scheduler.global_interval_max, 20);
	assert_int_equal(cfg.scheduler.budget, 64);
	assert_int_equal(cfg.io.backend, VIO_BACKEND_LIBEV);
	assert_int_equal(cfg.io.ring_entries, 1024);
	assert_int_equal(cfg.server.n_listen, 2);
	assert_string_equal(cfg.listen_text[0], "127.0.0.1:9000");
	assert_string_equal(cfg.listen_text[1], "[::1]:9001");
	assert_int_equal(cfg.server.listen[1].addr.ss_family, AF_INET6);
	assert_int_equal(ntohs(((struct sockaddr_in *)&cfg.server.listen[0].addr)->sin_port), 9000);
	assert_int_equal(cfg.server.max_body_bytes, 0);
	assert_int_equal(cfg.server.on_full, VSRV_ON_FULL_SHED);
	assert_int_equal(cfg.server.exec_tasks, 7);
	char v[64];
	vcfg_format(&cfg, vcfg_key_named("jobs.spin_max_n"), v, sizeof(v));
	assert_string_equal(v, "5000000000");
	assert_string_equal(cfg.control.socket, "/tmp/x.sock");
	assert_int_equal(cfg.control.mode, 0600);
	assert_string_equal(cfg.control.group, "adm");
	assert_int_equal(cfg.log.level, LOG_DEBUG);
}

static void test_every_default(void **state)
{
	struct vcfg cfg;
	size_t n;
	const struct vcfg_key *k = vcfg_schema(&n);
	char buf[1024];

	(void)state;
	vcfg_defaults(&cfg);
	for (size_t i = 0; i < n; i++) {
		if (is_loaded_module(&k[i]))
			continue; /* cfgmod's, when its test ran first */
		vcfg_format(&cfg, &k[i], buf, sizeof(buf));
		if (strcmp(buf, k[i].def) != 0) {
			print_error("%s.%s: default formats as '%s', schema says '%s'\n", k[i].section,
				    k[i].name, buf, k[i].def);
			fail();
		}
		assert_non_null(k[i].doc);
		assert_true(strlen(k[i].doc) > 10);
	}
	/* The values behind the text: "auto" counts and "none" are stored as
	 * 0 / "", and the layer structs are filled in place (no copy). */
	assert_int_equal(cfg.scheduler.workers, VCFG_AUTO);
	assert_int_equal(cfg.server.exec_tasks, VCFG_AUTO);
	assert_int_equal(cfg.server.write_tasks, VCFG_AUTO);
	assert_string_equal(cfg.control.group, "");
	assert_int_equal(cfg.server.n_listen, 1);
	assert_int_equal(cfg.server.listen[0].len, sizeof(struct sockaddr_in));
	assert_null(cfg.scheduler.park_ops);
	assert_int_equal(cfg.server.n_fds, 0);

	vcfg_resolve(&cfg);
	assert_true(cfg.scheduler.workers >= 1);
	assert_int_equal(cfg.server.exec_tasks, 4 * cfg.scheduler.workers);
	assert_int_equal(cfg.server.write_tasks, 2 * cfg.scheduler.workers);
}

/* tests/helpers/test_config.h (what rt, chan and io tests and the
 * benchmarks run with) sets the schema's values: every [scheduler] and [io]
 * key but workers formats the same from both. */
static void test_test_config_matches_schema(void **state)
{
	struct vcfg want, got;
	size_t n;
	const struct vcfg_key *k = vcfg_schema(&n);
	char a[256], b[256];

	(void)state;
	vcfg_defaults(&want);
	got = want;
	tcfg_rt(&got.scheduler);
	tcfg_io(&got.io);
	got.scheduler.workers = want.scheduler.workers;
	/* control.stall_warn_ms lives in vrt_config but is a [control] key:
	 * tests start the stall monitor only when they ask for it. */
	got.scheduler.stall_warn_ms = want.scheduler.stall_warn_ms;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(k[i].section, "scheduler") != 0 && strcmp(k[i].section, "io") != 0)
			continue;
		vcfg_format(&want, &k[i], a, sizeof(a));
		vcfg_format(&got, &k[i], b, sizeof(b));
		if (strcmp(a, b) != 0) {
			print_error("%s.%s: schema %s, tests/helpers/test_config.h %s\n", k[i].section, k[i].name,
				    a, b);
			fail();
		}
	}
	/* Nothing else: the fields that are not keys stay zero in both. */
	assert_memory_equal(&got.scheduler, &want.scheduler, sizeof(want.scheduler));
	assert_memory_equal(&got.io, &want.io, sizeof(want.io));
}

/* Every row is whole: a known section, the rows of a section together and
 * in the order of sections[], a doc line (no final period: the renderers
 * add it), choices for an ENUM, bounds in order, a unit only on numbers,
 * and at most one of live (a setter) and reload-only. */
static void test_schema_rows_are_whole(void **state)
{
	size_t n, ns, cur = 0;
	const struct vcfg_key *k = vcfg_schema(&n);
	const struct vcfg_section *sec = vcfg_sections(&ns);
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < n; i++) {
		const char *why = NULL;
		size_t dl = k[i].doc ? strlen(k[i].doc) : 0;
		while (cur < ns && strcmp(sec[cur].name, k[i].section) != 0)
			cur++;
		if (cur == ns)
			why = "its section is not in sections[] or its rows are not together in that order";
		else if ((!k[i].field && !k[i].mod) || !dl || k[i].doc[dl - 1] == '.')
			why = "no field name (voltd's own key), or no doc line, or a doc line ending in a period";
		else if ((k[i].type == VCFG_ENUM) != (k[i].choices != NULL))
			why = "choices belong to ENUM keys, and every ENUM key has them";
		else if (k[i].type == VCFG_I64 ? (int64_t)k[i].min > (int64_t)k[i].max :
			 k[i].min > k[i].max && k[i].type != VCFG_ENUM && k[i].type != VCFG_LISTEN &&
			 k[i].type != VCFG_ADDR)
			why = "min above max";
		else if (k[i].unit && k[i].type != VCFG_UINT && k[i].type != VCFG_U64 && k[i].type != VCFG_I64)
			why = "a unit on a key that is not a number";
		else if (k[i].type == VCFG_I64 && !k[i].mod)
			why = "I64 is the type of a module's INT key only";
		else if (k[i].apply && (k[i].flags & VCFG_F_RELOAD))
			why = "both live (.apply) and reload-only (VCFG_F_RELOAD)";
		if (why) {
			print_error("schema row %s.%s: %s\n", k[i].section, k[i].name, why);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
}

/* What the layer that takes key k's field says of cfg: 0 or -EINVAL. */
static int layer_check(const struct vcfg *cfg, const struct vcfg_key *k)
{
	if (strncmp(k->field, "scheduler.", 10) == 0)
		return vrt_config_check(&cfg->scheduler);
	if (strncmp(k->field, "io.", 3) == 0)
		return vio_config_check(&cfg->io, cfg->scheduler.workers);
	return vsrv_config_check(&cfg->server);
}

static void put_number(struct vcfg *cfg, const struct vcfg_key *k, uint64_t v)
{
	char *field = (char *)cfg + k->offset;

	if (k->type == VCFG_U64)
		memcpy(field, &v, sizeof(v));
	else
		*(unsigned *)field = (unsigned)v;
}

/*
 * A bound is written once: the layer that takes a key's value accepts
 * exactly the schema's range, so that a value the file may hold never
 * fails vrt_new / vio_new / vsrv_new, and the layer never runs with one
 * the schema refuses. The runtime and the I/O driver check every numeric
 * field: both ends must match (refused just outside: one more or less, or
 * the next power of two). The server checks only some (non-zero, and
 * max_pipeline): it must accept the schema's whole range.
 */
static void test_layers_take_the_schema_bounds(void **state)
{
	struct vcfg base;
	size_t n;
	const struct vcfg_key *k = vcfg_schema(&n);
	int bad = 0;

	(void)state;
	vcfg_defaults(&base);
	vcfg_resolve(&base);
	/* Cross-key rule: min <= max. With min at its lowest, each end of
	 * either is valid on its own. */
	base.scheduler.global_interval_min = 1;
	for (size_t i = 0; i < n; i++) {
		if (k[i].type != VCFG_UINT && k[i].type != VCFG_U64)
			continue;
		if (strncmp(k[i].field, "scheduler.", 10) && strncmp(k[i].field, "io.", 3) &&
		    strncmp(k[i].field, "server.", 7))
			continue; /* the daemon's own (life, control): no layer */
		bool exact = strncmp(k[i].field, "server.", 7) != 0;
		bool pow2 = k[i].flags & VCFG_F_POW2;
		uint64_t fmax = k[i].type == VCFG_U64 ? UINT64_MAX : UINT32_MAX;
		struct {
			uint64_t v;
			bool want_ok;
		} probe[4] = {
			{ k[i].min, true },
			{ k[i].max, true },
			{ pow2 ? k[i].min / 2 : k[i].min - 1, false },
			{ pow2 ? k[i].max * 2 : k[i].max + 1, false },
		};
		unsigned n_probe = exact ? 4 : 2;
		if (k[i].min == 0 && n_probe > 2) /* nothing below */
			probe[2] = probe[3], n_probe--;
		if (k[i].max >= fmax && n_probe > 2) /* nothing above */
			n_probe--;
		for (unsigned j = 0; j < n_probe; j++) {
			struct vcfg cfg = base;
			put_number(&cfg, &k[i], probe[j].v);
			int rc = layer_check(&cfg, &k[i]);
			if ((rc == 0) != probe[j].want_ok) {
				print_error("%s.%s = %llu: schema [%llu, %llu]%s, but the layer %s it (%s)\n",
					    k[i].section, k[i].name, (unsigned long long)probe[j].v,
					    (unsigned long long)k[i].min, (unsigned long long)k[i].max,
					    pow2 ? " power of two" : "", rc == 0 ? "accepts" : "refuses", k[i].field);
				bad++;
			}
		}
	}
	assert_int_equal(bad, 0);
}

/* The daemon that test_every_live_key_reaches_its_setter sets keys on. */
static const char live_conf[] = "[scheduler]\nworkers = 1\n[io]\nbackend = libev\n"
				"[server]\nlisten = 127.0.0.1:0\n[log]\nlevel = err\n";

static int live_load(void *ctx, struct vcfg *next, struct vb_strlist *err)
{
	(void)ctx;
	vcfg_defaults(next);
	return vcfg_load_string(next, "live.conf", live_conf, err);
}

/* The live values the running layers use now, in a struct vcfg's fields
 * (everything else zero): what each setter must have reached. */
static void running_values(struct vrt *rt, struct vsrv *srv, struct vcfg *out)
{
	memset(out, 0, sizeof(*out));
	vrt_get_tunables(rt, &out->scheduler);
	vsrv_get_live(srv, &out->server);
	out->log.level = vb_log_get_level();
}

/* The built-in module's keys are rows of [jobs], made from its
 * declaration as a loaded module's are made in [module.NAME]: the same
 * facts, its key's index, live when it says so. */
static void test_builtin_module_keys_are_rows_of_jobs(void **state)
{
	struct vjob_mod *m = vjob_mod_builtin();

	(void)state;
	assert_true(vjob_mod_key_count(m) >= 2);
	for (size_t i = 0; i < vjob_mod_key_count(m); i++) {
		const struct voltd_key *mk = vjob_mod_key(m, i);
		const struct vcfg_key *row = vcfg_key_find("jobs", mk->name);

		assert_non_null(row);
		assert_ptr_equal(row->mod, m);
		assert_int_equal(row->mod_key, i);
		assert_string_equal(row->def, mk->def);
		assert_ptr_equal(row->doc, mk->doc);
		assert_true((row->apply != NULL) == ((mk->flags & VOLTD_KEY_LIVE) != 0));
		assert_int_equal(row->type, mk->type == VOLTD_KEY_INT ? VCFG_I64 :
					    mk->type == VOLTD_KEY_BOOL ? VCFG_BOOL : VCFG_STRING);
		if (mk->type == VOLTD_KEY_INT)
			assert_true((int64_t)row->min == mk->min && (int64_t)row->max == mk->max);
	}
	/* at the start of [jobs], before voltd's own slice_us */
	assert_true(vcfg_key_find("jobs", "sleep_max_ms") < vcfg_key_find("jobs", "slice_us"));
}

/* The running value of live key k as text: from the module that declared
 * it, or from its layer (running_values). */
static void running_text(struct vrt *rt, struct vsrv *srv, const struct vcfg_key *k, char *buf, size_t len)
{
	struct vcfg got;

	if (k->mod) {
		vjob_mod_key_format(k->mod, k->mod_key, buf, len);
		return;
	}
	running_values(rt, srv, &got);
	vcfg_format(&got, k, buf, len);
}

/* Every key whose schema row names a setter (.apply, live) reaches the
 * running runtime, server, logger or module: the control socket's `set`
 * (the daemon's hook, src/voltd/reconf.c) of a value unlike the current
 * one is read back from the layer (or the module); then a reload puts
 * every live key back to the file's value. A live key the read-back does
 * not know reads 0 here: teach running_values its layer's getter. */
static void test_every_live_key_reaches_its_setter(void **state)
{
	struct vcfg cfg;
	struct vb_strlist err = { 0 }, changed = { 0 }, restart = { 0 };
	struct vio *io;
	struct vrt *rt;
	struct vsrv *srv;
	struct vd_reconf d;
	struct vctl_hooks h;
	size_t n;
	const struct vcfg_key *k = vcfg_schema(&n);
	char key[160], value[64], want[256], have[256];
	unsigned live = 0, bad = 0;
	int level = vb_log_get_level();

	(void)state;
	assert_int_equal(live_load(NULL, &cfg, &err), 0);
	vcfg_resolve(&cfg);
	assert_int_equal(vio_new(&cfg.io, cfg.scheduler.workers, &io), 0);
	vio_park_ops(io, &cfg.scheduler.park_ops, &cfg.scheduler.park_ctx);
	assert_int_equal(vrt_new(&cfg.scheduler, &rt), 0);
	assert_int_equal(vsrv_new(&cfg.server, rt, io, &srv), 0);
	vd_reconf_init(&d, &cfg, live_load, NULL);
	vd_reconf_attach(&d, rt, srv);
	vd_reconf_hooks(&d, &h);

	for (size_t i = 0; i < n; i++) {
		if (!k[i].apply)
			continue;
		live++;
		vcfg_format(&cfg, &k[i], have, sizeof(have));
		switch (k[i].type) {
		case VCFG_BOOL:
			snprintf(value, sizeof(value), "%s", strcmp(have, "on") == 0 ? "off" : "on");
			break;
		case VCFG_UINT:
		case VCFG_U64: { /* the middle of the range: never 0, never the default */
			uint64_t v = k[i].min + (k[i].max - k[i].min) / 2;
			snprintf(value, sizeof(value), "%llu", (unsigned long long)v);
			if (strcmp(value, have) == 0)
				snprintf(value, sizeof(value), "%llu", (unsigned long long)v + 1);
			break;
		}
		case VCFG_I64: { /* a module's: the middle of its range, never the default */
			int64_t lo = (int64_t)k[i].min, hi = (int64_t)k[i].max, v = lo + (hi - lo) / 2;
			snprintf(value, sizeof(value), "%lld", (long long)v);
			if (strcmp(value, have) == 0)
				snprintf(value, sizeof(value), "%lld", (long long)v + 1);
			break;
		}
		case VCFG_ENUM:
			snprintf(value, sizeof(value), "%s", k[i].choices[strcmp(have, k[i].choices[0]) == 0]);
			break;
		default:
			print_error("%s.%s: a live key of a type this test cannot set: teach it\n", k[i].section,
				    k[i].name);
			fail();
		}
		snprintf(key, sizeof(key), "%s.%s", k[i].section, k[i].name);
		char *keys[] = { key }, *values[] = { value };
		int rc = h.config_set(h.ctx, 1, keys, values, &err);
		if (rc != 0) {
			print_error("set %s %s: %d %s\n", key, value, rc, err.n ? err.msg[0] : "");
			bad++;
			continue;
		}
		running_text(rt, srv, &k[i], have, sizeof(have));
		vcfg_format(&cfg, &k[i], want, sizeof(want));
		if (strcmp(have, value) != 0 || strcmp(want, value) != 0) {
			print_error("set %s %s: the configuration says %s, the running %s says %s\n", key, value,
				    want, k[i].mod ? "module" : k[i].field, have);
			bad++;
		}
	}
	/* A reload applies the file's values (here the defaults) again. */
	assert_int_equal(vd_reconf_reload(&d, &changed, &restart, &err), 0);
	for (size_t i = 0; i < n; i++) {
		if (!k[i].apply)
			continue;
		running_text(rt, srv, &k[i], have, sizeof(have));
		vcfg_format(&cfg, &k[i], want, sizeof(want));
		if (strcmp(have, want) != 0) {
			print_error("reload: %s.%s is %s in the file, the running %s says %s\n", k[i].section,
				    k[i].name, want, k[i].mod ? "module" : k[i].field, have);
			bad++;
		}
	}
	assert_int_equal(changed.n, live);

	vsrv_stop(srv);
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	vsrv_free(srv);
	vrt_free(rt);
	vio_free(io);
	vd_reconf_fini(&d);
	vb_strlist_fini(&err);
	vb_strlist_fini(&changed);
	vb_strlist_fini(&restart);
	vb_log_set_level(level);
	assert_true(live > 0);
	assert_int_equal(bad, 0);
}

static void test_unknown_key_suggests(void **state)
{
	(void)state;
	expect_one_error("[scheduler]\nworkes = 2\n",
			 "t.conf:2: scheduler.workes: unknown key (did you mean scheduler.workers?)");
	expect_one_error("[server]\n\nmax_pipelin = 2\n",
			 "t.conf:3: server.max_pipelin: unknown key (did you mean server.max_pipeline?)");
	/* A key that belongs to another section is suggested there. */
	expect_one_error("[server]\nbudget = 2\n",
			 "t.conf:2: server.budget: unknown key (did you mean scheduler.budget?)");
	expect_one_error("[server]\nzzzzzzzzzz = 1\n", "t.conf:2: server.zzzzzzzzzz: unknown key");
}

static void test_unknown_section(void **state)
{
	(void)state;
	expect_one_error("[schedular]\nworkers = 2\n",
			 "t.conf:2: schedular.workers: unknown section [schedular] (did you mean [scheduler]?)");
	expect_one_error("workers = 2\n", "t.conf:1: workers: key outside any [section]");
}

static void test_duplicate_key(void **state)
{
	(void)state;
	expect_one_error("[scheduler]\nbudget = 2\nbudget = 3\n",
			 "t.conf:3: scheduler.budget: duplicate key (first set on line 2)");
	/* The same key in a repeated section is a duplicate too. */
	expect_one_error("[io]\nbackend = uring\n[server]\nbacklog = 2\n[io]\nbackend = libev\n",
			 "t.conf:6: io.backend: duplicate key (first set on line 2)");
}

static void test_bad_types(void **state)
{
	(void)state;
	expect_one_error("[scheduler]\nstealing = maybe\n",
			 "t.conf:2: scheduler.stealing: 'maybe' is not a boolean (use on or off)");
	expect_one_error("[scheduler]\nbudget = 12x\n", "t.conf:2: scheduler.budget: '12x' is not a whole number");
	expect_one_error("[scheduler]\nbudget = -1\n", "t.conf:2: scheduler.budget: '-1' is not a whole number");
	expect_one_error("[scheduler]\nworkers = many\n",
			 "t.conf:2: scheduler.workers: 'many' is not a whole number or auto");
	expect_one_error("[io]\nbackend = epoll\n",
			 "t.conf:2: io.backend: 'epoll' is not one of: auto, uring, libev");
	expect_one_error("[server]\nlisten = localhost\n",
			 "t.conf:2: server.listen: 'localhost' is not an address:port");
	expect_one_error("[server]\nlisten = 1.2.3.4:70000\n", "server.listen: '1.2.3.4:70000' is not an address:port");
	expect_one_error("[control]\nmode = 0999\n", "t.conf:2: control.mode: '0999' is not an octal mode");
	expect_one_error("[log]\nlevel = loud\n",
			 "t.conf:2: log.level: 'loud' is not one of: err, warning, notice, info, debug");
}

static void test_out_of_bounds(void **state)
{
	(void)state;
	expect_one_error("[scheduler]\nworkers = 0\n", "t.conf:2: scheduler.workers: 0 is out of bounds [1, 256]");
	expect_one_error("[scheduler]\nworkers = 257\n", "scheduler.workers: 257 is out of bounds [1, 256]");
	expect_one_error("[scheduler]\nlifo_poll_cap = 17\n", "scheduler.lifo_poll_cap: 17 is out of bounds [1, 16]");
	expect_one_error("[scheduler]\nbudget = 4097\n", "scheduler.budget: 4097 is out of bounds [1, 4096]");
	expect_one_error("[io]\nring_entries = 4\n", "io.ring_entries: 4 is out of bounds [8, 32768]");
	expect_one_error("[io]\nring_entries = 1000\n",
			 "t.conf:2: io.ring_entries: 1000 is not a power of two (bounds [8, 32768])");
	expect_one_error("[control]\nsocket = \n", "control.socket: length 0 is out of bounds [1, 107]");
}

static void test_cross_key(void **state)
{
	(void)state;
	expect_one_error("[scheduler]\nglobal_interval_min = 100\nglobal_interval_max = 50\n",
			 "t.conf: scheduler.global_interval_min: 100 is greater than scheduler.global_interval_max (50)");
	expect_one_error("[server]\nlisten = 127.0.0.1:1 127.0.0.1:1\n",
			 "server.listen: 127.0.0.1:1 is listed twice");
}

static void test_syntax_error(void **state)
{
	(void)state;
	expect_one_error("[scheduler]\njust some words\n",
			 "t.conf:2: syntax error: expected '[section]' or 'key = value'");
}

static void test_several_errors_all_reported(void **state)
{
	struct vcfg cfg;
	struct vb_strlist err = { 0 };

	(void)state;
	assert_int_equal(load(&cfg, "[scheduler]\nworkers = 0\nbudget = x\n[nope]\na = 1\n", &err), 3);
	assert_int_equal(err.n, 3);
	assert_non_null(strstr(err.msg[0], "t.conf:2:"));
	assert_non_null(strstr(err.msg[1], "t.conf:3:"));
	assert_non_null(strstr(err.msg[2], "t.conf:5:"));
	vb_strlist_fini(&err);
}

static void test_indented_key_is_a_key(void **state)
{
	struct vcfg cfg;
	struct vb_strlist err = { 0 };

	(void)state;
	assert_int_equal(load(&cfg, "[scheduler]\n  workers = 2\n  budget = 9\n", &err), 0);
	assert_int_equal(cfg.scheduler.workers, 2);
	assert_int_equal(cfg.scheduler.budget, 9);
}

static void test_overrides(void **state)
{
	struct vcfg cfg;
	struct vb_strlist err = { 0 };

	(void)state;
	assert_int_equal(load(&cfg, "[scheduler]\nbudget = 9\n", &err), 0);
	assert_int_equal(vcfg_override(&cfg, "scheduler.budget=77", &err), 0);
	assert_int_equal(cfg.scheduler.budget, 77);
	assert_int_equal(vcfg_override(&cfg, "server.listen=[::1]:8081", &err), 0);
	assert_string_equal(cfg.listen_text[0], "[::1]:8081");
	assert_int_equal(vcfg_override(&cfg, "control.socket=./run/c.sock", &err), 0);
	assert_string_equal(cfg.control.socket, "./run/c.sock");
	assert_int_equal(err.n, 0);

	assert_int_equal(vcfg_override(&cfg, "scheduler.budgett=1", &err), 1);
	assert_non_null(strstr(err.msg[0], "-s: scheduler.budgett: unknown key (did you mean scheduler.budget?)"));
	assert_int_equal(vcfg_override(&cfg, "scheduler.budget=0", &err), 1);
	assert_non_null(strstr(err.msg[1], "-s: scheduler.budget: 0 is out of bounds [1, 4096]"));
	assert_int_equal(vcfg_override(&cfg, "nodot=1", &err), 1);
	assert_non_null(strstr(err.msg[2], "expected SECTION.KEY=VALUE"));
	assert_int_equal(cfg.scheduler.budget, 77); /* failed overrides change nothing */
	vb_strlist_fini(&err);
}

static void test_missing_file(void **state)
{
	struct vcfg cfg;
	struct vb_strlist err = { 0 };

	(void)state;
	vcfg_defaults(&cfg);
	assert_int_equal(vcfg_load_file(&cfg, "/nonexistent/voltd.conf", &err), 1);
	assert_non_null(strstr(err.msg[0], "/nonexistent/voltd.conf: cannot open: No such file or directory"));
	vb_strlist_fini(&err);
}

static void test_dump_roundtrip(void **state)
{
	struct vcfg a, b;
	struct vb_strlist err = { 0 };
	char *text = NULL;
	size_t len = 0;

	(void)state;
	assert_int_equal(load(&a, "[scheduler]\nworkers = 5\nstealing = off\n[server]\nlisten = 0.0.0.0:1 [::]:2\n"
				  "[log]\nlevel = warning\n", &err), 0);
	FILE *fp = open_memstream(&text, &len);
	vcfg_dump(&a, fp);
	fclose(fp);
	/* The dump is itself a valid configuration with the same values. */
	assert_int_equal(load(&b, text, &err), 0);
	assert_int_equal(b.scheduler.workers, 5);
	assert_false(b.scheduler.stealing);
	assert_int_equal(b.server.n_listen, 2);
	assert_string_equal(b.listen_text[1], "[::]:2");
	assert_int_equal(b.log.level, LOG_WARNING);
	free(text);
}

static char *slurp(const char *rel)
{
	const char *src = getenv("VOLTD_SRCDIR");
	char path[4096];
	FILE *fp;
	char *buf = NULL;
	size_t len = 0;

	snprintf(path, sizeof(path), "%s/%s", src ? src : ".", rel);
	fp = fopen(path, "r");
	if (!fp) {
		print_error("cannot open %s\n", path);
		return NULL;
	}
	FILE *out = open_memstream(&buf, &len);
	int ch;
	while ((ch = fgetc(fp)) != EOF)
		fputc(ch, out);
	fclose(out);
	fclose(fp);
	return buf;
}

/* Every schema key must be documented in voltd.conf(5) and in the sample
 * conf/voltd.conf (commented with its default). */
static void test_every_key_documented(void **state)
{
	size_t n;
	const struct vcfg_key *k = vcfg_schema(&n);
	char *man = slurp("man/voltd.conf.5");
	char *conf = slurp("conf/voltd.conf");
	char want[256];
	int missing = 0;

	(void)state;
	assert_non_null(man);
	assert_non_null(conf);
	for (size_t i = 0; i < n; i++) {
		const char *def = k[i].def_doc ? k[i].def_doc : k[i].def;
		if (is_loaded_module(&k[i]))
			continue; /* voltd.conf(5) explains [module.NAME] in prose */
		/* man: the key appears as a tagged paragraph, ".B name" */
		snprintf(want, sizeof(want), ".B %s\n", k[i].name);
		if (!strstr(man, want)) {
			print_error("man/voltd.conf.5 does not document %s.%s\n", k[i].section, k[i].name);
			missing++;
		}
		/* conf: "#name = default" or "name = value" under its section */
		snprintf(want, sizeof(want), "[%s]", k[i].section);
		char *sec = strstr(conf, want);
		snprintf(want, sizeof(want), "\n#%s = %s\n", k[i].name, def);
		char *key = strstr(conf, want);
		if (!sec || !key || key < sec) {
			print_error("conf/voltd.conf lacks '#%s = %s' under [%s]\n", k[i].name, def, k[i].section);
			missing++;
		}
	}
	free(man);
	free(conf);
	assert_int_equal(missing, 0);
}

/* ------------------------------------------------ a loaded module's keys */

/* Load a configuration whose [module.cfgmod] (line 3) loads
 * tests/modules/cfgmod.so, body after it (from line 4), with -s
 * overrides; the module's rows join the schema for the tests after. */
static int load_cfgmod(struct vcfg *cfg, const char *body, const char *override, struct vb_strlist *err)
{
	const char *b = getenv("VOLTD_BUILDDIR");
	char text[2048];
	int n;

	snprintf(text, sizeof(text), "[modules]\ndir = %s/tests/modules\n[module.cfgmod]\n%s", b ? b : ".", body);
	vcfg_defaults(cfg);
	n = vcfg_load_string(cfg, "m.conf", text, err);
	if (override)
		n += vcfg_override(cfg, override, err);
	return n + vcfg_load_modules(cfg, true, err);
}

static void expect_module_error(const char *body, const char *want)
{
	struct vcfg cfg;
	struct vb_strlist err = { 0 };
	int n = load_cfgmod(&cfg, body, NULL, &err);

	if (n != 1 || err.n != 1 || !strstr(err.msg[0], want)) {
		for (size_t i = 0; i < err.n; i++)
			print_error("got: %s\n", err.msg[i]);
		print_error("want one error containing: %s\n", want);
		fail();
	}
	vb_strlist_fini(&err);
}

static void expect_key_value(const struct vcfg *cfg, const char *key, const char *value, const char *source)
{
	const struct vcfg_key *k = vcfg_key_named(key);
	char buf[256];

	assert_non_null(k);
	vcfg_format(cfg, k, buf, sizeof(buf));
	assert_string_equal(buf, value);
	assert_string_equal(cfg->source[vcfg_key_index(k)], source);
}

static void test_module_keys_take_the_file_and_overrides(void **state)
{
	struct vcfg cfg;
	struct vb_strlist err = { 0 };

	(void)state;
	assert_int_equal(load_cfgmod(&cfg, "limit = 20\ngreeting = hi there\n", "module.cfgmod.offset=-7", &err), 0);
	expect_key_value(&cfg, "module.cfgmod.limit", "20", "m.conf:4");
	expect_key_value(&cfg, "module.cfgmod.greeting", "hi there", "m.conf:5");
	expect_key_value(&cfg, "module.cfgmod.offset", "-7", "-s");
	expect_key_value(&cfg, "module.cfgmod.verbose", "off", "default");
	expect_key_value(&cfg, "module.cfgmod.path", "cfgmod.so", "default");
	/* Loaded again (a reload's file): the same rows, nothing opened. */
	assert_int_equal(load_cfgmod(&cfg, "verbose = yes\n", NULL, &err), 0);
	expect_key_value(&cfg, "module.cfgmod.verbose", "on", "m.conf:4");
	expect_key_value(&cfg, "module.cfgmod.limit", "10", "default");
	size_t n, rows = 0;
	const struct vcfg_key *k = vcfg_schema(&n);
	for (size_t i = 0; i < n; i++)
		rows += strcmp(k[i].section, "module.cfgmod") == 0;
	assert_int_equal(rows, 6); /* path and its five keys, once */
	assert_int_equal(err.n, 0);
}

static void test_module_keys_are_checked_by_their_declaration(void **state)
{
	(void)state;
	expect_module_error("limt = 3\n", "m.conf:4: module.cfgmod.limt: unknown key (did you mean module.cfgmod.limit?)");
	/* the module's section takes only its keys: voltd's are not suggested */
	expect_module_error("budget = 3\n", "m.conf:4: module.cfgmod.budget: unknown key");
	expect_module_error("verbose = maybe\n", "m.conf:4: module.cfgmod.verbose: 'maybe' is not a boolean (use on or off)");
	expect_module_error("limit = 12x\n", "m.conf:4: module.cfgmod.limit: '12x' is not a whole number");
	expect_module_error("offset = -x\n", "m.conf:4: module.cfgmod.offset: '-x' is not an integer");
	expect_module_error("limit = 1001\n", "m.conf:4: module.cfgmod.limit: 1001 is out of bounds [0, 1000]");
	expect_module_error("limit = -1\n", "m.conf:4: module.cfgmod.limit: -1 is out of bounds [0, 1000]");
	expect_module_error("offset = -101\n", "m.conf:4: module.cfgmod.offset: -101 is out of bounds [-100, 100]");
	expect_module_error("offset = 99999999999999999999\n", "module.cfgmod.offset: '99999999999999999999' is not an integer");
	expect_module_error("greeting = 12345678901234567890123456789012345678901234567890123456789012345\n",
			    "m.conf:4: module.cfgmod.greeting: length 65 is out of bounds [0, 64]");
	expect_module_error("limit = 1\nlimit = 2\n", "m.conf:5: module.cfgmod.limit: duplicate key (first set on line 4)");
}

static int cfgmod_load(void *ctx, struct vcfg *next, struct vb_strlist *err)
{
	return load_cfgmod(next, ctx, NULL, err);
}

/* `set` of a module's live key reaches the module (what its jobs read);
 * a restart-only one is refused with the built-in keys' words, and a
 * reload that changes one is refused whole. */
static void test_module_live_key_set_restart_key_refused(void **state)
{
	struct vcfg cfg;
	struct vb_strlist err = { 0 }, changed = { 0 }, restart = { 0 };
	struct vd_reconf d;
	struct vctl_hooks h;
	char buf[64];
	const char *file = "limit = 20\ngreeting = hi\n";

	(void)state;
	assert_int_equal(load_cfgmod(&cfg, file, NULL, &err), 0);
	vd_reconf_init(&d, &cfg, cfgmod_load, (void *)file);
	vd_reconf_hooks(&d, &h);
	const struct vcfg_key *limit = vcfg_key_named("module.cfgmod.limit");
	assert_int_equal(vcfg_start_modules(&cfg, VOLTD_INIT_CHECK, &err), 0);
	vjob_mod_key_format(limit->mod, limit->mod_key, buf, sizeof(buf));
	assert_string_equal(buf, "20");

	char *k1[] = { "module.cfgmod.limit" }, *v1[] = { "30" };
	assert_int_equal(h.config_set(h.ctx, 1, k1, v1, &err), 0);
	vjob_mod_key_format(limit->mod, limit->mod_key, buf, sizeof(buf));
	assert_string_equal(buf, "30");
	expect_key_value(&cfg, "module.cfgmod.limit", "30", "set");

	char *k2[] = { "module.cfgmod.greeting" }, *v2[] = { "bye" };
	assert_int_equal(h.config_set(h.ctx, 1, k2, v2, &err), -EINVAL);
	assert_non_null(strstr(err.msg[0], "module.cfgmod.greeting: cannot change while running (restart-only)"));
	vb_strlist_fini(&err);

	/* A reload of the same file puts the live key back; one that changes
	 * greeting is refused and changes nothing. */
	assert_int_equal(vd_reconf_reload(&d, &changed, &restart, &err), 0);
	vjob_mod_key_format(limit->mod, limit->mod_key, buf, sizeof(buf));
	assert_string_equal(buf, "20");
	d.load_ctx = (void *)"limit = 40\ngreeting = bye\n";
	assert_int_equal(vd_reconf_reload(&d, &changed, &restart, &err), -EINVAL);
	assert_non_null(strstr(err.msg[0], "m.conf:5: module.cfgmod.greeting: hi -> bye: a module's restart-only key "
					   "changes only at a restart"));
	vjob_mod_key_format(limit->mod, limit->mod_key, buf, sizeof(buf));
	assert_string_equal(buf, "20");
	vd_reconf_fini(&d);
	vb_strlist_fini(&err);
	vb_strlist_fini(&changed);
	vb_strlist_fini(&restart);
}

/* What a reload (may_open false) cannot do: open a module, drop one, or
 * take another file for one. */
static void test_a_reload_neither_loads_nor_unloads_a_module(void **state)
{
	struct vcfg cfg;
	struct vb_strlist err = { 0 };
	const char *b = getenv("VOLTD_BUILDDIR");
	char text[1024];

	(void)state;
	assert_int_equal(load_cfgmod(&cfg, "", NULL, &err), 0);
	vcfg_defaults(&cfg);
	snprintf(text, sizeof(text), "[modules]\ndir = %s/tests/modules\n[module.cfgmod]\n[module.other]\n",
		 b ? b : ".");
	assert_int_equal(vcfg_load_string(&cfg, "r.conf", text, &err) + vcfg_load_modules(&cfg, false, &err), 1);
	assert_non_null(strstr(err.msg[0], "r.conf:4: module.other: a module is loaded at start only"));
	vb_strlist_fini(&err);

	vcfg_defaults(&cfg);
	assert_int_equal(vcfg_load_string(&cfg, "r.conf", "[log]\nlevel = info\n", &err) +
			 vcfg_load_modules(&cfg, false, &err), 1);
	assert_non_null(strstr(err.msg[0], "r.conf: module.cfgmod: its section is gone, but a loaded module is "
					   "never unloaded"));
	vb_strlist_fini(&err);

	vcfg_defaults(&cfg);
	snprintf(text, sizeof(text), "[modules]\ndir = %s/tests\n[module.cfgmod]\npath = modules/cfgmod.so\n",
		 b ? b : ".");
	assert_int_equal(vcfg_load_string(&cfg, "r.conf", text, &err) + vcfg_load_modules(&cfg, false, &err), 0);
	snprintf(text, sizeof(text), "[module.cfgmod]\npath = /elsewhere/cfgmod.so\n");
	vcfg_defaults(&cfg);
	assert_int_equal(vcfg_load_string(&cfg, "r.conf", text, &err) + vcfg_load_modules(&cfg, false, &err), 1);
	assert_non_null(strstr(err.msg[0], "r.conf:2: module.cfgmod.path: /elsewhere/cfgmod.so is not the file "
					   "module cfgmod was loaded from"));
	vb_strlist_fini(&err);
}

/* -T of a configuration with a module reads back as the same values: the
 * sources after the module's keys are comments. */
static void test_module_dump_roundtrip(void **state)
{
	struct vcfg a, b;
	struct vb_strlist err = { 0 };
	char *text = NULL;
	size_t len = 0;

	(void)state;
	assert_int_equal(load_cfgmod(&a, "limit = 20\ngreeting = hi there\n", "module.cfgmod.offset=-7", &err), 0);
	FILE *fp = open_memstream(&text, &len);
	vcfg_dump(&a, fp);
	fclose(fp);
	assert_non_null(strstr(text, "\nlimit = 20 ; m.conf:4\n"));
	assert_non_null(strstr(text, "\noffset = -7 ; -s\n"));
	vcfg_defaults(&b);
	assert_int_equal(vcfg_load_string(&b, "dump", text, &err) + vcfg_load_modules(&b, true, &err), 0);
	const char *keys[] = { "module.cfgmod.limit", "module.cfgmod.greeting", "module.cfgmod.offset" };
	const char *want[] = { "20", "hi there", "-7" };
	for (size_t i = 0; i < 3; i++) {
		const struct vcfg_key *k = vcfg_key_named(keys[i]);
		char v[64];
		vcfg_format(&b, k, v, sizeof(v));
		assert_string_equal(v, want[i]);
		assert_true(strncmp(b.source[vcfg_key_index(k)], "dump:", 5) == 0);
	}
	free(text);
	vb_strlist_fini(&err);
}

/* More [module.NAME] sections than voltd holds: said once, with the file. */
static void test_too_many_module_sections(void **state)
{
	struct vcfg cfg;
	struct vb_strlist err = { 0 };
	char text[4096] = "";
	size_t off = 0;

	(void)state;
	for (int i = 0; i <= VCFG_MAX_MODULES; i++)
		off += (size_t)snprintf(text + off, sizeof(text) - off, "[module.m%d]\n", i);
	vcfg_defaults(&cfg);
	assert_int_equal(vcfg_load_string(&cfg, "many.conf", text, &err), 0);
	assert_true(vcfg_load_modules(&cfg, true, &err) > 1); /* the 32 files are missing too */
	assert_non_null(strstr(err.msg[0], "many.conf: more than 32 [module.NAME] sections"));
	vb_strlist_fini(&err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_file),
		cmocka_unit_test(test_every_default),
		cmocka_unit_test(test_test_config_matches_schema),
		cmocka_unit_test(test_schema_rows_are_whole),
		cmocka_unit_test(test_layers_take_the_schema_bounds),
		cmocka_unit_test(test_every_live_key_reaches_its_setter),
		cmocka_unit_test(test_builtin_module_keys_are_rows_of_jobs),
		cmocka_unit_test(test_unknown_key_suggests),
		cmocka_unit_test(test_unknown_section),
		cmocka_unit_test(test_duplicate_key),
		cmocka_unit_test(test_bad_types),
		cmocka_unit_test(test_out_of_bounds),
		cmocka_unit_test(test_cross_key),
		cmocka_unit_test(test_syntax_error),
		cmocka_unit_test(test_several_errors_all_reported),
		cmocka_unit_test(test_indented_key_is_a_key),
		cmocka_unit_test(test_overrides),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_dump_roundtrip),
		cmocka_unit_test(test_every_key_documented),
		/* Last: cfgmod's rows stay in the schema once loaded. */
		cmocka_unit_test(test_module_keys_take_the_file_and_overrides),
		cmocka_unit_test(test_module_keys_are_checked_by_their_declaration),
		cmocka_unit_test(test_module_live_key_set_restart_key_refused),
		cmocka_unit_test(test_a_reload_neither_loads_nor_unloads_a_module),
		cmocka_unit_test(test_too_many_module_sections),
		cmocka_unit_test(test_module_dump_roundtrip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
