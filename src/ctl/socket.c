/* SPDX-License-Identifier: MIT */
/*
 * ctl/socket.c: the control socket and the metrics listener, and the control
 * thread's epoll loop that serves both.
 *
 * Threading: everything below runs on the control thread, except
 * vctl_new / vctl_start / vctl_stop / vctl_free (main thread, before the
 * thread starts or after it has been joined). Stopping: vctl_stop writes the eventfd,
 * the thread sees it and returns; pthread_join orders everything it did
 * before main frees anything.
 *
 * Protocol: every complete line is answered, in order, with one reply
 * line, however many lines one write carries; a peer that shuts its side
 * still gets the replies to what it sent (a last line without its newline
 * included). A line holding a control character (NUL included) is refused
 * whole with an `invalid` error.
 *
 * Bounds (abuse): a command line is at most VCTL_MAX_LINE bytes; at most
 * max_clients control connections (VCTL_ADMIN_SLOTS more for admin peers)
 * and, apart, metrics_max_clients metrics connections are open (more get
 * one error line and are closed); each line (or metrics request) and its
 * reply must be done client_timeout_ms after the line began, else the
 * connection is closed (a deadline: trickled bytes do not move it); a
 * client that does not read its replies holds at most one reply: no further
 * line of it is read until that reply is sent, so its memory is bounded; a
 * client with many lines buffered is served VCTL_TURN of them, then the
 * others get their turn.
 */
#include "config.h"
#include "ctl/internal.h"
#include "base/compiler.h"
#include "base/log.h"
#include "base/time.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

enum client_kind { CLIENT_CONTROL, CLIENT_METRICS };

struct vctl_client {
	int fd;
	enum client_kind kind;
	struct vctl_peer peer;
	char in[VCTL_MAX_LINE];
	size_t in_len;
	char *out;           /* one pending reply (malloc'd), or NULL */
	size_t out_len, out_off;
	bool close_after;    /* close once out is sent */
	bool eof;            /* the peer shut its side: answer what is buffered, close */
	bool more;           /* lines left after a turn: serve again after the others */
	int64_t deadline_ns; /* the current line (or metrics request) and its reply end by then */
	uint32_t events;     /* registered epoll events */
};

/* Lines answered for one client before the others get their turn. */
#define VCTL_TURN 64

/* epoll data of the listeners and the eventfd (clients carry a pointer). */
static char tag_ctl, tag_metrics, tag_stop;

int vctl_reconfigure(struct vctl *ctl, const struct vctl_config *cfg, const char **why)
{
	int64_t op_gid = -1;

	if (cfg->operator_group && *cfg->operator_group) {
		unsigned gid;
		if (vctl_group_gid(cfg->operator_group, &gid) < 0) {
			*why = "control.operator_group names no group";
			return -ENOENT;
		}
		op_gid = gid;
	}
	/* Relaxed: each setting stands alone (see internal.h); a connection
	 * accepted meanwhile gets the old or the new level. */
	atomic_store_explicit(&ctl->op_gid, op_gid, memory_order_relaxed);
	atomic_store_explicit(&ctl->max_clients, cfg->max_clients, memory_order_relaxed);
	atomic_store_explicit(&ctl->metrics_max_clients, cfg->metrics_max_clients, memory_order_relaxed);
	atomic_store_explicit(&ctl->client_timeout_ms, cfg->client_timeout_ms, memory_order_relaxed);
	return 0;
}

int vctl_group_gid(const char *name, unsigned *gid)
{
	struct group gr, *res = NULL;
	char buf[4096];

	if (getgrnam_r(name, &gr, buf, sizeof(buf), &res) != 0 || !res)
		return -ENOENT;
	*gid = (unsigned)res->gr_gid;
	return 0;
}

/* ------------------------------------------------------------ setup */

/* mkdir -p of the socket's directory (mode 0755 for new levels). */
static int make_parent_dirs(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	size_t len = strlen(path);

	if (len >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, path, len + 1);
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Is a live process answering on path? 1 yes, 0 no (stale or absent). */
static int socket_alive(const struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int rc = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	int e = errno;
	close(fd);
	if (rc == 0)
		return 1;
	/* EAGAIN: its backlog is full, so something is listening. */
	return e == EAGAIN ? 1 : 0;
}

static int bind_control(struct vctl *ctl, const char **why)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, rc;

	if (strlen(ctl->path) >= sizeof(sa.sun_path)) {
		*why = "socket path too long";
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, ctl->path, strlen(ctl->path) + 1);
	rc = make_parent_dirs(ctl->path);
	if (rc < 0) {
		*why = "cannot create the socket's directory";
		return rc;
	}
	if (lstat(ctl->path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			*why = "the path exists and is not a socket";
			return -EEXIST;
		}
		if (socket_alive(&sa) > 0) {
			*why = "another voltd is answering on it";
			return -EADDRINUSE;
		}
		if (unlink(ctl->path) < 0 && errno != ENOENT) {
			*why = "cannot remove the stale socket";
			return -errno;
		}
		vb_notice("control: replaced the stale socket %s", ctl->path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		*why = "socket";
		return -errno;
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = -errno;
		*why = "bind";
		goto close_fd;
	}
	ctl->created_path = true;
	if (ctl->cfg.group && *ctl->cfg.group) {
		unsigned gid;
		if (vctl_group_gid(ctl->cfg.group, &gid) < 0) {
			rc = -ENOENT;
			*why = "control.group names no group";
			goto close_fd;
		}
		if (chown(ctl->path, (uid_t)-1, (gid_t)gid) < 0) {
			rc = -errno;
			*why = "cannot give the socket to control.group";
			goto close_fd;
		}
	}
	if (chmod(ctl->path, ctl->cfg.mode) < 0) {
		rc = -errno;
		*why = "cannot set control.mode";
		goto close_fd;
	}
	if (listen(fd, 64) < 0) {
		rc = -errno;
		*why = "listen";
		goto close_fd;
	}
	ctl->lfd = fd;
	return 0;
close_fd:
	close(fd);
	return rc;
}

static int bind_metrics(struct vctl *ctl, const char **why)
{
	int one = 1;
	int fd = socket(ctl->cfg.metrics_addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		*why = "metrics_listen: socket";
		return -errno;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ctl->cfg.metrics_addr, ctl->cfg.metrics_len) < 0 ||
	    listen(fd, 64) < 0) {
		int rc = -errno;
		*why = "metrics_listen: cannot listen";
		close(fd);
		return rc;
	}
	ctl->mfd = fd;
	return 0;
}

int vctl_new(const struct vctl_config *cfg, struct vctl **out, const char **why)
{
	struct vctl *ctl = calloc(1, sizeof(*ctl));
	int rc;

	*why = "out of memory";
	if (!ctl || vctl__error_init() < 0) {
		free(ctl);
		return -ENOMEM;
	}
	ctl->cfg = *cfg;
	ctl->lfd = ctl->mfd = ctl->epfd = ctl->evfd = -1;
	ctl->self_uid = geteuid();
	ctl->start_ns = vb_now_ns();
	snprintf(ctl->path, sizeof(ctl->path), "%s", cfg->path ? cfg->path : "");
	ctl->cfg.path = ctl->path;
	ctl->cfg.group = NULL; /* only used below, before returning */
	ctl->cfg.operator_group = NULL;
	rc = vctl_reconfigure(ctl, cfg, why);
	if (rc < 0)
		goto fail;
	if (cfg->fd >= 0) {
		ctl->lfd = cfg->fd;
		int fl = fcntl(ctl->lfd, F_GETFL);
		if (fl >= 0)
			fcntl(ctl->lfd, F_SETFL, fl | O_NONBLOCK);
	} else {
		ctl->cfg.group = cfg->group;
		rc = bind_control(ctl, why);
		ctl->cfg.group = NULL;
		if (rc < 0)
			goto fail;
	}
	if (cfg->metrics_len) {
		rc = bind_metrics(ctl, why);
		if (rc < 0)
			goto fail;
	}
	*out = ctl;
	return 0;
fail:
	vctl_free(ctl);
	return rc;
}

/* ------------------------------------------------------------ clients */

static void client_watch(struct vctl *ctl, struct vctl_client *c, uint32_t events)
{
	if (c->events == events)
		return;
	struct epoll_event ev = { .events = events, .data.ptr = c };
	epoll_ctl(ctl->epfd, EPOLL_CTL_MOD, c->fd, &ev);
	c->events = events;
}

static void client_close(struct vctl *ctl, struct vctl_client *c)
{
	for (unsigned i = 0; i < ctl->n_clients; i++) {
		if (ctl->clients[i] == c) {
			ctl->clients[i] = ctl->clients[--ctl->n_clients];
			break;
		}
	}
	if (c->kind == CLIENT_CONTROL)
		VCTL_GAUGE(ctl, clients, --ctl->n_control);
	else
		VCTL_GAUGE(ctl, metrics_clients, --ctl->n_metrics);
	close(c->fd); /* also leaves the epoll set */
	free(c->out);
	free(c);
}

/* The deadline of a line (or metrics request) that starts now. */
static int64_t line_deadline(struct vctl *ctl)
{
	/* Relaxed: a setting on its own (internal.h). */
	return vb_now_ns() +
	       (int64_t)atomic_load_explicit(&ctl->client_timeout_ms, memory_order_relaxed) * VB_NS_PER_MS;
}

/* Send what is pending: 1 all sent (out freed), 0 it would block (EPOLLOUT
 * watched), -1 the client broke and was closed. */
static int client_send(struct vctl *ctl, struct vctl_client *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			client_watch(ctl, c, EPOLLOUT);
			return 0;
		}
		if (n <= 0) {
			client_close(ctl, c);
			return -1;
		}
		c->out_off += (size_t)n;
	}
	free(c->out);
	c->out = NULL;
	c->out_len = c->out_off = 0;
	c->deadline_ns = line_deadline(ctl); /* the next line's clock starts */
	return 1;
}

static void client_queue(struct vctl_client *c, char *text, size_t len)
{
	c->out = text;
	c->out_len = len;
	c->out_off = 0;
}

/* Queue a JSON reply as one line. Frees reply. */
static void client_reply(struct vctl *ctl, struct vctl_client *c, json_t *reply)
{
	json_t *ok = json_object_get(reply, "ok");
	if (!json_is_true(ok))
		VCTL_COUNT(ctl, errors);
	char *s = json_dumps(reply, JSON_COMPACT | JSON_REAL_PRECISION(9));
	json_decref(reply);
	if (!s) {
		s = strdup("{\"schema\":\"voltd.error.v1\",\"ok\":false,\"error\":\"out of memory\",\"code\":\"internal\"}");
		if (!s) {
			c->close_after = true;
			return;
		}
	}
	size_t len = strlen(s);
	char *line = realloc(s, len + 2);
	if (!line) {
		free(s);
		c->close_after = true;
		return;
	}
	line[len] = '\n';
	line[len + 1] = '\0';
	client_queue(c, line, len + 1);
}

/* A GET /metrics request (or anything else) on the metrics listener. */
static void metrics_answer(struct vctl *ctl, struct vctl_client *c)
{
	char *body = NULL, *resp = NULL;
	size_t blen = 0;
	const char *status = "200 OK";
	const char *ctype = "text/plain; version=0.0.4; charset=utf-8";
	bool head = strncmp(c->in, "HEAD ", 5) == 0;

	VCTL_COUNT(ctl, metrics_requests);
	if (strncmp(c->in, "GET /metrics ", 13) == 0 || strncmp(c->in, "GET /metrics?", 13) == 0 ||
	    strncmp(c->in, "HEAD /metrics ", 14) == 0) {
		FILE *fp = open_memstream(&body, &blen);
		if (fp) {
			vctl__prom_write(ctl, fp);
			fclose(fp);
		}
	} else if (strncmp(c->in, "GET ", 4) == 0 || head) {
		status = "404 Not Found";
		ctype = "text/plain; charset=utf-8";
		body = strdup("only /metrics is served here\n");
	} else {
		status = "405 Method Not Allowed";
		ctype = "text/plain; charset=utf-8";
		body = strdup("only GET /metrics is served here\n");
	}
	if (status[0] != '2')
		VCTL_COUNT(ctl, metrics_errors);
	blen = body ? strlen(body) : 0;
	int n = asprintf(&resp, "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
			 status, ctype, blen, head || !body ? "" : body);
	free(body);
	c->close_after = true;
	if (n < 0)
		return;
	client_queue(c, resp, (size_t)n);
}

/* The metrics listener: one request head (ended by an empty line, CRLF or
 * bare LF), one response, close. true when a response was queued. */
static bool metrics_take(struct vctl *ctl, struct vctl_client *c)
{
	char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
	char *lf = memmem(c->in, c->in_len, "\n\n", 2);

	if (!end || (lf && lf < end))
		end = lf;
	if (end)
		*end = '\0';
	else if (c->in_len == sizeof(c->in))
		c->in[sizeof(c->in) - 1] = '\0'; /* a head this long: answered as it stands */
	else
		return false;
	metrics_answer(ctl, c);
	if (!c->out)
		c->close_after = true;
	return true;
}

/* Where a control line holds a control character (any byte below 0x20 but
 * tab, or 0x7f), or -1. A NUL would otherwise cut the line short. */
static long control_char_at(const char *line, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)line[i];
		if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
			return (long)i;
	}
	return -1;
}

/* The control socket: answer the first complete line of c->in (at EOF, a
 * last line without its newline counts). true when a reply was queued. */
static bool control_take(struct vctl *ctl, struct vctl_client *c)
{
	char *nl = memchr(c->in, '\n', c->in_len);
	size_t len, used;

	if (nl) {
		len = (size_t)(nl - c->in);
		used = len + 1;
	} else if (c->in_len == sizeof(c->in)) {
		VCTL_COUNT(ctl, lines_too_long);
		client_reply(ctl, c, vctl__error("invalid", "command line longer than %d bytes; closing",
						  VCTL_MAX_LINE - 1));
		c->close_after = true;
		c->in_len = 0;
		return true;
	} else if (c->eof && c->in_len) {
		len = used = c->in_len; /* < sizeof(c->in): room for the NUL */
	} else {
		return false;
	}
	if (len && c->in[len - 1] == '\r')
		len--;
	c->in[len] = '\0';
	VCTL_COUNT(ctl, commands);
	long bad = control_char_at(c->in, len);
	if (bad >= 0)
		client_reply(ctl, c, vctl__error("invalid", "command line holds a control character "
							    "(byte 0x%02x at offset %ld); nothing was run",
						  (unsigned)(unsigned char)c->in[bad], bad));
	else
		client_reply(ctl, c, vctl__execute(ctl, &c->peer, c->in));
	memmove(c->in, c->in + used, c->in_len - used);
	c->in_len -= used;
	return true;
}

/* Serve c until it would block: send the pending reply, then answer the
 * complete lines already buffered, in order, one reply at a time (the
 * next line is taken only once the reply before it is sent: a client that
 * does not read holds one reply), reading more only when none is left.
 * At EOF the lines still buffered are answered before the close. After
 * VCTL_TURN lines c->more is set and the control loop comes back to c
 * after the other clients. Returns false when c was closed. */
static bool client_run(struct vctl *ctl, struct vctl_client *c)
{
	unsigned turn = VCTL_TURN;

	c->more = false;
	for (;;) {
		if (c->out) {
			int r = client_send(ctl, c);
			if (r <= 0)
				return r == 0;
		}
		if (c->close_after) {
			client_close(ctl, c);
			return false;
		}
		if (c->kind == CLIENT_METRICS ? metrics_take(ctl, c) : control_take(ctl, c)) {
			if (--turn == 0 && !c->out) {
				c->more = true;
				client_watch(ctl, c, EPOLLIN);
				return true;
			}
			continue;
		}
		if (c->eof) {
			client_close(ctl, c);
			return false;
		}
		ssize_t n = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			client_watch(ctl, c, EPOLLIN);
			return true;
		}
		if (n < 0) {
			client_close(ctl, c);
			return false;
		}
		if (n == 0) {
			c->eof = true; /* the peer shut its side: answer what it sent */
			continue;
		}
		c->in_len += (size_t)n; /* no new time: the line's deadline stands */
	}
}

static void accept_one(struct vctl *ctl, int lfd, enum client_kind kind)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
			/* Out of descriptors: pause accepting for 100 ms rather
			 * than spin on a listener that stays readable. */
			VCTL_COUNT(ctl, accept_errors);
			ctl->accept_resume_ns = vb_now_ns() + 100 * VB_NS_PER_MS;
			struct epoll_event ev = { .events = 0, .data.ptr = &tag_ctl };
			epoll_ctl(ctl->epfd, EPOLL_CTL_MOD, ctl->lfd, &ev);
			if (ctl->mfd >= 0) {
				ev.data.ptr = &tag_metrics;
				epoll_ctl(ctl->epfd, EPOLL_CTL_MOD, ctl->mfd, &ev);
			}
		}
		return;
	}
	struct vctl_peer peer = { 0 };
	if (kind == CLIENT_CONTROL) {
		VCTL_COUNT(ctl, connections);
		if (vctl__peer_get(ctl, fd, &peer) < 0) {
			close(fd);
			return;
		}
	}
	/* Relaxed: settings on their own (internal.h). Each kind has its own
	 * limit, so the metrics port cannot fill the control socket; admin
	 * peers get VCTL_ADMIN_SLOTS more, so no other user can lock them out. */
	unsigned limit = kind == CLIENT_CONTROL ? atomic_load_explicit(&ctl->max_clients, memory_order_relaxed) :
						 atomic_load_explicit(&ctl->metrics_max_clients, memory_order_relaxed);
	if (kind == CLIENT_CONTROL && peer.level == VCTL_ADMIN)
		limit += VCTL_ADMIN_SLOTS;
	if ((kind == CLIENT_CONTROL ? ctl->n_control : ctl->n_metrics) >= limit) {
		static const char busy[] =
			"{\"schema\":\"voltd.error.v1\",\"ok\":false,\"error\":\"busy: too many control clients "
			"(control.max_clients); try again\",\"code\":\"busy\"}\n";
		static const char busy_http[] =
			"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
		if (kind == CLIENT_CONTROL) {
			VCTL_COUNT(ctl, refused_busy);
			(void)!send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		} else {
			VCTL_COUNT(ctl, metrics_refused_busy);
			(void)!send(fd, busy_http, sizeof(busy_http) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		}
		close(fd);
		return;
	}
	struct vctl_client *c = calloc(1, sizeof(*c));
	struct vctl_client **arr = realloc(ctl->clients, (ctl->n_clients + 1) * sizeof(*arr));
	if (!c || !arr) {
		free(c);
		if (arr)
			ctl->clients = arr;
		close(fd);
		return;
	}
	ctl->clients = arr;
	c->fd = fd;
	c->kind = kind;
	c->peer = peer;
	c->deadline_ns = line_deadline(ctl);
	c->events = EPOLLIN;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
	if (epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		free(c);
		close(fd);
		return;
	}
	ctl->clients[ctl->n_clients++] = c;
	if (kind == CLIENT_CONTROL)
		VCTL_GAUGE(ctl, clients, ++ctl->n_control);
	else
		VCTL_GAUGE(ctl, metrics_clients, ++ctl->n_metrics);
}

static void resume_accepting(struct vctl *ctl)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &tag_ctl };
	epoll_ctl(ctl->epfd, EPOLL_CTL_MOD, ctl->lfd, &ev);
	if (ctl->mfd >= 0) {
		ev.data.ptr = &tag_metrics;
		epoll_ctl(ctl->epfd, EPOLL_CTL_MOD, ctl->mfd, &ev);
	}
	ctl->accept_resume_ns = 0;
}

/* Close connections past their line deadline (client_timeout_ms after
 * the line began: bytes trickling in do not move it); return the earliest
 * deadline of those left (INT64_MAX: none). */
static int64_t expire_idle(struct vctl *ctl, int64_t now)
{
	int64_t due = INT64_MAX;

	for (unsigned i = 0; i < ctl->n_clients;) {
		struct vctl_client *c = ctl->clients[i];
		if (now >= c->deadline_ns) {
			VCTL_COUNT(ctl, idle_closed);
			client_close(ctl, c); /* moves the last client to i */
			continue;
		}
		if (c->deadline_ns < due)
			due = c->deadline_ns;
		i++;
	}
	return due;
}

/* How long epoll may sleep: until the first client's line deadline (`due`,
 * from expire_idle) or the end of an accept pause; forever when neither
 * exists (an idle daemon's control thread wakes only for a connection or
 * the stop). */
static int next_timeout_ms(const struct vctl *ctl, int64_t due, int64_t now)
{
	if (ctl->accept_resume_ns && ctl->accept_resume_ns < due)
		due = ctl->accept_resume_ns;
	if (due == INT64_MAX)
		return -1;
	if (due <= now)
		return 0;
	/* +1: round up, so the wake-up finds the deadline passed. */
	return (int)((due - now) / VB_NS_PER_MS + 1 < INT32_MAX ? (due - now) / VB_NS_PER_MS + 1 : INT32_MAX);
}

static void *control_thread(void *arg)
{
	struct vctl *ctl = arg;
	struct epoll_event evs[32];
	int64_t due = INT64_MAX; /* no client yet */
	bool more = false;

	pthread_setname_np(pthread_self(), "vctl"); /* comm: top -H, perf sched */
	for (;;) {
		int n = epoll_wait(ctl->epfd, evs, 32, more ? 0 : next_timeout_ms(ctl, due, vb_now_ns()));
		if (n < 0 && errno != EINTR) {
			vb_err("control: epoll_wait: %s", strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;
			if (p == &tag_stop)
				return NULL;
			if (p == &tag_ctl) {
				accept_one(ctl, ctl->lfd, CLIENT_CONTROL);
				continue;
			}
			if (p == &tag_metrics) {
				accept_one(ctl, ctl->mfd, CLIENT_METRICS);
				continue;
			}
			struct vctl_client *c = p;
			/* An earlier event of this batch may have closed c: it
			 * is then no longer in the list. */
			bool live = false;
			for (unsigned j = 0; j < ctl->n_clients && !live; j++)
				live = ctl->clients[j] == c;
			if (live)
				client_run(ctl, c);
		}
		/* Clients whose turn ended with lines still buffered; epoll
		 * does not wake for bytes already read, so the next wait does
		 * not sleep while one is left. */
		more = false;
		for (unsigned i = 0; i < ctl->n_clients;) {
			struct vctl_client *c = ctl->clients[i];
			if (c->more && !client_run(ctl, c))
				continue; /* closed: the last client moved to i */
			more |= c->more;
			i++;
		}
		int64_t now = vb_now_ns();
		if (ctl->accept_resume_ns && now >= ctl->accept_resume_ns)
			resume_accepting(ctl);
		due = expire_idle(ctl, now);
	}
	return NULL;
}

int vctl_start(struct vctl *ctl, struct vio *io, struct vrt *rt, struct vsrv *srv,
	       const struct vctl_hooks *hooks)
{
	int rc;

	ctl->io = io;
	ctl->rt = rt;
	ctl->srv = srv;
	ctl->hooks = *hooks;
	ctl->epfd = epoll_create1(EPOLL_CLOEXEC);
	ctl->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ctl->epfd < 0 || ctl->evfd < 0)
		return -errno;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &tag_ctl };
	if (epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, ctl->lfd, &ev) < 0)
		return -errno;
	ev.data.ptr = &tag_stop;
	if (epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, ctl->evfd, &ev) < 0)
		return -errno;
	if (ctl->mfd >= 0) {
		ev.data.ptr = &tag_metrics;
		if (epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, ctl->mfd, &ev) < 0)
			return -errno;
	}
	rc = pthread_create(&ctl->thread, NULL, control_thread, ctl);
	if (rc)
		return -rc;
	ctl->started = true;
	return 0;
}

void vctl_stop(struct vctl *ctl)
{
	if (!ctl || !ctl->started)
		return;
	uint64_t one = 1;
	(void)!write(ctl->evfd, &one, sizeof(one));
	pthread_join(ctl->thread, NULL);
	ctl->started = false;
	while (ctl->n_clients)
		client_close(ctl, ctl->clients[0]);
}

void vctl_free(struct vctl *ctl)
{
	if (!ctl)
		return;
	vctl_stop(ctl);
	free(ctl->clients);
	vctl__snap_fini(&ctl->snap);
	vctl__snap_fini(&ctl->base);
	if (ctl->lfd >= 0)
		close(ctl->lfd);
	if (ctl->created_path)
		unlink(ctl->path);
	if (ctl->mfd >= 0)
		close(ctl->mfd);
	if (ctl->epfd >= 0)
		close(ctl->epfd);
	if (ctl->evfd >= 0)
		close(ctl->evfd);
	free(ctl);
}
