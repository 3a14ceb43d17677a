"""skyprofd under bad input and faults: agent authentication, garbage on both ports, invalid
protobuf, snapshots for unknown tasks, duplicates (across and within streams), out-of-order
sequences, empty streams, clients vanishing mid-stream (grpcio cancel and a raw socket closed
mid-message), a read-only database (reads keep working, writes fail clearly), restart keeps
data, SIGTERM during a stream completes the stream and exits 0."""
import os
import random
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse
import http.client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402
import h2.config  # noqa: E402
import h2.connection  # noqa: E402

from skp_harness import Results, tempdir, wait_until  # noqa: E402
from skyprofd_util import (NOBODY, V3, Management_pb2, Profile_pb2, Skyprofd, by_sig,  # noqa: E402
                           can_drop_privileges, root_count, snap)

S = None
R = Results()
EXAMPLE = [(0, 1000, ["A", "B", "C"]), (1, 1010, ["A", "B", "C"]), (2, 1020, ["A", "B", "D"]),
           (3, 1030, ["A", "B"]), (4, 1040, ["A", "B", "C"])]


def seg_count(srv, seg):
    st, an = srv.json("GET", "/api/v1/profile/segments/%s/analyze" % seg, expect=200)
    return root_count(an)


def expect_code(code, fn, *a, **kw):
    try:
        fn(*a, **kw)
    except grpc.RpcError as e:
        assert e.code() == code, (e.code(), e.details())
        return e
    raise AssertionError("call succeeded, expected %s" % code)


def t_auth():
    with tempdir() as d:
        srv = Skyprofd(os.path.join(d, "db"), "--auth-token", "agent-secret", name="skyprofd-auth")
        try:
            expect_code(grpc.StatusCode.UNAUTHENTICATED, srv.query, "svc", "i")
            expect_code(grpc.StatusCode.UNAUTHENTICATED, srv.query, "svc", "i",
                        metadata=[("authentication", "wrong")])
            expect_code(grpc.StatusCode.UNAUTHENTICATED, srv.snapshots, [snap("t", "s", 0, ["a"])])
            expect_code(grpc.StatusCode.UNAUTHENTICATED, srv.unary, "/ManagementService/keepAlive",
                        Management_pb2.InstancePingPkg(service="s", serviceInstance="i"))
            ok = [("authentication", "agent-secret")]
            assert len(srv.query("svc", "i", metadata=ok).commands) == 0
            srv.snapshots([snap("t", "seg-auth", 0, ["a"])], metadata=ok)
            assert seg_count(srv, "seg-auth") == 1
            assert srv.metric("skyprof_auth_failures_total") >= 4
        finally:
            srv.stop()


def t_garbage_ports():
    rnd = random.Random(7)
    for port in (S.grpc_port, S.http_port):
        for payload in [b"GET / HTTP/1.1\r\n\r\n", bytes(rnd.getrandbits(8) for _ in range(4096)),
                        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\xff" * 64, b"\x00" * 10]:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sk:
                try:
                    sk.sendall(payload)
                    sk.shutdown(socket.SHUT_WR)
                    while sk.recv(65536):
                        pass
                except OSError:
                    pass
    # Still serving both.
    assert len(S.query("svc-garbage", "i").commands) == 0
    S.json("GET", "/healthz", expect=200)


def t_invalid_protobuf():
    e = expect_code(grpc.StatusCode.INVALID_ARGUMENT, S.unary, V3 + "ProfileTask/getProfileTaskCommands",
                    b"\xff\xff\xff\xff\xff", raw=True)
    good = snap("t", "seg-badpb", 0, ["a"]).SerializeToString()
    expect_code(grpc.StatusCode.INVALID_ARGUMENT, S.stream, V3 + "ProfileTask/collectSnapshot",
                [good, b"\x0a\xff\xff\xff"], raw=True)
    expect_code(grpc.StatusCode.INVALID_ARGUMENT, S.stream, V3 + "TraceSegmentReportService/collect",
                [b"\x12\x05ab"], raw=True)
    expect_code(grpc.StatusCode.INVALID_ARGUMENT, S.unary, V3 + "ManagementService/keepAlive", b"\x0a", raw=True)
    assert len(S.query("svc-badpb", "i").commands) == 0  # still serving


def t_random_inputs():
    """Seeded random requests at every route and method: nothing may crash the server or
    answer 5xx except storage errors; ASan checks memory safety."""
    rnd = random.Random(1234)
    routes = ["/api/v1/profile/tasks", "/api/v1/profile/tasks/%s", "/api/v1/profile/tasks/%s/logs",
              "/api/v1/profile/tasks/%s/segments", "/api/v1/profile/tasks/%s/analyze",
              "/api/v1/profile/tasks/%s/export?format=%s", "/api/v1/profile/analyze",
              "/api/v1/profile/segments/%s/analyze", "/api/v1/profile/segments/%s/export?format=%s&start=%s",
              "/api/v1/services", "/api/v1/services/%s/instances", "/healthz", "/metrics", "/%s", "/assets/%s"]

    def junk(n):
        return "".join(rnd.choice("abc/%.?&=+-_09\x7f\u00e9 ") for _ in range(rnd.randint(0, n)))

    bodies = [b"", b"{}", b"[]", b"null", b"[{}]", b'{"service":1}', b'[{"segmentId":"x","timeRange":{}}]',
              b'{"service":"r","endpointName":"/","duration":1,"minDurationThreshold":0,"dumpPeriod":10,'
              b'"maxSamplingCount":1,"startTime":-5}', b"\xff\xfe\x00", b"[" * 5000]
    for _ in range(400):
        route = rnd.choice(routes)
        n = route.count("%s")
        path = route % tuple(urllib.parse.quote(junk(20), safe="/%") for _ in range(n))
        method = rnd.choice(["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS"])
        body = rnd.choice(bodies) if method in ("POST", "PUT") else None
        try:
            st, h, data = S.http(method, path, body)
        except (OSError, http.client.HTTPException):
            continue  # the server may refuse a malformed request line outright
        assert st < 500 or st == 503, (method, path, st, data[:200])
    methods = ["ProfileTask/getProfileTaskCommands", "ProfileTask/collectSnapshot", "ProfileTask/reportTaskFinish",
               "ManagementService/keepAlive", "ManagementService/reportInstanceProperties",
               "TraceSegmentReportService/collect", "TraceSegmentReportService/collectInSync"]
    streaming = {"ProfileTask/collectSnapshot", "TraceSegmentReportService/collect"}
    for _ in range(150):
        m = rnd.choice(methods)
        payloads = [bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0, 300))) for _ in range(rnd.randint(1, 4))]
        try:
            if m in streaming:
                S.stream(V3 + m, payloads, raw=True, timeout=10)
            else:
                S.unary(V3 + m, payloads[0], raw=True, timeout=10)
        except grpc.RpcError as e:
            assert e.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNAVAILABLE), (m, e.code())
    S.json("GET", "/healthz", expect=200)
    assert len(S.query("svc-random", "i").commands) == 0


def t_unknown_task():
    before = S.metric("skyprof_snapshots_unknown_task_total")
    S.snapshots([snap("no-such-task", "seg-unk", i, ["x", "y"]) for i in range(3)])
    assert seg_count(S, "seg-unk") == 3
    assert S.metric("skyprof_snapshots_unknown_task_total") - before == 3


def t_duplicates():
    st, doc = S.create_task("svc-dup")
    tid = doc["id"]
    snaps = [snap(tid, "seg-dup", s, st_, 1700000000000 + t) for s, t, st_ in EXAMPLE]
    S.snapshots(snaps)
    before = S.metric("skyprof_snapshots_duplicate_total")
    S.snapshots(snaps, path="/ProfileTask/collectSnapshot")  # resent stream, compat path
    S.snapshots(snaps[:2] + snaps[:2])  # duplicates inside one stream
    assert seg_count(S, "seg-dup") == 5
    assert S.metric("skyprof_snapshots_duplicate_total") - before == 9


def t_out_of_order():
    st, doc = S.create_task("svc-ooo")
    tid = doc["id"]
    snaps = [snap(tid, "seg-ooo", s, st_, 1700000000000 + t) for s, t, st_ in EXAMPLE]
    order = [4, 2, 0, 3, 1]
    S.snapshots([snaps[i] for i in order[:3]])
    S.snapshots([snaps[i] for i in order[3:]])
    st, an = S.json("GET", "/api/v1/profile/segments/seg-ooo/analyze", expect=200)
    e = by_sig(an["trees"][0])
    got = {k: (int(v["count"]), int(v["duration"]), int(v["durationChildExcluded"])) for k, v in e.items()}
    assert got == {"A": (5, 50, 0), "B": (5, 50, 10), "C": (3, 30, 30), "D": (1, 10, 10)}, got


def t_empty_stream():
    r = S.snapshots([])
    assert len(r.commands) == 0
    r = S.stream(V3 + "TraceSegmentReportService/collect", [])
    assert len(r.commands) == 0
    # A snapshot without a segment id is counted and skipped, the stream still succeeds.
    S.snapshots([Profile_pb2.ThreadSnapshot(taskId="t", sequence=0)])


def t_client_vanishes():
    before = S.metric("skyprof_snapshots_rejected_total")

    # grpcio: the request iterator fails mid-stream -> the client cancels the call.
    def gen():
        for i in range(50):
            yield snap("t-van", "seg-van-1", i, ["a", "b"])
        raise RuntimeError("client dies")
    try:
        S.snapshots(gen())
        raise AssertionError("stream succeeded")
    except grpc.RpcError as e:
        assert e.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN), e.code()
    # Raw HTTP/2: 20 whole messages and half of one, then the socket closes.
    sk = socket.create_connection(("127.0.0.1", S.grpc_port), timeout=10)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":authority", "x"),
                            (":path", V3 + "ProfileTask/collectSnapshot"), ("content-type", "application/grpc"),
                            ("te", "trailers")])
    data = b""
    for i in range(20):
        p = snap("t-van", "seg-van-2", i, ["a", "b"]).SerializeToString()
        data += b"\x00" + struct.pack(">I", len(p)) + p
    conn.send_data(sid, data + data[:7])
    sk.sendall(conn.data_to_send())
    sk.close()
    wait_until(lambda: S.metric("skyprof_snapshots_rejected_total") - before >= 70, 20,
               what="unacknowledged snapshots counted as rejected")
    # The server keeps serving, and nothing of either stream was acknowledged or stored.
    assert seg_count(S, "seg-van-1") == 0 and seg_count(S, "seg-van-2") == 0
    S.snapshots([snap("t-van", "seg-van-3", 0, ["a"])])
    assert seg_count(S, "seg-van-3") == 1
    # Every stream is over: no batch buffer is held any more.
    wait_until(lambda: S.metric("skyprof_snapshot_buffer_bytes") == 0, 20, what="buffers released")


def t_http_client_gone_during_analysis():
    """Analyses run on a worker thread and are answered later: clients that hang up before the
    answer must not disturb the server (ASan checks the request lifetime)."""
    st, doc = S.create_task("svc-gone")
    tid = doc["id"]
    S.snapshots([snap(tid, "seg-gone-%d" % (i // 500), i % 500, ["r", "a%d" % (i % 7), "b%d" % (i % 13)])
                 for i in range(8000)])
    body = b'[{"segmentId":"seg-gone-1","timeRange":{"start":0,"end":99999999999999}}]'
    reqs = [b"GET /api/v1/profile/tasks/%s/analyze HTTP/1.1\r\nHost: x\r\n\r\n" % tid.encode(),
            b"GET /api/v1/profile/tasks/%s/export?format=html HTTP/1.1\r\nHost: x\r\n\r\n" % tid.encode(),
            b"POST /api/v1/profile/analyze HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body)]
    for k in range(30):
        with socket.create_connection(("127.0.0.1", S.http_port), timeout=10) as sk:
            sk.sendall(reqs[k % 3])
            sk.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST on close
    # Pipelined requests on one connection that is then closed half-way.
    with socket.create_connection(("127.0.0.1", S.http_port), timeout=10) as sk:
        sk.sendall(reqs[0] * 5)
    st, an = S.json("GET", "/api/v1/profile/tasks/%s/analyze" % tid, expect=200)
    assert root_count(an) == 8000, root_count(an)
    st, h, b = S.http("GET", "/api/v1/profile/tasks/%s/export?format=collapsed" % tid)
    assert st in (200, 501), st
    S.json("GET", "/healthz", expect=200)


def t_readonly_and_restart():
    if not can_drop_privileges():
        print("skip: running as root without setpriv")
        return
    prefix = NOBODY if os.geteuid() == 0 else None
    with tempdir() as d:
        os.chmod(d, 0o755)
        data = os.path.join(d, "db")
        os.makedirs(data)
        if os.geteuid() == 0:
            os.chown(data, 65534, 65534)
        srv = Skyprofd(data, prefix=prefix, name="skyprofd-rw")
        try:
            st, doc = srv.create_task("svc-ro", "/ro")
            assert st == 201, doc
            tid = doc["id"]
            srv.snapshots([snap(tid, "seg-ro", i, ["m", "n"]) for i in range(4)])
        finally:
            srv.stop()
        for f in os.listdir(data):
            os.chmod(os.path.join(data, f), 0o444)
        srv = Skyprofd(data, prefix=prefix, name="skyprofd-ro")
        try:
            # Reads work, data survived the restart.
            st, lst = srv.json("GET", "/api/v1/profile/tasks", expect=200)
            assert [t["id"] for t in lst] == [tid], lst
            assert seg_count(srv, "seg-ro") == 4
            srv.json("GET", "/api/v1/services", expect=200)
            # Writes fail with clear errors; the server keeps serving.
            st, doc = srv.create_task("svc-ro2", "/x")
            assert st == 503 and "storage" in doc["error"], (st, doc)
            e = expect_code(grpc.StatusCode.UNAVAILABLE, srv.snapshots, [snap(tid, "seg-ro2", 0, ["m"])])
            assert "not stored" in e.details(), e.details()
            expect_code(grpc.StatusCode.UNAVAILABLE, srv.unary, V3 + "ManagementService/keepAlive",
                        Management_pb2.InstancePingPkg(service="s", serviceInstance="i"))
            # Task polling still hands out the task (its NOTIFIED log cannot be written).
            assert len(srv.query("svc-ro", "i").commands) == 1
            srv.json("GET", "/healthz", expect=200)
            assert seg_count(srv, "seg-ro2") == 0
        finally:
            srv.stop()


def t_sigterm_during_stream():
    with tempdir() as d:
        srv = Skyprofd(os.path.join(d, "db"), name="skyprofd-term")
        try:
            gate = threading.Event()
            result = {}

            def gen():
                for i in range(1500):  # crosses one batch boundary before the signal
                    yield snap("t-term", "seg-term", i, ["r", "s%d" % (i % 3)])
                gate.wait(30)
                for i in range(1500, 1700):
                    yield snap("t-term", "seg-term", i, ["r", "s%d" % (i % 3)])

            def run():
                try:
                    result["resp"] = srv.snapshots(gen(), timeout=60)
                except grpc.RpcError as e:
                    result["err"] = e

            th = threading.Thread(target=run)
            th.start()
            wait_until(lambda: srv.metric("skyprof_snapshots_received_total") >= 1500, 30, what="first part")
            srv.proc.signal(signal.SIGTERM)
            wait_until(lambda: "shutting down" in srv.proc.output(), 10, what="shutdown log")
            gate.set()
            th.join(60)
            assert "resp" in result, result.get("err")
            wait_until(lambda: not srv.proc.alive(), 30, what="exit after the stream")
        finally:
            srv.stop()
        srv = Skyprofd(os.path.join(d, "db"), name="skyprofd-term2")
        try:
            n = seg_count(srv, "seg-term")
            assert n == 1700, (n, result)
        finally:
            srv.stop()


def t_retention():
    with tempdir() as d:
        data = os.path.join(d, "db")
        srv = Skyprofd(data, "--retention-days", "0", name="skyprofd-ret")
        try:
            old = int(time.time() * 1000) - 5 * 86400000
            srv.snapshots([snap("t-ret", "seg-old", i, ["a"], old + i) for i in range(3)])
            srv.snapshots([snap("t-ret", "seg-new", i, ["a"], old + i) for i in range(3)])
        finally:
            srv.stop()
        # Retention counts from when skyprofd received a segment, not from the agent's clock
        # (both were sent with 5-day-old times just now): age seg-old as if received 5 days ago.
        import sqlite3
        db = sqlite3.connect(os.path.join(data, "skyprof.db"))
        db.execute("UPDATE segids SET first_ms = ? WHERE segment_id = 'seg-old'", (old,))
        db.commit()
        db.close()
        srv = Skyprofd(data, "--retention-days", "0", name="skyprofd-ret0")
        try:
            assert seg_count(srv, "seg-old") == 3  # 0 = keep forever
        finally:
            srv.stop()
        srv = Skyprofd(data, "--retention-days", "2", name="skyprofd-ret2")
        try:  # purged at start: received over 2 days ago gone, received now kept
            assert seg_count(srv, "seg-old") == 0
            assert seg_count(srv, "seg-new") == 3
            assert srv.metric("skyprof_retention_runs_total") == 1
            # a purge this small is one batch (issue 27: purges run in batches of bounded rows)
            assert srv.metric("skyprof_retention_batches_total") == 1
        finally:
            srv.stop()


def main():
    global S
    R.run("agent authentication", t_auth)
    with tempdir() as d:
        S = Skyprofd(os.path.join(d, "db"))
        try:
            for name, fn in [("garbage on both ports", t_garbage_ports),
                             ("invalid protobuf", t_invalid_protobuf),
                             ("random HTTP and gRPC inputs", t_random_inputs),
                             ("snapshots for unknown tasks", t_unknown_task),
                             ("duplicates stored once", t_duplicates),
                             ("out-of-order sequences", t_out_of_order),
                             ("empty streams", t_empty_stream),
                             ("client vanishes mid-stream", t_client_vanishes),
                             ("HTTP client gone during an analysis", t_http_client_gone_during_analysis)]:
                R.run(name, fn)
        finally:
            S.stop()
    R.run("read-only database + restart keeps data", t_readonly_and_restart)
    R.run("SIGTERM during a stream", t_sigterm_during_stream)
    R.run("retention purge at start", t_retention)
    R.finish()


if __name__ == "__main__":
    main()
