/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_server_conn.c: the connection's three state machines
 * (server/internal.h, server/conn.c) through their transition functions,
 * on a real connection object over a socket pair: every move of each
 * machine's list goes where it says (and what entering the state does
 * happens: the budget count, the linger's shutdown, an abort ending the
 * requests, the release at CLOSING); a STAY and a move to the current state
 * change nothing; whole paths a connection lives (a keep-alive exchange, a
 * quiet send collected late, a bad request lingering, a reset); every
 * state has a name; each move is traced at debug level and not otherwise;
 * and a move that is not on a list stops the process (VB_BUG_ON), shown in
 * a child for each machine. Single-threaded, no worker: the transitions
 * need none.
 */
#include "config.h"
#include "server/internal.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

static struct vsrv *srv;
static int peer = -1; /* the other end of the last connection's socket */

static int setup(void **state)
{
	(void)state;
	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return -1;
	srv->nworkers = 0; /* counters go to the block of non-workers */
	srv->ws = calloc(1, sizeof(*srv->ws));
	srv->cfg.max_pipeline = 4;
	vsrv__mem_init(srv);
	return srv->ws ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	vsrv__mem_fini(srv);
	free(srv->ws);
	free(srv);
	return 0;
}

/* A fresh connection over a socket pair (READ, IDLE, OPEN), idle: no
 * busy block. */
static struct vsrv_conn *idle_conn(void)
{
	int sv[2];
	struct vsrv_conn *c = NULL;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	if (peer >= 0)
		close(peer);
	peer = sv[1];
	assert_int_equal(vsrv__conn_new(srv, sv[0], &c), 0);
	assert_int_equal(c->rx, VSRV_RX_READ);
	assert_int_equal(c->tx, VSRV_TX_IDLE);
	assert_int_equal(c->end, VSRV_END_OPEN);
	assert_null(c->busy);
	return c;
}

/* The same with its busy block, as once a request arrived: the machines
 * move in that state (a failure's linger keeps its bounds there). */
static struct vsrv_conn *conn(void)
{
	struct vsrv_conn *c = idle_conn();

	assert_true(vsrv__conn_take_busy(c));
	assert_non_null(c->busy);
	return c;
}

/* The caller's reference is the only one: its drop frees the object. */
static void conn_done(struct vsrv_conn *c)
{
	close(c->io.fd);
	vrt_task_unref(&c->task);
}

static uint64_t count(enum vsrv_counter k)
{
	return atomic_load(&srv->ws[0].c[k]);
}

/* ------------------------------------------------------------- names */

static void check_names(const char *const *names, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		assert_non_null(names[i]);
		assert_true(names[i][0] != '\0');
		for (unsigned j = 0; j < i; j++)
			assert_true(strcmp(names[i], names[j]) != 0);
	}
}

static void test_every_state_has_a_name(void **state)
{
	(void)state;
	check_names(vsrv__rx_name, VSRV_RX_N);
	check_names(vsrv__tx_name, VSRV_TX_N);
	check_names(vsrv__end_name, VSRV_END_N);
	assert_string_equal(vsrv__rx_name[VSRV_RX_JOBS_WAIT], "JOBS_WAIT");
	assert_string_equal(vsrv__tx_name[VSRV_TX_QUIET], "QUIET");
	assert_string_equal(vsrv__end_name[VSRV_END_CLOSING], "CLOSING");
}

/* ------------------------------------------------- every listed move */

/* The lists' names are pasted, never expanded (EOF is stdio's too). */
#define RX_GO(f, t) rx_go(VSRV_RX_##f, VSRV_RX_##t);
#define RX_STAY(f, t) rx_stay(VSRV_RX_##f, VSRV_RX_##t);
#define TX_GO(f, t) tx_go(VSRV_TX_##f, VSRV_TX_##t);
#define TX_STAY(f, t) tx_stay(VSRV_TX_##f, VSRV_TX_##t);
#define END_GO(f, t) end_go(VSRV_END_##f, VSRV_END_##t);
#define END_STAY(f, t) end_stay(VSRV_END_##f, VSRV_END_##t);

static unsigned moves_seen;

static void rx_go(enum vsrv_rx from, enum vsrv_rx to)
{
	struct vsrv_conn *c = conn();
	uint64_t waits = count(VSRV_C_budget_waits);

	c->rx = from;
	vsrv__rx_to(c, to);
	assert_int_equal(c->rx, to);
	/* entering BUDGET_WAIT counts once */
	assert_int_equal(count(VSRV_C_budget_waits) - waits, to == VSRV_RX_BUDGET_WAIT);
	vsrv__rx_to(c, to);
	assert_int_equal(c->rx, to);
	assert_int_equal(count(VSRV_C_budget_waits) - waits, to == VSRV_RX_BUDGET_WAIT);
	conn_done(c);
	moves_seen++;
}

static void rx_stay(enum vsrv_rx from, enum vsrv_rx to)
{
	struct vsrv_conn *c = conn();

	c->rx = from;
	vsrv__rx_to(c, to);
	assert_int_equal(c->rx, from);
	conn_done(c);
	moves_seen++;
}

static void test_rx_moves(void **state)
{
	(void)state;
	moves_seen = 0;
	VSRV_RX_MOVES(RX_GO, RX_STAY)
	assert_true(moves_seen >= 15);
}

static void tx_go(enum vsrv_tx from, enum vsrv_tx to)
{
	struct vsrv_conn *c = conn();

	c->tx = from;
	/* No send under way: the I/O layer has nothing that ended. */
	assert_false(vsrv__tx_to(c, to));
	assert_int_equal(c->tx, to);
	assert_false(vsrv__tx_to(c, to));
	assert_int_equal(c->tx, to);
	c->tx = VSRV_TX_IDLE;
	conn_done(c);
	moves_seen++;
}

/* The send machine lists no STAY today. */
__attribute__((unused)) static void tx_stay(enum vsrv_tx from, enum vsrv_tx to)
{
	struct vsrv_conn *c = conn();

	c->tx = from;
	assert_false(vsrv__tx_to(c, to));
	assert_int_equal(c->tx, from);
	c->tx = VSRV_TX_IDLE;
	conn_done(c);
	moves_seen++;
}

static void test_tx_moves(void **state)
{
	(void)state;
	moves_seen = 0;
	VSRV_TX_MOVES(TX_GO, TX_STAY)
	assert_int_equal(moves_seen, 7);
}

static void end_go(enum vsrv_end from, enum vsrv_end to)
{
	struct vsrv_conn *c = conn();
	uint64_t lingers = count(VSRV_C_lingers);
	int64_t t0 = vb_now_ns();
	char b;

	c->end = from;
	vsrv__end_to(c, to, t0);
	assert_int_equal(c->end, to);
	switch (to) {
	case VSRV_END_LINGER:
		/* our side is shut: the peer reads EOF; counted once */
		assert_true(c->busy->linger_until > t0);
		assert_int_equal(recv(peer, &b, 1, MSG_DONTWAIT), 0);
		assert_int_equal(count(VSRV_C_lingers) - lingers, 1);
		break;
	case VSRV_END_ABORTED:
		assert_int_equal(c->rx, VSRV_RX_DONE); /* no more requests */
		break;
	case VSRV_END_CLOSING:
		assert_true(atomic_load(&c->dead)); /* released */
		break;
	default:
		break;
	}
	vsrv__end_to(c, to, t0);
	assert_int_equal(c->end, to);
	assert_int_equal(count(VSRV_C_lingers) - lingers, to == VSRV_END_LINGER);
	conn_done(c);
	moves_seen++;
}

static void end_stay(enum vsrv_end from, enum vsrv_end to)
{
	struct vsrv_conn *c = conn();

	c->end = from;
	vsrv__end_to(c, to, vb_now_ns());
	assert_int_equal(c->end, from);
	conn_done(c);
	moves_seen++;
}

static void test_end_moves(void **state)
{
	(void)state;
	moves_seen = 0;
	VSRV_END_MOVES(END_GO, END_STAY)
	assert_int_equal(moves_seen, 8);
}

/* ------------------------------------------------------- whole paths */

static void test_paths(void **state)
{
	struct vsrv_conn *c;
	int64_t now = vb_now_ns();

	(void)state;
	/* A keep-alive exchange with a pipelined request that waits for
	 * room in `jobs`, a 100 Continue, and a quiet send that the timer
	 * collects; then the peer closes and the connection closes. */
	c = conn();
	vsrv__rx_to(c, VSRV_RX_PARSE);
	vsrv__rx_to(c, VSRV_RX_JOBS_WAIT);
	vsrv__rx_to(c, VSRV_RX_PARSE);
	vsrv__rx_to(c, VSRV_RX_CONTINUE);
	vsrv__rx_to(c, VSRV_RX_PARSE);
	vsrv__rx_to(c, VSRV_RX_READ);
	assert_false(vsrv__tx_to(c, VSRV_TX_SENDING));
	assert_false(vsrv__tx_to(c, VSRV_TX_QUIET));
	assert_false(vsrv__tx_to(c, VSRV_TX_OVERDUE));
	assert_false(vsrv__tx_to(c, VSRV_TX_IDLE));
	vsrv__rx_to(c, VSRV_RX_BUDGET_WAIT);
	vsrv__rx_to(c, VSRV_RX_READ);
	vsrv__rx_to(c, VSRV_RX_EOF);
	vsrv__rx_to(c, VSRV_RX_DONE);
	vsrv__end_to(c, VSRV_END_CLOSING, now);
	assert_int_equal(c->rx, VSRV_RX_DONE);
	assert_int_equal(c->tx, VSRV_TX_IDLE);
	assert_int_equal(c->end, VSRV_END_CLOSING);
	conn_done(c);

	/* A bad request: its answer, the linger, the client's close. */
	c = conn();
	vsrv__rx_to(c, VSRV_RX_PARSE);
	vsrv__rx_to(c, VSRV_RX_DONE);
	vsrv__end_to(c, VSRV_END_FAILED, now);
	vsrv__end_to(c, VSRV_END_LINGER, now);
	vsrv__rx_to(c, VSRV_RX_EOF); /* the client's close, read while lingering */
	assert_int_equal(c->rx, VSRV_RX_DONE);
	vsrv__conn_abort(c, NULL);
	vsrv__end_to(c, VSRV_END_CLOSING, now);
	assert_int_equal(c->end, VSRV_END_CLOSING);
	conn_done(c);

	/* A reset while a request waits for room: the abort ends the
	 * requests; a later failure (its answer out of memory) and a second
	 * abort change nothing, and the first reason is kept. */
	c = conn();
	vsrv__rx_to(c, VSRV_RX_PARSE);
	vsrv__rx_to(c, VSRV_RX_JOBS_WAIT);
	vsrv__conn_abort(c, "reset by peer");
	assert_int_equal(c->rx, VSRV_RX_DONE);
	assert_int_equal(c->end, VSRV_END_ABORTED);
	vsrv__end_to(c, VSRV_END_FAILED, now);
	vsrv__conn_abort(c, "send error");
	assert_int_equal(c->end, VSRV_END_ABORTED);
	assert_string_equal(c->busy->close_reason, "reset by peer");
	vsrv__end_to(c, VSRV_END_CLOSING, now);
	conn_done(c);
}

/* ------------------------------------------------- the busy block */

/* An idle connection holds no busy block (nor io its send operation);
 * taking one lends io the block's; it stays, and a second take changes
 * nothing; the connection's drop gives it back. */
static void test_busy_block_taken_for_work(void **state)
{
	struct vsrv_conn *c = idle_conn();
	struct vsrv_busy *b;

	(void)state;
	assert_null(c->io.tx);
	assert_int_equal(vsrv__in_flight(c), 0);
	assert_true(vsrv__conn_take_busy(c));
	b = c->busy;
	assert_non_null(b);
	assert_ptr_equal(c->io.tx, &b->tx);
	assert_null(b->parser);
	assert_null(b->out);
	assert_null(b->pending);
	assert_int_equal(b->sent_seq, c->next_seq);
	for (uint32_t i = 0; i <= srv->slot_mask; i++)
		assert_null(atomic_load(&b->slots[i]));
	assert_true(vsrv__conn_take_busy(c));
	assert_ptr_equal(c->busy, b);
	conn_done(c);
}

/* ------------------------------------------------------------- trace */

/* Run fn(c) with stderr going to a file; return what was written. */
static char *captured(void (*fn)(struct vsrv_conn *), struct vsrv_conn *c, int level)
{
	char path[] = "/tmp/voltd-test-conn.XXXXXX";
	int fd = mkstemp(path), saved = dup(STDERR_FILENO), old = vb_log_get_level();
	static char buf[4096];
	ssize_t n;

	assert_true(fd >= 0 && saved >= 0);
	unlink(path);
	fflush(stderr);
	dup2(fd, STDERR_FILENO);
	vb_log_set_level(level);
	fn(c);
	vb_log_set_level(old);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static void read_to_parse(struct vsrv_conn *c)
{
	vsrv__rx_to(c, VSRV_RX_PARSE);
	vsrv__rx_to(c, VSRV_RX_PARSE); /* no move: no line */
	vsrv__rx_to(c, VSRV_RX_READ);
}

static void test_moves_traced_at_debug(void **state)
{
	struct vsrv_conn *c = conn();
	char want[64];
	const char *out;

	(void)state;
	out = captured(read_to_parse, c, LOG_DEBUG);
	snprintf(want, sizeof(want), "conn fd %d: rx READ -> PARSE", c->io.fd);
	assert_non_null(strstr(out, want));
	snprintf(want, sizeof(want), "conn fd %d: rx PARSE -> READ", c->io.fd);
	assert_non_null(strstr(out, want));
	assert_null(strstr(strstr(out, "READ -> PARSE") + 1, "READ -> PARSE"));
	out = captured(read_to_parse, c, LOG_INFO);
	assert_string_equal(out, "");
	conn_done(c);
}

/* ------------------------------------------------------ illegal moves */

static void rx_done_to_read(struct vsrv_conn *c)
{
	c->rx = VSRV_RX_DONE;
	vsrv__rx_to(c, VSRV_RX_READ);
}

static void tx_overdue_to_quiet(struct vsrv_conn *c)
{
	c->tx = VSRV_TX_OVERDUE;
	vsrv__tx_to(c, VSRV_TX_QUIET);
}

static void end_closing_to_aborted(struct vsrv_conn *c)
{
	c->end = VSRV_END_CLOSING;
	vsrv__conn_abort(c, "late");
}

static void end_open_to_linger(struct vsrv_conn *c)
{
	vsrv__end_to(c, VSRV_END_LINGER, vb_now_ns());
}

/* In a child: fn(c) must stop the process (abort) after saying which
 * move it refused. */
static void caught(void (*fn)(struct vsrv_conn *), const char *move)
{
	struct vsrv_conn *c = conn();
	int pipefd[2], status;
	char out[2048], want[128];
	size_t got = 0;
	ssize_t n;
	pid_t pid;

	assert_int_equal(pipe(pipefd), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit no_core = { 0, 0 };

		setrlimit(RLIMIT_CORE, &no_core); /* no core file in the tree */
		signal(SIGABRT, SIG_DFL);
		dup2(pipefd[1], STDERR_FILENO);
		close(pipefd[0]);
		fn(c);
		_exit(0); /* not caught: the parent fails */
	}
	close(pipefd[1]);
	while (got < sizeof(out) - 1 && (n = read(pipefd[0], out + got, sizeof(out) - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(pipefd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
		fail_msg("%s: the child was not stopped by the check (status %#x): %s", move, status, out);
	snprintf(want, sizeof(want), "connection fd %d: %s is not a move of its machine", c->io.fd, move);
	if (!strstr(out, want) || !strstr(out, "BUG at"))
		fail_msg("%s: the child said: %s", move, out);
	conn_done(c);
}

static void test_illegal_moves_are_caught(void **state)
{
	(void)state;
	caught(rx_done_to_read, "rx DONE -> READ");
	caught(tx_overdue_to_quiet, "tx OVERDUE -> QUIET");
	caught(end_closing_to_aborted, "end CLOSING -> ABORTED");
	caught(end_open_to_linger, "end OPEN -> LINGER");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_state_has_a_name),
		cmocka_unit_test(test_rx_moves),
		cmocka_unit_test(test_tx_moves),
		cmocka_unit_test(test_end_moves),
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_busy_block_taken_for_work),
		cmocka_unit_test(test_moves_traced_at_debug),
		cmocka_unit_test(test_illegal_moves_are_caught),
	};
	int rc = cmocka_run_group_tests(tests, setup, teardown);

	if (peer >= 0)
		close(peer);
	return rc;
}
