/* SPDX-License-Identifier: MIT */
/*
 * bench/echo_bench.c: the I/O driver's two backends side by side. A forked
 * child runs an echo server on the runtime + driver (one SO_REUSEPORT
 * listener per worker, connection tasks that re-arm an idle deadline before
 * every receive); the parent drives it and samples the child's CPU time and
 * memory from /proc.
 *
 * 1. Echo: for each (connections x message size) cell, closed-loop clients
 *    (each connection sends a message, waits for the whole echo, repeats)
 *    for --seconds; io_uring and libev alternate within a cell for
 *    --rounds rounds; messages/s, MB/s, latency p50/p99 and server CPU.
 * 2. Idle: --idle connections each echo one byte (so each one holds a
 *    pending receive and a live 60 s deadline), then stay idle for
 *    --idle-seconds: server RSS and kernel slab growth per connection, and
 *    server CPU while idle.
 *
 * Not a test: it asserts nothing; it prints tables. Threading: the parent
 * uses one thread per client thread; the child is the runtime.
 */
#include "config.h"

#include "base/histogram.h"
#include "base/time.h"
#include "io/io.h"
#include "rt/rt.h"
#include "tests/helpers/test_config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXCELLS 16

static struct {
	unsigned workers, threads, rounds, idle;
	double seconds, idle_seconds;
	unsigned conns[MAXCELLS], nconns;
	unsigned sizes[MAXCELLS], nsizes;
	enum vio_backend backends[2];
	unsigned nbackends;
	unsigned idle_deadline_ms;
	size_t bufsize; /* server connection buffer, set per phase */
	bool verbose;
} opt = {
	.workers = 2, .threads = 2, .rounds = 2, .idle = 10000,
	.seconds = 3, .idle_seconds = 5,
	.conns = { 1, 64, 512 }, .nconns = 3,
	.sizes = { 64, 4096, 65536 }, .nsizes = 3,
	.backends = { VIO_BACKEND_URING, VIO_BACKEND_LIBEV }, .nbackends = 2,
	.idle_deadline_ms = 60000,
	.bufsize = 16384,
};

static const char *bname(enum vio_backend b)
{
	return b == VIO_BACKEND_URING ? "uring" : "libev";
}

/* ================================================================ server */

struct econn {
	struct vrt_task t;
	struct vio_conn c;
	int state; /* 0 recv, 1 send, 2 close */
	size_t n;
	char buf[]; /* opt.bufsize */
};

static enum vrt_poll econn_poll(struct vrt_task *t)
{
	struct econn *e = (struct econn *)t;
	enum vrt_poll p;
	ssize_t r;
	int rc;

	if (vrt_task_is_cancelled(t)) {
		vio_conn_abandon(&e->c);
		return VRT_READY;
	}
	for (;;) {
		switch (e->state) {
		case 0:
			if (e->n == 0) {
				/* A live idle deadline, re-armed before every receive. */
				if (vio_conn_set_deadline(&e->c, vb_now_ns() + (int64_t)opt.idle_deadline_ms *
							  VB_NS_PER_MS) < 0) {
					e->state = 2;
					continue;
				}
				e->n = 1;
			}
			p = vio_conn_recv(&e->c, e->buf, opt.bufsize, &r);
			if (p != VRT_READY)
				return p;
			e->n = r > 0 ? (size_t)r : 0;
			e->state = r > 0 ? 1 : 2;
			continue;
		case 1:
			p = vio_conn_send(&e->c, e->buf, e->n, &r);
			if (p != VRT_READY)
				return p;
			e->n = 0;
			e->state = r < 0 ? 2 : 0;
			continue;
		default:
			return vio_conn_close(&e->c, &rc);
		}
	}
}

static void econn_drop(struct vrt_task *t)
{
	free(t);
}

static const struct vrt_task_vtable econn_vt = { .poll = econn_poll, .drop = econn_drop };

struct acceptor {
	struct vrt_task t;
	struct vrt *rt;
	struct vio_listener *l;
	unsigned idx;
};

static enum vrt_poll acceptor_poll(struct vrt_task *t)
{
	struct acceptor *a = (struct acceptor *)t;
	int fd, one = 1;

	for (;;) {
		enum vrt_poll p = vio_accept(a->l, a->idx, &fd);
		struct econn *e;

		if (p != VRT_READY)
			return p;
		if (fd < 0 || vrt_task_is_cancelled(t))
			return VRT_READY;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		e = calloc(1, sizeof(*e) + opt.bufsize);
		if (!e) {
			close(fd);
			continue;
		}
		vrt_task_init(&e->t, &econn_vt);
		vio_conn_init(&e->c, fd);
		if (vrt_spawn(a->rt, &e->t) < 0)
			close(fd);
		vrt_task_unref(&e->t);
	}
}

static const struct vrt_task_vtable acceptor_vt = { .poll = acceptor_poll, .drop = econn_drop };

/* The child: serve until the parent closes `rfd`. */
static int serve(enum vio_backend b, int wfd, int rfd)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct vio_config vc;
	struct vrt_config rc;
	struct vio_listener *l;
	struct vio *io;
	struct vrt *rt;
	int port;
	char c;

	tcfg_io(&vc);
	vc.backend = b;
	if (vio_new(&vc, opt.workers, &io) < 0)
		return 77;
	tcfg_rt(&rc);
	rc.workers = opt.workers;
	vio_park_ops(io, &rc.park_ops, &rc.park_ctx);
	if (vrt_new(&rc, &rt) < 0)
		return 99;
	if (vio_listener_new(io, (struct sockaddr *)&sa, sizeof(sa), 4096, &l) < 0)
		return 99;
	for (unsigned i = 0; i < vio_listener_count(l); i++) {
		struct acceptor *a = calloc(1, sizeof(*a));

		vrt_task_init(&a->t, &acceptor_vt);
		a->rt = rt;
		a->l = l;
		a->idx = i;
		vrt_spawn(rt, &a->t);
		vrt_task_unref(&a->t);
	}
	port = vio_listener_port(l);
	if (write(wfd, &port, sizeof(port)) != sizeof(port))
		return 99;
	while (read(rfd, &c, 1) > 0)
		;
	vio_listener_close(l);
	if (opt.verbose) {
		struct vio_worker_stats vs[8];
		struct vrt_worker_stats rs[8];
		unsigned n = vio_stats_snapshot(io, vs, 8);

		vrt_stats_snapshot(rt, NULL, rs, 8);
		for (unsigned i = 0; i < n && i < 8; i++)
			fprintf(stderr, "  [%s w%u] polls %lu stolen %lu parks %lu unparks %lu | io parks %lu "
				"wakeups_io %lu submitted %lu completed %lu migrations %lu ms-arms %lu\n",
				bname(b), i, rs[i].polls, rs[i].tasks_stolen, rs[i].parks, rs[i].unparks,
				vs[i].parks, vs[i].park_wakeups_io, vs[i].submitted, vs[i].completed,
				vs[i].migrations, vs[i].recv_multishot_arms);
	}
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	vrt_free(rt);
	vio_free(io);
	return 0;
}

struct server {
	pid_t pid;
	int port;
	int ctl; /* closing it stops the server */
};

static int server_start(enum vio_backend b, struct server *s)
{
	int up[2], down[2];

	if (pipe(up) < 0 || pipe(down) < 0)
		return -errno;
	fflush(NULL);
	s->pid = fork();
	if (s->pid == 0) {
		close(up[0]);
		close(down[1]);
		_exit(serve(b, up[1], down[0]));
	}
	close(up[1]);
	close(down[0]);
	s->ctl = down[1];
	if (read(up[0], &s->port, sizeof(s->port)) != sizeof(s->port)) {
		int st;
		waitpid(s->pid, &st, 0);
		close(up[0]);
		return WIFEXITED(st) && WEXITSTATUS(st) == 77 ? -ENOSYS : -EIO;
	}
	close(up[0]);
	return 0;
}

static void server_stop(struct server *s)
{
	int st;

	close(s->ctl);
	waitpid(s->pid, &st, 0);
}

/* CPU seconds of a process: the sum of its threads' run time from
 * /proc/PID/task/TID/schedstat (nanoseconds, unlike the 10 ms ticks of
 * /proc/PID/stat). */
static double proc_cpu(pid_t pid)
{
	char path[320];
	struct dirent *e;
	unsigned long long ns = 0, v;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return 0;
	while ((e = readdir(d)) != NULL) {
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/schedstat", (int)pid, e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%llu", &v) == 1)
			ns += v;
		fclose(f);
	}
	closedir(d);
	return (double)ns / 1e9;
}

/* A "Key:   N kB" line of a /proc file, in bytes. */
static long proc_kb(const char *file, const char *key)
{
	char line[256];
	size_t kl = strlen(key);
	long v = -1;
	FILE *f = fopen(file, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
			v = strtol(line + kl + 1, NULL, 10) * 1024;
			break;
		}
	fclose(f);
	return v;
}

static long proc_rss(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	return proc_kb(path, "VmRSS");
}

/* ================================================================ client */

static int connect_port(int port)
{
	struct sockaddr_in sa = {
		.sin_family = AF_INET,
		.sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

struct cconn {
	int fd;
	size_t sent, got;
	int64_t t0;
	bool want_out;
};

struct cthread {
	pthread_t th;
	int port;
	unsigned nconn;
	size_t size;
	int64_t end;
	_Atomic int *go;
	uint64_t msgs, errors;
	struct vb_hist hist;
};

static void *cthread_main(void *arg)
{
	struct cthread *ct = arg;
	struct cconn *cs = calloc(ct->nconn, sizeof(*cs));
	char *tx = malloc(ct->size), *rx = malloc(65536);
	struct epoll_event evs[256];
	int ep = epoll_create1(EPOLL_CLOEXEC);

	memset(tx, 'e', ct->size);
	for (unsigned i = 0; i < ct->nconn; i++) {
		struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.u32 = i };

		cs[i].fd = connect_port(ct->port);
		if (cs[i].fd < 0) {
			ct->errors++;
			continue;
		}
		fcntl(cs[i].fd, F_SETFL, O_NONBLOCK);
		cs[i].want_out = true;
		epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev);
	}
	while (!atomic_load(ct->go))
		usleep(100);
	for (unsigned i = 0; i < ct->nconn; i++)
		cs[i].t0 = vb_now_ns();
	while (vb_now_ns() < ct->end) {
		int n = epoll_wait(ep, evs, 256, 100);

		for (int k = 0; k < n; k++) {
			struct cconn *c = &cs[evs[k].data.u32];
			ssize_t r;

			if (c->fd < 0)
				continue;
			if (c->sent < ct->size && (evs[k].events & EPOLLOUT)) {
				r = send(c->fd, tx + c->sent, ct->size - c->sent, MSG_NOSIGNAL);
				if (r > 0)
					c->sent += (size_t)r;
				else if (r < 0 && errno != EAGAIN)
					goto bad;
			}
			while (evs[k].events & EPOLLIN) {
				r = recv(c->fd, rx, 65536, 0);
				if (r > 0) {
					c->got += (size_t)r;
					continue;
				}
				if (r < 0 && errno == EAGAIN)
					break;
				goto bad;
			}
			if (c->got >= ct->size) { /* one message echoed */
				int64_t now = vb_now_ns();
				vb_hist_record_owner(&ct->hist, (uint64_t)(now - c->t0));
				ct->msgs++;
				c->got -= ct->size;
				c->sent = 0;
				c->t0 = now;
				r = send(c->fd, tx, ct->size, MSG_NOSIGNAL);
				if (r > 0)
					c->sent = (size_t)r;
				else if (r < 0 && errno != EAGAIN)
					goto bad;
			}
			{
				bool out = c->sent < ct->size;
				if (out != c->want_out) {
					struct epoll_event ev = {
						.events = EPOLLIN | (out ? EPOLLOUT : 0),
						.data.u32 = evs[k].data.u32,
					};
					epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
					c->want_out = out;
				}
			}
			continue;
bad:
			ct->errors++;
			close(c->fd);
			c->fd = -1;
		}
	}
	for (unsigned i = 0; i < ct->nconn; i++)
		if (cs[i].fd >= 0)
			close(cs[i].fd);
	close(ep);
	free(cs);
	free(tx);
	free(rx);
	return NULL;
}

struct cell_result {
	double msgs_per_s, mb_per_s, p50_us, p99_us, cpu_pct, msgs_per_cpu_s;
	uint64_t errors;
	bool ok;
};

static void run_cell(enum vio_backend b, unsigned conns, size_t size, struct cell_result *res)
{
	struct server s;
	struct cthread *ct;
	struct vb_hist_snap sum, one;
	unsigned nt = opt.threads < conns ? opt.threads : conns;
	_Atomic int go = 0;
	double cpu0, cpu1;
	int64_t t0, t1;
	uint64_t msgs = 0;

	memset(res, 0, sizeof(*res));
	if (server_start(b, &s) < 0)
		return;
	ct = calloc(nt, sizeof(*ct));
	for (unsigned i = 0; i < nt; i++) {
		ct[i].port = s.port;
		ct[i].nconn = conns / nt + (i < conns % nt);
		ct[i].size = size;
		ct[i].go = &go;
		vb_hist_init(&ct[i].hist);
	}
	t0 = vb_now_ns() + 300 * VB_NS_PER_MS; /* connect first */
	for (unsigned i = 0; i < nt; i++) {
		ct[i].end = t0 + (int64_t)(opt.seconds * 1e9);
		pthread_create(&ct[i].th, NULL, cthread_main, &ct[i]);
	}
	while (vb_now_ns() < t0)
		usleep(1000);
	cpu0 = proc_cpu(s.pid);
	atomic_store(&go, 1);
	memset(&sum, 0, sizeof(sum));
	for (unsigned i = 0; i < nt; i++) {
		pthread_join(ct[i].th, NULL);
		vb_hist_snapshot(&ct[i].hist, &one);
		vb_hist_snap_merge(&sum, &one);
		msgs += ct[i].msgs;
		res->errors += ct[i].errors;
	}
	t1 = vb_now_ns();
	cpu1 = proc_cpu(s.pid);
	server_stop(&s);
	res->msgs_per_s = (double)msgs / ((double)(t1 - t0) / 1e9);
	res->mb_per_s = res->msgs_per_s * (double)size / 1e6;
	res->p50_us = (double)vb_hist_snap_quantile(&sum, 0.5) / 1e3;
	res->p99_us = (double)vb_hist_snap_quantile(&sum, 0.99) / 1e3;
	res->cpu_pct = 100.0 * (cpu1 - cpu0) / ((double)(t1 - t0) / 1e9);
	res->msgs_per_cpu_s = cpu1 > cpu0 ? (double)msgs / (cpu1 - cpu0) : 0;
	res->ok = true;
	free(ct);
}

/* ================================================================ idle */

struct idle_result {
	double rss_per_conn, slab_per_conn, idle_cpu_ms_per_s, idle0_cpu_ms_per_s, setup_s;
	unsigned opened;
	bool ok;
};

static void run_idle(enum vio_backend b, struct idle_result *res)
{
	struct server s;
	int *fds = calloc(opt.idle, sizeof(int));
	long rss0, rss1, slab0, slab1;
	double cpu0, cpu1;
	int64_t t0;
	unsigned n = 0;

	memset(res, 0, sizeof(*res));
	if (server_start(b, &s) < 0)
		return;
	usleep(200 * 1000);
	/* Baseline: the same server with no connection at all. */
	cpu0 = proc_cpu(s.pid);
	t0 = vb_now_ns();
	usleep((useconds_t)(opt.idle_seconds * 1e6));
	cpu1 = proc_cpu(s.pid);
	res->idle0_cpu_ms_per_s = (cpu1 - cpu0) * 1e3 / ((double)(vb_now_ns() - t0) / 1e9);
	rss0 = proc_rss(s.pid);
	slab0 = proc_kb("/proc/meminfo", "Slab");
	t0 = vb_now_ns();
	while (n < opt.idle) {
		unsigned batch = opt.idle - n < 256 ? opt.idle - n : 256, i;
		char c;

		for (i = 0; i < batch; i++) {
			fds[n + i] = connect_port(s.port);
			if (fds[n + i] < 0 || send(fds[n + i], "i", 1, 0) != 1)
				break;
		}
		for (unsigned k = 0; k < i; k++) {
			struct pollfd p = { .fd = fds[n + k], .events = POLLIN };

			if (poll(&p, 1, 5000) != 1 || recv(fds[n + k], &c, 1, 0) != 1)
				break;
		}
		n += i;
		if (i < batch)
			break;
	}
	res->opened = n;
	res->setup_s = (double)(vb_now_ns() - t0) / 1e9;
	usleep(500 * 1000); /* settle */
	rss1 = proc_rss(s.pid);
	slab1 = proc_kb("/proc/meminfo", "Slab");
	cpu0 = proc_cpu(s.pid);
	t0 = vb_now_ns();
	usleep((useconds_t)(opt.idle_seconds * 1e6));
	cpu1 = proc_cpu(s.pid);
	res->idle_cpu_ms_per_s = (cpu1 - cpu0) * 1e3 / ((double)(vb_now_ns() - t0) / 1e9);
	if (n) {
		res->rss_per_conn = (double)(rss1 - rss0) / n;
		res->slab_per_conn = (double)(slab1 - slab0) / n;
	}
	for (unsigned i = 0; i < n; i++)
		close(fds[i]);
	server_stop(&s);
	free(fds);
	res->ok = n == opt.idle;
}

/* ================================================================ main */

static unsigned parse_list(const char *s, unsigned *v)
{
	unsigned n = 0;

	while (*s && n < MAXCELLS) {
		char *end;
		unsigned long x = strtoul(s, &end, 10);
		if (end == s)
			break;
		if (*end == 'k' || *end == 'K')
			x *= 1024, end++;
		v[n++] = (unsigned)x;
		s = *end == ',' ? end + 1 : end;
	}
	return n;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: echo_bench [--workers N] [--threads N] [--seconds S] [--rounds R]\n"
		"                  [--conns 1,64,512] [--sizes 64,4k,64k] [--backend uring|libev|both]\n"
		"                  [--idle N] [--idle-seconds S] [--no-echo] [--no-idle] [--verbose]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct rlimit rl;
	bool do_echo = true, do_idle = true;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--no-echo"))
			do_echo = false;
		else if (!strcmp(a, "--verbose"))
			opt.verbose = true;
		else if (!strcmp(a, "--no-idle"))
			do_idle = false;
		else if (!v)
			usage();
		else if (!strcmp(a, "--workers"))
			opt.workers = (unsigned)atoi(v), i++;
		else if (!strcmp(a, "--threads"))
			opt.threads = (unsigned)atoi(v), i++;
		else if (!strcmp(a, "--seconds"))
			opt.seconds = atof(v), i++;
		else if (!strcmp(a, "--rounds"))
			opt.rounds = (unsigned)atoi(v), i++;
		else if (!strcmp(a, "--idle"))
			opt.idle = (unsigned)atoi(v), i++;
		else if (!strcmp(a, "--idle-seconds"))
			opt.idle_seconds = atof(v), i++;
		else if (!strcmp(a, "--conns"))
			opt.nconns = parse_list(v, opt.conns), i++;
		else if (!strcmp(a, "--sizes"))
			opt.nsizes = parse_list(v, opt.sizes), i++;
		else if (!strcmp(a, "--backend")) {
			if (!strcmp(v, "uring"))
				opt.backends[0] = VIO_BACKEND_URING, opt.nbackends = 1;
			else if (!strcmp(v, "libev"))
				opt.backends[0] = VIO_BACKEND_LIBEV, opt.nbackends = 1;
			else if (strcmp(v, "both"))
				usage();
			i++;
		} else {
			usage();
		}
	}
	signal(SIGPIPE, SIG_IGN);
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max; /* children inherit it */
	setrlimit(RLIMIT_NOFILE, &rl);
	printf("echo_bench: %u server workers, %u client threads, %u CPUs, %.1f s per run, "
	       "%u alternating rounds\n", opt.workers, opt.threads,
	       (unsigned)sysconf(_SC_NPROCESSORS_ONLN), opt.seconds, opt.rounds);
	printf("sizeof(struct vio_conn) = %zu B, struct vio_timer = %zu B\n\n",
	       sizeof(struct vio_conn), sizeof(struct vio_timer));

	if (do_echo) {
		opt.bufsize = 16384;
		printf("%-6s %6s %7s %10s %8s %9s %9s %7s %12s\n", "backend", "conns", "size",
		       "msgs/s", "MB/s", "p50 us", "p99 us", "srv CPU", "msgs/CPU-s");
		for (unsigned ci = 0; ci < opt.nconns; ci++) {
			for (unsigned si = 0; si < opt.nsizes; si++) {
				struct cell_result sum[2], r;
				unsigned ok[2] = { 0, 0 };

				memset(sum, 0, sizeof(sum));
				for (unsigned round = 0; round < opt.rounds; round++) {
					for (unsigned bi = 0; bi < opt.nbackends; bi++) {
						/* alternate the order every round */
						unsigned k = (round & 1) ? opt.nbackends - 1 - bi : bi;

						run_cell(opt.backends[k], opt.conns[ci], opt.sizes[si], &r);
						if (!r.ok)
							continue;
						ok[k]++;
						sum[k].msgs_per_s += r.msgs_per_s;
						sum[k].mb_per_s += r.mb_per_s;
						sum[k].p50_us += r.p50_us;
						sum[k].p99_us += r.p99_us;
						sum[k].cpu_pct += r.cpu_pct;
						sum[k].msgs_per_cpu_s += r.msgs_per_cpu_s;
						sum[k].errors += r.errors;
					}
				}
				for (unsigned k = 0; k < opt.nbackends; k++) {
					double d = ok[k] ? ok[k] : 1;
					if (!ok[k]) {
						printf("%-6s %6u %7u   (unavailable)\n", bname(opt.backends[k]),
						       opt.conns[ci], opt.sizes[si]);
						continue;
					}
					printf("%-6s %6u %7u %10.0f %8.1f %9.1f %9.1f %6.0f%% %12.0f%s\n",
					       bname(opt.backends[k]), opt.conns[ci], opt.sizes[si],
					       sum[k].msgs_per_s / d, sum[k].mb_per_s / d, sum[k].p50_us / d,
					       sum[k].p99_us / d, sum[k].cpu_pct / d, sum[k].msgs_per_cpu_s / d,
					       sum[k].errors ? "  (client errors)" : "");
				}
				if (opt.nbackends == 2 && ok[0] && ok[1])
					printf("%-6s %6u %7u %9.2fx %54.2fx\n", "ratio", opt.conns[ci],
					       opt.sizes[si],
					       (sum[0].msgs_per_s / ok[0]) / (sum[1].msgs_per_s / ok[1]),
					       (sum[0].msgs_per_cpu_s / ok[0]) / (sum[1].msgs_per_cpu_s / ok[1]));
			}
		}
		printf("\n");
	}
	if (do_idle) {
		opt.bufsize = 256; /* the driver's cost, not an application buffer's */
		printf("%u idle connections, each with a pending receive and a live %u s deadline\n"
		       "(server connection task %zu B incl. a 256 B buffer; CPU in ms per second):\n",
		       opt.idle, opt.idle_deadline_ms / 1000, sizeof(struct econn) + opt.bufsize);
		printf("%-6s %8s %11s %19s %13s %14s\n", "backend", "setup s", "RSS B/conn",
		       "kernel slab B/conn", "idle CPU", "CPU, 0 conns");
		for (unsigned bi = 0; bi < opt.nbackends; bi++) {
			struct idle_result r;

			run_idle(opt.backends[bi], &r);
			if (!r.ok) {
				printf("%-6s   (only %u connections opened)\n", bname(opt.backends[bi]),
				       r.opened);
				continue;
			}
			printf("%-6s %8.2f %11.0f %19.0f %13.2f %14.2f\n", bname(opt.backends[bi]),
			       r.setup_s, r.rss_per_conn, r.slab_per_conn, r.idle_cpu_ms_per_s,
			       r.idle0_cpu_ms_per_s);
		}
	}
	return 0;
}
