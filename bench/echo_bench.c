/* SPDX-License-Identifier: MIT */
/*
 * bench/echo_bench.c: the I/O driver's two backends side by side. A forked
 * child runs an echo server on the runtime + driver (one SO_REUSEPORT
 * listener per worker, connection tasks that re-arm an idle deadline before
 * every receive); the parent drives it and samples the child's CPU time and
 * memory from /proc.
 *
 * The server is the echo server of tests/helpers/io_harness.c, the clients
 * its closed-loop client (ioh_pingpong_run), which also checks every echo.
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
#include "base/metric.h"
#include "base/time.h"
#include "io/io.h"
#include "rt/rt.h"
#include "tests/helpers/io_harness.h"
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

/* --verbose: the server's runtime and driver counters, per worker, from the
 * layers' metric tables. */
static void print_stats(struct ioh *h, enum vio_backend b)
{
	struct vio_worker_stats vs[8];
	struct vrt_worker_stats rs[8];
	unsigned n = vio_stats_snapshot(h->io, vs, 8);
	char line[2048];
	size_t off;

	vrt_stats_snapshot(h->rt, NULL, rs, 8);
	for (unsigned i = 0; i < n && i < 8; i++) {
		off = 0;
		line[0] = '\0';
		vb_metric_format(line, sizeof(line), &off, vrt_worker_metrics, vrt_worker_metrics_n, &rs[i]);
		fprintf(stderr, "  [%s w%u] rt: %s\n", bname(b), i, line);
		off = 0;
		line[0] = '\0';
		vb_metric_format(line, sizeof(line), &off, vio_worker_metrics, vio_worker_metrics_n, &vs[i]);
		fprintf(stderr, "  [%s w%u] io: %s\n", bname(b), i, line);
	}
}

/* ================================================================ server */

/* The child: the echo server of tests/helpers/io_harness.c on `b`, until the
 * parent closes `rfd`. */
static int serve(enum vio_backend b, int wfd, int rfd)
{
	struct vio_config vc;
	struct vrt_config rc;
	struct ioh h;
	struct ioh_echo e;
	char c;

	tcfg_io(&vc);
	vc.backend = b;
	tcfg_rt(&rc);
	ioh_start(&h, opt.workers, &vc, &rc); /* exits 77 where the backend is unavailable */
	memset(&e, 0, sizeof(e));
	e.bufsize = opt.bufsize;
	e.idle_deadline_ns = (int64_t)opt.idle_deadline_ms * VB_NS_PER_MS;
	if (ioh_echo_start(&h, &e) < 0)
		return 99;
	if (write(wfd, &e.port, sizeof(e.port)) != sizeof(e.port))
		return 99;
	while (read(rfd, &c, 1) > 0)
		;
	if (opt.verbose)
		print_stats(&h, b);
	ioh_echo_stop(&e, 10000);
	ioh_stop(&h);
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

struct cthread {
	pthread_t th;
	struct ioh_pingpong_opts o;
	struct ioh_pingpong_result r;
	struct vb_hist hist;
};

static void *cthread_main(void *arg)
{
	struct cthread *ct = arg;

	ct->o.latency = &ct->hist;
	ioh_pingpong_run(&ct->o, &ct->r);
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
	t0 = vb_now_ns() + 300 * VB_NS_PER_MS; /* connect first */
	for (unsigned i = 0; i < nt; i++) {
		ct[i].o.port = s.port;
		ct[i].o.conns = conns / nt + (i < conns % nt);
		ct[i].o.size = size;
		ct[i].o.go = &go;
		ct[i].o.until_ns = t0 + (int64_t)(opt.seconds * 1e9);
		ct[i].o.seed = i + 1;
		vb_hist_init(&ct[i].hist);
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
		msgs += ct[i].r.messages;
		res->errors += ct[i].r.errors + ct[i].r.mismatches + (ct[i].o.conns - ct[i].r.conns_open);
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
			fds[n + i] = ioh_connect(s.port);
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
		       opt.idle, opt.idle_deadline_ms / 1000, ioh_echo_conn_size(opt.bufsize));
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
