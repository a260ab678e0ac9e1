# SPDX-License-Identifier: MIT
"""Client faults (issue 17): clients that reset mid-request and mid-reply,
half-close after their requests, or cut a pipeline at a random byte, next
to clients whose every byte is checked. Each case runs on both I/O backends
with its own voltd on loopback, prints its seed (VOLTD_TEST_SEED=N repeats
it), is bounded in count and time, and closes the books (faultutil.Books:
requests == responses + dropped, no descriptor leaked, every provided
buffer back, RSS near its baseline)."""
import random
import select
import socket
import threading
import time

import pytest

from faultutil import (MIB, Books, Clients, Reader, backend, check_reply, connect, ctl,  # noqa: F401
                       fault_daemon, random_job, req_bytes, reset, seed, stop)

FAULTS = 40  # faulty connections per case


def send_some(s, data, seconds=5):
    """Send data without blocking for more than `seconds` (the server may
    stop reading: back pressure); returns how much went out."""
    s.setblocking(False)
    sent, deadline = 0, time.monotonic() + seconds
    try:
        while sent < len(data) and time.monotonic() < deadline:
            if not select.select([], [s], [], 0.1)[1]:
                continue
            try:
                sent += s.send(data[sent:sent + 262144])
            except BlockingIOError:
                pass
    except OSError:
        pass
    s.settimeout(30)
    return sent


def send_then(s, data, shut_wr):
    """Send data from a thread (the replies are read meanwhile), then
    half-close if asked. Join it before closing s."""
    def run():
        try:
            s.sendall(data)
            if shut_wr:
                s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def start_case(fault_daemon, args=()):
    """A voltd, its books, and 2 good clients (jobs up to 1 MiB, every byte
    checked) running until end_case()."""
    sd = seed()
    print("seed %d" % sd)
    d = fault_daemon(args)
    books = Books(d)
    good = Clients(d.port, sd, threads=2, max_size=MIB, loop=True, limit_s=60).start()
    return random.Random(sd), d, books, good


def end_case(d, books, good, errors, figures):
    good.stop()
    print("%s; good clients: %d jobs, %d MiB" % (figures, good.ok, good.nbytes >> 20))
    assert not errors, errors[:5]
    assert not good.errors, good.errors[:5]
    assert good.ok > 0
    books.check()
    stop(d)


def check_replies(rd, jobs, where, was_reset):
    """The replies to jobs, read off rd in order, each whole; returns how
    many, or the error (a string)."""
    for k, (kind, target, body) in enumerate(jobs):
        try:
            err = check_reply(kind, body, rd.response())
        except EOFError as e:
            err = "no reply: %s" % e
        if err:
            return "%s, request %d of %d (%s): %s%s" % (where, k + 1, len(jobs), target, err,
                                                       " (reset)" if was_reset else "")
    return len(jobs)


# The echo failures of issue 17 came with the receive-buffer ring running
# dry (recv_enobufs, then plain receives): "few" gives each worker 16
# buffers of 512 bytes, so that path runs all the time on io_uring.
RINGS = {"default": (), "few": ("-s", "io.recv_buffers=16", "-s", "io.recv_buffer_size=512")}


@pytest.mark.parametrize("ring", sorted(RINGS))
def test_resets_mid_request_and_mid_reply(fault_daemon, ring):
    """Connections reset (SO_LINGER 0) at a random byte of their request or
    after a random part of their reply (bodies up to 4 MiB), while other
    clients' jobs all come back whole; with the default receive buffers and
    with few (io_uring: multishot receives run out, plain receives take
    over)."""
    rng, d, books, good = start_case(fault_daemon, RINGS[ring])
    modes = {"request": 0, "reply": 0}
    for _ in range(FAULTS):
        _, target, body = random_job(rng)
        data = req_bytes("POST", target, body)
        s = connect(d.port, timeout=30)
        if rng.random() < 0.5:
            modes["request"] += 1
            send_some(s, data[:rng.randint(1, len(data) - 1)])
            time.sleep(rng.choice((0, 0, 0.002)))
        else:
            modes["reply"] += 1
            t = send_then(s, data, False)
            rd = Reader(s)
            try:
                n = int(rd.response(head_only=True).header("content-length"))
                want = rng.randint(0, max(0, n - 1))  # never the whole reply
                while len(rd.buf) < want:
                    rd._fill()
            except (OSError, EOFError):
                pass
            t.join(60)
        reset(s)
    st = ctl(d, "stats io")["io"]["workers"]
    enobufs, plain = sum(w["recv_enobufs"] for w in st), sum(w["recv_plain"] for w in st)
    end_case(d, books, good, [], "resets (%s buffers): %s; recv_enobufs %d, recv_plain %d"
             % (ring, modes, enobufs, plain))
    if ring == "few" and d.backend == "uring":
        assert enobufs > 0, "the receive buffers never ran out: the case did not test the fallback"


def read_all(s, timeout=60):
    """Everything until the server closes."""
    s.settimeout(timeout)
    out = bytearray()
    while True:
        try:
            chunk = s.recv(1 << 20)
        except ConnectionResetError:
            return bytes(out), True
        if not chunk:
            return bytes(out), False
        out += chunk


class BufReader(Reader):
    """httputil.Reader over bytes already read."""

    def __init__(self, data):
        super().__init__(None)
        self.buf = data

    def _fill(self):
        raise EOFError("reply ends; %d bytes unread: %r" % (len(self.buf), self.buf[:200]))


def pipeline(rng, n, max_size):
    jobs = [random_job(rng, max_size) for _ in range(n)]
    reqs = [req_bytes("POST", target, body) for _, target, body in jobs]
    return jobs, reqs


def test_half_close_after_requests(fault_daemon):
    """1-4 pipelined jobs (bodies up to 2 MiB), then shutdown(SHUT_WR): every
    reply comes back whole, in order, then the server closes."""
    rng, d, books, good = start_case(fault_daemon)
    errors, replies = [], 0
    for i in range(FAULTS):
        jobs, reqs = pipeline(rng, rng.randint(1, 4), 2 * MIB)
        s = connect(d.port, timeout=60)
        t = send_then(s, b"".join(reqs), True)
        out, was_reset = read_all(s)
        t.join(60)
        s.close()
        rd = BufReader(out)
        n = check_replies(rd, jobs, "connection %d" % i, was_reset)
        if isinstance(n, str):
            errors.append(n)
            continue
        replies += n
        if rd.buf:
            errors.append("connection %d: %d bytes after the last reply: %r" % (i, len(rd.buf), rd.buf[:100]))
    end_case(d, books, good, errors, "half-close: %d replies checked" % replies)


def test_pipelines_cut_at_random_bytes(fault_daemon):
    """2-6 pipelined jobs (bodies up to 256 KiB) cut at a random byte, then
    half-closed or reset: after a half-close the requests sent whole are all
    answered, whole and in order; then the server closes (at most a 4xx for
    the cut request first)."""
    rng, d, books, good = start_case(fault_daemon)
    errors, replies, resets = [], 0, 0
    for i in range(FAULTS):
        jobs, reqs = pipeline(rng, rng.randint(2, 6), 256 * 1024)
        data = b"".join(reqs)
        cut = rng.randint(1, len(data) - 1)
        whole = 0
        while sum(len(r) for r in reqs[:whole + 1]) <= cut:
            whole += 1
        s = connect(d.port, timeout=60)
        if rng.random() < 0.3:
            resets += 1
            send_some(s, data[:cut])
            reset(s)
            continue
        t = send_then(s, data[:cut], True)
        out, was_reset = read_all(s)
        t.join(60)
        s.close()
        rd = BufReader(out)
        n = check_replies(rd, jobs[:whole], "connection %d (cut at byte %d of %d)" % (i, cut, len(data)), was_reset)
        if isinstance(n, str):
            errors.append(n)
            continue
        replies += n
        if rd.buf:
            try:
                r = rd.response()
                if not 400 <= r.status < 500 or rd.buf:
                    errors.append("connection %d: after the whole requests' replies: %r + %r" % (i, r, rd.buf[:100]))
            except EOFError as e:
                errors.append("connection %d: after the whole requests' replies: %s" % (i, e))
    end_case(d, books, good, errors, "cut pipelines: %d replies checked, %d reset" % (replies, resets))
