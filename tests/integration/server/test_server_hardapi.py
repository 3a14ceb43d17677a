"""skyprofd's HTTP API under hostile use (issue 15, API findings), end to end against the real
daemon over real gRPC and HTTP:
- finding 7: a foreign Host is refused with 421 (DNS rebinding), mutating routes need
  Content-Type: application/json (a no-cors text/plain POST from another page creates nothing)
  and a same-site Origin (or one of --allowed-origins); X-Frame-Options and the UI's CSP;
- finding 7: POST …/tasks/{id}/cancel (profile and pprof tasks): no agent is handed the task
  any more (even polling with lastCommandTime=0), status "cancelled", the service is free again;
- finding 6: listing routes answer pages (limit, opaque cursor in X-Next-Cursor) with bounded
  defaults; following the cursors gives every row once, in order; the CLI follows them;
- finding 6: NOTIFIED logs are written once per (task, instance): 200 polls with
  lastCommandTime=0 leave one row (trace and pprof tasks);
- "Also": retention counts from when skyprofd received data, not the agent's clock (a 1970
  snapshot survives the start-up purge);
- "Also": a database damaged mid-file starts with /healthz 503 and a clear log line;
- finding 12: agent times at the ends of int64 (snapshots at INT64_MIN/INT64_MAX, a span from
  INT64_MIN to INT64_MAX) give clamped durations in the analysis and the segment listing, and
  the UBSan build does not abort."""
import json
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from skp_harness import Results, tempdir, using_postgres  # noqa: E402
from skyprofd_util import V3, Skyprofd, Tracing_pb2, snap  # noqa: E402
from profile import Pprof_pb2  # noqa: E402
import urllib.parse  # noqa: E402

V10 = "/skywalking.v10.PprofTask/"


def q(s):
    return urllib.parse.quote(s, safe="")

R = Results()
I64_MIN = -(1 << 63)
I64_MAX = (1 << 63) - 1
COLLECT = V3 + "TraceSegmentReportService/collect"


def t_extreme_agent_times(S):
    st, doc = S.create_task("svc-times", "/t")
    assert st == 201, doc
    tid = doc["id"]
    S.snapshots([snap(tid, "seg-x", 0, ["A", "B"], I64_MIN), snap(tid, "seg-x", 1, ["A", "B"], I64_MAX),
                 snap(tid, "seg-x", 2, ["A"], I64_MIN)])
    S.stream(COLLECT, [Tracing_pb2.SegmentObject(
        traceId="tr-x", traceSegmentId="seg-x", service="svc-times", serviceInstance="i",
        spans=[Tracing_pb2.SpanObject(spanId=0, parentSpanId=-1, startTime=I64_MIN, endTime=I64_MAX,
                                      operationName="/t", spanType=Tracing_pb2.Entry)])])
    st, segs = S.json("GET", "/api/v1/profile/tasks/%s/segments" % tid, expect=200)
    seg = [s for s in (segs["items"] if isinstance(segs, dict) else segs) if s["segmentId"] == "seg-x"]
    assert seg and seg[0]["start"] == I64_MIN and seg[0]["duration"] == I64_MAX, seg
    st, a = S.json("GET", "/api/v1/profile/tasks/%s/analyze" % tid, expect=200)
    root = [e for e in a["trees"][0]["elements"] if e["codeSignature"] == "A"][0]
    # steps MAX - MIN clamp to MAX; the step back (MIN - MAX) gets the typical period (MAX):
    # every sum saturates at MAX, never a wrap
    assert int(root["duration"]) == I64_MAX, root
    b = [e for e in a["trees"][0]["elements"] if e["codeSignature"] == "B"][0]
    assert int(b["duration"]) == I64_MAX, b
    st, a = S.json("GET", "/api/v1/profile/segments/seg-x/analyze", expect=200)
    assert a["trees"], a
    assert S.alive()


def raw(S, req):
    """Sends raw request bytes; returns (status, headers dict, body)."""
    with socket.create_connection(("127.0.0.1", S.http_port), timeout=30) as sk:
        sk.sendall(req)
        data = b""
        while True:
            b = sk.recv(65536)
            if not b:
                break
            data += b
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    hdrs = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return int(lines[0].split()[1]), hdrs, body


def tasks_of(S, service):
    st, doc = S.json("GET", "/api/v1/profile/tasks?service=" + service, expect=200)
    return doc["items"] if isinstance(doc, dict) else doc


def t_foreign_host_refused(S):
    port = S.http_port
    for host, want in (("evil.example:%d" % port, 421), ("127.0.0.1:%d" % port, 200),
                       ("localhost:%d" % port, 200), ("[::1]:%d" % port, 200),
                       ("devbox:%d" % port, 200), ("app.localhost:%d" % port, 200),
                       ("skyprof.example.com:%d" % port, 421)):
        st, h, body = raw(S, b"GET /api/v1/services HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                          % host.encode())
        assert st == want, (host, st, body)
        assert h.get("x-frame-options") == "DENY", h
    st, h, body = raw(S, b"GET / HTTP/1.1\r\nHost: rebind.attacker.net\r\nConnection: close\r\n\r\n")
    assert st == 421 and b"DNS rebinding" in body, (st, body)
    assert S.metric("skyprof_http_guard_refused_total") >= 2


def t_csrf_refused(S):
    body = json.dumps({"service": "svc-csrf", "endpointName": "/x", "duration": 15,
                       "minDurationThreshold": 0, "dumpPeriod": 10, "maxSamplingCount": 5})
    # What a page on another site can send without a preflight: a no-cors text/plain POST.
    st, h, data = S.http("POST", "/api/v1/profile/tasks", body,
                         {"Content-Type": "text/plain;charset=UTF-8", "Origin": "http://evil.example"})
    assert st == 415, (st, data)
    st, h, data = S.http("POST", "/api/v1/profile/tasks", body, {"Content-Type": "text/plain"})
    assert st == 415, (st, data)
    st, h, data = S.http("POST", "/api/v1/profile/tasks", body)   # no Content-Type at all
    assert st == 415, (st, data)
    # JSON with a foreign Origin (only possible after a CORS preflight we never grant)
    st, h, data = S.http("POST", "/api/v1/profile/tasks", body,
                         {"Content-Type": "application/json", "Origin": "http://evil.example"})
    assert st == 403 and b"cross-site" in data, (st, data)
    st, h, data = S.http("POST", "/api/v1/profile/tasks", body,
                         {"Content-Type": "application/json", "Origin": "null"})
    assert st == 403, (st, data)
    assert tasks_of(S, "svc-csrf") == []
    # the UI (same origin) and the CLI (no Origin) still create tasks
    st, h, data = S.http("POST", "/api/v1/profile/tasks", body,
                         {"Content-Type": "application/json; charset=utf-8",
                          "Origin": "http://127.0.0.1:%d" % S.http_port})
    assert st == 201, (st, data)
    assert len(tasks_of(S, "svc-csrf")) == 1
    # wrong methods still answer 405 (the checks apply to routes that take the POST)
    st, h, data = S.http("POST", "/api/v1/services", b"{}")
    assert st == 405, st


def t_allowed_origins(d):
    S = Skyprofd(d, "--allowed-origins", "http://skyprof.example.com:8080, https://ops.example.org")
    try:
        port = S.http_port
        st, h, b = raw(S, b"GET /healthz HTTP/1.1\r\nHost: ops.example.org\r\nConnection: close\r\n\r\n")
        assert st == 200, (st, b)
        st, h, b = raw(S, b"GET /healthz HTTP/1.1\r\nHost: other.example.org\r\nConnection: close\r\n\r\n")
        assert st == 421, (st, b)
        body = {"service": "svc-ao", "endpointName": "/x", "duration": 1, "minDurationThreshold": 0,
                "dumpPeriod": 10, "maxSamplingCount": 5}
        st, _ = S.json("POST", "/api/v1/profile/tasks", body, {"Origin": "https://ops.example.org"})
        assert st == 201, st
        st, _ = S.json("POST", "/api/v1/profile/tasks", body, {"Origin": "https://evil.example.org"})
        assert st == 403, st
    finally:
        S.stop()
    # a malformed list is refused at start with the reason
    import subprocess
    from skyprofd_util import SKYPROFD
    p = subprocess.run([SKYPROFD, "--db", os.path.join(d, "x.db"), "--allowed-origins", "evil.example/path"],
                       capture_output=True, timeout=30)
    assert p.returncode == 2 and b"--allowed-origins" in p.stderr, (p.returncode, p.stderr)


def t_ui_headers(S):
    st, h, body = S.http("GET", "/")
    assert st == 200, st
    assert h.get("x-frame-options") == "DENY", h
    csp = h.get("content-security-policy", "")
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp, h
    assert "http:" not in csp and "https:" not in csp and "*" not in csp, csp
    st, h, body = S.http("GET", "/healthz")
    assert h.get("x-frame-options") == "DENY", h


def t_corrupt_database(d):
    path = os.path.join(d, "skyprof.db")
    S = Skyprofd(d, "--keep-segments", "all")
    try:
        st, doc = S.create_task("svc-big", "/b")
        tid = doc["id"]
        # enough distinct frames and stacks for many pages
        S.snapshots([snap(tid, "seg-%d" % (i // 8), i % 8, ["frame_%d_%s" % (i, "x" * 200), "f%d" % i])
                     for i in range(4000)])
        st, h, _ = S.http("GET", "/healthz")
        assert st == 200
    finally:
        S.stop()
    size = os.path.getsize(path)
    assert size > 64 * 4096, size
    with open(path, "r+b") as f:       # damage pages in the middle, keep the header and schema
        for off in range(size // 2, size // 2 + 8 * 4096, 4096):
            f.seek(off)
            f.write(os.urandom(4096))
    S = Skyprofd(d)
    try:
        st, h, body = S.http("GET", "/healthz")
        assert st == 503, (st, body)
        doc = json.loads(body)
        assert doc["status"] == "database corrupt" and doc["database"], doc
        assert "failed its integrity check" in S.output(), S.output()[-2000:]
    finally:
        S.stop(expect_rc=None)


def t_notified_once(S):
    st, doc = S.create_task("svc-poll", "/p")
    assert st == 201, doc
    tid = doc["id"]
    for i in range(200):
        cmds = S.query("svc-poll", "inst-%d" % (i % 2), last=0)
        assert len(cmds.commands) == 1
    st, logs = S.json("GET", "/api/v1/profile/tasks/%s/logs" % q(tid), expect=200)
    logs = logs["items"] if isinstance(logs, dict) else logs
    assert sorted((l["instanceName"], l["operationType"]) for l in logs) == \
        [("inst-0", "NOTIFIED"), ("inst-1", "NOTIFIED")], logs
    # pprof tasks too
    st, doc = S.json("POST", "/api/v1/pprof/tasks", {"service": "svc-poll", "events": "cpu", "duration": 1,
                                                      "serviceInstanceIds": ["inst-0"]})
    assert st == 201, doc
    pid = doc["id"]
    for _ in range(100):
        S.unary(V10 + "getPprofTaskCommands", Pprof_pb2.PprofTaskCommandQuery(
            service="svc-poll", serviceInstance="inst-0", lastCommandTime=0))
    st, t = S.json("GET", "/api/v1/pprof/tasks/" + q(pid), expect=200)
    notified = [l for l in t["logs"] if l.get("operationType", l.get("op")) == "NOTIFIED"]
    assert len(notified) == 1, t["logs"]


def pages(S, path):
    """Follows X-Next-Cursor; returns (pages' sizes, all rows)."""
    sizes, rows, cursor = [], [], None
    while True:
        sep = "&" if "?" in path else "?"
        st, h, body = S.http("GET", path + (sep + "cursor=" + q(cursor) if cursor else ""))
        assert st == 200, (st, body)
        page = json.loads(body)
        sizes.append(len(page))
        rows += page
        cursor = h.get("x-next-cursor")
        if not cursor:
            return sizes, rows
        assert len(sizes) < 100


def t_pagination(S):
    st, doc = S.create_task("svc-page", "/pg")
    tid = doc["id"]
    S.snapshots([snap(tid, "seg-%03d" % i, 0, ["p", "q"], 1700000000000 + (i % 7) * 1000) for i in range(250)])
    sizes, rows = pages(S, "/api/v1/profile/tasks/%s/segments" % q(tid))
    assert sizes == [100, 100, 50], sizes                     # default page: 100
    ids = [r["segmentId"] for r in rows]
    assert len(set(ids)) == 250, len(set(ids))
    assert [(r["start"], r["segmentId"]) for r in rows] == sorted((r["start"], r["segmentId"]) for r in rows)
    sizes, rows2 = pages(S, "/api/v1/profile/tasks/%s/segments?limit=1000" % q(tid))
    assert sizes == [250] and rows2 == rows, sizes
    sizes, _ = pages(S, "/api/v1/profile/tasks/%s/segments?limit=33" % q(tid))
    assert sizes == [33] * 7 + [19], sizes
    for bad in ("limit=0", "limit=1001", "limit=x", "cursor=zz", "cursor=00"):
        st, doc = S.json("GET", "/api/v1/profile/tasks/%s/segments?%s" % (q(tid), bad))
        assert st == 400, (bad, st, doc)
    # tasks, logs, services, instances
    for i in range(5):
        S.create_task("svc-page-%d" % i, "/x")
        S.query("svc-page", "inst-%d" % i, last=0)
    sizes, tasks = pages(S, "/api/v1/profile/tasks?limit=2")
    assert all(n <= 2 for n in sizes) and len(tasks) == len({t["id"] for t in tasks}) >= 6, sizes
    st, full = S.json("GET", "/api/v1/profile/tasks?limit=1000", expect=200)
    assert [t["id"] for t in tasks] == [t["id"] for t in full]
    sizes, logs = pages(S, "/api/v1/profile/tasks/%s/logs?limit=2" % q(tid))
    assert sizes == [2, 2, 1] and sorted(l["instanceName"] for l in logs) == ["inst-%d" % i for i in range(5)], (sizes, logs)
    sizes, svcs = pages(S, "/api/v1/services?limit=1")
    st, allsvc = S.json("GET", "/api/v1/services", expect=200)
    assert [s["name"] for s in svcs] == [s["name"] for s in allsvc] and len(sizes) == len(allsvc) + (0 if len(allsvc) else 1)
    # the CLI follows the cursors: every segment listed
    import subprocess
    cli = os.path.join(os.environ.get("SKP_BUILD_DIR", ""), "src", "cli", "skyprof")
    if os.path.exists(cli):
        out = subprocess.run([cli, "--server", "http://127.0.0.1:%d" % S.http_port, "--json", "segments", tid],
                             capture_output=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert len(json.loads(out.stdout)) == 250


def t_cancel(S):
    st, doc = S.create_task("svc-cancel", "/c", duration=15)
    assert st == 201, doc
    tid = doc["id"]
    assert len(S.query("svc-cancel", "i1", last=0).commands) == 1
    path = "/api/v1/profile/tasks/%s/cancel" % q(tid)
    st, _, body = S.http("POST", path, "{}", {"Content-Type": "text/plain"})
    assert st == 415, st                       # a CSRF form post cannot cancel
    st, doc = S.json("POST", path, {})
    assert st == 200 and doc["status"] == "cancelled" and doc["cancelledTime"] > 0, (st, doc)
    st, t = S.json("GET", "/api/v1/profile/tasks/" + q(tid), expect=200)
    assert t["status"] == "cancelled" and t["cancelledTime"] == doc["cancelledTime"], t
    # agents see it no more, even polling from the start or as a new instance
    assert len(S.query("svc-cancel", "i1", last=0).commands) == 0
    assert len(S.query("svc-cancel", "i2", last=-1).commands) == 0
    st, doc2 = S.json("POST", path, {})
    assert st == 409, (st, doc2)
    st, doc2 = S.json("POST", "/api/v1/profile/tasks/nope/cancel", {})
    assert st == 404, (st, doc2)
    # the service is free for a new task at once
    st, doc3 = S.create_task("svc-cancel", "/c2", duration=1)
    assert st == 201, doc3
    assert [c.command for c in S.query("svc-cancel", "i1", last=0).commands] == ["ProfileTaskQuery"]
    assert S.metric("skyprof_tasks_cancelled_total") >= 1
    # process tasks
    st, doc = S.json("POST", "/api/v1/pprof/tasks", {"service": "svc-cancel", "events": "cpu", "duration": 5,
                                                      "serviceInstanceIds": ["i1"]})
    pid = doc["id"]
    qry = lambda: S.unary(V10 + "getPprofTaskCommands", Pprof_pb2.PprofTaskCommandQuery(
        service="svc-cancel", serviceInstance="i1", lastCommandTime=0))
    assert len(qry().commands) == 1
    st, c = S.json("POST", "/api/v1/async-profiler/tasks/%s/cancel" % q(pid), {})
    assert st == 404, (st, c)                  # a pprof id under the other kind's path
    st, c = S.json("POST", "/api/v1/pprof/tasks/%s/cancel" % q(pid), {})
    assert st == 200 and c["status"] == "cancelled", (st, c)
    assert len(qry().commands) == 0
    st, t = S.json("GET", "/api/v1/pprof/tasks/" + q(pid), expect=200)
    assert t["status"] == "cancelled" and t["cancelledTime"], t
    st, doc = S.json("POST", "/api/v1/pprof/tasks", {"service": "svc-cancel", "events": "cpu", "duration": 5,
                                                      "serviceInstanceIds": ["i1"]})
    assert st == 201, doc                      # no overlap with the cancelled one


def t_retention_by_receive_time(d):
    S = Skyprofd(d, "--retention-days", "1")
    try:
        st, doc = S.create_task("svc-ret", "/r")
        tid = doc["id"]
        S.snapshots([snap(tid, "seg-1970", i, ["old", "clock"], 1000 + i * 10) for i in range(3)])
        st, a = S.json("GET", "/api/v1/profile/segments/seg-1970/analyze", expect=200)
        assert a["trees"], a
    finally:
        S.stop()
    S = Skyprofd(d, "--retention-days", "1")   # purges at start
    try:
        from skp_harness import wait_until
        wait_until(lambda: S.metric("skyprof_retention_runs_total") >= 1, 30, what="start-up purge")
        st, a = S.json("GET", "/api/v1/profile/segments/seg-1970/analyze", expect=200)
        assert a["trees"] and a["trees"][0]["elements"], a   # received today: kept
    finally:
        S.stop()


def main():
    with tempdir() as d:
        S = Skyprofd(os.path.join(d, "a"), "--keep-segments", "all")
        try:
            R.run("finding 12: agent times at the ends of int64", t_extreme_agent_times, S)
            R.run("finding 7: a foreign Host is refused (DNS rebinding)", t_foreign_host_refused, S)
            R.run("finding 7: CSRF: text/plain and foreign Origin refused", t_csrf_refused, S)
            R.run("finding 7: X-Frame-Options and the UI's CSP", t_ui_headers, S)
            R.run("finding 7: cancel profile and pprof tasks", t_cancel, S)
            R.run("finding 6: one NOTIFIED log per task and instance", t_notified_once, S)
            R.run("finding 6: pagination of the listing routes", t_pagination, S)
        finally:
            S.stop()
        R.run("finding 7: --allowed-origins", t_allowed_origins, os.path.join(d, "ao"))
        R.run("retention by receive time, not agent time", t_retention_by_receive_time,
              os.path.join(d, "ret"))
        if not using_postgres():  # an SQLite file damaged on disk
            R.run("a database damaged mid-file: /healthz 503", t_corrupt_database,
                  os.path.join(d, "corrupt"))
    R.finish()


if __name__ == "__main__":
    main()
