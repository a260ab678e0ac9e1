/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_jobs_loader.c: the module loader (vjob_mod_open,
 * vjob_mod_start) over real files: the shared objects of tests/modules
 * (built at check time against <voltd/module.h>) and files made here (not
 * ELF, an archive, 32-bit, another machine, cut short). Every refusal is
 * one line, "PATH: expected against found", checked word for word, and
 * leaves nothing registered; a good module loads, keeps its file's
 * identity and build id, registers its kinds; one built against a later
 * minor loads through its longer descriptors. Single-threaded.
 */
#include "config.h"
#include "jobs/job.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static char moddir[4096]; /* the built modules */
static char tmpdir[] = "/tmp/test_jobs_loader.XXXXXX";

static const char *mod_path(const char *file)
{
	static char p[8][4352];
	static unsigned i;

	i = (i + 1) % 8;
	snprintf(p[i], sizeof(p[i]), "%s/%s", moddir, file);
	return p[i];
}

static const char *tmp_path(const char *file)
{
	static char p[8][4352];
	static unsigned i;

	i = (i + 1) % 8;
	snprintf(p[i], sizeof(p[i]), "%s/%s", tmpdir, file);
	return p[i];
}

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

/* Open must refuse with rc and exactly "PATH: want" (want may hold one %s:
 * voltd's version, written twice at most), registering nothing. */
static void expect_refusal(const char *name, const char *path, int rc, const char *want)
{
	size_t mods = vjob_mod_count(), kinds = vjob_kind_count();
	struct vjob_mod *m = (void *)1;
	char err[1024], line[1200], w[1024];

	snprintf(w, sizeof(w), want, PACKAGE_VERSION, PACKAGE_VERSION);
	snprintf(line, sizeof(line), "%s: %s", path, w);
	int got = vjob_mod_open(name, path, &m, err, sizeof(err));
	if (got != rc || strcmp(err, line) != 0)
		fail_msg("open %s as %s:\n got  %d %s\n want %d %s", path, name, got, err, rc, line);
	assert_null(m);
	assert_int_equal(vjob_mod_count(), mods);
	assert_int_equal(vjob_kind_count(), kinds);
}

/* -------------------------------------------------------------- refusals */

static void test_refusals_of_the_file(void **state)
{
	ElfW(Ehdr) eh;
	int self = open("/proc/self/exe", O_RDONLY);

	(void)state;
	assert_true(self >= 0);
	assert_int_equal(pread(self, &eh, sizeof(eh), 0), (ssize_t)sizeof(eh));
	close(self);

	expect_refusal("good", tmp_path("missing.so"), -ENOENT, "no such file");
	assert_int_equal(mkdir(tmp_path("dir.so"), 0755), 0);
	expect_refusal("good", tmp_path("dir.so"), -EINVAL, "not a regular file");
	write_file(tmp_path("script.so"), "#!/bin/sh\necho not a module\n", 28);
	expect_refusal("good", tmp_path("script.so"), -ENOEXEC,
		       "not an ELF shared object (no ELF header: a script, text or data?)");
	write_file(tmp_path("empty.so"), "", 0);
	expect_refusal("good", tmp_path("empty.so"), -ENOEXEC,
		       "not an ELF shared object (no ELF header: a script, text or data?)");
	write_file(tmp_path("archive.so"), "!<arch>\n/               0           0     0     0       4         `\n", 68);
	expect_refusal("good", tmp_path("archive.so"), -ENOEXEC,
		       "not an ELF shared object: an ar archive (.a); link the module with -shared");
	write_file(tmp_path("cut.so"), &eh, 20);
	expect_refusal("good", tmp_path("cut.so"), -ENOEXEC, "not an ELF shared object (its ELF header is cut short)");
	ElfW(Ehdr) other = eh;
	other.e_ident[EI_CLASS] = ELFCLASS32;
	write_file(tmp_path("elf32.so"), &other, sizeof(other));
	expect_refusal("good", tmp_path("elf32.so"), -ENOEXEC, "built for 32-bit code, this voltd runs 64-bit code");
	other = eh;
	other.e_machine = eh.e_machine == EM_AARCH64 ? EM_X86_64 : EM_AARCH64;
	write_file(tmp_path("machine.so"), &other, sizeof(other));
	char want[200];
	snprintf(want, sizeof(want), "built for ELF machine %u (little-endian), this voltd runs on machine %u (little-endian)",
		 other.e_machine, eh.e_machine);
	expect_refusal("good", tmp_path("machine.so"), -ENOEXEC, want);
	expect_refusal("good", mod_path("good_reloc.so"), -ENOEXEC,
		       "not an ELF shared object: an object file (.o); link the module with -shared");
	/* An ELF shared object header over garbage: dlopen says why. */
	other = eh;
	other.e_type = ET_DYN;
	other.e_phnum = 0;
	other.e_shnum = 0;
	write_file(tmp_path("hollow.so"), &other, sizeof(other));
	struct vjob_mod *m = NULL;
	char err[1024];
	assert_int_equal(vjob_mod_open("good", tmp_path("hollow.so"), &m, err, sizeof(err)), -ENOEXEC);
	assert_true(strncmp(err, tmp_path("hollow.so"), strlen(tmp_path("hollow.so"))) == 0);
	assert_non_null(strstr(err, ": cannot load it: "));
	assert_null(m);
}

static void test_refusals_of_the_entry_and_abi(void **state)
{
	(void)state;
	expect_refusal("bad", mod_path("bad_nosym.so"), -ENOEXEC,
		       "not a voltd module: no symbol voltd_module_v1 (VOLTD_MODULE(descriptor) in one of its files "
		       "defines it)");
	expect_refusal("bad", mod_path("bad_v2.so"), -EPROTO,
		       "built for module ABI 2.x (it has voltd_module_v2, not voltd_module_v1), this voltd (%s) "
		       "speaks 1.0; rebuild it against voltd-dev %s");
	expect_refusal("bad", mod_path("bad_major.so"), -EPROTO,
		       "built for module ABI 2.0, this voltd (%s) speaks 1.0; rebuild it against voltd-dev %s");
	expect_refusal("bad", mod_path("bad_minor.so"), -EPROTO,
		       "needs module ABI 1.5 or later (built against 1.5), this voltd (%s) speaks 1.0; upgrade "
		       "voltd, or rebuild the module against voltd-dev %s");
	expect_refusal("bad", mod_path("bad_small.so"), -EINVAL, "descriptor too small: 40 bytes, module ABI 1.0's is 64");
	expect_refusal("bad", mod_path("bad_stride.so"), -EINVAL,
		       "descriptor too small: kind_size 16, module ABI 1.0's is 72");
}

static void test_refusals_of_the_descriptor(void **state)
{
	(void)state;
	expect_refusal("bad", mod_path("bad_name.so"), -EINVAL, "module name \"Bad-Name\": not 1..32 of [a-z0-9_]");
	expect_refusal("other", mod_path("bad_init.so"), -EINVAL,
		       "module name \"bad\", expected \"other\" (the NAME of [module.NAME])");
	expect_refusal("bad", mod_path("bad_version.so"), -EINVAL,
		       "version \"(null)\": expected one line of 1..64 printable bytes");
	expect_refusal("bad", mod_path("bad_kindname.so"), -EINVAL, "kind 1: name \"Bad Kind\": not 1..32 of [a-z0-9_]");
	expect_refusal("bad", mod_path("bad_nostep.so"), -EINVAL,
		       "kind \"bad_nostep\": no step (the one callback a kind must have)");
	expect_refusal("bad", mod_path("bad_route_syntax.so"), -EINVAL,
		       "kind \"bad_query\": route \"/bad?x=1\": not a path ('/' then up to 256 bytes of visible ASCII "
		       "but '?' and '#')");
	expect_refusal("bad", mod_path("bad_methods.so"), -EINVAL,
		       "kind \"bad_methods\": methods \"GET;POST\": not a list of HTTP methods (\"GET, HEAD\")");
	expect_refusal("bad", mod_path("bad_counter.so"), -EINVAL, "kind \"bad_ok\": counter \"same\" declared twice");
	expect_refusal("bad", mod_path("bad_dupkind.so"), -EEXIST,
		       "kind \"spin\": the name is taken by kind \"spin\" of module voltd (kind names are unique across "
		       "modules)");
	expect_refusal("bad", mod_path("bad_route.so"), -EEXIST,
		       "kind \"bad_hash\": route \"/v1/hash\" is served already by kind \"hash\" of module voltd");
	expect_refusal("bad", mod_path("bad_server_route.so"), -EEXIST,
		       "kind \"bad_livez\": route \"/livez\" is voltd's own (the server answers /healthz, /readyz and "
		       "/livez)");
	expect_refusal("bad", mod_path("bad_own_clash.so"), -EEXIST,
		       "kind \"bad_again\": route \"/bad/ok\" is served already by kind \"bad_ok\" of module bad");
	expect_refusal("bad", mod_path("bad_key_bounds.so"), -EINVAL,
		       "key \"limit\": default: 100 is out of bounds [1, 10]");
	expect_refusal("bad", mod_path("bad_key_path.so"), -EINVAL,
		       "key \"path\": voltd's own key of every module section (the module's file)");
	expect_refusal("bad", mod_path("bad_key_type.so"), -EINVAL,
		       "key \"odd\": type 9, expected VOLTD_KEY_BOOL, _INT or _STRING (1..3)");
	expect_refusal("bad", mod_path("bad_key_live_string.so"), -EINVAL,
		       "key \"word\": a STRING key is never live (VOLTD_KEY_LIVE)");
}

/* ------------------------------------------------------------ good ones */

static void test_file_identity_and_build_id(void **state)
{
	struct vjob_mod *m;
	char err[1024];
	char cmd[9000];

	(void)state;
	/* a copy, replaced by rename later (install(1), dpkg) */
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", mod_path("good.so"), tmp_path("good.so"));
	assert_int_equal(system(cmd), 0);
	assert_int_equal(vjob_mod_open("good", tmp_path("good.so"), &m, err, sizeof(err)), 0);
	assert_string_equal(vjob_mod_path(m), tmp_path("good.so"));
	assert_int_equal(strlen(vjob_mod_build_id(m)), 40); /* -Wl,--build-id: sha1 */
	assert_int_equal(strspn(vjob_mod_build_id(m), "0123456789abcdef"), 40);
	assert_int_equal(vjob_mod_file_changed(m), 0);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s.new' && mv '%s.new' '%s'", mod_path("good.so"), tmp_path("good.so"),
		 tmp_path("good.so"), tmp_path("good.so"));
	assert_int_equal(system(cmd), 0);
	assert_int_equal(vjob_mod_file_changed(m), 1);
	assert_int_equal(unlink(tmp_path("good.so")), 0);
	assert_int_equal(vjob_mod_file_changed(m), 1);
	vjob_mod_close(m); /* opened, never started: freed, the mapping stays */
}

static void test_good_loads_and_registers(void **state)
{
	size_t kinds = vjob_kind_count(), mods = vjob_mod_count();
	struct vjob_mod *m, *clash;
	char err[1024], buf[64];

	(void)state;
	/* opened before good is registered: its clash shows at start */
	assert_int_equal(vjob_mod_open("bad", mod_path("bad_good_clash.so"), &clash, err, sizeof(err)), 0);
	assert_int_equal(vjob_mod_open("good", mod_path("good.so"), &m, err, sizeof(err)), 0);
	assert_string_equal(vjob_mod_name(m), "good");
	assert_string_equal(vjob_mod_version(m), "1.0.0-test");
	assert_int_equal(vjob_mod_abi_minor(m), VOLTD_MODULE_ABI_MINOR);
	assert_int_equal(vjob_mod_kind_count(m), 3);
	assert_int_equal(vjob_mod_key_count(m), 2);
	/* keys: defaults, then set before start */
	vjob_mod_key_format(m, 0, buf, sizeof(buf));
	assert_string_equal(buf, "1000000000");
	assert_int_equal(vjob_mod_key_set(m, 1, "bonjour", err, sizeof(err)), 0);
	assert_int_equal(vjob_mod_key_set(m, 1, "a greeting far longer than thirty-two bytes", err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(vjob_mod_key_set(m, 0, "12x", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "'12x' is not a whole number");
	/* nothing registered before start */
	assert_int_equal(vjob_kind_count(), kinds);
	assert_int_equal(vjob_mod_start(m, 0, err, sizeof(err)), 0);
	assert_int_equal(vjob_kind_count(), kinds + 3);
	assert_int_equal(vjob_mod_count(), mods + 1);
	assert_ptr_equal(vjob_mod_at(mods), m);
	assert_ptr_equal(vjob_kind_by_name("good_spin")->mod, m);
	assert_true(vjob_kind_by_name("good_files")->prefix);
	assert_int_equal(vjob_mod_start(m, 0, err, sizeof(err)), -EBUSY);
	/* the same name again: refused */
	char again[1024];
	snprintf(again, sizeof(again), "a module named good is loaded already (%s)", mod_path("good.so"));
	expect_refusal("good", mod_path("good.so"), -EEXIST, again);
	/* the one opened before: its kind's name is taken now */
	char want[512];
	snprintf(want, sizeof(want),
		 "%s: kind \"good_spin\": the name is taken by kind \"good_spin\" of module good (kind names are "
		 "unique across modules)", mod_path("bad_good_clash.so"));
	assert_int_equal(vjob_mod_start(clash, 0, err, sizeof(err)), -EEXIST);
	assert_string_equal(err, want);
	assert_int_equal(vjob_kind_count(), kinds + 3);
	vjob_mod_close(clash);
}

static void test_init_failure_registers_nothing(void **state)
{
	size_t kinds = vjob_kind_count(), mods = vjob_mod_count();
	struct vjob_mod *m;
	char err[1024], want[512];

	(void)state;
	assert_int_equal(vjob_mod_open("bad", mod_path("bad_init.so"), &m, err, sizeof(err)), 0);
	assert_int_equal(vjob_mod_start(m, 0, err, sizeof(err)), -ECONNREFUSED);
	snprintf(want, sizeof(want), "%s: init failed: no database at db.example:5432", mod_path("bad_init.so"));
	assert_string_equal(err, want);
	assert_int_equal(vjob_kind_count(), kinds);
	assert_int_equal(vjob_mod_count(), mods);
	assert_null(vjob_kind_by_name("bad_ok"));
	vjob_mod_close(m);
}

static void test_later_minor_loads(void **state)
{
	struct vjob_mod *m;
	char err[1024];

	(void)state;
	assert_int_equal(vjob_mod_open("bad", mod_path("bad_future.so"), &m, err, sizeof(err)), 0);
	assert_int_equal(vjob_mod_abi_minor(m), 3);
	assert_int_equal(vjob_mod_min_minor(m), 0);
	assert_int_equal(vjob_mod_kind_count(m), 2);
	assert_string_equal(vjob_mod_kind(m, 1)->name, "future_b");
	assert_string_equal(vjob_mod_kind(m, 1)->path, "/future/b");
	assert_int_equal(vjob_mod_start(m, 0, err, sizeof(err)), 0);
}

static void test_routes_after_freeze(void **state)
{
	const struct vjob_kind *k;
	char err[256];
	struct vjob_mod *m = (void *)1;

	(void)state;
	vjob_registry_freeze();
	assert_int_equal(vjob_route("/good/spin", 10, "GET", &k), VJOB_ROUTE_OK);
	assert_string_equal(k->name, "good_spin");
	assert_int_equal(vjob_route("/good/files/a/b", 15, "GET", &k), VJOB_ROUTE_OK);
	assert_string_equal(k->name, "good_files");
	assert_int_equal(vjob_route("/future/a", 9, "GET", &k), VJOB_ROUTE_OK);
	assert_int_equal(vjob_route("/bad/ok", 7, "GET", &k), VJOB_ROUTE_NOT_FOUND);
	/* a good module's job runs */
	struct vjob_input in = { .method = "GET", .query = "n=1000", .query_len = 6 };
	struct vjob *j;
	assert_int_equal(vjob_new(vjob_kind_by_name("good_spin"), &in, &j), 0);
	while (vjob_step(j, 0) == VJOB_MORE)
		;
	assert_int_equal(vjob_result(j)->body_len, 20);
	assert_memory_equal(vjob_result(j)->body, "6248290529083013365\n", 20);
	assert_int_equal(vjob_kind_counter(vjob_kind_by_name("good_spin"), 0), 1000);
	vjob_free(j);
	/* frozen: nothing more loads */
	assert_int_equal(vjob_mod_open("good", mod_path("good.so"), &m, err, sizeof(err)), -EBUSY);
	vjob_mod_shutdown_all();
}

int main(void)
{
	const char *b = getenv("VOLTD_BUILDDIR");
	char err[512];

	snprintf(moddir, sizeof(moddir), "%s/tests/modules", b ? b : ".");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 99;
	}
	if (vjob_mod_start(vjob_mod_builtin(), 0, err, sizeof(err)) < 0) {
		fprintf(stderr, "test_jobs_loader: %s\n", err);
		return 99;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refusals_of_the_file),
		cmocka_unit_test(test_refusals_of_the_entry_and_abi),
		cmocka_unit_test(test_refusals_of_the_descriptor),
		cmocka_unit_test(test_file_identity_and_build_id),
		cmocka_unit_test(test_good_loads_and_registers),
		cmocka_unit_test(test_init_failure_registers_nothing),
		cmocka_unit_test(test_later_minor_loads),
		cmocka_unit_test(test_routes_after_freeze),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	(void)system(cmd);
	return rc;
}
