/* SPDX-License-Identifier: MIT */
/*
 * server/deadline.c: when a connection's timer fires and what a passed
 * deadline does. One lazily armed timer per connection covers the header,
 * body and idle deadlines (from the parser's phase), the send deadline
 * (moved while the client acknowledges bytes: TCP_INFO, read only at the
 * deadline), the quiet send's collection, the linger's end, the budget's
 * recheck and the reset probe of a connection that reads nothing.
 *
 * Threading: the connection's task (task-private state of struct
 * vsrv_conn); state changes go through conn.c's transition functions.
 */
#include "config.h"
#include "server/internal.h"
#include "base/time.h"

#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_acked */
#include <netinet/in.h>

/* The read deadline while waiting for input (0: none). */
static int64_t read_deadline(const struct vsrv_conn *c)
{
	const struct vsrv_busy *b = c->busy;

	if (c->end == VSRV_END_LINGER)
		return b->linger_until;
	if (!(c->recv_lent || (b && b->recv_buf)) || c->rx != VSRV_RX_READ || c->end != VSRV_END_OPEN)
		return 0;
	switch (c->phase) {
	case VHTTP_PHASE_HEAD: /* a request under way: there is a parser */
		return b->phase_since + vsrv__ms(vsrv__live(c->srv, header_timeout_ms));
	case VHTTP_PHASE_BODY:
		return b->phase_since + vsrv__ms(vsrv__live(c->srv, body_timeout_ms));
	case VHTTP_PHASE_IDLE:
		if (vsrv__in_flight(c) || (b && b->pending))
			return 0; /* the client waits for us */
		/* Before the first answer the header timeout bounds the wait
		 * (nothing in flight: every request parsed was answered);
		 * draining, VSRV_DRAIN_FIRST_MS (drain_keeps_reading). */
		if (vsrv__draining(c->srv))
			return c->idle_since + vsrv__ms(VSRV_DRAIN_FIRST_MS);
		return c->idle_since + vsrv__ms(c->next_seq ? vsrv__live(c->srv, idle_timeout_ms) :
							   vsrv__live(c->srv, header_timeout_ms));
	default:
		return 0;
	}
}

static int64_t send_deadline(const struct vsrv_conn *c)
{
	return c->tx != VSRV_TX_IDLE ? c->busy->tx_mark + vsrv__ms(vsrv__live(c->srv, send_timeout_ms)) : 0;
}

/*
 * The send deadline passed: did the client take anything since the last
 * look? Progress is the socket's acknowledged byte count (TCP_INFO), read
 * only here, never per request. The first look of a batch has nothing to
 * compare with and counts as progress, so a stalled send is cut between
 * one and two send_timeout_ms after its last progress. A socket without
 * TCP_INFO (not TCP) never shows progress: cut at the first deadline.
 */
static bool send_progressed(struct vsrv_conn *c, int64_t now)
{
	struct vsrv_busy *b = c->busy;
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (getsockopt(c->io.fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 ||
	    len < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(ti.tcpi_bytes_acked))
		return false;
	if (b->tx_acked != VSRV_ACKED_UNSEEN && ti.tcpi_bytes_acked == b->tx_acked)
		return false;
	b->tx_acked = ti.tcpi_bytes_acked;
	b->tx_mark = now;
	return true;
}

/* A quiet send is collected by the timer after VSRV_QUIET_NS at the
 * latest (then it wakes us), so that an idle connection gives its batch
 * back; a busy one sees this at most once per VSRV_QUIET_NS (lazy arming). */
static int64_t quiet_deadline(const struct vsrv_conn *c)
{
	return c->tx == VSRV_TX_QUIET ? c->busy->tx_since + VSRV_QUIET_NS : 0;
}

/* TCP_CLOSE of include/net/tcp_states.h (not in the uapi headers): the
 * state of a socket the peer reset. */
#define VSRV_TCP_STATE_CLOSE 7

/*
 * A connection that reads nothing (pipeline full, waiting for room in
 * jobs) would not see its peer's reset before it sends, while its jobs
 * burn executors. Once a second it looks at the socket's TCP state: reset
 * means abandoned (a half-close is not: its answers are still sent).
 */
static bool peer_reset(const struct vsrv_conn *c)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (getsockopt(c->io.fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return false;
	return ti.tcpi_state == VSRV_TCP_STATE_CLOSE;
}

static int64_t dl_min(int64_t a, int64_t b)
{
	return !a ? b : !b ? a : a < b ? a : b;
}

/* Act on passed deadlines; true when something changed. */
bool vsrv__conn_timeouts(struct vsrv_conn *c, int64_t now)
{
	struct vsrv *srv = c->srv;
	int64_t rd = read_deadline(c), sd = send_deadline(c), qd = quiet_deadline(c);

	if (qd && now >= qd) {
		/* True when the send has ended already: the state stays
		 * QUIET and the send is collected at the next step. */
		vsrv__tx_to(c, VSRV_TX_OVERDUE);
		return true;
	}
	if (c->busy && c->busy->probe_at && now >= c->busy->probe_at) {
		c->busy->probe_at = now + VSRV_PROBE_NS;
		if (peer_reset(c)) {
			VSRV_INC(srv, client_resets);
			vsrv__conn_abort(c, "reset by peer (seen while not reading)");
			return true;
		}
	}

	if (sd && now >= sd && !send_progressed(c, now)) {
		VSRV_INC(srv, timeouts_send);
		vsrv__conn_abort(c, "send timeout");
		return true;
	}
	if (!rd || now < rd)
		return false;
	if (c->end == VSRV_END_LINGER) {
		vsrv__conn_linger_cut(c);
		return true;
	}
	switch (c->phase) {
	case VHTTP_PHASE_HEAD:
	case VHTTP_PHASE_BODY:
		if (c->phase == VHTTP_PHASE_HEAD)
			VSRV_INC(srv, timeouts_header);
		else
			VSRV_INC(srv, timeouts_body);
		/* The client may still be sending: answer, then linger. */
		vsrv__conn_fail(c, 408, now);
		break;
	default:
		VSRV_INC(srv, timeouts_idle);
		vsrv__rx_to(c, VSRV_RX_DONE);
		break;
	}
	return true;
}

/* Arm the timer for the earliest deadline. Lazily: an earlier armed time
 * is kept (its wakeup finds nothing due and re-arms), so a busy keep-alive
 * connection does not touch the timer heap on every request. */
void vsrv__conn_arm(struct vsrv_conn *c, int64_t now)
{
	int64_t want = dl_min(dl_min(read_deadline(c), send_deadline(c)), quiet_deadline(c));

	if (c->rx == VSRV_RX_BUDGET_WAIT)
		want = dl_min(want, now + VSRV_BUDGET_RECHECK_NS);
	if (c->busy)
		want = dl_min(want, c->busy->probe_at);

	if (!want)
		return;
	if (c->tmr_at && c->tmr_at > now && c->tmr_at <= want)
		return;
	if (vio_timer_arm(&c->tmr, want) == 0)
		c->tmr_at = want;
}
