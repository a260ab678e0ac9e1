/* SPDX-License-Identifier: MIT */
/*
 * voltd/cfg_types.c: the value types of voltd.conf, one row of operations
 * per type (cfg_types.h): parse, format, size, describe. A new type is a
 * new row here and nowhere else. Single-threaded (see cfg.h).
 */
#include "config.h"
#include "voltd/cfg_internal.h"
#include "base/compiler.h"
#include "base/query.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A whole decimal number: digits only, no sign or space, no overflow. */
static bool parse_u64(const char *s, uint64_t *out)
{
	return vb_parse_u64(s, strlen(s), out) == 0;
}

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* ------------------------------------------------------------------ BOOL */

static int bool_parse(struct vcfg *cfg, const struct vcfg_key *k, const char *value, char *why, size_t len)
{
	static const char *const yes[] = { "on", "yes", "true", "1" };
	static const char *const no[] = { "off", "no", "false", "0" };

	for (size_t i = 0; i < VB_ARRAY_SIZE(yes); i++) {
		if (strcasecmp(value, yes[i]) == 0) {
			*(bool *)vcfg__field(cfg, k) = true;
			return 0;
		}
		if (strcasecmp(value, no[i]) == 0) {
			*(bool *)vcfg__field(cfg, k) = false;
			return 0;
		}
	}
	snprintf(why, len, "'%s' is not a boolean (use on or off)", value);
	return -EINVAL;
}

static void bool_format(const struct vcfg *cfg, const struct vcfg_key *k, char *buf, size_t len)
{
	snprintf(buf, len, "%s", *(const bool *)vcfg__cfield(cfg, k) ? "on" : "off");
}

static size_t bool_size(const struct vcfg_key *k)
{
	(void)k;
	return sizeof(bool);
}

static void bool_describe(const struct vcfg_key *k, char *buf, size_t len)
{
	(void)k;
	snprintf(buf, len, "on or off");
}

/* ------------------------------------------------------------ UINT, U64 */

/* A count or a size within [min, max]: "auto" (VCFG_F_AUTO), a power of
 * two (VCFG_F_POW2). */
static int number_parse(const struct vcfg_key *k, const char *value, uint64_t *v, char *why, size_t len)
{
	if ((k->flags & VCFG_F_AUTO) && strcmp(value, "auto") == 0) {
		*v = VCFG_AUTO;
	} else if (!parse_u64(value, v)) {
		snprintf(why, len, "'%s' is not a whole number%s", value, (k->flags & VCFG_F_AUTO) ? " or auto" : "");
		return -EINVAL;
	} else if (*v < k->min || *v > k->max) {
		snprintf(why, len, "%s is out of bounds [%llu, %llu]", value, (unsigned long long)k->min,
			 (unsigned long long)k->max);
		return -EINVAL;
	} else if ((k->flags & VCFG_F_POW2) && !is_pow2(*v)) {
		snprintf(why, len, "%s is not a power of two (bounds [%llu, %llu])", value,
			 (unsigned long long)k->min, (unsigned long long)k->max);
		return -EINVAL;
	}
	return 0;
}

static void number_format(const struct vcfg_key *k, uint64_t v, char *buf, size_t len)
{
	if ((k->flags & VCFG_F_AUTO) && v == VCFG_AUTO)
		snprintf(buf, len, "auto");
	else
		snprintf(buf, len, "%llu", (unsigned long long)v);
}

static void number_describe(const struct vcfg_key *k, char *buf, size_t len)
{
	size_t off = (size_t)snprintf(buf, len, "%s%s%llu..%llu", (k->flags & VCFG_F_AUTO) ? "auto or " : "",
				      (k->flags & VCFG_F_POW2) ? "power of two, " : "", (unsigned long long)k->min,
				      (unsigned long long)k->max);
	if (k->unit && off < len)
		snprintf(buf + off, len - off, " %s", k->unit);
}

static int uint_parse(struct vcfg *cfg, const struct vcfg_key *k, const char *value, char *why, size_t len)
{
	uint64_t v;
	int rc = number_parse(k, value, &v, why, len);

	if (rc == 0)
		*(unsigned *)vcfg__field(cfg, k) = (unsigned)v;
	return rc;
}

static void uint_format(const struct vcfg *cfg, const struct vcfg_key *k, char *buf, size_t len)
{
	number_format(k, *(const unsigned *)vcfg__cfield(cfg, k), buf, len);
}

static size_t uint_size(const struct vcfg_key *k)
{
	(void)k;
	return sizeof(unsigned);
}

static int u64_parse(struct vcfg *cfg, const struct vcfg_key *k, const char *value, char *why, size_t len)
{
	uint64_t v;
	int rc = number_parse(k, value, &v, why, len);

	if (rc == 0)
		*(uint64_t *)vcfg__field(cfg, k) = v;
	return rc;
}

static void u64_format(const struct vcfg *cfg, const struct vcfg_key *k, char *buf, size_t len)
{
	number_format(k, *(const uint64_t *)vcfg__cfield(cfg, k), buf, len);
}

static size_t u64_size(const struct vcfg_key *k)
{
	(void)k;
	return sizeof(uint64_t);
}

/* ------------------------------------------------------------------- I64 */

/* A module's INT key: a decimal, maybe negative, within its declared
 * bounds (the row's min and max hold int64_t values). */
static int i64_parse(struct vcfg *cfg, const struct vcfg_key *k, const char *value, char *why, size_t len)
{
	int64_t min = (int64_t)k->min, max = (int64_t)k->max, v;
	uint64_t mag;
	bool neg = value[0] == '-';

	if (!parse_u64(value + neg, &mag) || mag > (uint64_t)INT64_MAX + neg) {
		snprintf(why, len, "'%s' is not %s", value, min < 0 ? "an integer" : "a whole number");
		return -EINVAL;
	}
	v = neg ? (int64_t)(0 - mag) : (int64_t)mag;
	if (v < min || v > max) {
		snprintf(why, len, "%s is out of bounds [%lld, %lld]", value, (long long)min, (long long)max);
		return -EINVAL;
	}
	*(int64_t *)vcfg__field(cfg, k) = v;
	return 0;
}

static void i64_format(const struct vcfg *cfg, const struct vcfg_key *k, char *buf, size_t len)
{
	snprintf(buf, len, "%lld", (long long)*(const int64_t *)vcfg__cfield(cfg, k));
}

static void i64_describe(const struct vcfg_key *k, char *buf, size_t len)
{
	size_t off = (size_t)snprintf(buf, len, "%lld..%lld", (long long)(int64_t)k->min, (long long)(int64_t)k->max);
	if (k->unit && off < len)
		snprintf(buf + off, len - off, " %s", k->unit);
}

/* ------------------------------------------------------------------ ENUM */

/* Stored as an int: choice_base + the index of the name in choices. */
static int enum_parse(struct vcfg *cfg, const struct vcfg_key *k, const char *value, char *why, size_t len)
{
	char list[128] = "";
	size_t off = 0;

	for (unsigned i = 0; k->choices[i]; i++) {
		if (strcasecmp(value, k->choices[i]) == 0) {
			*(int *)vcfg__field(cfg, k) = k->choice_base + (int)i;
			return 0;
		}
	}
	for (unsigned i = 0; k->choices[i] && off < sizeof(list); i++)
		off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "", k->choices[i]);
	snprintf(why, len, "'%s' is not one of: %s", value, list);
	return -EINVAL;
}

static void enum_format(const struct vcfg *cfg, const struct vcfg_key *k, char *buf, size_t len)
{
	snprintf(buf, len, "%s", k->choices[*(const int *)vcfg__cfield(cfg, k) - k->choice_base]);
}

static size_t enum_size(const struct vcfg_key *k)
{
	(void)k;
	return sizeof(int);
}

static void enum_describe(const struct vcfg_key *k, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; k->choices[i] && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? " | " : "", k->choices[i]);
}

/* ---------------------------------------------------------------- STRING */

/* A char array of max + 1 bytes; "none" stored as "" with VCFG_F_NONE. */
static int string_parse(struct vcfg *cfg, const struct vcfg_key *k, const char *value, char *why, size_t len)
{
	char *field = vcfg__field(cfg, k);
	size_t n = strlen(value);

	if (n < k->min || n > k->max) {
		snprintf(why, len, "length %zu is out of bounds [%llu, %llu]", n, (unsigned long long)k->min,
			 (unsigned long long)k->max);
		return -EINVAL;
	}
	if ((k->flags & VCFG_F_NONE) && strcmp(value, "none") == 0)
		n = 0;
	memcpy(field, value, n);
	field[n] = '\0';
	return 0;
}

static void string_format(const struct vcfg *cfg, const struct vcfg_key *k, char *buf, size_t len)
{
	const char *field = vcfg__cfield(cfg, k);

	snprintf(buf, len, "%s", ((k->flags & VCFG_F_NONE) && !*field) ? "none" : field);
}

static size_t string_size(const struct vcfg_key *k)
{
	return k->max + 1;
}

static void string_describe(const struct vcfg_key *k, char *buf, size_t len)
{
	snprintf(buf, len, "text, at most %llu characters%s", (unsigned long long)k->max,
		 (k->flags & VCFG_F_NONE) ? ", or none" : "");
}

/* ------------------------------------------------------------------ MODE */

static int mode_parse(struct vcfg *cfg, const struct vcfg_key *k, const char *value, char *why, size_t len)
{
	char *end;

	errno = 0;
	unsigned long m = strtoul(value, &end, 8);
	if (errno || *end || !*value || value[0] == '-' || m > k->max) {
		snprintf(why, len, "'%s' is not an octal mode in [0, 0777]", value);
		return -EINVAL;
	}
	*(unsigned *)vcfg__field(cfg, k) = (unsigned)m;
	return 0;
}

static void mode_format(const struct vcfg *cfg, const struct vcfg_key *k, char *buf, size_t len)
{
	snprintf(buf, len, "0%o", *(const unsigned *)vcfg__cfield(cfg, k));
}

static void mode_describe(const struct vcfg_key *k, char *buf, size_t len)
{
	snprintf(buf, len, "octal, %#llo..%#llo", (unsigned long long)k->min, (unsigned long long)k->max);
}

/* --------------------------------------------------------- ADDR, LISTEN */

static_assert(sizeof(((struct vcfg_addr *)0)->text) == sizeof(((struct vcfg *)0)->listen_text[0]),
	      "one text size for an address");

static int parse_listen_one(const char *tok, struct vcfg_addr *l)
{
	char host[64];
	const char *colon, *port_s;
	uint64_t port;

	memset(l, 0, sizeof(*l));
	if (tok[0] == '[') {
		const char *rb = strchr(tok, ']');
		if (!rb || rb[1] != ':' || (size_t)(rb - tok - 1) >= sizeof(host))
			return -EINVAL;
		memcpy(host, tok + 1, (size_t)(rb - tok - 1));
		host[rb - tok - 1] = '\0';
		port_s = rb + 2;
	} else {
		colon = strrchr(tok, ':');
		if (!colon || (size_t)(colon - tok) >= sizeof(host))
			return -EINVAL;
		memcpy(host, tok, (size_t)(colon - tok));
		host[colon - tok] = '\0';
		port_s = colon + 1;
	}
	if (!parse_u64(port_s, &port) || port > 65535)
		return -EINVAL;
	if (tok[0] == '[') {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&l->addr;
		if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1)
			return -EINVAL;
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		l->len = sizeof(*a6);
		snprintf(l->text, sizeof(l->text), "[%s]:%u", host, (unsigned)port);
	} else {
		struct sockaddr_in *a4 = (struct sockaddr_in *)&l->addr;
		if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
			return -EINVAL;
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		l->len = sizeof(*a4);
		snprintf(l->text, sizeof(l->text), "%s:%u", host, (unsigned)port);
	}
	return 0;
}

/* One address:port (struct vcfg_addr), or "off" (len 0). */
static int addr_parse(struct vcfg *cfg, const struct vcfg_key *k, const char *value, char *why, size_t len)
{
	struct vcfg_addr *l = vcfg__field(cfg, k);

	if (strcmp(value, "off") == 0) {
		memset(l, 0, sizeof(*l));
		return 0;
	}
	if (parse_listen_one(value, l) < 0) {
		memset(l, 0, sizeof(*l));
		snprintf(why, len, "'%s' is not off or an address:port (e.g. 127.0.0.1:9100 or [::1]:9100)", value);
		return -EINVAL;
	}
	return 0;
}

static void addr_format(const struct vcfg *cfg, const struct vcfg_key *k, char *buf, size_t len)
{
	const struct vcfg_addr *l = vcfg__cfield(cfg, k);

	snprintf(buf, len, "%s", l->len ? l->text : "off");
}

static void addr_describe(const struct vcfg_key *k, char *buf, size_t len)
{
	(void)k;
	snprintf(buf, len, "off | address:port");
}

/* server.listen: one to VCFG_MAX_LISTEN addresses, separated by blanks or
 * commas, into cfg->server.listen, n_listen and cfg->listen_text. */
static int listen_parse(struct vcfg *cfg, const struct vcfg_key *k, const char *value, char *why, size_t len)
{
	struct vcfg_addr tmp[VCFG_MAX_LISTEN];
	unsigned n = 0;
	char *copy = strdup(value), *save = NULL;
	int rc = 0;

	(void)k;
	if (!copy) {
		snprintf(why, len, "out of memory");
		return -ENOMEM;
	}
	for (char *tok = strtok_r(copy, " ,\t", &save); tok; tok = strtok_r(NULL, " ,\t", &save)) {
		if (n == VCFG_MAX_LISTEN) {
			snprintf(why, len, "more than %d addresses", VCFG_MAX_LISTEN);
			rc = -EINVAL;
			break;
		}
		if (parse_listen_one(tok, &tmp[n]) < 0) {
			snprintf(why, len, "'%s' is not an address:port (e.g. 127.0.0.1:8080 or [::1]:8080)", tok);
			rc = -EINVAL;
			break;
		}
		n++;
	}
	free(copy);
	if (rc == 0 && n == 0) {
		snprintf(why, len, "needs at least one address");
		rc = -EINVAL;
	}
	if (rc == 0) {
		for (unsigned i = 0; i < n; i++) {
			cfg->server.listen[i].addr = tmp[i].addr;
			cfg->server.listen[i].len = tmp[i].len;
			memcpy(cfg->listen_text[i], tmp[i].text, sizeof(cfg->listen_text[i]));
		}
		cfg->server.n_listen = n;
	}
	return rc;
}

static void listen_format(const struct vcfg *cfg, const struct vcfg_key *k, char *buf, size_t len)
{
	size_t off = 0;

	(void)k;
	buf[0] = '\0';
	for (unsigned i = 0; i < cfg->server.n_listen && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? " " : "", cfg->listen_text[i]);
}

static void listen_describe(const struct vcfg_key *k, char *buf, size_t len)
{
	(void)k;
	snprintf(buf, len, "one to %d addresses", VCFG_MAX_LISTEN);
}

/* Values spread over several fields: never copied (no live or reload-only
 * key has these types). */
static size_t no_size(const struct vcfg_key *k)
{
	(void)k;
	return 0;
}

/* ------------------------------------------------------------------ table */

static const struct vcfg_type_ops types[] = {
	[VCFG_BOOL] = { bool_parse, bool_format, bool_size, bool_describe },
	[VCFG_UINT] = { uint_parse, uint_format, uint_size, number_describe },
	[VCFG_U64] = { u64_parse, u64_format, u64_size, number_describe },
	[VCFG_ENUM] = { enum_parse, enum_format, enum_size, enum_describe },
	[VCFG_STRING] = { string_parse, string_format, string_size, string_describe },
	[VCFG_MODE] = { mode_parse, mode_format, uint_size, mode_describe },
	[VCFG_LISTEN] = { listen_parse, listen_format, no_size, listen_describe },
	[VCFG_ADDR] = { addr_parse, addr_format, no_size, addr_describe },
	[VCFG_I64] = { i64_parse, i64_format, u64_size, i64_describe },
};

const struct vcfg_type_ops *vcfg__type(const struct vcfg_key *k)
{
	VB_BUG_ON((size_t)k->type >= VB_ARRAY_SIZE(types) || !types[k->type].parse);
	return &types[k->type];
}
