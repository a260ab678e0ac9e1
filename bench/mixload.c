/* SPDX-License-Identifier: MIT */
/*
 * bench/mixload.c: an HTTP/1.1 keep-alive load client for scripts/bench that
 * keeps latency per request class, which wrk cannot: workload B's light and
 * heavy requests (every Nth request heavy, in a fixed order over all
 * connections, like bench/wrk/mixed.lua), and an open-loop mode for
 * workload C (light requests at one fixed rate, latency measured from each
 * request's scheduled send time, so a slow server is not hidden by the
 * client waiting for it: no coordinated omission).
 *
 *   mixload -c CONNS -d SECONDS [-r RATE] [-e HEAVY_EVERY] HOST:PORT LIGHT_PATH [HEAVY_PATH]
 *
 * -r 0 (default): closed loop, each connection sends its next request when
 * the previous response is complete. -r RATE: open loop, RATE requests per
 * second over all connections; a request whose time came while every
 * connection was busy waits in a queue, its latency counting from its
 * scheduled time. -e N: every Nth request goes to HEAVY_PATH (0: none).
 * Prints one line per class (all, light, heavy when used) in the format of
 * bench/wrk/report.lua: RESULT class=... requests= duration_s= rps=
 * p50_us= ... p99_99_us= max_us= errors= status_err=
 * Targets any address (the benchmark uses 127.0.0.1 only); bounded by -d.
 * Single-threaded (epoll), like wrk -t1. Responses must carry Content-Length.
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
	char *out;
	size_t outlen, outoff;
	char in[65536];
	size_t inlen;
};

static struct sockaddr_in addr;
static char *req[NCLASS];
static size_t reqlen[NCLASS];
static struct lat lats[NCLASS];
static uint64_t errors, status_err, counter;
static unsigned heavy_every;
static int ep;

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

static void conn_reset(struct conn *c)
{
	errors++;
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

static void send_req(struct conn *c, int64_t t0)
{
	int cls = heavy_every && ++counter % heavy_every == 0 ? HEAVY : LIGHT;

	c->busy = true;
	c->cls = cls;
	c->t0 = t0;
	c->out = req[cls];
	c->outlen = reqlen[cls];
	c->outoff = 0;
	flush_out(c);
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
		lat_add(&lats[c->cls], now - c->t0);
		if (status < 200 || status > 399)
			status_err++;
		memmove(c->in, c->in + n, c->inlen - (size_t)n);
		c->inlen -= (size_t)n;
		c->busy = false;
		return true;
	}
}

static void report(const char *cls, int64_t *v, size_t n, double secs)
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
	       (unsigned long long)errors, (unsigned long long)status_err);
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
	double secs = 8, rate = 0;
	struct conn *cs;
	int64_t start, end, next_due, interval = 0;
	int64_t *queue; /* open loop: scheduled times waiting for a connection */
	size_t qhead = 0, qlen = 0, qcap = 1 << 20;
	char host[64];
	int opt;

	while ((opt = getopt(argc, argv, "c:d:r:e:")) != -1) {
		switch (opt) {
		case 'c': conns = (unsigned)atoi(optarg); break;
		case 'd': secs = atof(optarg); break;
		case 'r': rate = atof(optarg); break;
		case 'e': heavy_every = (unsigned)atoi(optarg); break;
		default: goto usage;
		}
	}
	if (argc - optind < 2 || conns < 1 || secs <= 0 || (heavy_every && argc - optind < 3)) {
usage:
		fprintf(stderr, "usage: mixload -c CONNS -d SECONDS [-r RATE] [-e HEAVY_EVERY] "
			"HOST:PORT LIGHT_PATH [HEAVY_PATH]\n");
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
	req[HEAVY] = make_req(argv[optind], heavy_every ? argv[optind + 2] : argv[optind + 1],
			      &reqlen[HEAVY]);
	ep = epoll_create1(EPOLL_CLOEXEC);
	cs = calloc(conns, sizeof(*cs));
	queue = malloc(qcap * sizeof(*queue));
	if (ep < 0 || !cs || !queue) {
		perror("setup");
		return 1;
	}
	for (unsigned i = 0; i < conns; i++)
		conn_open(&cs[i]);
	start = now_ns();
	end = start + (int64_t)(secs * 1e9);
	next_due = start;
	if (rate > 0)
		interval = (int64_t)(1e9 / rate);
	else
		for (unsigned i = 0; i < conns; i++)
			send_req(&cs[i], start);
	for (;;) {
		struct epoll_event evs[256];
		struct timespec to;
		int64_t now = now_ns(), wait_ns;
		int n;

		if (now >= end)
			break;
		if (rate > 0) {
			while (next_due <= now && qlen < qcap) {
				queue[(qhead + qlen++) % qcap] = next_due;
				next_due += interval;
			}
			for (unsigned i = 0; i < conns && qlen; i++) {
				if (!cs[i].busy) {
					send_req(&cs[i], queue[qhead]);
					qhead = (qhead + 1) % qcap;
					qlen--;
				}
			}
			wait_ns = next_due - now;
		} else {
			wait_ns = end - now;
		}
		if (wait_ns > end - now)
			wait_ns = end - now;
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
				if (on_readable(c, now) && rate <= 0 && now < end)
					send_req(c, now);
			}
		}
	}
	{
		double dur = (now_ns() - start) / 1e9;
		size_t all_n = lats[LIGHT].n + lats[HEAVY].n;
		int64_t *all = malloc((all_n ? all_n : 1) * sizeof(*all));

		if (!all)
			return 1;
		if (lats[LIGHT].n)
			memcpy(all, lats[LIGHT].v, lats[LIGHT].n * sizeof(*all));
		if (lats[HEAVY].n)
			memcpy(all + lats[LIGHT].n, lats[HEAVY].v, lats[HEAVY].n * sizeof(*all));
		/* Requests still waiting (open loop: the server fell behind)
		 * count as errors: they were never answered in time. */
		errors += qlen;
		report("light", lats[LIGHT].v, lats[LIGHT].n, dur);
		if (heavy_every)
			report("heavy", lats[HEAVY].v, lats[HEAVY].n, dur);
		report("all", all, all_n, dur);
		free(all);
	}
	return 0;
}
