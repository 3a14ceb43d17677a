"""skyprofd's HTTP listener under hostile clients (issue 15, findings 2, 5, 10, 11), over raw
loopback sockets: strict framing (two Content-Length headers, `+N`, Transfer-Encoding other than
chunked, obsolete folding, bare LF, a body on GET: refused and closed), HEAD answers without a
body, the API token checked before a body is read, a deadline for a request's headers and body
together, a budget for bodies held at once, connection caps (per listener and per peer) and
accepting paused when the process runs out of fds; chunked request bodies (raw, from curl, from
Python's http.client and requests with a generator body; malformed chunking refused, the same
size, budget and deadline limits as Content-Length bodies); pipelined requests answered in order
when a later one is refused. Small limits as flags; every wait is on a condition with a
deadline."""
import http.client
import json
import shutil
import subprocess
import os
import resource
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import rawsock  # noqa: E402
from rawsock import read_all, wait_for  # noqa: E402
from skp_harness import Results, tempdir  # noqa: E402
from skyprofd_util import Skyprofd  # noqa: E402

R = Results()


def connect(S, source="127.0.0.1", timeout=10.0):
    return rawsock.connect(S.http_port, source, timeout)


BAD = [
    ("two different Content-Length", 400,
     b"POST /api/v1/profile/tasks HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n"
     b"Content-Length: 40\r\n\r\n{}"),
    ("two equal Content-Length", 400,
     b"POST /api/v1/profile/tasks HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n"
     b"Content-Length: 2\r\n\r\n{}"),
    ("Content-Length +N", 400,
     b"POST /api/v1/profile/tasks HTTP/1.1\r\nHost: a\r\nContent-Length: +2\r\n\r\n{}"),
    ("Content-Length list", 400,
     b"POST /api/v1/profile/tasks HTTP/1.1\r\nHost: a\r\nContent-Length: 2, 2\r\n\r\n{}"),
    ("space before colon", 400,
     b"POST /api/v1/profile/tasks HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n"
     b"2\r\n{}\r\n0\r\n\r\n"),
    ("Transfer-Encoding gzip", 501,
     b"POST /api/v1/profile/tasks HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n"
     b"2\r\n{}\r\n0\r\n\r\n"),
    ("Transfer-Encoding and Content-Length", 400,
     b"POST /api/v1/profile/tasks HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n{}"),
    ("obsolete folding", 400,
     b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n"),
    ("bare LF", 400, b"GET /healthz HTTP/1.1\nHost: a\n\n"),
    ("body on GET", 400,
     b"GET /healthz HTTP/1.1\r\nHost: a\r\nContent-Length: 29\r\n\r\n"
     b"GET /metrics HTTP/1.1\r\n\r\n\r\n"),
    ("HTTP/2.0 line", 505, b"GET /healthz HTTP/1.2\r\nHost: a\r\n\r\n"),
]


def t_strict_framing(d):
    S = Skyprofd(d)
    try:
        for name, want, raw in BAD:
            s = connect(S)
            s.sendall(raw)
            data, closed = read_all(s)
            s.close()
            assert rawsock.http_status(data) == want, (name, data[:200])
            assert closed, name + ": connection left open"
            assert data.count(b"HTTP/1.1 ") == 1, (name, data)
        assert S.metric("skyprof_http_framing_errors_total") == len(BAD)
        # a well-formed keep-alive pair still works
        s = connect(S)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\nGET /healthz HTTP/1.1\r\nHost: a\r\n"
                  b"Connection: close\r\n\r\n")
        data, closed = read_all(s)
        s.close()
        assert data.count(b"HTTP/1.1 200") == 2 and closed, data
    finally:
        S.stop()


def t_head_without_body(d):
    S = Skyprofd(d)
    try:
        s = connect(S)
        s.sendall(b"HEAD /healthz HTTP/1.1\r\nHost: a\r\n\r\nGET /healthz HTTP/1.1\r\nHost: a\r\n"
                  b"Connection: close\r\n\r\n")
        data, _ = read_all(s)
        s.close()
        head, rest = data.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 200"), data
        hdrs = {k.strip().lower(): v.strip() for k, v in
                (line.split(b":", 1) for line in head.split(b"\r\n")[1:])}
        assert rest.startswith(b"HTTP/1.1 200"), "HEAD answer carried a body: %r" % rest[:80]
        ghead, gbody = rest.split(b"\r\n\r\n", 1)
        assert int(hdrs[b"content-length"]) == len(gbody), (hdrs, gbody)
    finally:
        S.stop()


def t_token_before_body(d):
    S = Skyprofd(d, "--api-token", "sekret")
    try:
        s = connect(S)
        s.sendall(b"POST /api/v1/profile/tasks HTTP/1.1\r\nHost: a\r\n"
                  b"Authorization: Bearer wrong\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000000\r\n\r\n")
        data, closed = read_all(s, 10)  # no body byte sent: the answer must come anyway
        s.close()
        assert rawsock.http_status(data) == 401, data
        assert closed
        assert S.metric("skyprof_http_early_unauthorized_total") == 1
        st, _, _ = S.http("GET", "/healthz")
        assert st == 200
    finally:
        S.stop()


def t_request_deadline(d):
    S = Skyprofd(d, "--http-request-timeout-ms", "600")
    try:
        s = connect(S)
        t0 = time.monotonic()
        got = b""
        # trickle a header byte every 100 ms: never idle, never complete
        for b in b"GET /healthz HTTP/1.1\r\nHost: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa":
            try:
                s.sendall(bytes([b]))
            except OSError:
                break
            s.settimeout(0.1)
            try:
                chunk = s.recv(4096)
                got += chunk
                if not chunk or got:
                    break
            except socket.timeout:
                pass
        data, _ = read_all(s, 5)
        got += data
        took = time.monotonic() - t0
        s.close()
        assert rawsock.http_status(got) == 408, got
        assert took < 5, took
        assert S.metric("skyprof_http_timeouts_total") == 1
    finally:
        S.stop()


def t_body_budget(d):
    S = Skyprofd(d, "--http-body-budget", "1000000")
    socks = []
    try:
        codes = []
        for _ in range(4):
            s = connect(S)
            s.sendall(b"POST /api/v1/profile/tasks HTTP/1.1\r\nHost: a\r\n"
                      b"Content-Type: application/json\r\nContent-Length: 400000\r\n\r\n" +
                      b" " * 1000)
            socks.append(s)
        wait_for(lambda: (S.metric("skyprof_http_budget_refused_total") or 0) >= 2, "refusals")
        for s in socks:
            data, _ = read_all(s, 0.3)
            codes.append(rawsock.http_status(data))
        assert codes.count(503) == 2 and codes.count(None) == 2, codes
        assert S.metric("skyprof_http_body_bytes") == 800000
        for s in socks:
            s.close()
        wait_for(lambda: S.metric("skyprof_http_body_bytes") == 0, "bodies released")
    finally:
        for s in socks:
            s.close()
        S.stop()


def t_connection_caps(d):
    S = Skyprofd(d, "--http-max-connections", "20", "--max-conns-per-peer", "10",
                 "--http-request-timeout-ms", "1500")
    socks = []
    try:
        refused = 0
        for _ in range(15):
            s = connect(S, "127.0.0.2")
            socks.append(s)
        for s in socks:
            data, closed = read_all(s, 0.2)
            if rawsock.http_status(data) == 503 and closed:
                refused += 1
        assert refused == 5, refused
        for _ in range(12):
            socks.append(connect(S, "127.0.0.3"))  # 10 + 10 open: the listener pauses
        wait_for(lambda: S.metric("skyprof_http_connections_open") is not None, "metrics", 20)
        # /healthz from another address is answered once the idle ones time out (1.5 s)
        t0 = time.monotonic()
        st, _, _ = S.http("GET", "/healthz", timeout=20)
        assert st == 200
        print("  /healthz answered after %.2f s with the listener full" % (time.monotonic() - t0))
        assert S.metric("skyprof_http_connections_refused_total") >= 5
        assert S.metric("skyprof_http_timeouts_total") >= 10
    finally:
        for s in socks:
            s.close()
        S.stop()


def t_out_of_fds(d):
    S = Skyprofd(d, "--max-conns-per-peer", "100000")
    socks = []
    try:
        n_open = len(os.listdir("/proc/%d/fd" % S.pid))
        soft, hard = resource.prlimit(S.pid, resource.RLIMIT_NOFILE)
        resource.prlimit(S.pid, resource.RLIMIT_NOFILE, (n_open + 20, hard))
        for _ in range(60):
            socks.append(connect(S, "127.0.0.4", timeout=2))
        wait_for(lambda: "http: accept failed" in S.output(), "a pause")
        c0, logged0 = rawsock.cpu_seconds(S.pid), S.output().count("accept failed")
        time.sleep(2.0)
        used = rawsock.cpu_seconds(S.pid) - c0
        logged = S.output().count("accept failed") - logged0
        print("  while out of fds: %.2f s CPU and %d log lines in 2 s" % (used, logged))
        assert used < 0.5, "the daemon spins: %.2f s CPU in 2 s" % used
        assert logged <= 6, logged
        for s in socks:
            s.close()
        socks = []
        resource.prlimit(S.pid, resource.RLIMIT_NOFILE, (soft, hard))
        st, _, _ = S.http("GET", "/healthz", timeout=20)
        assert st == 200
        assert S.metric("skyprof_http_accept_pauses_total") >= 1
    finally:
        for s in socks:
            s.close()
        S.stop()


def responses(data):
    """Splits the bytes of pipelined HTTP/1.1 answers: [(status, headers, body)]."""
    out = []
    while data.startswith(b"HTTP/1."):
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        hdrs = {k.strip().lower(): v.strip() for k, v in (l.split(b":", 1) for l in lines[1:])}
        n = int(hdrs.get(b"content-length", b"0"))
        out.append((int(lines[0].split()[1]), hdrs, rest[:n]))
        data = rest[n:]
    assert not data, "bytes after the answers: %r" % data[:200]
    return out


TASK = {"service": "svc-chunked", "endpointName": "/c", "duration": 5,
        "minDurationThreshold": 0, "dumpPeriod": 10, "maxSamplingCount": 5}


def chunked(body, sizes, ext=b"", trailer=b""):
    """`body` as chunks of the given sizes (the rest in one more chunk), the last chunk and an
    optional trailer section."""
    out, off = b"", 0
    for n in list(sizes) + [len(body)]:
        part = body[off:off + n]
        off += len(part)
        if part:
            out += b"%x%s\r\n%s\r\n" % (len(part), ext, part)
    return out + b"0\r\n" + trailer + b"\r\n"


def post_chunked_head(path=b"/api/v1/profile/tasks", extra=b""):
    return (b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n" + extra + b"\r\n")


def task_body(n):
    """A task for service svc-chunked-<n> (one running task per service)."""
    return json.dumps(dict(TASK, service="svc-chunked-%d" % n)).encode()


def task_count(S):
    st, doc = S.json("GET", "/api/v1/profile/tasks")
    assert st == 200, (st, doc)
    return sum(1 for t in doc if t["service"].startswith("svc-chunked-"))


def t_chunked_bodies(d):
    S = Skyprofd(d)
    try:
        made = 0
        # raw: small chunks with extensions and a trailer, then a pipelined GET on the same
        # connection (the chunked request's end is framed right)
        s = connect(S)
        s.sendall(post_chunked_head() + chunked(task_body(1), [1, 7, 20], ext=b";name=v;x",
                                                trailer=b"X-Sum: 7\r\n")
                  + b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        data, closed = read_all(s)
        s.close()
        got = responses(data)
        assert [r[0] for r in got] == [201, 200] and closed, got
        assert "id" in json.loads(got[0][2]), got[0]
        made += 1
        # http.client's own chunked encoder (a generator body)
        body = task_body(2)
        c = http.client.HTTPConnection("127.0.0.1", S.http_port, timeout=30)
        c.request("POST", "/api/v1/profile/tasks", body=(body[i:i + 5] for i in range(0, len(body), 5)),
                  headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
                  encode_chunked=True)
        r = c.getresponse()
        assert r.status == 201, (r.status, r.read())
        r.read()
        c.close()
        made += 1
        # requests with a generator body (it sends Transfer-Encoding: chunked)
        import requests
        body = task_body(3)
        r = requests.post("http://127.0.0.1:%d/api/v1/profile/tasks" % S.http_port,
                          data=(body[i:i + 9] for i in range(0, len(body), 9)),
                          headers={"Content-Type": "application/json"}, timeout=30)
        assert r.status_code == 201, (r.status_code, r.text)
        assert r.request.headers.get("Transfer-Encoding") == "chunked"
        made += 1
        # curl -H 'Transfer-Encoding: chunked'
        curl = shutil.which("curl")
        if curl:
            body = task_body(4)
            p = subprocess.run([curl, "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                                "-H", "Transfer-Encoding: chunked", "-H", "Content-Type: application/json",
                                "--data-binary", "@-", "http://127.0.0.1:%d/api/v1/profile/tasks" % S.http_port],
                               input=body, capture_output=True, timeout=60)
            assert p.stdout == b"201", (p.stdout, p.stderr)
            made += 1
        assert task_count(S) == made
        # a chunked body is still JSON-checked by the route: broken JSON gets the route's 400
        s = connect(S)
        s.sendall(post_chunked_head(extra=b"Connection: close\r\n") + chunked(b"{nope", [2]))
        data, _ = read_all(s)
        s.close()
        assert rawsock.http_status(data) == 400 and b"malformed JSON" in data, data
    finally:
        S.stop()


CHUNK_BAD = [
    ("hex prefix", 400, b"0x2\r\n{}\r\n0\r\n\r\n"),
    ("sign", 400, b"+2\r\n{}\r\n0\r\n\r\n"),
    ("blank after size", 400, b"2 \r\n{}\r\n0\r\n\r\n"),
    ("blank before size", 400, b" 2\r\n{}\r\n0\r\n\r\n"),
    ("not hex", 400, b"2g\r\n{}\r\n0\r\n\r\n"),
    ("17 digits", 400, b"00000000000000002\r\n{}\r\n0\r\n\r\n"),
    ("overflow", 413, b"ffffffffffffffff\r\n"),
    ("over the maximum body", 413, b"300000\r\n"),
    ("data without CRLF", 400, b"2\r\n{}XY0\r\n\r\n"),
    ("bare LF after data", 400, b"2\r\n{}\n0\r\n\r\n"),
    ("bare LF after size", 400, b"2\n{}\r\n0\r\n\r\n"),
    ("empty line before size", 400, b"\r\n2\r\n{}\r\n0\r\n\r\n"),
    ("control byte in extension", 400, b"2;a\x01\r\n{}\r\n0\r\n\r\n"),
    ("extension too long", 400, b"2;" + b"e" * 300 + b"\r\n{}\r\n0\r\n\r\n"),
    ("Content-Type trailer", 400, b"2\r\n{}\r\n0\r\nContent-Type: application/json\r\n\r\n"),
    ("Content-Length trailer", 400, b"2\r\n{}\r\n0\r\nContent-Length: 29\r\n\r\n"),
    ("folded trailer", 400, b"2\r\n{}\r\n0\r\nX-A: b\r\n c\r\n\r\n"),
]

TE_BAD = [
    ("two Transfer-Encoding", 400, b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"),
    ("Transfer-Encoding list", 501, b"Transfer-Encoding: gzip, chunked\r\n"),
    ("tab before chunked", 400, b"Transfer-Encoding:\tchunked\r\n"),
]


def t_chunked_malformed(d):
    S = Skyprofd(d)
    try:
        for name, want, tail in CHUNK_BAD:
            s = connect(S)
            s.sendall(post_chunked_head() + tail)
            data, closed = read_all(s)
            s.close()
            assert rawsock.http_status(data) == want, (name, data[:300])
            assert closed and data.count(b"HTTP/1.1 ") == 1, (name, data)
        for name, want, hdr in TE_BAD:
            s = connect(S)
            s.sendall(b"POST /api/v1/profile/tasks HTTP/1.1\r\nHost: a\r\n" + hdr + b"\r\n0\r\n\r\n")
            data, closed = read_all(s)
            s.close()
            assert rawsock.http_status(data) == want and closed, (name, data[:300])
        for name, raw in [
                ("HTTP/1.0", b"POST /api/v1/profile/tasks HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"
                             b"0\r\n\r\n"),
                ("on GET", b"GET /healthz HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")]:
            s = connect(S)
            s.sendall(raw)
            data, closed = read_all(s)
            s.close()
            assert rawsock.http_status(data) == 400 and closed, (name, data[:300])
        assert task_count(S) == 0
        assert S.metric("skyprof_http_framing_errors_total") == len(CHUNK_BAD) + len(TE_BAD) + 2
    finally:
        S.stop()


def t_chunked_limits(d):
    # the body budget counts a chunked body chunk by chunk; the deadline covers the whole body
    S = Skyprofd(d, "--http-body-budget", "100000", "--http-request-timeout-ms", "3000")
    try:
        s = connect(S)
        s.sendall(post_chunked_head() + b"10000\r\n" + b" " * 1000)  # 65,536 bytes announced
        wait_for(lambda: S.metric("skyprof_http_body_bytes") == 65536, "first chunk reserved")
        s2 = connect(S)
        s2.sendall(post_chunked_head() + b"10000\r\n")  # does not fit beside the first one
        data, closed = read_all(s2)
        s2.close()
        assert rawsock.http_status(data) == 503 and closed, data
        assert S.metric("skyprof_http_budget_refused_total") == 1
        # the first one trickles no further: 408 at its deadline, its reservation released
        data, closed = read_all(s, 10)
        s.close()
        assert rawsock.http_status(data) == 408 and closed, data
        wait_for(lambda: S.metric("skyprof_http_body_bytes") == 0, "reservation released")
        # a body of many one-byte chunks is fine (chunk-size lines are not a head)
        body = task_body(5)
        s = connect(S)
        s.sendall(post_chunked_head(extra=b"Connection: close\r\n") + chunked(body, [1] * len(body)))
        data, _ = read_all(s)
        s.close()
        assert rawsock.http_status(data) == 201, data
    finally:
        S.stop()


def t_pipelined_in_order(d):
    """A refusal of a pipelined request never overtakes the answers to earlier ones on the same
    connection: they come first, in order, then the refusal, then the close."""
    S = Skyprofd(d, "--api-token", "sekret", "--http-request-timeout-ms", "1500")
    try:
        st, doc = S.json("POST", "/api/v1/profile/tasks", dict(TASK, service="svc-pipe"),
                         headers={"Authorization": "Bearer sekret"})
        assert st == 201, doc
        segs = ("/api/v1/profile/tasks/%s/segments" % doc["id"]).encode()
        get = lambda p: b"GET " + p + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"  # noqa: E731
        bad_cl = (b"POST /api/v1/profile/tasks HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n"
                  b"Content-Length: 3\r\n\r\n{}")
        no_token = (b"POST /api/v1/profile/tasks HTTP/1.1\r\nHost: a\r\nContent-Type: "
                    b"application/json\r\nContent-Length: 2\r\n\r\n{}")
        cases = [
            ("healthz then bad framing", get(b"/healthz") + bad_cl, [200, 400]),
            # the segments listing is answered by the worker thread, after the refusal was found
            ("worker listing then bad framing", get(segs) + bad_cl, [200, 400]),
            ("three then bad framing", get(b"/healthz") + get(segs) + get(b"/metrics") + bad_cl,
             [200, 200, 200, 400]),
            ("listing then no token", get(segs) + no_token, [200, 401]),
            ("chunked POST then bad chunk",
             post_chunked_head(extra=b"Authorization: Bearer sekret\r\n") +
             chunked(json.dumps(dict(TASK, service="svc-pipe2")).encode(), [3]) +
             post_chunked_head(extra=b"Authorization: Bearer sekret\r\n") + b"0x1\r\n", [201, 400]),
            ("listing then an incomplete request", get(segs) + b"GET /healthz HTTP/1.1\r\nHo",
             [200, 408]),
        ]
        for name, raw, want in cases:
            s = connect(S)
            s.sendall(raw)
            data, closed = read_all(s, 15)
            s.close()
            got = responses(data)
            assert [r[0] for r in got] == want, (name, [r[0] for r in got], data[-400:])
            assert closed, name + ": connection left open"
            assert got[-1][1].get(b"connection") == b"close", (name, got[-1][1])
        # the bytes after a refused request never reach evhttp: the same pipeline with a valid
        # request hidden after the bad one leaves no trace
        before = S.metric("skyprof_tasks_created_total")
        s = connect(S)
        s.sendall(get(b"/healthz") + bad_cl + b"POST /api/v1/profile/tasks HTTP/1.1\r\nHost: a\r\n"
                  b"Authorization: Bearer sekret\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(json.dumps(TASK)) + json.dumps(TASK).encode())
        data, _ = read_all(s)
        s.close()
        assert [r[0] for r in responses(data)] == [200, 400], data
        assert S.metric("skyprof_tasks_created_total") == before
        st, _, _ = S.http("GET", "/healthz")
        assert st == 200
    finally:
        S.stop()


if __name__ == "__main__":
    only = sys.argv[1:]
    cases = [("strict_framing", t_strict_framing), ("head_without_body", t_head_without_body),
             ("token_before_body", t_token_before_body), ("request_deadline", t_request_deadline),
             ("body_budget", t_body_budget), ("connection_caps", t_connection_caps),
             ("out_of_fds", t_out_of_fds), ("chunked_bodies", t_chunked_bodies),
             ("chunked_malformed", t_chunked_malformed), ("chunked_limits", t_chunked_limits),
             ("pipelined_in_order", t_pipelined_in_order)]
    for name, fn in cases:
        if only and name not in only:
            continue
        with tempdir() as d:
            R.run(name, fn, d)
    R.finish()
