/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz_ctl.c: libFuzzer harness for the control plane (src/ctl):
 * arbitrary bytes as the input of one control connection (or, by byte 0,
 * of one connection to control.metrics_listen).
 *
 * Seam: the public API only (vctl_new, vctl_start), so that the line
 * protocol's own code (framing, pipelining, NUL bytes, overlong lines,
 * back-pressure, the metrics listener's HTTP) is what is fuzzed, whatever
 * its internal functions are called. Context, built once per process: the
 * daemon's real pieces with nothing served: a 1-worker runtime on the libev
 * backend, a server created (listening on 127.0.0.1:0, never started), the
 * daemon's real hooks (src/voltd/reconf.c: config, set, reload over a
 * configuration held in memory; drain answers "failed": no daemon life),
 * the control thread on a socket in a fresh directory under $TMPDIR. The
 * peer is this process's uid: admin, so every command runs.
 *
 * Each input: connect, send the bytes (the first 512 in pieces of a size
 * chosen by byte 0) while reading the replies, half-close, read to EOF;
 * then a `reload` through the hooks puts every live key back (inputs start
 * alike). Besides
 * the sanitizers it aborts when a property fails (FUZZ_CTL_PRINT=1 in the
 * environment prints what came back):
 *  - the daemon closes the connection (EOF) within 10 s of the last byte;
 *  - control: every reply is one line holding one JSON object whose
 *    "schema" is a reply schema of src/ctl/schemas.json with every key that
 *    schema requires, and whose "ok" is true, or false with a documented
 *    error "code" (not "internal": out of memory);
 *  - control: one reply per line, the last one without its newline
 *    included, and one error for a line longer than VCTL_MAX_LINE, after
 *    which the connection ends (fewer only when the daemon's close reset
 *    the connection and cut them);
 *  - metrics: the reply is one HTTP/1.1 response whose Content-Length is
 *    the length of its body (0 for HEAD).
 */
#include "config.h"
#include "fuzz.h"
#include "ctl/internal.h"
#include "base/log.h"
#include "voltd/cfg.h"
#include "voltd/reconf.h"

#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

/* The configuration file `reload` reads (from memory); %s: socket path. */
static const char conf_fmt[] =
	"[scheduler]\nworkers = 1\n"
	"[io]\nbackend = libev\n"
	"[server]\nlisten = 127.0.0.1:0\n"
	"[control]\nsocket = %s\nmetrics_listen = 127.0.0.1:0\nclient_timeout_ms = 60000\n"
	"[log]\nlevel = err\n";

static struct {
	bool up;
	char dir[64];
	char conf[512];
	struct vcfg cfg;
	struct vio *io;
	struct vrt *rt;
	struct vsrv *srv;
	struct vctl *ctl;
	struct vd_reconf reconf;
	struct sockaddr_un ctl_addr;
	struct sockaddr_in metrics_addr;
	json_t *schemas;
	bool print; /* FUZZ_CTL_PRINT set: print what came back */
} g;

static int load(void *ctx, struct vcfg *next, struct vb_strlist *err)
{
	vcfg_defaults(next);
	return vcfg_load_string(next, "fuzz.conf", g.conf, err);
}

static void cleanup(void)
{
	if (!g.up)
		return;
	vctl_free(g.ctl); /* stops the thread, unlinks the socket */
	rmdir(g.dir);
}

static void setup(void)
{
	struct vb_strlist err = { 0 };
	struct vctl_config cc;
	struct vctl_hooks h;
	const char *why = "";
	const char *tmp = getenv("TMPDIR");

	signal(SIGPIPE, SIG_IGN);
	vb_log_set_level(LOG_ERR);
	snprintf(g.dir, sizeof(g.dir), "%s/voltd-fuzz-ctl.XXXXXX", tmp && strlen(tmp) < 30 ? tmp : "/tmp");
	CHECK(mkdtemp(g.dir) != NULL);
	char path[100];
	snprintf(path, sizeof(path), "%s/control.sock", g.dir);
	snprintf(g.conf, sizeof(g.conf), conf_fmt, path);
	CHECK(load(NULL, &g.cfg, &err) == 0);
	vcfg_resolve(&g.cfg);
	vb_log_set_level(g.cfg.log.level);

	CHECK(vio_new(&g.cfg.io, g.cfg.scheduler.workers, &g.io) == 0);
	vio_park_ops(g.io, &g.cfg.scheduler.park_ops, &g.cfg.scheduler.park_ctx);
	CHECK(vrt_new(&g.cfg.scheduler, &g.rt) == 0);
	CHECK(vsrv_new(&g.cfg.server, g.rt, g.io, &g.srv) == 0);

	vd_reconf_init(&g.reconf, &g.cfg, load, NULL);
	vd_reconf_config(&g.cfg, &cc);
	CHECK(vctl_new(&cc, &g.ctl, &why) == 0);
	vd_reconf_attach(&g.reconf, g.rt, g.srv);
	vd_reconf_attach_ctl(&g.reconf, g.ctl);
	vd_reconf_hooks(&g.reconf, &h);
	h.version = PACKAGE_VERSION;
	h.features = "fuzz";
	h.backend = vio_backend_name(g.io);
	h.backend_reason = vio_backend_reason(g.io);
	CHECK(vctl_start(g.ctl, g.io, g.rt, g.srv, &h) == 0);

	g.ctl_addr.sun_family = AF_UNIX;
	snprintf(g.ctl_addr.sun_path, sizeof(g.ctl_addr.sun_path), "%s", path);
	socklen_t len = sizeof(g.metrics_addr);
	CHECK(getsockname(g.ctl->mfd, (struct sockaddr *)&g.metrics_addr, &len) == 0);
	g.print = getenv("FUZZ_CTL_PRINT") != NULL;
	g.schemas = vctl__schemas();
	CHECK(json_object_size(g.schemas) > 0);
	g.up = true;
	atexit(cleanup);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Send data (pieces of at most `piece` bytes) while reading everything
 * back until EOF. Returns the bytes read (malloc'd, NUL-terminated). */
static char *exchange(int fd, const uint8_t *data, size_t size, size_t piece, size_t *got, bool *reset)
{
	size_t off = 0, cap = 4096, len = 0;
	char *in = malloc(cap);
	bool wr_done = false;
	int64_t last = now_ms();

	CHECK(in != NULL);
	for (;;) {
		if (!wr_done && off == size) {
			shutdown(fd, SHUT_WR);
			wr_done = true;
		}
		struct pollfd p = { .fd = fd, .events = POLLIN | (wr_done ? 0 : POLLOUT) };
		int n = poll(&p, 1, 1000);
		CHECK(n >= 0 || errno == EINTR);
		if (n <= 0) {
			/* A daemon that neither reads nor answers nor closes. */
			CHECK(now_ms() - last < 10000);
			continue;
		}
		if (p.revents & POLLOUT) {
			/* in pieces for the first 512 bytes, the rest at once */
			size_t k = off < 512 && size - off > piece ? piece : size - off;
			ssize_t w = send(fd, data + off, k, MSG_NOSIGNAL);
			if (w > 0) {
				off += (size_t)w;
				last = now_ms();
			} else if (w < 0 && errno != EAGAIN && errno != EINTR) {
				wr_done = true; /* closed by the daemon (EPIPE, ECONNRESET): read what came */
			}
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			if (cap - len < 2048) {
				cap *= 2;
				in = realloc(in, cap);
				CHECK(in != NULL);
			}
			ssize_t r = recv(fd, in + len, cap - len - 1, 0);
			if (r == 0)
				break;
			if (r < 0 && errno == ECONNRESET) {
				/* closed with bytes of ours unread: what it sent
				 * after them may be lost */
				*reset = true;
				break;
			}
			if (r < 0) {
				CHECK(errno == EAGAIN || errno == EINTR);
				continue;
			}
			len += (size_t)r;
			last = now_ms();
		}
	}
	in[len] = '\0';
	*got = len;
	return in;
}

static const char *const error_codes[] = {
	"usage", "unknown_command", "permission", "invalid", "busy", "unsupported", "failed", "internal", NULL,
};

/* One reply line: a JSON object as src/ctl/schemas.json describes it. */
static void check_reply(const char *line, size_t len)
{
	json_error_t e;
	json_t *r = json_loadb(line, len, 0, &e);
	if (!r)
		fprintf(stderr, "fuzz_ctl: reply is not JSON (%s): %.*s\n", e.text, (int)len, line);
	CHECK(r != NULL);
	CHECK(json_is_object(r));
	const char *schema = json_string_value(json_object_get(r, "schema"));
	CHECK(schema != NULL);
	json_t *s = json_object_get(g.schemas, schema);
	if (!s)
		fprintf(stderr, "fuzz_ctl: no schema %s\n", schema);
	CHECK(s != NULL);
	size_t i;
	json_t *key;
	json_array_foreach(json_object_get(s, "required"), i, key) {
		if (!json_object_get(r, json_string_value(key)))
			fprintf(stderr, "fuzz_ctl: %s reply without \"%s\"\n", schema, json_string_value(key));
		CHECK(json_object_get(r, json_string_value(key)) != NULL);
	}
	json_t *ok = json_object_get(r, "ok");
	CHECK(json_is_boolean(ok));
	CHECK(json_is_true(ok) == (strcmp(schema, "voltd.error.v1") != 0));
	if (!json_is_true(ok)) {
		const char *code = json_string_value(json_object_get(r, "code"));
		bool known = false;
		CHECK(code != NULL);
		for (size_t k = 0; error_codes[k] && !known; k++)
			known = strcmp(code, error_codes[k]) == 0;
		CHECK(known);
		/* "internal" means out of memory: never here */
		CHECK(strcmp(code, "internal") != 0);
		CHECK(json_is_string(json_object_get(r, "error")));
	}
	json_decref(r);
}

/* Replies the protocol owes a connection that sent data[0..size) and shut
 * its side (src/ctl/socket.c, "Protocol"): one per line, the last one
 * without its newline included; a line that does not fit in VCTL_MAX_LINE
 * bytes with its newline gets one error and ends the connection. */
static size_t replies_owed(const uint8_t *data, size_t size)
{
	size_t owed = 0;

	while (size) {
		size_t win = size < VCTL_MAX_LINE ? size : VCTL_MAX_LINE;
		const uint8_t *nl = memchr(data, '\n', win);
		owed++;
		if (!nl)
			break; /* the last line, or one too long */
		size -= (size_t)(nl + 1 - data);
		data = nl + 1;
	}
	return owed;
}

static void check_control(const uint8_t *data, size_t size, const char *out, size_t len, bool reset)
{
	size_t lines = 0;
	const char *p = out;

	while (p < out + len) {
		const char *nl = memchr(p, '\n', (size_t)(out + len - p));
		if (!nl && reset)
			break; /* cut by the reset */
		CHECK(nl != NULL); /* every reply ends with its newline */
		check_reply(p, (size_t)(nl - p));
		lines++;
		p = nl + 1;
	}
	size_t owed = replies_owed(data, size);
	if (lines != owed && !(reset && lines < owed))
		fprintf(stderr, "fuzz_ctl: %zu replies for %zu lines%s\n", lines, owed, reset ? " (reset)" : "");
	CHECK(lines == owed || (reset && lines < owed));
}

static void check_metrics(const uint8_t *data, size_t size, const char *out, size_t len, bool reset)
{
	if (len == 0)
		return; /* closed without an answer: allowed for a request it cannot read */
	CHECK(len < 9 || memcmp(out, "HTTP/1.1 ", 9) == 0);
	if (reset)
		return; /* the answer may be cut */
	CHECK(len > 9 && memcmp(out, "HTTP/1.1 ", 9) == 0);
	const char *end = strstr(out, "\r\n\r\n");
	CHECK(end != NULL);
	const char *cl = strstr(out, "\r\nContent-Length: ");
	CHECK(cl != NULL && cl < end);
	size_t body = len - (size_t)(end + 4 - out);
	bool head = size >= 5 && memcmp(data, "HEAD ", 5) == 0;
	unsigned long n = strtoul(cl + 18, NULL, 10);
	CHECK(head ? body == 0 : n == body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (!g.up)
		setup();
	uint8_t sel = data[0];
	data++;
	size--;
	bool metrics = sel & 1;
	/* pieces of 1, 7, 100 bytes or all at once */
	static const size_t pieces[] = { SIZE_MAX, 1, 7, 100 };
	size_t piece = pieces[(sel >> 1) & 3];

	int fd = metrics ? socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)
			 : socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	int rc = metrics ? connect(fd, (struct sockaddr *)&g.metrics_addr, sizeof(g.metrics_addr))
			 : connect(fd, (struct sockaddr *)&g.ctl_addr, sizeof(g.ctl_addr));
	CHECK(rc == 0 || errno == EINPROGRESS || errno == EAGAIN);
	size_t len;
	bool reset = false;
	char *out = exchange(fd, data, size, piece, &len, &reset);
	close(fd);
	if (g.print)
		fprintf(stderr, "fuzz_ctl: %zu bytes back%s:\n%s\n", len, reset ? " (reset)" : "", out);
	if (metrics)
		check_metrics(data, size, out, len, reset);
	else
		check_control(data, size, out, len, reset);
	free(out);

	/* Put every live key back (set, reload-only keys) as the file has it. */
	struct vb_strlist changed = { 0 }, restart = { 0 }, errors = { 0 };
	CHECK(vd_reconf_reload(&g.reconf, &changed, &restart, &errors) == 0);
	vb_strlist_fini(&changed);
	vb_strlist_fini(&restart);
	vb_strlist_fini(&errors);
	return 0;
}
