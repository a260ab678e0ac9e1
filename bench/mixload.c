/* SPDX-License-Identifier: MIT */
/*
 * bench/mixload.c: an HTTP/1.1 keep-alive load client for scripts/bench that
 * keeps latency per request class, which wrk cannot: workload B's light and
 * heavy requests (every Nth request heavy, in a fixed order over all
 * connections, like bench/wrk/mixed.lua), and an open-loop mode for
 * workloads D, E and F (each class at its own fixed rate, latency measured
 * from each request's scheduled send time, so a slow server is not hidden
 * by the client waiting for it: no coordinated omission).
 *
 *   mixload -c CONNS -d SECONDS [-r RATE] [-R HEAVY_RATE] [-e HEAVY_EVERY] [-w GRACE] [-T FILE]
 *           HOST:PORT LIGHT_PATH [HEAVY_PATH]
 *
 * -r 0 (default): closed loop, each connection sends its next request when
 * the previous response is complete; -e N: every Nth request goes to
 * HEAVY_PATH (0: none). -r RATE: open loop, RATE light requests per second
 * over all connections; -R HEAVY_RATE adds HEAVY_PATH requests at their own
 * rate (the two schedules are independent and merged in time order). A
 * request whose time came while every connection was busy waits in one
 * queue, its latency counting from its scheduled time; the connection
 * idle longest takes it (they take turns). Open loop, at the end of the window nothing new is
 * sent: requests still queued count as errors, and responses in flight are
 * awaited for up to -w GRACE seconds (default 5) and counted with their
 * whole latency (after that, errors), so a server that falls behind cannot
 * hide its slowest requests by being slow.
 * Prints one line per class (light, heavy when used, all) in the format of
 * bench/wrk/report.lua: RESULT class=... requests= duration_s= rps=
 * p50_us= ... p99_99_us= max_us= errors= status_err=
 * requests, rps and the percentiles count the responses with a 2xx or 3xx
 * status; status_err counts the others (a shed 503), errors the requests
 * never answered (a connection reset, still queued, no answer in time).
 * duration_s is the measured window (open loop: the schedule's). Targets
 * any address (the benchmark uses 127.0.0.1 only); bounded by -d and -w.
 * Single-threaded (epoll), like wrk -t1. Responses must carry Content-Length.
 *
 * -T FILE (bench/attrib): every request carries its send time as the query
 * parameter trace_t0 (CLOCK_MONOTONIC ns; voltd's trace records keep it),
 * and FILE gets one line per answered request: "CLASS SCHEDULED SENT DONE
 * STATUS" (ns; CLASS 0 light, 1 heavy; SCHEDULED is SENT in closed loop),
 * so that a client's view joins the server's by SENT.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { LIGHT = 0, HEAVY = 1, NCLASS = 2 };

struct lat {
	int64_t *v;
	size_t n, cap;
};

struct conn {
	int fd;
	bool busy;
	int cls;
	int64_t t0;          /* scheduled (open loop) or send time */
	int64_t sent;        /* -T: when the request was written */
	char tbuf[1024];     /* -T: the request with its trace_t0 */
	char *out;
	size_t outlen, outoff;
	char in[65536];
	size_t inlen;
};

/* Open loop: a request whose time has come, waiting for a connection. */
struct due {
	int64_t t;
	int cls;
};

static struct sockaddr_in addr;
static char *req[NCLASS];
static size_t reqlen[NCLASS];
static struct lat lats[NCLASS];
static uint64_t errors[NCLASS], status_err[NCLASS], counter;
static unsigned heavy_every;
static unsigned busy_n;
/* Open loop: the idle connections, oldest first (so they take turns). */
static struct conn **idle;
static size_t idle_head, idle_n, idle_cap;
static int ep;
/* -T: the request line's parts around trace_t0, and the records. */
static const char *trace_path;
static const char *tpath[NCLASS], *thost;
struct trec {
	int64_t sched, sent, done;
	int cls, status;
};
static struct trec *trecs;
static size_t ntrec, trec_cap;

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void lat_add(struct lat *l, int64_t v)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 65536;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		if (!l->v) {
			perror("realloc");
			exit(1);
		}
	}
	l->v[l->n++] = v;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static void conn_open(struct conn *c)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
	int one = 1;

	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		perror("socket");
		exit(1);
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(c->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 && errno != EINPROGRESS) {
		perror("connect");
		exit(1);
	}
	c->busy = false;
	c->inlen = 0;
	epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
}

static void set_idle(struct conn *c)
{
	if (c->busy) {
		busy_n--;
		if (idle)
			idle[(idle_head + idle_n++) % idle_cap] = c;
	}
	c->busy = false;
}

/* The connection failed: its request (if any) is lost and counted. */
static void conn_reset(struct conn *c)
{
	errors[c->busy ? c->cls : LIGHT]++;
	set_idle(c);
	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	conn_open(c);
}

static void want_out(struct conn *c, bool on)
{
	struct epoll_event ev = { .events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c };

	epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void flush_out(struct conn *c)
{
	while (c->outoff < c->outlen) {
		ssize_t w = send(c->fd, c->out + c->outoff, c->outlen - c->outoff, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EAGAIN || errno == ENOTCONN) {
				want_out(c, true);
				return;
			}
			conn_reset(c);
			return;
		}
		c->outoff += (size_t)w;
	}
	want_out(c, false);
}

static void send_req(struct conn *c, int cls, int64_t t0)
{
	c->busy = true;
	busy_n++;
	c->cls = cls;
	c->t0 = t0;
	c->out = req[cls];
	c->outlen = reqlen[cls];
	c->outoff = 0;
	if (trace_path) {
		int n;

		c->sent = now_ns();
		n = snprintf(c->tbuf, sizeof(c->tbuf), "GET %s%ctrace_t0=%lld HTTP/1.1\r\nHost: %s\r\n\r\n",
			     tpath[cls], strchr(tpath[cls], '?') ? '&' : '?', (long long)c->sent, thost);
		if (n > 0 && (size_t)n < sizeof(c->tbuf)) {
			c->out = c->tbuf;
			c->outlen = (size_t)n;
		}
	}
	flush_out(c);
}

static void trec_add(struct conn *c, int64_t now, int status)
{
	if (ntrec == trec_cap) {
		trec_cap = trec_cap ? 2 * trec_cap : 65536;
		trecs = realloc(trecs, trec_cap * sizeof(*trecs));
		if (!trecs) {
			perror("realloc");
			exit(1);
		}
	}
	trecs[ntrec++] = (struct trec){ c->t0, c->sent, now, c->cls, status };
}

/* Closed loop: the class of the next request (every Nth heavy). */
static int next_class(void)
{
	return heavy_every && ++counter % heavy_every == 0 ? HEAVY : LIGHT;
}

/* A complete response in c->in: its length, 0 if incomplete, -1 if bad. */
static ssize_t response_len(struct conn *c, int *status)
{
	char *end = memmem(c->in, c->inlen, "\r\n\r\n", 4);
	size_t head, body = 0;
	char *p;

	if (!end)
		return c->inlen == sizeof(c->in) ? -1 : 0;
	head = (size_t)(end - c->in) + 4;
	if (c->inlen < 12 || memcmp(c->in, "HTTP/1.", 7) != 0)
		return -1;
	*status = atoi(c->in + 9);
	for (p = c->in; p < end; p++) {
		if ((p == c->in || p[-1] == '\n') && strncasecmp(p, "content-length:", 15) == 0) {
			body = strtoul(p + 15, NULL, 10);
			break;
		}
	}
	if (head + body > sizeof(c->in))
		return -1;
	return c->inlen >= head + body ? (ssize_t)(head + body) : 0;
}

/* Returns true when a response completed (the connection is idle again). */
static bool on_readable(struct conn *c, int64_t now)
{
	for (;;) {
		ssize_t r = recv(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen, 0);
		ssize_t n;
		int status = 0;

		if (r == 0 || (r < 0 && errno != EAGAIN)) {
			bool was_busy = c->busy;

			conn_reset(c);
			return was_busy; /* the request is lost (counted) */
		}
		if (r < 0)
			return false;
		c->inlen += (size_t)r;
		n = response_len(c, &status);
		if (n < 0) {
			conn_reset(c);
			return true;
		}
		if (n == 0)
			continue;
		if (!c->busy) {
			conn_reset(c); /* a response nobody asked for */
			return false;
		}
		if (status < 200 || status > 399)
			status_err[c->cls]++;
		else
			lat_add(&lats[c->cls], now - c->t0);
		if (trace_path)
			trec_add(c, now, status);
		memmove(c->in, c->in + n, c->inlen - (size_t)n);
		c->inlen -= (size_t)n;
		set_idle(c);
		return true;
	}
}

static void report(const char *cls, int64_t *v, size_t n, double secs, uint64_t errs, uint64_t serr)
{
	static const double pcts[] = { 50, 75, 90, 95, 99, 99.9, 99.99 };
	static const char *names[] = { "50", "75", "90", "95", "99", "99_9", "99_99" };

	qsort(v, n, sizeof(*v), cmp64);
	printf("RESULT class=%s requests=%zu duration_s=%.3f rps=%.1f", cls, n, secs, n / secs);
	for (int i = 0; i < 7; i++) {
		size_t k = n ? (size_t)(pcts[i] / 100.0 * (double)(n - 1) + 0.5) : 0;
		printf(" p%s_us=%.0f", names[i], n ? v[k] / 1e3 : 0.0);
	}
	printf(" max_us=%.0f errors=%llu status_err=%llu\n", n ? v[n - 1] / 1e3 : 0.0,
	       (unsigned long long)errs, (unsigned long long)serr);
}

static char *make_req(const char *host, const char *path, size_t *len)
{
	char *r;
	int n = asprintf(&r, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host);

	if (n < 0) {
		perror("asprintf");
		exit(1);
	}
	*len = (size_t)n;
	return r;
}

int main(int argc, char **argv)
{
	unsigned conns = 64;
	double secs = 8, rate[NCLASS] = { 0, 0 }, grace = 5;
	struct conn *cs;
	int64_t start, end, next_due[NCLASS], interval[NCLASS] = { 0, 0 };
	struct due *queue; /* open loop: requests due, waiting for a connection */
	size_t qhead = 0, qlen = 0, qcap = 1 << 20;
	bool open_loop;
	char host[64];
	int opt;

	while ((opt = getopt(argc, argv, "c:d:r:R:e:w:T:")) != -1) {
		switch (opt) {
		case 'c': conns = (unsigned)atoi(optarg); break;
		case 'd': secs = atof(optarg); break;
		case 'r': rate[LIGHT] = atof(optarg); break;
		case 'R': rate[HEAVY] = atof(optarg); break;
		case 'e': heavy_every = (unsigned)atoi(optarg); break;
		case 'w': grace = atof(optarg); break;
		case 'T': trace_path = optarg; break;
		default: goto usage;
		}
	}
	open_loop = rate[LIGHT] > 0 || rate[HEAVY] > 0;
	if (argc - optind < 2 || conns < 1 || secs <= 0 || grace < 0 || rate[LIGHT] < 0 ||
	    rate[HEAVY] < 0 || (heavy_every && open_loop) ||
	    ((heavy_every || rate[HEAVY] > 0) && argc - optind < 3)) {
usage:
		fprintf(stderr, "usage: mixload -c CONNS -d SECONDS [-r RATE] [-R HEAVY_RATE] [-e HEAVY_EVERY] "
			"[-w GRACE] [-T FILE] HOST:PORT LIGHT_PATH [HEAVY_PATH]\n"
			"(-e is for the closed loop, -R for the open loop)\n");
		return 2;
	}
	{
		char *colon = strrchr(argv[optind], ':');

		if (!colon || colon - argv[optind] >= (long)sizeof(host))
			goto usage;
		memcpy(host, argv[optind], (size_t)(colon - argv[optind]));
		host[colon - argv[optind]] = '\0';
		addr.sin_family = AF_INET;
		addr.sin_port = htons((uint16_t)atoi(colon + 1));
		if (inet_pton(AF_INET, host, &addr.sin_addr) != 1)
			goto usage;
	}
	req[LIGHT] = make_req(argv[optind], argv[optind + 1], &reqlen[LIGHT]);
	req[HEAVY] = make_req(argv[optind], argc - optind >= 3 ? argv[optind + 2] : argv[optind + 1],
			      &reqlen[HEAVY]);
	tpath[LIGHT] = argv[optind + 1];
	tpath[HEAVY] = argc - optind >= 3 ? argv[optind + 2] : argv[optind + 1];
	thost = argv[optind];
	ep = epoll_create1(EPOLL_CLOEXEC);
	cs = calloc(conns, sizeof(*cs));
	queue = malloc(qcap * sizeof(*queue));
	if (ep < 0 || !cs || !queue) {
		perror("setup");
		return 1;
	}
	for (unsigned i = 0; i < conns; i++)
		conn_open(&cs[i]);
	if (open_loop) {
		idle_cap = conns;
		idle = malloc(idle_cap * sizeof(*idle));
		if (!idle) {
			perror("setup");
			return 1;
		}
		for (unsigned i = 0; i < conns; i++)
			idle[idle_n++] = &cs[i];
	}
	start = now_ns();
	end = start + (int64_t)(secs * 1e9);
	for (int k = 0; k < NCLASS; k++) {
		/* A class without a rate is never due. */
		interval[k] = rate[k] > 0 ? (int64_t)(1e9 / rate[k]) : 0;
		next_due[k] = rate[k] > 0 ? start : INT64_MAX;
	}
	if (!open_loop)
		for (unsigned i = 0; i < conns; i++)
			send_req(&cs[i], next_class(), start);
	for (;;) {
		struct epoll_event evs[256];
		struct timespec to;
		int64_t now = now_ns(), wait_ns;
		int n;

		if (now >= end) {
			/* Open loop: the responses under way may still come. */
			if (!open_loop || busy_n == 0 || now >= end + (int64_t)(grace * 1e9))
				break;
			wait_ns = end + (int64_t)(grace * 1e9) - now;
		} else if (open_loop) {
			for (;;) {
				int k = next_due[LIGHT] <= next_due[HEAVY] ? LIGHT : HEAVY;

				if (next_due[k] > now || qlen == qcap)
					break;
				queue[(qhead + qlen++) % qcap] = (struct due){ next_due[k], k };
				next_due[k] += interval[k];
			}
			/* The connection idle longest takes the next one due
			 * (a reset one may sit in the ring while busy: skip). */
			while (qlen && idle_n) {
				struct conn *c = idle[idle_head];

				idle_head = (idle_head + 1) % idle_cap;
				idle_n--;
				if (c->busy)
					continue;
				send_req(c, queue[qhead].cls, queue[qhead].t);
				qhead = (qhead + 1) % qcap;
				qlen--;
			}
			wait_ns = (next_due[LIGHT] < next_due[HEAVY] ? next_due[LIGHT] : next_due[HEAVY]) - now;
			if (wait_ns > end - now)
				wait_ns = end - now;
		} else {
			wait_ns = end - now;
		}
		if (wait_ns < 0)
			wait_ns = 0;
		to.tv_sec = wait_ns / 1000000000;
		to.tv_nsec = wait_ns % 1000000000;
		n = epoll_pwait2(ep, evs, 256, &to, NULL);
		now = now_ns();
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;

			if (evs[i].events & EPOLLOUT)
				flush_out(c);
			if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
				if (on_readable(c, now) && !open_loop && now < end)
					send_req(c, next_class(), now);
			}
		}
	}
	{
		/* Open loop: the schedule's window; closed: until the last look. */
		double dur = open_loop ? secs : (now_ns() - start) / 1e9;
		size_t all_n = lats[LIGHT].n + lats[HEAVY].n;
		int64_t *all = malloc((all_n ? all_n : 1) * sizeof(*all));

		if (!all)
			return 1;
		if (lats[LIGHT].n)
			memcpy(all, lats[LIGHT].v, lats[LIGHT].n * sizeof(*all));
		if (lats[HEAVY].n)
			memcpy(all + lats[LIGHT].n, lats[HEAVY].v, lats[HEAVY].n * sizeof(*all));
		/* Open loop: requests still queued or unanswered after the grace
		 * (the server fell behind) count as errors. */
		for (size_t i = 0; i < qlen; i++)
			errors[queue[(qhead + i) % qcap].cls]++;
		for (unsigned i = 0; open_loop && i < conns; i++)
			if (cs[i].busy)
				errors[cs[i].cls]++;
		report("light", lats[LIGHT].v, lats[LIGHT].n, dur, errors[LIGHT], status_err[LIGHT]);
		if (heavy_every || rate[HEAVY] > 0)
			report("heavy", lats[HEAVY].v, lats[HEAVY].n, dur, errors[HEAVY], status_err[HEAVY]);
		report("all", all, all_n, dur, errors[LIGHT] + errors[HEAVY],
		       status_err[LIGHT] + status_err[HEAVY]);
		free(all);
	}
	if (trace_path) {
		FILE *f = fopen(trace_path, "w");

		if (!f) {
			perror(trace_path);
			return 1;
		}
		for (size_t i = 0; i < ntrec; i++)
			fprintf(f, "%d %lld %lld %lld %d\n", trecs[i].cls, (long long)trecs[i].sched,
				(long long)(trecs[i].sent ? trecs[i].sent : trecs[i].sched),
				(long long)trecs[i].done, trecs[i].status);
		if (fclose(f) != 0) {
			perror(trace_path);
			return 1;
		}
	}
	return 0;
}
