/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/stress_blocking.c: the blocking pool under load (also run
 * under TSan): a real server (runtime, I/O driver, server) in this process
 * with the test module tests/modules/pool.so loaded, 3 pool threads and a
 * queue of 4, and client threads that pipeline up to 8 requests per
 * keep-alive connection: blocking jobs (GET /block, each with a unique id,
 * random MORE steps, a SLEEP and a blocking nanosleep of 0..2 ms) mixed
 * with light ones (GET /v1/spin) and jobs of the heavy lane (GET /slices,
 * a unique id, 1..40 MORE steps, a SLEEP now and then: from their
 * executor to the lane, its runners woken on their workers through the
 * mailboxes, server/lane.c), and now and then a connection closed
 * with answers still owed (its jobs are dropped wherever they are: queued,
 * running, sleeping, or waiting for room in the full queue).
 *
 * Checked: every answer read is the one its request asked for, in order
 * (a blocking answer names its own id), no id is answered twice, each ran
 * on a pool thread (thread_index past the workers'), each lane job on a
 * worker; with on_full = wait
 * nothing is refused, with on_full = shed a refusal is a 503 with
 * Retry-After of a blocking request only; after the stop, every request
 * received was answered or counted dropped (requests == responses +
 * requests_dropped, nothing in any stage), nothing is left in the lane
 * and (heavy_wait_ms 0, the wait pass) every lane answer read went through
 * it (lane_jobs; the shed pass, heavy_wait_ms 1, also keeps some with their
 * executors), the pool's queue is empty and
 * every job it received was taken (sends == recvs), and every job whose
 * start ran had its fini (the module's counters: starts == finis). Once
 * per I/O backend this machine has, each with on_full = wait, then shed.
 */
#include "config.h"
#include "base/log.h"
#include "base/rng.h"
#include "io/io.h"
#include "jobs/job.h"
#include "rt/rt.h"
#include "server/server.h"
#include "tests/stress/stress_rt_harness.h"
#include "voltd/cfg.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <sys/socket.h>

#define WORKERS 2
#define POOL 3
#define CLIENTS 4
#define PIPE_MAX 8

static int port;
static bool shed_mode;
static _Atomic uint64_t next_id;
static _Atomic uint8_t *seen;       /* [ids]: answers per id */
static uint64_t ids_max;
static _Atomic uint64_t answered, refused, abandoned, lane_answered;

struct req {
	bool blocking;
	bool lane;                  /* /slices: not blocking, runs on the heavy lane */
	uint64_t id;
};

static int dial(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct timeval tv = { .tv_sec = 30 };

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	SH_CHECK(fd >= 0, "socket: %s", strerror(errno));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	SH_CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "connect: %s", strerror(errno));
	return fd;
}

/* A response off fd into buf (*len bytes buffered so far): status and the
 * body (NUL-terminated, in buf after the head). */
struct resp {
	int status;
	bool retry_after;
	char body[128];
};

static void read_resp(int fd, char *buf, size_t *len, size_t cap, struct resp *r)
{
	char *end;
	size_t clen;

	while (!(end = memmem(buf, *len, "\r\n\r\n", 4))) {
		ssize_t n = recv(fd, buf + *len, cap - *len, 0);
		SH_CHECK(n > 0, "recv: %s", n == 0 ? "EOF" : strerror(errno));
		*len += (size_t)n;
	}
	size_t head = (size_t)(end + 4 - buf);
	buf[head - 1] = '\0';
	SH_CHECK(sscanf(buf, "HTTP/1.1 %d", &r->status) == 1, "status line: %.60s", buf);
	const char *cl = strcasestr(buf, "\r\nContent-Length: ");
	SH_CHECK(cl && sscanf(cl + 18, "%zu", &clen) == 1 && clen < sizeof(r->body), "Content-Length: %.200s", buf);
	r->retry_after = strcasestr(buf, "\r\nRetry-After: ") != NULL;
	while (*len < head + clen) {
		ssize_t n = recv(fd, buf + *len, cap - *len, 0);
		SH_CHECK(n > 0, "recv body: %s", n == 0 ? "EOF" : strerror(errno));
		*len += (size_t)n;
	}
	memcpy(r->body, buf + head, clen);
	r->body[clen] = '\0';
	memmove(buf, buf + head + clen, *len - head - clen);
	*len -= head + clen;
}

static void check_answer(const struct req *q, const struct resp *r)
{
	if (r->status == 503) {
		SH_CHECK(shed_mode && q->blocking && r->retry_after, "a 503 for %s request %" PRIu64,
			 q->blocking ? "blocking" : "light", q->id);
		atomic_fetch_add(&refused, 1);
		return;
	}
	SH_CHECK(r->status == 200, "status %d for request %" PRIu64, r->status, q->id);
	if (q->lane) {
		uint64_t id;
		unsigned t;

		SH_CHECK(sscanf(r->body, "slices %" SCNu64 " on thread %u", &id, &t) == 2, "body %s", r->body);
		SH_CHECK(id == q->id, "answer for %" PRIu64 " to request %" PRIu64 ": out of order or lost", id, q->id);
		SH_CHECK(t < WORKERS, "lane job %" PRIu64 " ran on thread %u, not a worker", id, t);
		SH_CHECK(atomic_fetch_add(&seen[id], 1) == 0, "job %" PRIu64 " answered twice", id);
		atomic_fetch_add(&lane_answered, 1);
	} else if (q->blocking) {
		uint64_t id;
		unsigned t;

		SH_CHECK(sscanf(r->body, "block %" SCNu64 " on thread %u", &id, &t) == 2, "body %s", r->body);
		SH_CHECK(id == q->id, "answer for %" PRIu64 " to request %" PRIu64 ": out of order or lost", id, q->id);
		SH_CHECK(t >= WORKERS && t < WORKERS + POOL, "job %" PRIu64 " ran on thread %u, not a pool thread", id, t);
		SH_CHECK(atomic_fetch_add(&seen[id], 1) == 0, "job %" PRIu64 " answered twice", id);
	}
	atomic_fetch_add(&answered, 1);
}

static void *client(void *arg)
{
	struct vb_rng rng;
	char buf[65536];
	unsigned conns = (unsigned)sh_size(120);

	vb_rng_seed(&rng, sh_seed + (uintptr_t)arg);
	for (unsigned c = 0; c < conns; c++) {
		struct req q[PIPE_MAX];
		unsigned n = 1 + (unsigned)(vb_rng_below(&rng, PIPE_MAX));
		char out[PIPE_MAX * 128];
		size_t off = 0, len = 0;
		int fd = dial();

		for (unsigned i = 0; i < n; i++) {
			unsigned what = (unsigned)vb_rng_below(&rng, 8);

			q[i].blocking = what >= 2 && what < 6;
			q[i].lane = what >= 6;
			if (q[i].lane) {
				q[i].id = atomic_fetch_add(&next_id, 1);
				SH_CHECK(q[i].id < ids_max, "more ids than planned");
				off += (size_t)snprintf(out + off, sizeof(out) - off,
							"GET /slices?more=%u&sleep=%u&id=%" PRIu64 " HTTP/1.1\r\nHost: s\r\n\r\n",
							vb_rng_below(&rng, 40), vb_rng_below(&rng, 2), q[i].id);
			} else if (q[i].blocking) {
				q[i].id = atomic_fetch_add(&next_id, 1);
				SH_CHECK(q[i].id < ids_max, "more ids than planned");
				off += (size_t)snprintf(out + off, sizeof(out) - off,
							"GET /block?ms=%u&more=%u&sleep=%u&id=%" PRIu64 " HTTP/1.1\r\nHost: s\r\n\r\n",
							vb_rng_below(&rng, 3), vb_rng_below(&rng, 4),
							vb_rng_below(&rng, 3), q[i].id);
			} else {
				q[i].id = 0;
				off += (size_t)snprintf(out + off, sizeof(out) - off,
							"GET /v1/spin?n=10 HTTP/1.1\r\nHost: s\r\n\r\n");
			}
		}
		SH_CHECK(send(fd, out, off, MSG_NOSIGNAL) == (ssize_t)off, "send: %s", strerror(errno));
		/* One connection in 8 leaves with answers still owed. */
		unsigned reads = vb_rng_below(&rng, 8) == 0 ? vb_rng_below(&rng, n) : n;
		for (unsigned i = 0; i < reads; i++) {
			struct resp r;

			read_resp(fd, buf, &len, sizeof(buf) - 1, &r);
			check_answer(&q[i], &r);
			sh_progress();
		}
		if (reads < n)
			atomic_fetch_add(&abandoned, 1);
		close(fd);
	}
	return NULL;
}

static bool run(const char *backend, const char *on_full)
{
	static const char conf_fmt[] = "[scheduler]\nworkers = %d\n[io]\nbackend = %s\n"
				       "[server]\nlisten = 127.0.0.1:0\ndrain_timeout_ms = 20000\n"
				       "[stages]\non_full = %s\nheavy_wait_ms = %d\n"
				       "[modules]\nblocking_threads = %d\nblocking_queue = 4\n";
	char conf[512];
	struct vcfg cfg;
	struct vb_strlist err = { 0 };
	struct vio *io = NULL;
	struct vrt *rt = NULL;
	struct vsrv *srv = NULL;
	pthread_t th[CLIENTS];

	/* wait: the lane takes every job; shed: a job behind a lane that
	 * waited 1 ms stays with its executor (both paths run). */
	bool all_lane = strcmp(on_full, "wait") == 0;
	snprintf(conf, sizeof(conf), conf_fmt, WORKERS, backend, on_full, all_lane ? 0 : 1, POOL);
	vcfg_defaults(&cfg);
	SH_CHECK(vcfg_load_string(&cfg, "stress_blocking.conf", conf, &err) == 0, "config: %s",
		 err.n ? err.msg[0] : "?");
	vcfg_resolve(&cfg);
	if (vio_new(&cfg.io, cfg.scheduler.workers, &io) < 0) {
		printf("# %s: this backend cannot run here; skipped\n", backend);
		return false;
	}
	vio_park_ops(io, &cfg.scheduler.park_ops, &cfg.scheduler.park_ctx);
	SH_CHECK(vrt_new(&cfg.scheduler, &rt) == 0, "vrt_new");
	atomic_store(&sh_rt, rt);
	SH_CHECK(vsrv_new(&cfg.server, rt, io, &srv) == 0, "vsrv_new");
	SH_CHECK(vsrv_start(srv) == 0, "vsrv_start");
	port = vsrv_port(srv, 0);
	shed_mode = strcmp(on_full, "shed") == 0;
	uint64_t answered0 = atomic_load(&answered), refused0 = atomic_load(&refused);
	uint64_t lane0 = atomic_load(&lane_answered);

	for (uintptr_t i = 0; i < CLIENTS; i++)
		SH_CHECK(pthread_create(&th[i], NULL, client, (void *)i) == 0, "pthread_create");
	for (unsigned i = 0; i < CLIENTS; i++)
		pthread_join(th[i], NULL);
	SH_CHECK(vsrv_stop(srv) == 0, "the drain had to cut connections");

	struct vsrv_stats *s = vsrv_stats_new(srv);
	SH_CHECK(s, "vsrv_stats_new");
	vsrv_stats_snapshot(srv, s);
	uint64_t responses = 0;
	for (int c = 1; c <= 5; c++)
		responses += s->responses[c];
	SH_CHECK(s->requests == responses + s->requests_dropped, "requests %" PRIu64 " != responses %" PRIu64
		 " + dropped %" PRIu64, s->requests, responses, s->requests_dropped);
	for (unsigned st = 0; st < VSRV_STAGES; st++)
		SH_CHECK(s->in_flight[st] == 0, "%" PRIu64 " requests left in stage %u", s->in_flight[st], st);
	SH_CHECK(s->blocking.len == 0 && s->blocking.sends == s->blocking.recvs,
		 "the pool's queue: len %" PRIu64 ", sends %" PRIu64 ", recvs %" PRIu64, s->blocking.len,
		 s->blocking.sends, s->blocking.recvs);
	SH_CHECK(s->blocking_busy == 0 && s->blocking_threads == POOL, "pool: busy %" PRIu64 " threads %" PRIu64,
		 s->blocking_busy, s->blocking_threads);
	SH_CHECK(shed_mode || s->shed == 0, "%" PRIu64 " refused with on_full = wait", s->shed);
	SH_CHECK(s->lane_waiting == 0, "%" PRIu64 " jobs left in the lane", s->lane_waiting);
	SH_CHECK(!all_lane || s->lane_jobs >= atomic_load(&lane_answered) - lane0,
		 "lane_jobs %" PRIu64 " < lane answers read %" PRIu64, s->lane_jobs, atomic_load(&lane_answered) - lane0);
	SH_CHECK(s->blocking_shed >= atomic_load(&refused) - refused0, "blocking_shed %" PRIu64 " < 503s read",
		 s->blocking_shed);
	printf("# %s, on_full = %s: %" PRIu64 " requests, %" PRIu64 " answers read (%" PRIu64
	       " refused), %" PRIu64 " dropped with their connection, %" PRIu64 " blocking jobs taken, %" PRIu64
	       " results dropped, queue full %" PRIu64 " times, %" PRIu64 " jobs through the lane\n",
	       backend, on_full, s->requests, atomic_load(&answered) - answered0, atomic_load(&refused) - refused0,
	       s->requests_dropped, s->blocking_jobs, s->results_dropped, s->blocking.full_events, s->lane_jobs);
	free(s);
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	atomic_store(&sh_rt, NULL);
	vsrv_free(srv);
	vrt_free(rt);
	vio_free(io);
	return true;
}

int main(void)
{
	const char *b = getenv("VOLTD_BUILDDIR");
	char path[4200], err[512];
	struct vjob_mod *m;

	sh_init("stress_blocking", 20, 600);
	vb_log_set_level(LOG_WARNING); /* the cut connections say so at notice */
	snprintf(path, sizeof(path), "%s/tests/modules/pool.so", b ? b : ".");
	vjob_threads_set(WORKERS);
	vjob_blocking_threads_set(POOL);
	if (vjob_mod_start(vjob_mod_builtin(), 0, err, sizeof(err)) < 0 ||
	    vjob_mod_open("pool", path, &m, err, sizeof(err)) < 0 || vjob_mod_start(m, 0, err, sizeof(err)) < 0)
		sh_fail("%s", err);
	vjob_registry_freeze();
	ids_max = 4 * sh_size(120) * CLIENTS * PIPE_MAX;
	seen = calloc(ids_max, sizeof(*seen));
	SH_CHECK(seen, "calloc");

	unsigned runs = 0;
	static const char *const backends[] = { "uring", "libev" };
	for (unsigned i = 0; i < 2; i++) {
		const char *only = getenv("VOLTD_IO_BACKEND");
		if (only && *only && strcmp(only, backends[i]) != 0)
			continue;
		if (run(backends[i], "wait")) {
			run(backends[i], "shed");
			runs++;
		}
	}
	if (!runs) {
		sh_done();
		return 77; /* the backend asked for cannot run here */
	}
	const struct vjob_kind *k = vjob_kind_by_name("block");
	SH_CHECK(vjob_kind_counter(k, 0) == vjob_kind_counter(k, 1), "starts %" PRIu64 " != finis %" PRIu64,
		 vjob_kind_counter(k, 0), vjob_kind_counter(k, 1));
	printf("# %" PRIu64 " blocking jobs started, each fini run once; %" PRIu64 " connections left early\n",
	       vjob_kind_counter(k, 0), atomic_load(&abandoned));
	vjob_mod_shutdown_all();
	sh_done();
	free((void *)seen);
	return 0;
}
