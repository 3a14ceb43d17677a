"""skyprofd's HTTP listener under hostile clients (issue 15, findings 2, 5, 10, 11), over raw
loopback sockets: strict framing (two Content-Length headers, `+N`, Transfer-Encoding, obsolete
folding, bare LF, a body on GET: refused and closed), HEAD answers without a body, the API token
checked before a body is read, a deadline for a request's headers and body together, a budget for
bodies held at once, connection caps (per listener and per peer) and accepting paused when the
process runs out of fds. Small limits as flags; every wait is on a condition with a deadline."""
import os
import resource
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from skp_harness import Results, tempdir  # noqa: E402
from skyprofd_util import Skyprofd  # noqa: E402

R = Results()


def connect(S, source="127.0.0.1", timeout=10.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", S.http_port))
    return s


def read_all(s, deadline_s=10.0):
    """Everything the server sends until it closes (or the deadline): (bytes, closed)."""
    data = b""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        s.settimeout(max(0.05, end - time.monotonic()))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            return data, False
        except ConnectionResetError:
            return data, True
        if not chunk:
            return data, True
        data += chunk
    return data, False


def status_of(data):
    line = data.split(b"\r\n", 1)[0]
    return int(line.split()[1]) if line.startswith(b"HTTP/1.") else None


def wait_for(cond, what, deadline_s=20.0):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


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
    ("Transfer-Encoding", 501,
     b"POST /api/v1/profile/tasks HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
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
            assert status_of(data) == want, (name, data[:200])
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
        assert status_of(data) == 401, data
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
        assert status_of(got) == 408, got
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
            codes.append(status_of(data))
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
            if status_of(data) == 503 and closed:
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


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
        c0, logged0 = cpu_s(S.pid), S.output().count("accept failed")
        time.sleep(2.0)
        used = cpu_s(S.pid) - c0
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


if __name__ == "__main__":
    only = sys.argv[1:]
    cases = [("strict_framing", t_strict_framing), ("head_without_body", t_head_without_body),
             ("token_before_body", t_token_before_body), ("request_deadline", t_request_deadline),
             ("body_budget", t_body_budget), ("connection_caps", t_connection_caps),
             ("out_of_fds", t_out_of_fds)]
    for name, fn in cases:
        if only and name not in only:
            continue
        with tempdir() as d:
            R.run(name, fn, d)
    R.finish()
