/* SPDX-License-Identifier: MIT */
/*
 * tests/helpers/io_harness.h: what the I/O tests and bench/echo_bench share:
 * bringing up a runtime with the I/O driver on the backend of this run
 * (uring / libev / auto from VOLTD_IO_BACKEND), heap-allocated tasks around
 * a poll function, a TCP echo server built from the driver's operations, a
 * verifying multi-connection client (send, half-close, read the echo to
 * EOF) and a verifying closed-loop client (message, echo, next message)
 * that can record round-trip latencies.
 *
 * Threading: ioh_start / ioh_stop and the client from plain threads; task
 * functions run on workers. Counters are atomics read by the test thread.
 */
#ifndef VOLTD_TESTS_IO_HARNESS_H
#define VOLTD_TESTS_IO_HARNESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/histogram.h"
#include "io/io.h"
#include "rt/rt.h"

struct ioh {
	struct vio *io;
	struct vrt *rt;
	unsigned workers;
};

/* The backend this run tests: $VOLTD_IO_BACKEND (auto|uring|libev, set by
 * tests/helpers/io-backend), else auto. */
enum vio_backend ioh_backend(void);
const char *ioh_backend_label(enum vio_backend b);
/* False when VOLTD_IO_FIXED_FILES=off: ioh_start turns io.fixed_files off
 * whatever the test asked (to run the I/O tests without registered files). */
bool ioh_fixed_files_allowed(void);

/* Start runtime + driver. `vcfg` / `rcfg` may be NULL (defaults; backend
 * from ioh_backend()). Exits 77 when the uring backend was asked for and
 * io_uring is unavailable, 99 on other set-up errors. If
 * $VOLTD_IO_EXPECT_BACKEND is set, exits 1 unless the chosen backend has
 * that name. */
void ioh_start(struct ioh *h, unsigned workers, const struct vio_config *vcfg,
	       const struct vrt_config *rcfg);
/* Drain-shutdown the runtime, free both. */
void ioh_stop(struct ioh *h);

/* Fail (exit 1, after printing `what`) if the test is not done in
 * `seconds`. 0 disarms. */
void ioh_watchdog(unsigned seconds, const char *what);

/* Stress scale from $VOLTD_STRESS_SCALE (default 1); sizes are divided by
 * 4 under ThreadSanitizer. */
unsigned ioh_scale(void);
bool ioh_under_tsan(void);

/* A heap task around a poll function. `fini` (may be NULL) runs in drop
 * before the memory is freed. */
struct ioh_task {
	struct vrt_task t;
	enum vrt_poll (*fn)(struct ioh_task *self);
	void (*fini)(struct ioh_task *self);
};
/* Allocate `size` (>= sizeof(struct ioh_task)) zeroed bytes as a task. */
void *ioh_task_new(size_t size, enum vrt_poll (*fn)(struct ioh_task *),
		   void (*fini)(struct ioh_task *));
/* Spawn; keeps the handle reference when `keep`, else drops it. */
void ioh_spawn(struct ioh *h, struct ioh_task *t, bool keep);
/* Tasks dropped so far (all ioh tasks). */
uint64_t ioh_drops(void);

/*
 * Move the calling task to another worker (a test that needs an operation
 * submitted on one worker's ring and continued on another's). A task that
 * yields with nothing else waiting runs on at once on its own worker
 * (doc/runtime.md), so yielding does not move it: the first call
 * returns VRT_PENDING (return it) and spawns a task that keeps this worker
 * busy in one poll while a plain thread wakes the caller through the
 * injection queue, until the caller runs elsewhere (or 10 s). A later call
 * returns VRT_PENDING while still on the first worker and VRT_READY (go on)
 * on another. `l` lives in the caller's struct, zeroed.
 */
struct ioh_leave {
	int state;              /* caller's: 0 before the first call */
	int home;               /* caller's: the worker it leaves */
	_Atomic int moved;      /* set by the caller on another worker */
};
enum vrt_poll ioh_leave_worker(struct ioh_task *self, struct ioh_leave *l);

/* TCP helpers (blocking). */
int ioh_listen_local(int *port);
int ioh_connect(int port);
/* A connected TCP pair over loopback: a[0] accepted (non-blocking), a[1]
 * client (blocking). 0 or -errno. */
int ioh_tcp_pair(int a[2]);

/* ------------------------------------------------------ echo server */

struct ioh_echo {
	struct ioh *h;
	struct vio_listener *l;
	int port;
	unsigned spin_ns;          /* busy work per message (forces stealing) */
	bool use_sendv;            /* echo every other message as header+body iovecs */
	size_t bufsize;            /* receive buffer per connection; 0: 32 KiB */
	int64_t idle_deadline_ns;  /* > 0: a deadline this far ahead, re-armed before
				    * every receive (a live timer per connection) */
	/* per connection, never per message (the benchmark uses this server) */
	_Atomic uint64_t accepted, closed, resets, errors;
	_Atomic int64_t active;
	/* acceptor tasks not ended: after the listener's close they still
	 * hand out what it accepted before (ioh_echo_stop waits for them) */
	_Atomic int64_t acceptors;
	/* NULL, or 65536 records indexed by the client's port: what the
	 * server saw of each connection (a failed client names its port). */
	struct ioh_echo_trace *trace;
};

struct ioh_echo_trace {
	uint64_t in, out;   /* bytes received, bytes sent */
	uint32_t recvs;     /* receives that returned data */
	int32_t end;        /* 0: EOF, else the -errno that ended it */
	uint32_t workers;   /* bit per worker the connection's task ran on */
	bool used;
};
/* Prints the server's record of the connection from client port `port`. */
void ioh_echo_trace_print(const struct ioh_echo *e, int port);

/* Listener on 127.0.0.1 (ephemeral port) + one acceptor task per queue. */
int ioh_echo_start(struct ioh *h, struct ioh_echo *e);
/* The same on an existing listener (e.g. vio_listener_adopt). */
void ioh_echo_start_on(struct ioh *h, struct ioh_echo *e, struct vio_listener *l);
/* Bytes of one connection task of this server with a `bufsize` buffer. */
size_t ioh_echo_conn_size(size_t bufsize);
/* Close the listener, then wait (up to timeout_ms) for every connection
 * task to end. Returns 0, or -ETIMEDOUT with connections still active. */
int ioh_echo_stop(struct ioh_echo *e, unsigned timeout_ms);

/* ------------------------------------------------------ echo client */

struct ioh_client_opts {
	int port;
	unsigned conns;            /* connections open at once */
	unsigned rounds;           /* connections opened one after another, per slot */
	size_t max_payload;        /* payload sizes 1..max, skewed small */
	unsigned big_permille;     /* share of payloads of max_payload exactly */
	unsigned reset_permille;   /* share of connections reset mid-transfer */
	uint64_t seed;
};

struct ioh_client_result {
	uint64_t conns_done, resets, bytes_sent, bytes_echoed;
	uint64_t mismatches, errors;
	char first_error[160];
	int first_port;            /* local port of the first failed connection */
};

/* Drive the connections with poll(2): every connection sends its payload,
 * half-closes, reads the echo back to EOF and checks every byte. */
void ioh_client_run(const struct ioh_client_opts *o, struct ioh_client_result *res);

/* Run `threads` clients in parallel (seed + i each) and sum the results. */
void ioh_clients(unsigned threads, const struct ioh_client_opts *o,
		 struct ioh_client_result *sum);

/* ------------------------------------------------ closed-loop client */

/* Each connection sends a message of `size` bytes, reads its whole echo
 * back (checking every byte), and sends the next, until it has done
 * `messages` or the clock passes `until_ns`. One thread, epoll. */
struct ioh_pingpong_opts {
	int port;
	unsigned conns;            /* connections of this client */
	size_t size;               /* bytes per message, >= 1 */
	uint64_t messages;         /* per connection; 0: until until_ns */
	int64_t until_ns;          /* vb_now_ns() deadline; 0: none */
	_Atomic int *go;           /* NULL, or connect first, then wait for *go != 0 */
	struct vb_hist *latency;   /* NULL, or each round trip in ns (this thread only) */
	uint64_t seed;             /* message bytes */
};

struct ioh_pingpong_result {
	uint64_t messages, bytes, mismatches, errors;
	unsigned conns_open;       /* connections that could be opened */
	char first_error[160];
};

void ioh_pingpong_run(const struct ioh_pingpong_opts *o, struct ioh_pingpong_result *res);

#endif
