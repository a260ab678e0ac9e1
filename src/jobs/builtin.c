/* SPDX-License-Identifier: MIT */
/*
 * jobs/builtin.c: the built-in module "voltd": the kinds echo, spin, sleep,
 * hash and gzip (and, in test builds, stall), written against
 * <voltd/module.h> alone like any module and registered through the same
 * call (vjob_mod_start). Its keys are [jobs] spin_max_n and sleep_max_ms of
 * voltd.conf (the built-in module's section is [jobs]; a loaded module's
 * is [module.NAME]). Its init warms OpenSSL up.
 *
 * Threading: the entry and init run once on the main thread, before any
 * job; the kinds follow the job contract of the header.
 */
#include "config.h"
#include "jobs/builtin.h"

#include <openssl/evp.h>

#include <stddef.h>

const struct voltd_host *voltd;

static const struct voltd_key keys[] = {
	[VJOB_KEY_SPIN_MAX_N] = { .name = "spin_max_n", .type = VOLTD_KEY_INT, .flags = VOLTD_KEY_LIVE,
				  .def = "1000000000", .min = 1, .max = 1000000000000,
				  .doc = "largest n of /v1/spin (400 above)" },
	[VJOB_KEY_SLEEP_MAX_MS] = { .name = "sleep_max_ms", .type = VOLTD_KEY_INT, .flags = VOLTD_KEY_LIVE,
				    .def = "60000", .min = 1, .max = 3600000, .unit = "ms",
				    .doc = "largest ms of /v1/sleep (400 above)" },
	{ .name = NULL },
};

/* OpenSSL 3 fetches and caches a digest's implementation on its first use,
 * several milliseconds: done here, once, not inside the first hash job's
 * slice on a worker. Nothing to do for `voltd -t`. */
static int builtin_init(struct voltd_mod *mod, uint32_t flags, void **data, char *err, size_t errlen)
{
	const EVP_MD *mds[] = { EVP_sha256(), EVP_sha512() };
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len;

	(void)mod;
	(void)data;
	(void)err;
	(void)errlen;
	if (flags & VOLTD_INIT_CHECK)
		return 0;
	for (size_t i = 0; i < sizeof(mds) / sizeof(mds[0]); i++)
		(void)EVP_Digest("", 0, md, &len, mds[i], NULL);
	return 0;
}

/* The kinds live one per file; the descriptor wants them side by side, so
 * the entry lays them out (once, before voltd reads the descriptor). */
#ifdef VOLTD_TEST_KINDS
#define N_KINDS 6
#else
#define N_KINDS 5
#endif
static struct voltd_kind kinds[N_KINDS + 1];

static const struct voltd_module builtin = {
	VOLTD_MODULE_HEAD,
	.name = "voltd",
	.version = PACKAGE_VERSION,
	.kinds = kinds,
	.keys = keys,
	.init = builtin_init,
};

const struct voltd_module *vjob__builtin_entry(const struct voltd_host *host)
{
	const struct voltd_kind *each[N_KINDS] = {
		&vjob_builtin_echo, &vjob_builtin_spin, &vjob_builtin_sleep, &vjob_builtin_hash, &vjob_builtin_gzip,
#ifdef VOLTD_TEST_KINDS
		&vjob_builtin_stall,
#endif
	};

	voltd = host;
	for (size_t i = 0; i < N_KINDS; i++)
		kinds[i] = *each[i];
	return &builtin;
}
