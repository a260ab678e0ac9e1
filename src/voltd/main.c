/* SPDX-License-Identifier: MIT */
/*
 * voltd/main.c: the daemon's entry point. main() is an init ladder; each rung
 * has a matching teardown, run in reverse order on the way out
 * (doc/daemon.md).
 * The main thread owns the ladder and waits on a signalfd; worker threads
 * belong to the runtime.
 */
#include "config.h"
#include "base/lineaudit.h"
#include "base/log.h"
#include "ctl/ctl.h"
#include "io/io.h"
#include "jobs/job.h"
#include "rt/rt.h"
#include "server/server.h"
#include "voltd/cfg.h"
#include "voltd/reconf.h"
#include "voltd/life.h"
#include "voltd/malloc_policy.h"
#include "voltd/notify.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <unistd.h>
#include <voltd/module.h>

#ifndef VOLTD_SYSCONFDIR
#define VOLTD_SYSCONFDIR "/etc"
#endif
#define DEFAULT_CONFIG VOLTD_SYSCONFDIR "/voltd/voltd.conf"
#define MAX_OVERRIDES 64

struct vd_opts {
	const char *config;
	bool config_given;
	bool test_only;   /* -t */
	bool dump;        /* -T */
	bool foreground;  /* -f */
	const char *overrides[MAX_OVERRIDES];
	unsigned n_overrides;
};

static void usage(FILE *fp)
{
	fprintf(fp,
		"usage: voltd [-c FILE] [-t] [-T] [-f] [-s SECTION.KEY=VALUE]... [-V] [-h]\n"
		"  -c FILE        configuration file (default %s)\n"
		"  -t             check the configuration and exit (0 OK, 78 errors)\n"
		"  -T             check the configuration and print the effective values\n"
		"  -f             stay in the foreground, log to stderr (the systemd way)\n"
		"  -s S.K=V       set a key after the file is read (repeatable)\n"
		"  -V, --version  print the version and the features built in\n"
		"  -h, --help     this help\n",
		DEFAULT_CONFIG);
}

/* The features built in, for -V and the control socket's `version`. */
static const char *features(void)
{
	static char buf[128];
	snprintf(buf, sizeof(buf), "io_uring libev %s%s", vd_notify_impl(),
		 vb_line_audit_enabled() ? " line-audit" : "");
	return buf;
}

static void version(void)
{
	printf("voltd %s\n", PACKAGE_VERSION);
	printf("features: %s\n", features());
}

static int parse_args(int argc, char **argv, struct vd_opts *o)
{
	static const struct option longopts[] = {
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	o->config = DEFAULT_CONFIG;
	while ((ch = getopt_long(argc, argv, "c:tTfs:Vh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			o->config = optarg;
			o->config_given = true;
			break;
		case 't':
			o->test_only = true;
			break;
		case 'T':
			o->test_only = o->dump = true;
			break;
		case 'f':
			o->foreground = true;
			break;
		case 's':
			if (o->n_overrides == MAX_OVERRIDES) {
				fprintf(stderr, "voltd: at most %d -s options\n", MAX_OVERRIDES);
				return EX_USAGE;
			}
			o->overrides[o->n_overrides++] = optarg;
			break;
		case 'V':
			version();
			exit(0);
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return EX_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "voltd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return EX_USAGE;
	}
	return 0;
}

/*
 * Read the configuration: defaults, then the file, then -s overrides, then
 * the modules' sections (their modules opened unless may_open is false, as
 * in a reload: opened at start only), then the cross-key rules. Without -c,
 * a missing default file means "embedded defaults" (scripts/run relies on
 * it); with -c it is an error.
 */
static int load_config(const struct vd_opts *o, struct vcfg *cfg, struct vb_strlist *err,
		       bool *used_file, bool may_open)
{
	int n = 0;

	vcfg_defaults(cfg);
	*used_file = o->config_given || access(o->config, F_OK) == 0;
	if (*used_file) {
		n += vcfg_load_file(cfg, o->config, err);
		if (n) /* the modules' problems too, in one report */
			return n + vcfg_load_modules(cfg, may_open, err);
	}
	for (unsigned i = 0; i < o->n_overrides; i++)
		n += vcfg_override(cfg, o->overrides[i], err);
	n += vcfg_load_modules(cfg, may_open, err);
	if (n == 0 && o->n_overrides)
		n += vcfg_validate(cfg, "-s", err);
	if (n == 0)
		n += vcfg_check_host(cfg, err);
	return n;
}

/* voltd -t: each module's init as a check, told the workers a start would
 * have (thread_count()). Returns errors added. */
static int check_modules(const struct vcfg *cfg, struct vb_strlist *err)
{
	struct vcfg *run = malloc(sizeof(*run));

	if (!run) {
		vb_strlist_add(err, "out of memory");
		return 1;
	}
	*run = *cfg;
	vcfg_resolve(run);
	vjob_threads_set(run->scheduler.workers);
	vjob_blocking_threads_set(run->server.blocking_threads);
	free(run);
	return vcfg_start_modules(cfg, VOLTD_INIT_CHECK, err);
}

/* Configuration errors, before logging starts (and for -t): one line each,
 * at priority err for journald when stderr goes there (ExecStartPre= and
 * ExecStart= under systemd), plain on a terminal. */
static void print_errors(const struct vb_strlist *err)
{
	const char *prio = getenv("JOURNAL_STREAM") ? "<3>" : "";

	for (size_t i = 0; i < err->n; i++)
		fprintf(stderr, "%s%s\n", prio, err->msg[i]);
}

static void log_effective_config(const struct vcfg *cfg)
{
	char *text = NULL;
	size_t len = 0;
	FILE *fp;

	if (vb_log_get_level() < LOG_DEBUG)
		return;
	fp = open_memstream(&text, &len);
	if (!fp)
		return;
	vcfg_dump(cfg, fp);
	fclose(fp);
	vb_debug("effective configuration:");
	for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		vb_debug("  %s", line);
	free(text);
}

/* Leave the terminal: one fork, a new session, stdio on /dev/null. The
 * systemd unit runs voltd with -f instead. */
static int daemonize(void)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid > 0)
		_exit(0);
	if (setsid() < 0)
		return -errno;
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
	return chdir("/") < 0 ? -errno : 0;
}

static int signals_block(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
	/* Not ours to give a meaning (HAProxy's soft stop, nginx's log
	 * reopen): taken so that they do not kill voltd without a drain, and
	 * logged (voltd/life.c). */
	sigaddset(set, SIGUSR1);
	sigaddset(set, SIGUSR2);
	/* Blocked before any thread starts, so every thread inherits the mask
	 * and the signals reach only the signalfd. */
	if (pthread_sigmask(SIG_BLOCK, set, NULL) != 0)
		return -EINVAL;
	signal(SIGPIPE, SIG_IGN);
	int fd = signalfd(-1, set, SFD_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Descriptors a full server needs: the connections, each worker's ring or
 * loop, eventfd and per-address listeners, the control clients, and a
 * margin for the rest (signalfd, timerfd, stdio, agent and metrics). */
static uint64_t nofile_needed(const struct vcfg *cfg)
{
	return (uint64_t)cfg->server.max_connections + (uint64_t)cfg->scheduler.workers * (cfg->server.n_listen + 4) +
	       cfg->control.max_clients + cfg->control.metrics_max_clients + 64;
}

/* RLIMIT_NOFILE below what server.max_connections needs: raise the soft
 * limit as far as the hard one allows; warn when that is not enough (at the
 * limit accepts pause, and the control socket's accepts fail too). */
static void check_nofile(const struct vcfg *cfg)
{
	struct rlimit rl;
	uint64_t need = nofile_needed(cfg);

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
		return;
	rlim_t was = rl.rlim_cur;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? (rlim_t)need : rl.rlim_max;
	if (rl.rlim_cur > was && setrlimit(RLIMIT_NOFILE, &rl) < 0)
		rl.rlim_cur = was;
	if (rl.rlim_cur >= need) {
		vb_notice("RLIMIT_NOFILE: soft limit raised from %llu to %llu for server.max_connections = %u",
			  (unsigned long long)was, (unsigned long long)rl.rlim_cur, cfg->server.max_connections);
		return;
	}
	vb_warn("RLIMIT_NOFILE is %llu (hard limit %llu): server.max_connections = %u needs about %llu "
		"descriptors; past the limit accepts pause and the control socket refuses clients. Raise "
		"LimitNOFILE= (or ulimit -n), or lower server.max_connections",
		(unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max, cfg->server.max_connections,
		(unsigned long long)need);
}

/* The configuration as it would be read now (SIGHUP, `reload`): no module
 * is opened (a module loads at start only). */
static int reload_load(void *ctx, struct vcfg *next, struct vb_strlist *err)
{
	bool used_file;
	return load_config(ctx, next, err, &used_file, false);
}

/* SIGHUP (vd_life's reload_fn, between RELOADING=1 and READY=1): read the
 * file again; a bad new configuration keeps the old one. Only live-tunable
 * keys take effect; the control socket's `reload` runs the same
 * (vd_reconf_reload). */
static void reload(void *ctx)
{
	struct vd_reconf *reconf = ctx;
	struct vb_strlist changed = { 0 }, restart = { 0 }, errors = { 0 };

	int rc = vd_reconf_reload(reconf, &changed, &restart, &errors);
	vd_reconf_log_reload("reload", rc, &changed, &restart, &errors);
	vb_strlist_fini(&changed);
	vb_strlist_fini(&restart);
	vb_strlist_fini(&errors);
}

/* STATUS='s suffix: the last reload's refusal, while it stands. */
static void reload_note(void *ctx, char *buf, size_t len)
{
	vd_reconf_reload_note(ctx, buf, len);
}

/* Socket activation (LISTEN_FDS): the HTTP listeners ("http", or unnamed)
 * and the control socket ("control"). Any other name is an error: a unit
 * passing sockets voltd would not serve is a mistake to report. */
struct vd_inherited {
	int http[VSRV_MAX_LISTEN];
	unsigned n_http;
	int control; /* -1: none */
	/* What they are bound to (getsockname), for the log and `config`:
	 * "addr:port" each, joined by blanks; the control socket's path. */
	char http_names[VSRV_MAX_LISTEN * 64];
	char control_name[128];
};

/* "a.b.c.d:port", "[v6]:port" or the path of a bound socket (buf = "?" when
 * it cannot be named). Returns buf. */
static const char *socket_name(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN];

	snprintf(buf, len, "?");
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		return buf;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
		if (inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host)))
			snprintf(buf, len, "%s:%u", host, (unsigned)ntohs(a->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
		if (inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host)))
			snprintf(buf, len, "[%s]:%u", host, (unsigned)ntohs(a->sin6_port));
	} else if (ss.ss_family == AF_UNIX) {
		const struct sockaddr_un *a = (const struct sockaddr_un *)&ss;
		size_t n = sl > offsetof(struct sockaddr_un, sun_path) ? sl - offsetof(struct sockaddr_un, sun_path) : 0;
		if (n && a->sun_path[0])
			snprintf(buf, len, "%.*s", (int)strnlen(a->sun_path, n), a->sun_path);
		else if (n)
			snprintf(buf, len, "@%.*s", (int)(n - 1), a->sun_path + 1); /* abstract */
	}
	return buf;
}

static int take_listen_fds(struct vd_inherited *inh)
{
	struct vd_listen_fd fds[VSRV_MAX_LISTEN + 1];
	int n = vd_listen_fds(fds, VSRV_MAX_LISTEN + 1);

	inh->n_http = 0;
	inh->control = -1;
	if (n < 0) {
		vb_err("socket activation: %s", n == -E2BIG ? "more sockets passed than voltd serves" :
			strerror(-n));
		return n;
	}
	for (int i = 0; i < n; i++) {
		if (strcmp(fds[i].name, "http") == 0 || strcmp(fds[i].name, "unknown") == 0) {
			if (inh->n_http == VSRV_MAX_LISTEN)
				goto bad;
			inh->http[inh->n_http++] = fds[i].fd;
		} else if (strcmp(fds[i].name, "control") == 0 && inh->control < 0) {
			inh->control = fds[i].fd;
		} else {
			vb_err("socket activation: fd %d is named '%s'; voltd serves 'http' and 'control'",
			       fds[i].fd, fds[i].name);
			goto bad;
		}
	}
	if (n > 0)
		vb_notice("socket activation: %u HTTP listener(s)%s inherited", inh->n_http,
			  inh->control >= 0 ? " and the control socket" : "");
	size_t off = 0;
	inh->http_names[0] = '\0';
	for (unsigned i = 0; i < inh->n_http && off < sizeof(inh->http_names); i++) {
		char one[64];
		off += (size_t)snprintf(inh->http_names + off, sizeof(inh->http_names) - off, "%s%s", i ? " " : "",
					socket_name(inh->http[i], one, sizeof(one)));
	}
	if (inh->control >= 0)
		socket_name(inh->control, inh->control_name, sizeof(inh->control_name));
	if (n > 0 && inh->n_http == 0) {
		vb_err("socket activation: no socket named 'http' was passed");
		goto bad;
	}
	return 0;
bad:
	for (int i = 0; i < n; i++)
		close(fds[i].fd);
	inh->n_http = 0;
	inh->control = -1;
	return -EINVAL;
}

static void close_inherited(struct vd_inherited *inh)
{
	for (unsigned i = 0; i < inh->n_http; i++)
		close(inh->http[i]);
	if (inh->control >= 0)
		close(inh->control);
	inh->n_http = 0;
	inh->control = -1;
}

/* server.agent_listen: a plain listening TCP socket the main thread polls.
 * -1 when off, -errno on failure. */
static int agent_listen(const struct vcfg *cfg)
{
	const struct vcfg_addr *a = &cfg->life.agent_listen;
	int one = 1, fd;

	if (!a->len)
		return -1;
	fd = socket(a->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)&a->addr, a->len) < 0 || listen(fd, 64) < 0) {
		int rc = -errno;
		close(fd);
		return rc == -1 ? -EIO : rc;
	}
	vb_notice("agent-check: listening on %s", a->text);
	return fd;
}


/* Rung 4: the I/O driver, one ring (or libev loop) per worker. */
static int io_start(const struct vcfg *cfg, struct vio **io)
{
	int rc = vio_new(&cfg->io, cfg->scheduler.workers, io);

	if (rc < 0) {
		vb_err("io: cannot start the %s backend: %s",
		       cfg->io.backend == VIO_BACKEND_URING ? "uring" : "I/O", strerror(-rc));
		return rc;
	}
	vb_notice("io: backend=%s (%s)", vio_backend_name(*io), vio_backend_reason(*io));
	return 0;
}

/* Rung 5: the runtime, parking in the I/O driver. */
static int rt_start(struct vcfg *cfg, struct vio *io, struct vrt **rt)
{
	int rc;

	vio_park_ops(io, &cfg->scheduler.park_ops, &cfg->scheduler.park_ctx);
	rc = vrt_new(&cfg->scheduler, rt);
	if (rc < 0) {
		vb_err("runtime: cannot start %u workers: %s", cfg->scheduler.workers, strerror(-rc));
		return rc;
	}
	vb_notice("runtime: %u workers, stealing %s", cfg->scheduler.workers,
		  cfg->scheduler.stealing ? "on" : "off");
	return 0;
}

/* Is something already listening on server.listen's address i? voltd's
 * own listeners share a port through SO_REUSEPORT, which the kernel also
 * grants a second process of the same user: a second voltd would then
 * silently take a share of the connections. A probe bind without
 * SO_REUSEPORT fails on any listening socket there (SO_REUSEADDR lets it
 * pass connections in TIME_WAIT). 0, or -EADDRINUSE with the error logged. */
static int probe_listen(const struct vcfg *cfg, unsigned i)
{
	const struct sockaddr_storage *ss = &cfg->server.listen[i].addr;
	int one = 1, rc = 0;
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return 0; /* the real bind reports it */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss->ss_family == AF_INET6 && ((const struct sockaddr_in6 *)ss)->sin6_port == 0)
		goto out; /* port 0: a fresh port each time */
	if (ss->ss_family == AF_INET && ((const struct sockaddr_in *)ss)->sin_port == 0)
		goto out;
	if (bind(fd, (const struct sockaddr *)ss, cfg->server.listen[i].len) < 0 && errno == EADDRINUSE) {
		vb_err("server.listen: %s: another socket listens there already (a second voltd? "
		       "voltd does not share its port with another process); stop it first",
		       cfg->listen_text[i]);
		rc = -EADDRINUSE;
	}
out:
	close(fd);
	return rc;
}

/* Rung 6: the server (listeners, stages), on the runtime and the I/O driver. */
static int srv_start(const struct vcfg *cfg, const struct vd_inherited *inh, struct vd_life *life,
		     struct vrt *rt, struct vio *io, struct vsrv **srv)
{
	struct vsrv_config sc = cfg->server;
	int rc;

	if (inh->n_http) {
		sc.fds = inh->http;
		sc.n_fds = inh->n_http;
	}
	sc.drain_tick_fn = vd_life_drain_tick;
	sc.drain_tick_ctx = life;
	rc = vsrv_new(&sc, rt, io, srv);
	if (rc < 0) {
		char where[VCFG_MAX_LISTEN * 82] = "";
		for (unsigned i = 0; !inh->n_http && i < cfg->server.n_listen; i++)
			snprintf(where + strlen(where), sizeof(where) - strlen(where), "%s%s", i ? ", " : "",
				 cfg->listen_text[i]);
		vb_err("server: cannot listen on %s: %s", inh->n_http ? "the inherited sockets" : where,
		       strerror(-rc));
		return rc;
	}
	rc = vsrv_start(*srv);
	if (rc < 0) {
		vb_err("server: cannot start its tasks: %s", strerror(-rc));
		return rc;
	}
	if (inh->n_http)
		vb_notice("server: listening on %s (inherited)", inh->http_names);
	else
		for (unsigned i = 0; i < vsrv_listener_count(*srv); i++)
			vb_notice("server: listening on %s (port %d)", cfg->listen_text[i], vsrv_port(*srv, i));
	return 0;
}

/* Rung 3c: bind the control socket (served from the end of rung 7). */
static int ctl_open(const struct vcfg *cfg, int inherited_fd, struct vctl **ctl)
{
	struct vctl_config cc;
	const char *why = "";

	vd_reconf_config(cfg, &cc);
	cc.fd = inherited_fd; /* socket activation: "control" */
	int rc = vctl_new(&cc, ctl, &why);
	if (rc < 0) {
		vb_err("control socket %s: %s (%s)", cfg->control.socket, why, strerror(-rc));
		return rc;
	}
	return 0;
}

/* Rung 7, its last step: serve the control socket from its own thread. */
static int ctl_start(struct vctl *ctl, struct vd_reconf *reconf, const char *inherited, struct vio *io,
		     struct vrt *rt, struct vsrv *srv)
{
	struct vctl_hooks h;

	vd_reconf_hooks(reconf, &h);
	h.version = PACKAGE_VERSION;
	h.features = features();
	h.backend = vio_backend_name(io);
	h.backend_reason = vio_backend_reason(io);
	int rc = vctl_start(ctl, io, rt, srv, &h);
	if (rc < 0) {
		vb_err("control: cannot start its thread: %s", strerror(-rc));
		return rc;
	}
	if (*inherited)
		vb_notice("control: listening on %s (inherited)", inherited);
	else
		vb_notice("control: listening on %s", reconf->cfg->control.socket);
	if (reconf->cfg->control.metrics_listen.len)
		vb_notice("control: metrics on http://%s/metrics", reconf->cfg->control.metrics_listen.text);
	return 0;
}

int main(int argc, char **argv)
{
	struct vd_opts opts = { 0 };
	struct vcfg cfg;
	struct vb_strlist err = { 0 };
	struct vio *io = NULL;
	struct vrt *rt = NULL;
	struct vsrv *srv = NULL;
	struct vctl *ctl = NULL;
	struct vd_reconf reconf;
	struct vd_inherited inh = { .control = -1, .http_names = "", .control_name = "" };
	struct vd_life life = { .sfd = -1, .agent_fd = -1, .tfd = -1 };
	sigset_t sigs;
	bool used_file;
	int rc, sfd;

	rc = parse_args(argc, argv, &opts);
	if (rc)
		return rc;

	/* Rung 1: configuration, its modules opened and checked. Nothing
	 * starts on a bad one. voltd -t runs each module's init as a check
	 * (VOLTD_INIT_CHECK: it acquires nothing and starts no thread). */
	if (load_config(&opts, &cfg, &err, &used_file, true) > 0 ||
	    (opts.test_only && check_modules(&cfg, &err) > 0)) {
		print_errors(&err);
		vb_strlist_fini(&err);
		return EX_CONFIG;
	}
	vb_strlist_fini(&err);
	if (opts.test_only) {
		if (opts.dump)
			vcfg_dump(&cfg, stdout);
		printf("configuration OK%s%s\n", used_file ? ": " : " (embedded defaults)",
		       used_file ? opts.config : "");
		return 0;
	}
	vcfg_resolve(&cfg);

	/* Rung 2: logging, and the process's malloc policy (before any
	 * thread: malloc_policy.h). */
	vd_mem_policy();
	vb_log_init(false);
	vb_log_set_level(cfg.log.level);
	if (!opts.foreground) {
		rc = daemonize();
		if (rc < 0) {
			vb_err("cannot leave the terminal: %s", strerror(-rc));
			return EX_OSERR;
		}
		vb_log_to_syslog("voltd");
	}
	vb_notice("voltd %s starting (config %s)", PACKAGE_VERSION,
		  used_file ? opts.config : "embedded defaults");
	log_effective_config(&cfg);
	check_nofile(&cfg);

	/* Rung 3: signals, before any thread exists. */
	sfd = signals_block(&sigs);
	if (sfd < 0) {
		vb_err("cannot set up signals: %s", strerror(-sfd));
		rc = EX_OSERR;
		goto out;
	}

	/* Rung 3b: sockets passed by systemd (socket activation). */
	if (take_listen_fds(&inh) < 0) {
		rc = EX_CONFIG;
		goto close_signals;
	}

	/* Rung 3c: the control socket, before anything listens: a second
	 * voltd on the same socket stops here. */
	vd_reconf_init(&reconf, &cfg, reload_load, &opts);
	/* `config` shows the sockets really used: under socket activation
	 * the inherited ones, not the file's server.listen and
	 * control.socket. */
	if (inh.n_http)
		vd_reconf_inherited(&reconf, "server.listen", inh.http_names);
	if (inh.control >= 0)
		vd_reconf_inherited(&reconf, "control.socket", inh.control_name);
	rc = ctl_open(&cfg, inh.control, &ctl);
	inh.control = -1; /* the control plane took it over */
	if (rc < 0) {
		rc = EX_UNAVAILABLE;
		goto fini_reconf;
	}

	/* Rung 3d: the agent-check port. */
	life.agent_fd = agent_listen(&cfg);
	if (life.agent_fd < -1) {
		vb_err("agent-check: cannot listen on %s: %s", cfg.life.agent_listen.text,
		       strerror(-life.agent_fd));
		life.agent_fd = -1;
		rc = EX_UNAVAILABLE;
		goto free_ctl;
	}

	/* Rung 3e: nobody else listens on our HTTP port (inherited sockets
	 * are ours by definition). */
	for (unsigned i = 0; !inh.n_http && i < cfg.server.n_listen; i++)
		if (probe_listen(&cfg, i) < 0) {
			rc = EX_UNAVAILABLE;
			goto close_agent;
		}

	/* Rung 3f: the modules, after the signals' mask (a module's init may
	 * start threads) and before any worker: each module's keys and init,
	 * the built-in one first, then the [module.NAME] sections in file
	 * order; their kinds go into the registry, frozen before the workers
	 * start. A refusal is the configuration's (exit 78). */
	vjob_threads_set(cfg.scheduler.workers);
	vjob_blocking_threads_set(cfg.server.blocking_threads);
	/* A module that dies of a fatal signal in a kind's callback is
	 * named in the log before the default action (jobs/crash.c). */
	rc = vjob_crash_report_install();
	if (rc < 0)
		vb_warn("cannot install the fatal-signal report: %s", strerror(-rc));
	if (vcfg_start_modules(&cfg, 0, &err) > 0) {
		for (size_t i = 0; i < err.n; i++)
			vb_err("%s", err.msg[i]);
		vb_strlist_fini(&err);
		rc = EX_CONFIG;
		goto stop_modules;
	}
	vjob_registry_freeze();

	if (io_start(&cfg, &io) < 0) {
		rc = EX_UNAVAILABLE;
		goto stop_modules;
	}
	if (rt_start(&cfg, io, &rt) < 0) {
		rc = EX_OSERR;
		goto free_io;
	}
	rc = srv_start(&cfg, &inh, &life, rt, io, &srv);
	inh.n_http = 0; /* the server took them over, even on failure */
	if (rc < 0) {
		rc = EX_UNAVAILABLE;
		goto stop_rt;
	}

	/* Rung 7: the main thread's loop (signals, notifications, the drain),
	 * set up before the control socket can ask for a drain. */
	life.srv = srv;
	life.rt = rt;
	life.backend = vio_backend_name(io);
	life.workers = cfg.scheduler.workers;
	life.shutdown_delay_ms = cfg.life.shutdown_delay_ms;
	life.stall_fail_ms = cfg.life.stall_fail_ms;
	life.sfd = sfd;
	life.reload_fn = reload;
	life.reload_ctx = &reconf;
	life.status_note_fn = reload_note;
	life.status_note_ctx = &reconf;
	rc = vd_life_init(&life);
	if (rc < 0) {
		vb_err("cannot create the main thread's timer: %s", strerror(-rc));
		rc = EX_OSERR;
		goto stop_rt;
	}

	vd_reconf_attach(&reconf, rt, srv);
	vd_reconf_attach_life(&reconf, &life);
	vd_reconf_attach_ctl(&reconf, ctl);
	if (ctl_start(ctl, &reconf, inh.control_name, io, rt, srv) < 0) {
		rc = EX_OSERR;
		goto stop_rt;
	}

	vb_notice("ready");
	int sig = vd_life_run(&life);
	vb_notice("%s received, stopping", strsignal(sig));
	rc = 0;

	vd_life_stop(&life); /* not ready for a while, then drain within a bound */
	vsrv_stats_log(srv);
stop_rt:
	vctl_stop(ctl); /* it reads the server's and runtime's stats */
	vd_reconf_attach(&reconf, NULL, NULL);
	vd_reconf_attach_life(&reconf, NULL);
	vd_reconf_attach_ctl(&reconf, NULL);
	if (srv)
		vsrv_stop(srv);
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	vsrv_free(srv);
	vrt_free(rt);
free_io:
	vio_free(io);
stop_modules:
	vjob_mod_shutdown_all(); /* after the drain: every job finished or abandoned */
close_agent:
	vd_life_fini(&life);
free_ctl:
	vctl_free(ctl);
fini_reconf:
	vd_reconf_fini(&reconf);
	close_inherited(&inh);
close_signals:
	close(sfd);
out:
	vb_notice("voltd stopped");
	return rc;
}
