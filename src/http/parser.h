/* SPDX-License-Identifier: MIT */
/*
 * http/parser.h: the HTTP/1.x request parser of one connection: bytes in,
 * requests out. It wraps llhttp (strict build, every lenient flag off) and
 * adds what a server needs on top of it: the limits (431 / 414 / 413), the
 * framing rules llhttp lets through (obs-fold, transfer codings, Expect,
 * Host), the keep-alive decision, and the body gathered into one buffer from
 * Content-Length or chunked framing (trailers parsed, bounded and dropped).
 * No sockets, clocks, logging or global state.
 *
 * Threading: a parser belongs to one connection and is used by one thread at
 * a time (it may move between threads between calls). A request it hands out
 * is an independent heap object owned by the caller, usable on any thread.
 *
 * Use (the connection task):
 *
 *     vhttp_parser_new(&limits, &p);
 *     for (;;) {
 *         buf = vhttp_parser_rbuf(p, &room);        // read straight into it,
 *         n = recv(fd, buf, room); vhttp_parser_commit(p, n);
 *         // (or vhttp_parser_feed(p, data, len), which copies)
 *         while ((ev = vhttp_parser_next(p, &req)) != VHTTP_EV_MORE) {
 *             VHTTP_EV_REQUEST:  a complete request, now yours
 *             VHTTP_EV_CONTINUE: head of a request with "Expect: 100-continue"
 *                                (req borrowed): send VHTTP_RESPONSE_100, or a
 *                                final answer and close; call next() again
 *             VHTTP_EV_ERROR:    answer vhttp_parser_error()'s status, close
 *             VHTTP_EV_CLOSED:   the last request said close: no more
 *                                requests; answer those in flight, close
 *         }
 *     }
 *
 * Pipelining: next() parses one request at a time and stops after it; bytes
 * of the following requests stay buffered until the next call. A caller that
 * has enough requests in flight simply stops calling next() and stops reading
 * (rbuf() then offers less room, eventually none): back pressure.
 * Every ERROR means "send the status, then close": the parser never resumes
 * after an error (413 is decided from Content-Length before the body, so the
 * stream cannot continue). Errors are sticky. Closing right after writing
 * while the client still sends (a refused body) makes the kernel answer with
 * a reset that can destroy the response in flight: shut down the write side
 * and drain reads briefly before close.
 *
 * HTTP/1.1 requests must carry exactly one Host (else 400, RFC 9112 3.2);
 * CONNECT is 501; an Upgrade offer is ignored (the answer stays HTTP/1.1).
 */
#ifndef VOLTD_HTTP_PARSER_H
#define VOLTD_HTTP_PARSER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits; the server fills them from [server] in the config. */
struct vhttp_limits {
	/* Request line plus header fields, in bytes on the wire, CRLFs
	 * included (also bounds the chunked trailer section and the total of
	 * chunk extensions). Over it: 431, or 414 while still in the
	 * request-target. */
	size_t max_header_bytes;
	/* Body bytes after decoding. Over it: 413, decided from Content-Length
	 * before any body byte is read, or as soon as a chunk would cross it. */
	size_t max_body_bytes;
	/* Input buffer size; 0 picks VHTTP_DEFAULT_READ_BUF. */
	size_t read_buf_bytes;
	/* Where a request's memory comes from when the parser keeps none that
	 * fits (NULL: malloc): size bytes (VHTTP_REQUEST_MIN for most), from
	 * malloc or a pool of malloc'd blocks (the request is freed with
	 * free()); NULL when there is none. Called on the parser's thread. */
	void *(*req_alloc)(void *ctx, size_t size);
	void *req_ctx;
};

#define VHTTP_DEFAULT_MAX_HEADER_BYTES 8192
#define VHTTP_DEFAULT_MAX_BODY_BYTES (1024 * 1024)
#define VHTTP_DEFAULT_READ_BUF 16384

void vhttp_limits_default(struct vhttp_limits *l);

enum vhttp_method {
	VHTTP_M_OTHER = 0, /* a method llhttp knows that is none of these */
	VHTTP_M_GET,
	VHTTP_M_HEAD,
	VHTTP_M_POST,
	VHTTP_M_PUT,
	VHTTP_M_DELETE,
	VHTTP_M_OPTIONS,
	VHTTP_M_PATCH,
	VHTTP_M_TRACE,
};

/*
 * One request. All fields public and read-only but mem_cap (private);
 * strings point inside the request's own allocation and are NUL-terminated
 * (the lengths exclude the NUL). The request outlives the parser that
 * produced it.
 */
struct vhttp_request {
	enum vhttp_method method;
	const char *method_name;     /* "GET", ... (static storage) */
	uint8_t version_minor;       /* HTTP/1.<minor>: 0 or 1 */
	/* false: the connection must close after this response (HTTP/1.0
	 * without keep-alive, Connection: close, or HTTP/1.0 with
	 * Transfer-Encoding). After such a request next() says CLOSED. */
	bool keep_alive;
	bool expect_continue;        /* "Expect: 100-continue" (HTTP/1.1 only) */
	bool chunked;                /* body framed with chunked coding */
	bool has_content_length;
	uint64_t content_length;     /* declared Content-Length, else 0 */
	/* request-target as sent: "/p?q", "http://host/p?q" or "*" */
	const char *target;
	size_t target_len;
	/* its path ("/" for an absolute-form target with none; "*") */
	const char *path;
	size_t path_len;
	/* its query, after '?' and before any '#': "" when there is none */
	const char *query;
	size_t query_len;
	/* Host header value ("" when absent: only HTTP/1.0 may omit it) */
	const char *host;
	size_t host_len;
	/* The head's header fields, in arrival order, one line each:
	 * name ':' value '\n', the name as sent, the value without its
	 * leading and trailing blanks (a tab inside it is a space, see
	 * parser.c); the trailer section's fields are not kept. n_fields
	 * lines, fields_len bytes ("" when none). No extra allocation: they
	 * are part of the request's own (at most max_header_bytes). */
	const char *fields;
	size_t fields_len;
	uint32_t n_fields;
	/* Decoded body (NULL when empty). Owned by the request, malloc'd:
	 * vhttp_request_take_body() moves it out. Incomplete while the
	 * request is only borrowed (CONTINUE event). */
	uint8_t *body;
	size_t body_len;
	size_t mem_cap;              /* private: bytes of the allocation */
};

/* A request's allocation is at least this large, so that the memory of
 * one request given back to its parser fits the next. */
#define VHTTP_REQUEST_MIN 512

/* Free a request the caller owns (NULL is fine). */
void vhttp_request_free(struct vhttp_request *r);
/* Bytes of the request's allocation (VHTTP_REQUEST_MIN for most): what a
 * pool of request memory keeps. */
size_t vhttp_request_cap(const struct vhttp_request *r);
/* Move the body out: the caller then frees it with free(). */
uint8_t *vhttp_request_take_body(struct vhttp_request *r, size_t *len);

struct vhttp_parser;

/* Done with r (NULL is fine): its body is freed and its memory kept by p
 * for p's next request (a parser keeps one; p NULL: as vhttp_request_free).
 * p need not be the parser r came from. */
void vhttp_request_release(struct vhttp_parser *p, struct vhttp_request *r);
/* 0, -EINVAL (max_header_bytes is 0), -ENOMEM. max_body_bytes 0 means
 * no request may carry a body (413). */
int vhttp_parser_new(const struct vhttp_limits *lim, struct vhttp_parser **out);
/* Frees the parser, its buffer and any request it has not handed out. */
void vhttp_parser_free(struct vhttp_parser *p);
/* Back to the state of a new parser (same limits), keeping its buffers:
 * for a cache of parsers that connections take when bytes arrive and give
 * back when idle. Drops what is buffered and any request not handed out. */
void vhttp_parser_reset(struct vhttp_parser *p);

/* Room to read into: returns the start and sets *room (0 when the buffer is
 * full of unparsed bytes: call next() first). */
void *vhttp_parser_rbuf(struct vhttp_parser *p, size_t *room);
/* n bytes were written at vhttp_parser_rbuf()'s pointer (n <= room). */
void vhttp_parser_commit(struct vhttp_parser *p, size_t n);
/* Copy bytes in; returns how many were taken (fewer than len when the
 * buffer fills: call next() and feed the rest). */
size_t vhttp_parser_feed(struct vhttp_parser *p, const void *data, size_t len);
/* Unparsed bytes held (pipelined requests waiting for next()). */
size_t vhttp_parser_buffered(const struct vhttp_parser *p);
/* Bytes the body of the request being received needs (0 when none): the
 * larger of its declared Content-Length and what is allocated for it;
 * what a server counts against its memory budget. */
size_t vhttp_parser_body_held(const struct vhttp_parser *p);

enum vhttp_event {
	VHTTP_EV_MORE = 0,  /* every buffered byte is parsed: read more */
	VHTTP_EV_REQUEST,   /* *req: a complete request; the caller owns it */
	VHTTP_EV_CONTINUE,  /* *req: its head (borrowed); send 100 Continue */
	VHTTP_EV_ERROR,     /* answer vhttp_parser_error(), then close */
	VHTTP_EV_CLOSED,    /* no more requests on this connection */
};

/* Parse buffered bytes up to the next event. *req is set for REQUEST and
 * CONTINUE, NULL otherwise. Out of memory is an ERROR with status 503. */
enum vhttp_event vhttp_parser_next(struct vhttp_parser *p, struct vhttp_request **req);

/* After VHTTP_EV_ERROR: the status to answer (400, 413, 414, 417, 431,
 * 501, 503, 505) and, if reason is not NULL, a static text for logs. */
int vhttp_parser_error(const struct vhttp_parser *p, const char **reason);

/* Where the connection stands, for its timers: IDLE between requests with
 * nothing buffered (keep-alive timeout), HEAD while a head is arriving
 * (header timeout, 408), BODY while a body is arriving (body timeout, 408),
 * DONE after CLOSED or ERROR. */
enum vhttp_phase {
	VHTTP_PHASE_IDLE = 0,
	VHTTP_PHASE_HEAD,
	VHTTP_PHASE_BODY,
	VHTTP_PHASE_DONE,
};
enum vhttp_phase vhttp_parser_phase(const struct vhttp_parser *p);

#endif
