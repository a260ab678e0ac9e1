/* SPDX-License-Identifier: MIT */
/*
 * voltctl/top.c: `voltctl top`: a live view of voltd built from `stats`
 * replies taken every DELAY seconds on one control connection: per worker
 * state, stall flag, busy % and CPU % (of one core), polls/s, steals/s,
 * local queue depth, global interval, the current poll's age and task; channel
 * fill; requests/s by status class; per job kind requests/s and p50/p99.
 * Rates are deltas between two replies over the client's monotonic clock
 * (a `clear counters` in between shows as 0, not negative). Full screen with
 * ncurses ('q' quits, any other key refreshes now), or plain text frames
 * with -b (for scripts and tests), -n N frames. Single-threaded.
 */
#include "config.h"
#include "voltctl/render.h"
#include "voltctl/voltctl.h"

#include <curses.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_ 512

enum style { ST_PLAIN, ST_TITLE, ST_HEAD, ST_ALERT };

struct frame {
	struct fline {
		enum style st;
		char text[LINE_MAX_];
	} *l;
	size_t n, cap;
};

static void add(struct frame *f, enum style st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(struct frame *f, enum style st, const char *fmt, ...)
{
	va_list ap;

	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 64;
		struct fline *l = realloc(f->l, cap * sizeof(*l));
		if (!l)
			return;
		f->l = l;
		f->cap = cap;
	}
	f->l[f->n].st = st;
	va_start(ap, fmt);
	vsnprintf(f->l[f->n].text, LINE_MAX_, fmt, ap);
	va_end(ap);
	f->n++;
}

/* A table into the frame: first row header (ST_HEAD), `alert[r]` marks rows. */
static void add_table(struct frame *f, struct vcli_table *t, const bool *alert)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	char *line, *save = NULL;
	size_t r = 0;

	if (!mem)
		return;
	vcli_table_print(t, mem, 0, false);
	fclose(mem);
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save), r++)
		add(f, r == 0 ? ST_HEAD : alert && alert[r] ? ST_ALERT : ST_PLAIN, "%s", line);
	free(buf);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_number(v) ? json_number_value(v) : 0;
}

/* (cur - prev) / dt, as text; "-" without a previous sample. */
static const char *rate(json_t *cur, json_t *prev, const char *key, double dt, double scale,
			char *buf, size_t len)
{
	double d;

	if (!prev || dt <= 0)
		return snprintf(buf, len, "-"), buf;
	d = num(cur, key) - num(prev, key);
	if (d < 0)
		d = 0; /* counters cleared in between */
	snprintf(buf, len, "%.*f", scale != 1 ? 1 : 0, d / dt * scale);
	return buf;
}

static json_t *path2(json_t *o, const char *a, const char *b)
{
	o = json_object_get(o, a);
	return b ? json_object_get(o, b) : o;
}

static void build_workers(struct frame *f, json_t *cur, json_t *prev, double dt)
{
	json_t *ws = json_object_get(cur, "workers"), *pws = prev ? json_object_get(prev, "workers") : NULL;
	json_t *w;
	size_t i, n = json_array_size(ws);
	struct vcli_table t;
	bool *alert = calloc(n + 1, sizeof(*alert));
	static const char *const head[] = { "WORKER", "STATE", "STALL", "BUSY%", "CPU%", "POLLS/S",
					    "STEALS/S", "QUEUE", "GINT", "POLL AGE", "TASK" };

	vcli_table_init(&t, 11);
	vcli_table_row(&t, head);
	json_array_foreach(ws, i, w) {
		json_t *p = json_array_get(pws, i);
		char c[11][64];
		const char *cells[11];
		const char *task = json_string_value(json_object_get(w, "task"));
		const char *label = json_string_value(json_object_get(w, "task_label"));

		vcli_cell("worker", json_object_get(w, "worker"), c[0], 64);
		vcli_cell("state_name", json_object_get(w, "state_name"), c[1], 64);
		if (num(w, "stall") != 0) {
			char age[32];
			vcli_duration(num(w, "stall_age_ns") / 1e9, age, sizeof(age));
			snprintf(c[2], 64, "STALLED %s %s", vcli_cell("stall_name", json_object_get(w, "stall_name"),
								    c[9], 64), age);
			if (alert)
				alert[i + 1] = true;
		} else {
			snprintf(c[2], 64, "-");
		}
		/* busy_ns grows at a worker's maintenance ticks and parks: one
		 * stuck in a poll for the whole interval is 100 % busy. */
		if (num(w, "poll_age_ns") >= dt * 1e9)
			snprintf(c[3], 64, "100.0");
		else
			rate(w, p, "busy_ns", dt, 100 / 1e9, c[3], 64);
		rate(w, p, "cpu_ns", dt, 100 / 1e9, c[4], 64);
		rate(w, p, "polls", dt, 1, c[5], 64);
		rate(w, p, "steal_ops", dt, 1, c[6], 64);
		vcli_cell("", json_object_get(w, "local_queue_depth"), c[7], 64);
		vcli_cell("", json_object_get(w, "global_interval"), c[8], 64);
		if (num(w, "poll_age_ns") > 0)
			vcli_duration(num(w, "poll_age_ns") / 1e9, c[9], 64);
		else
			snprintf(c[9], 64, "-");
		snprintf(c[10], 64, "%s%s%s%s", task ? task : "-", label ? " (" : "", label ? label : "",
			 label ? ")" : "");
		for (int k = 0; k < 11; k++)
			cells[k] = c[k];
		vcli_table_row(&t, cells);
	}
	add_table(f, &t, alert);
	vcli_table_fini(&t);
	free(alert);
}

static void build_channels(struct frame *f, json_t *cur, json_t *prev, double dt)
{
	json_t *chs = json_object_get(cur, "channels"), *ch;
	const char *name;
	struct vcli_table t;
	static const char *const head[] = { "CHANNEL", "LEN", "CAPACITY", "FILL%", "SENDS/S", "FULL/S" };

	vcli_table_init(&t, 6);
	vcli_table_row(&t, head);
	json_object_foreach(chs, name, ch) {
		json_t *p = prev ? path2(prev, "channels", name) : NULL;
		char c[6][64];
		const char *cells[6] = { name, c[1], c[2], c[3], c[4], c[5] };
		double cap = num(ch, "capacity");

		snprintf(c[1], 64, "%.0f", num(ch, "len"));
		snprintf(c[2], 64, "%.0f", cap);
		snprintf(c[3], 64, "%.1f", cap > 0 ? 100 * num(ch, "len") / cap : 0);
		rate(ch, p, "sends", dt, 1, c[4], 64);
		rate(ch, p, "full_events", dt, 1, c[5], 64);
		vcli_table_row(&t, cells);
	}
	add_table(f, &t, NULL);
	vcli_table_fini(&t);
}

static void build_kinds(struct frame *f, json_t *cur, json_t *prev, double dt)
{
	json_t *kinds = json_object_get(cur, "kinds"), *k;
	const char *name;
	struct vcli_table t;
	size_t shown = 0;
	static const char *const head[] = { "JOB KIND", "REQ/S", "TOTAL", "P50", "P99" };

	vcli_table_init(&t, 5);
	vcli_table_row(&t, head);
	json_object_foreach(kinds, name, k) {
		json_t *p = prev ? path2(prev, "kinds", name) : NULL;
		json_t *lat = json_object_get(k, "latency");
		char c[5][64];
		const char *cells[5] = { name, c[1], c[2], c[3], c[4] };

		if (num(k, "kind_responses") == 0)
			continue;
		rate(k, p, "kind_responses", dt, 1, c[1], 64);
		snprintf(c[2], 64, "%.0f", num(k, "kind_responses"));
		vcli_duration(num(lat, "p50_seconds"), c[3], 64);
		vcli_duration(num(lat, "p99_seconds"), c[4], 64);
		vcli_table_row(&t, cells);
		shown++;
	}
	if (shown)
		add_table(f, &t, NULL);
	else
		add(f, ST_PLAIN, "(no job answered yet)");
	vcli_table_fini(&t);
}

static void build(struct frame *f, json_t *cur, json_t *prev, double dt, const char *path)
{
	json_t *b = json_object_get(cur, "build"), *rt = json_object_get(cur, "runtime");
	json_t *srv = json_object_get(cur, "server"), *psrv = prev ? json_object_get(prev, "server") : NULL;
	json_t *resp = json_object_get(srv, "responses"), *presp = psrv ? json_object_get(psrv, "responses") : NULL;
	json_t *infl = json_object_get(srv, "in_flight");
	char up[32], r[6][32];
	static const char *const cls[] = { "1xx", "2xx", "3xx", "4xx", "5xx" };
	double stalled = num(rt, "stalled");

	f->n = 0;
	vcli_duration(num(b, "uptime_seconds"), up, sizeof(up));
	add(f, ST_TITLE, "voltd %s on %s  backend %s  up %s  workers %.0f  %s",
	    json_string_value(json_object_get(b, "version")) ?: "?", path,
	    json_string_value(path2(cur, "io", "backend")) ?: "?", up, num(rt, "workers"),
	    num(srv, "draining") ? "DRAINING" : "");
	add(f, stalled ? ST_ALERT : ST_PLAIN,
	    "stalled workers %.0f (stalls so far %.0f)  searching %.0f  parked %.0f  injection queue %.0f  tasks %.0f",
	    stalled, num(rt, "stalls"), num(rt, "searching"), num(rt, "parked"),
	    num(rt, "injection_depth"), num(rt, "tasks_alive"));
	rate(srv, psrv, "requests", dt, 1, r[5], sizeof(r[5]));
	for (int i = 0; i < 5; i++)
		rate(resp, presp, cls[i], dt, 1, r[i], sizeof(r[i]));
	add(f, ST_PLAIN, "requests/s %s  by class: 1xx %s  2xx %s  3xx %s  4xx %s  5xx %s", r[5], r[0], r[1],
	    r[2], r[3], r[4]);
	add(f, ST_PLAIN, "connections %.0f  in flight: parse %.0f  exec %.0f  write %.0f  send %.0f  dropped %.0f",
	    num(srv, "conns_open"), num(infl, "parse"), num(infl, "exec"), num(infl, "write"),
	    num(infl, "send"), num(srv, "requests_dropped"));
	add(f, ST_PLAIN, "%s", "");
	build_workers(f, cur, prev, dt);
	add(f, ST_PLAIN, "%s", "");
	build_channels(f, cur, prev, dt);
	add(f, ST_PLAIN, "%s", "");
	build_kinds(f, cur, prev, dt);
}

/* ------------------------------------------------------------- screens */

static void draw_curses(const struct frame *f)
{
	erase();
	for (size_t i = 0; i < f->n && (int)i < LINES - 1; i++) {
		int a = f->l[i].st == ST_TITLE ? A_BOLD : f->l[i].st == ST_HEAD ? A_REVERSE :
			f->l[i].st == ST_ALERT ? (A_BOLD | A_STANDOUT) : A_NORMAL;
		attrset(a);
		mvaddnstr((int)i, 0, f->l[i].text, COLS);
	}
	attrset(A_NORMAL);
	mvaddnstr(LINES - 1, 0, "q: quit  any key: refresh", COLS);
	refresh();
}

static void draw_batch(const struct frame *f, unsigned iter)
{
	time_t t = time(NULL);
	struct tm tm;
	char ts[32];

	gmtime_r(&t, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (iter)
		putchar('\n');
	printf("--- %s\n", ts);
	for (size_t i = 0; i < f->n; i++)
		printf("%s\n", f->l[i].text);
	fflush(stdout);
}

/* Wait `secs`; curses: a key ends the wait early. Returns false on 'q'. */
static bool wait_key(bool curses_on, double secs)
{
	double end = now_s() + secs;

	if (!curses_on) {
		struct timespec ts = { (time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9) };
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		return true;
	}
	for (;;) {
		double left = end - now_s();
		int ch;
		if (left <= 0)
			return true;
		timeout((int)(left * 1000) + 1);
		ch = getch();
		if (ch == 'q' || ch == 'Q')
			return false;
		if (ch != ERR && ch != KEY_RESIZE)
			return true;
	}
}

static void top_usage(void)
{
	fprintf(stderr, "usage: voltctl [-s SOCKET] top [-b] [-n N] [-d SECONDS]\n");
}

int vcli_top(const char *path, int argc, char **argv)
{
	bool batch = false, curses_on = false;
	long frames = -1;
	double delay = 1.0;
	struct vcli_conn c;
	struct frame f = { 0 };
	json_t *cur = NULL, *prev = NULL;
	double t_prev = 0;
	char err[512], *end;
	int opt, rc;

	optind = 1;
	while ((opt = getopt(argc, argv, "bn:d:")) != -1) {
		switch (opt) {
		case 'b': batch = true; break;
		case 'n':
			frames = strtol(optarg, &end, 10);
			if (*end || frames < 1) {
				fprintf(stderr, "voltctl top: -n takes a count >= 1\n");
				return VCLI_USAGE;
			}
			break;
		case 'd':
			delay = strtod(optarg, &end);
			if (*end || !(delay >= 0.1 && delay <= 3600)) {
				fprintf(stderr, "voltctl top: -d takes seconds, 0.1 to 3600\n");
				return VCLI_USAGE;
			}
			break;
		default: top_usage(); return VCLI_USAGE;
		}
	}
	if (optind != argc) {
		top_usage();
		return VCLI_USAGE;
	}
	if (!batch && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))) {
		fprintf(stderr, "voltctl top: not a terminal; -b prints plain-text frames\n");
		return VCLI_USAGE;
	}
	rc = vcli_connect(&c, path, err, sizeof(err));
	if (rc != VCLI_OK) {
		fprintf(stderr, "voltctl: %s\n", err);
		return rc;
	}
	/* The first reply only primes the rates. */
	rc = vcli_call(&c, "stats", &prev, NULL, err, sizeof(err));
	if (rc == VCLI_OK && !json_is_true(json_object_get(prev, "ok"))) {
		fprintf(stderr, "voltctl: %s\n", json_string_value(json_object_get(prev, "error")) ?: "stats refused");
		rc = vcli_error_exit(prev);
		goto out;
	}
	if (rc != VCLI_OK) {
		fprintf(stderr, "voltctl: %s\n", err);
		goto out;
	}
	t_prev = now_s();
	if (!batch) {
		initscr();
		cbreak();
		noecho();
		keypad(stdscr, TRUE);
		curs_set(0);
		curses_on = true;
		mvaddstr(0, 0, "voltctl top: sampling...");
		refresh();
	}
	for (unsigned iter = 0; frames < 0 || iter < (unsigned long)frames; iter++) {
		double t;

		if (!wait_key(curses_on, delay))
			break;
		rc = vcli_call(&c, "stats", &cur, NULL, err, sizeof(err));
		if (rc != VCLI_OK)
			break;
		t = now_s();
		build(&f, cur, prev, t - t_prev, path);
		if (curses_on)
			draw_curses(&f);
		else
			draw_batch(&f, iter);
		json_decref(prev);
		prev = cur;
		cur = NULL;
		t_prev = t;
	}
	if (curses_on)
		endwin();
	if (rc != VCLI_OK)
		fprintf(stderr, "voltctl: %s\n", err);
out:
	json_decref(prev);
	json_decref(cur);
	free(f.l);
	vcli_close(&c);
	return rc;
}
