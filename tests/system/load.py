#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The system test's load client (runs inside the container, against its
own loopback): THREADS threads send GET PATH to 127.0.0.1:PORT, a fresh
connection per request (or keep-alive with --keepalive), until DURATION
seconds have passed, REQUESTS requests were sent or the file --stop-file
exists, whichever is first.
Every outcome is counted by kind: http_<status>, refused, reset, eof,
timeout, oserror_<errno>. The last line is the summary the cases read:
  ok=N refused=N errors=N requests=N
(ok = 2xx; errors = everything that is neither 2xx nor refused)."""
import argparse
import collections
import os
import socket
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=4)
ap.add_argument("--duration", type=float, default=5.0)
ap.add_argument("--requests", type=int, default=200000)
ap.add_argument("--path", default="/healthz")
ap.add_argument("--port", type=int, default=8080)
ap.add_argument("--keepalive", action="store_true")
ap.add_argument("--stop-file", default="")
a = ap.parse_args()

REQ = ("GET %s HTTP/1.1\r\nHost: systest\r\n%s\r\n"
       % (a.path, "" if a.keepalive else "Connection: close\r\n")).encode()
lock = threading.Lock()
counts = collections.Counter()
first_errors = []
sent = [0]
max_latency = [0.0]
t0 = time.monotonic()


def read_response(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise EOFError("eof before the headers")
        buf += d
    head, _, body = buf.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length, close = 0, False
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        k = k.strip().lower()
        if k == b"content-length":
            length = int(v)
        elif k == b"connection" and v.strip().lower() == b"close":
            close = True
    while len(body) < length:
        d = s.recv(65536)
        if not d:
            raise EOFError("eof in the body")
        body += d
    return status, close


def worker():
    s = None
    while time.monotonic() < t0 + a.duration:
        if a.stop_file and os.path.exists(a.stop_file):
            break
        with lock:
            if sent[0] >= a.requests:
                break
            sent[0] += 1
        start = time.monotonic()
        try:
            if s is None:
                s = socket.create_connection(("127.0.0.1", a.port), timeout=15)
            s.sendall(REQ)
            status, close = read_response(s)
            kind = "http_%d" % status
            if not a.keepalive or close:
                s.close()
                s = None
        except ConnectionRefusedError:
            kind = "refused"
        except ConnectionResetError:
            kind = "reset"
        except BrokenPipeError:
            kind = "broken_pipe"
        except EOFError as e:
            kind = "eof (%s)" % e
        except socket.timeout:
            kind = "timeout"
        except OSError as e:
            kind = "oserror_%s" % e.errno
        if not kind.startswith("http_2"):
            if s is not None:
                s.close()
                s = None
            if kind == "refused":
                time.sleep(0.01)  # bounded: do not spin on a closed port
        with lock:
            counts[kind] += 1
            max_latency[0] = max(max_latency[0], time.monotonic() - start)
            if not kind.startswith("http_2") and len(first_errors) < 10:
                first_errors.append("%.3f s %s" % (start - t0, kind))
    if s is not None:
        s.close()


threads = [threading.Thread(target=worker) for _ in range(a.threads)]
for t in threads:
    t.start()
for t in threads:
    t.join()
ok = sum(n for k, n in counts.items() if k.startswith("http_2"))
refused = counts["refused"]
print("%s, %d threads, %.1f s: %s" % ("keep-alive" if a.keepalive else "a connection per request",
                                      a.threads, time.monotonic() - t0, dict(sorted(counts.items()))))
print("max latency %.3f s; first errors: %s" % (max_latency[0], first_errors or "none"))
print("ok=%d refused=%d errors=%d requests=%d" % (ok, refused, sum(counts.values()) - ok - refused,
                                                  sum(counts.values())))
