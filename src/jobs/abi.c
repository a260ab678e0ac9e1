/* SPDX-License-Identifier: MIT */
/*
 * jobs/abi.c: the layout of <voltd/module.h> pinned, so that a change that
 * breaks modules built against an earlier header fails the build. Nothing
 * here runs: static assertions only.
 *
 * The rule the pins enforce (see the header's "Versions"): within a major,
 * every field of every public struct keeps its offset and size, every
 * constant its value; a minor only appends. When an assertion fails:
 * - the change appends (a field after the last, a host entry, a flag): add
 *   pins for what was appended, bump VOLTD_MODULE_ABI_MINOR and move the
 *   whole-struct sizes below under that minor;
 * - it changes what a published field or constant means or where it lies:
 *   that is a new major (VOLTD_MODULE_ABI_MAJOR and VOLTD_MODULE_ENTRY),
 *   never an edit of these numbers.
 * Offsets are those of the LP64 data model (x86-64, arm64, ppc64el, s390x,
 * riscv64: every Debian architecture voltd builds on but the 32-bit ones,
 * whose compilers lay the same declarations out by the same rules).
 */
#include <voltd/module.h>

#include <assert.h>
#include <stdint.h>

#define FIELD(type, f) sizeof(((struct type *)0)->f)
/* Field f of struct type lies at byte off and is size bytes long. */
#define PIN(type, f, off, size) \
	static_assert(offsetof(struct type, f) == (off) && FIELD(type, f) == (size), \
		      "<voltd/module.h>: struct " #type "." #f " moved or changed size: an ABI break (see jobs/abi.c)")
#define PIN_VALUE(name, value) \
	static_assert((name) == (value), "<voltd/module.h>: " #name " changed value: an ABI break (see jobs/abi.c)")

static_assert(VOLTD_MODULE_ABI_MAJOR == 1, "a new major: pin its layout anew in jobs/abi.c");

PIN_VALUE(VOLTD_STEP_DONE, 0);
PIN_VALUE(VOLTD_STEP_MORE, 1);
PIN_VALUE(VOLTD_STEP_SLEEP, 2);
PIN_VALUE(VOLTD_COUNTERS_MAX, 16);
PIN_VALUE(VOLTD_KIND_BLOCKING, 1u << 0);
PIN_VALUE(VOLTD_KIND_PREFIX, 1u << 1);
PIN_VALUE(VOLTD_KEY_BOOL, 1);
PIN_VALUE(VOLTD_KEY_INT, 2);
PIN_VALUE(VOLTD_KEY_STRING, 3);
PIN_VALUE(VOLTD_KEY_LIVE, 1u << 0);
PIN_VALUE(VOLTD_INIT_CHECK, 1u << 0);
PIN_VALUE(VOLTD_LOG_ERR, 3);
PIN_VALUE(VOLTD_LOG_WARNING, 4);
PIN_VALUE(VOLTD_LOG_NOTICE, 5);
PIN_VALUE(VOLTD_LOG_INFO, 6);
PIN_VALUE(VOLTD_LOG_DEBUG, 7);
PIN_VALUE(VOLTD_BODY_COPY, 0);
PIN_VALUE(VOLTD_BODY_STATIC, 1);
PIN_VALUE(VOLTD_BODY_MALLOC, 2);
PIN_VALUE(VOLTD_HEADERS_MAX, 4096);
static_assert(sizeof(VOLTD_MODULE_ENTRY_NAME) == sizeof("voltd_module_v1"),
	      "<voltd/module.h>: the entry symbol is named for the major");

#if UINTPTR_MAX == UINT64_MAX
PIN(voltd_counter, name, 0, 8);
PIN(voltd_counter, help, 8, 8);

PIN(voltd_kind, name, 0, 8);
PIN(voltd_kind, route, 8, 8);
PIN(voltd_kind, methods, 16, 8);
PIN(voltd_kind, flags, 24, 4);
PIN(voltd_kind, state_size, 28, 4);
PIN(voltd_kind, start, 32, 8);
PIN(voltd_kind, step, 40, 8);
PIN(voltd_kind, fini, 48, 8);
PIN(voltd_kind, counters, 56, 8);
PIN(voltd_kind, doc, 64, 8);

PIN(voltd_key, name, 0, 8);
PIN(voltd_key, type, 8, 4);
PIN(voltd_key, flags, 12, 4);
PIN(voltd_key, def, 16, 8);
PIN(voltd_key, min, 24, 8);
PIN(voltd_key, max, 32, 8);
PIN(voltd_key, unit, 40, 8);
PIN(voltd_key, doc, 48, 8);

PIN(voltd_module, size, 0, 4);
PIN(voltd_module, abi_major, 4, 2);
PIN(voltd_module, abi_minor, 6, 2);
PIN(voltd_module, min_minor, 8, 2);
PIN(voltd_module, kind_size, 10, 2);
PIN(voltd_module, key_size, 12, 2);
PIN(voltd_module, counter_size, 14, 2);
PIN(voltd_module, name, 16, 8);
PIN(voltd_module, version, 24, 8);
PIN(voltd_module, kinds, 32, 8);
PIN(voltd_module, keys, 40, 8);
PIN(voltd_module, init, 48, 8);
PIN(voltd_module, shutdown, 56, 8);

PIN(voltd_host, size, 0, 4);
PIN(voltd_host, abi_major, 4, 2);
PIN(voltd_host, abi_minor, 6, 2);
PIN(voltd_host, version, 8, 8);
PIN(voltd_host, method, 16, 8);
PIN(voltd_host, path, 24, 8);
PIN(voltd_host, query, 32, 8);
PIN(voltd_host, query_param, 40, 8);
PIN(voltd_host, query_u64, 48, 8);
PIN(voltd_host, header, 56, 8);
PIN(voltd_host, header_at, 64, 8);
PIN(voltd_host, body, 72, 8);
PIN(voltd_host, body_take, 80, 8);
PIN(voltd_host, set_status, 88, 8);
PIN(voltd_host, set_header, 96, 8);
PIN(voltd_host, set_body, 104, 8);
PIN(voltd_host, body_alloc, 112, 8);
PIN(voltd_host, respond, 120, 8);
PIN(voltd_host, respondf, 128, 8);
PIN(voltd_host, now_ns, 136, 8);
PIN(voltd_host, sleep_until, 144, 8);
PIN(voltd_host, mod_of, 152, 8);
PIN(voltd_host, mod_data, 160, 8);
PIN(voltd_host, key_int, 168, 8);
PIN(voltd_host, key_str, 176, 8);
PIN(voltd_host, count, 184, 8);
PIN(voltd_host, thread_index, 192, 8);
PIN(voltd_host, thread_count, 200, 8);
PIN(voltd_host, log, 208, 8);

/* The whole structs as of minor 0: a minor that appends moves these under
 * its own #if and pins the new fields above. */
#if VOLTD_MODULE_ABI_MINOR == 0
static_assert(sizeof(struct voltd_counter) == 16, "struct voltd_counter grew: bump the minor");
static_assert(sizeof(struct voltd_kind) == 72, "struct voltd_kind grew: bump the minor");
static_assert(sizeof(struct voltd_key) == 56, "struct voltd_key grew: bump the minor");
static_assert(sizeof(struct voltd_module) == 64, "struct voltd_module grew: bump the minor");
static_assert(sizeof(struct voltd_host) == 216, "struct voltd_host grew: bump the minor");
#else
#error "a new minor: pin what it appended in jobs/abi.c"
#endif
#endif
