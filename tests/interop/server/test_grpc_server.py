"""Interop suite for skyprof's gRPC server (src/wire/grpc_server.c).

Drives tests/interop/server/grpc_test_server with Debian's grpcio (unary, client streams, 50
concurrent streams on one channel, errors, metadata, compat path, async finish, cancellation)
and with hand-built HTTP/2 (python3-h2 and raw bytes: garbage, truncated preface, corrupt
frames, compressed flag, truncated gRPC prefix, wrong method/content-type, unary with 0 or 2
messages). Ends with a graceful shutdown under load and checks the server's own accounting
(every call closed exactly once, no live bytes) and sanitizer output.
"""
import os
import re
import signal
import socket
import struct
import sys
import threading
import time

import grpc
import h2.config
import h2.connection
import h2.events

from skp_harness import Proc, Results, build_path, check_sanitizer_clean, port_open, wait_until


from common import Command_pb2  # noqa: E402
from profile import Profile_pb2, Profile_pb2_grpc  # noqa: E402

MAX_MSG = 64 * 1024
TOKEN = "tok-" + "x" * 40
PFX = "/skywalking.v3.ProfileTask/"


class Server:
    def __init__(self, max_conns=0, grace_ms=10000):
        self.proc = Proc([build_path("tests", "interop", "server", "grpc_test_server"), str(MAX_MSG), TOKEN,
                          str(max_conns), str(grace_ms)], name="grpc_test_server")
        m = wait_until(lambda: re.search(r"^PORT (\d+)$", self.proc.output(), re.M), 30, what="PORT line")
        self.port = int(m.group(1))
        self.target = "127.0.0.1:%d" % self.port


SRV = None


def channel():
    return grpc.insecure_channel(SRV.target)


def args_of(commands):
    assert len(commands.commands) == 1, commands
    return {kv.key: kv.value for kv in commands.commands[0].args}


def snapshot(task, i, frames=20):
    return Profile_pb2.ThreadSnapshot(
        taskId=task, traceSegmentId="seg-%d" % (i // 100), time=1700000000000 + i, sequence=i,
        stack=Profile_pb2.ThreadStack(codeSignatures=["pkg.module.Class.method_%02d(file_%d.py:%d)" % (j, j, i % 97)
                                                      for j in range(frames)]))


def fnv_checksum(msgs):
    h = 14695981039346656037
    for m in msgs:
        fields = [m.taskId, m.traceSegmentId, str(m.time), str(m.sequence)] + list(m.stack.codeSignatures)
        for f in fields:
            for b in f.encode() + b"\n":
                h ^= b
                h = (h * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


# ---------------------------------------------------------------- grpcio cases

def t_unary_echo():
    with channel() as ch:
        stub = Profile_pb2_grpc.ProfileTaskStub(ch)
        q = Profile_pb2.ProfileTaskCommandQuery(service="svc-\u00e9", serviceInstance="inst@host", lastCommandTime=1234567890123)
        a = args_of(stub.getProfileTaskCommands(q, timeout=10))
        assert a["service"] == "svc-\u00e9", a
        assert a["serviceInstance"] == "inst@host", a
        assert a["lastCommandTime"] == "1234567890123", a
        assert a["path"] == PFX + "getProfileTaskCommands", a
        assert a["peer"].startswith("127.0.0.1:"), a
        assert a["user-agent"].startswith("grpc-python"), a
        # Defaults (an empty message is a valid request).
        a = args_of(stub.getProfileTaskCommands(Profile_pb2.ProfileTaskCommandQuery(), timeout=10))
        assert a["service"] == "" and a["lastCommandTime"] == "0", a


def t_compat_path():
    with channel() as ch:
        call = ch.unary_unary("/ProfileTask/getProfileTaskCommands",
                              request_serializer=Profile_pb2.ProfileTaskCommandQuery.SerializeToString,
                              response_deserializer=Command_pb2.Commands.FromString)
        a = args_of(call(Profile_pb2.ProfileTaskCommandQuery(service="old-agent", lastCommandTime=7), timeout=10))
        assert a["service"] == "old-agent" and a["lastCommandTime"] == "7", a
        assert a["path"] == "/ProfileTask/getProfileTaskCommands", a


def t_stream_10k():
    with channel() as ch:
        stub = Profile_pb2_grpc.ProfileTaskStub(ch)
        for rnd in range(2):
            msgs = [snapshot("task-%d" % rnd, i) for i in range(10000)]
            a = args_of(stub.collectSnapshot(iter(msgs), timeout=120))
            assert a == {"count": "10000", "checksum": fnv_checksum(msgs)}, a


def t_stream_empty():
    with channel() as ch:
        stub = Profile_pb2_grpc.ProfileTaskStub(ch)
        a = args_of(stub.collectSnapshot(iter([]), timeout=10))
        assert a["count"] == "0", a


def t_stream_out_of_order_rejected():
    with channel() as ch:
        stub = Profile_pb2_grpc.ProfileTaskStub(ch)
        msgs = [snapshot("t", 0), snapshot("t", 5)]
        try:
            stub.collectSnapshot(iter(msgs), timeout=10)
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
        else:
            raise AssertionError("out-of-order stream accepted")


def t_concurrent_one_channel():
    n_streams, n_unary, per_stream = 50, 200, 300
    with channel() as ch:
        stub = Profile_pb2_grpc.ProfileTaskStub(ch)
        streams = []
        for s in range(n_streams):
            msgs = [snapshot("conc-%d" % s, i, frames=5) for i in range(per_stream)]
            streams.append((msgs, stub.collectSnapshot.future(iter(msgs), timeout=120)))
        unaries = [(k, stub.getProfileTaskCommands.future(
            Profile_pb2.ProfileTaskCommandQuery(service="s%d" % k, lastCommandTime=k), timeout=120))
            for k in range(n_unary)]
        for msgs, f in streams:
            a = args_of(f.result())
            assert a == {"count": str(per_stream), "checksum": fnv_checksum(msgs)}, a
        for k, f in unaries:
            a = args_of(f.result())
            assert a["service"] == "s%d" % k and a["lastCommandTime"] == str(k), a


def expect_code(fn, code, details_re=None):
    try:
        fn()
    except grpc.RpcError as e:
        assert e.code() == code, (e.code(), e.details())
        if details_re:
            assert re.search(details_re, e.details() or ""), e.details()
        return e
    raise AssertionError("expected %s" % code)


def t_unknown_method():
    with channel() as ch:
        call = ch.unary_unary(PFX + "noSuchMethod", request_serializer=lambda b: b, response_deserializer=lambda b: b)
        expect_code(lambda: call(b"", timeout=10), grpc.StatusCode.UNIMPLEMENTED, "noSuchMethod")
        scall = ch.stream_unary("/skywalking.v3.Nope/collect", request_serializer=lambda b: b,
                                response_deserializer=lambda b: b)
        expect_code(lambda: scall(iter([b"x" * 100] * 1000), timeout=10), grpc.StatusCode.UNIMPLEMENTED)
        # The channel is still fine.
        stub = Profile_pb2_grpc.ProfileTaskStub(ch)
        stub.getProfileTaskCommands(Profile_pb2.ProfileTaskCommandQuery(), timeout=10)


def t_oversized():
    with channel() as ch:
        stub = Profile_pb2_grpc.ProfileTaskStub(ch)
        big = Profile_pb2.ProfileTaskCommandQuery(service="x" * (MAX_MSG + 1))
        expect_code(lambda: stub.getProfileTaskCommands(big, timeout=10), grpc.StatusCode.RESOURCE_EXHAUSTED,
                    "larger than max")
        # In the middle of a stream: small messages, then one too large, then more.
        msgs = [snapshot("t", i) for i in range(100)] + [Profile_pb2.ThreadSnapshot(taskId="y" * MAX_MSG, sequence=100)] + \
               [snapshot("t", i) for i in range(101, 2000)]
        expect_code(lambda: stub.collectSnapshot(iter(msgs), timeout=30), grpc.StatusCode.RESOURCE_EXHAUSTED)
        # Exactly at the limit is fine.
        q = Profile_pb2.ProfileTaskCommandQuery(service="z")
        pad = MAX_MSG - q.ByteSize()
        q = Profile_pb2.ProfileTaskCommandQuery(service="z" * (1 + pad - 2))  # field tag + 3-byte length
        assert q.ByteSize() == MAX_MSG, q.ByteSize()
        a = args_of(stub.getProfileTaskCommands(q, timeout=10))
        assert a["service"] == "z" * 255, len(a["service"])  # the echo is truncated by the test server
        stub.getProfileTaskCommands(Profile_pb2.ProfileTaskCommandQuery(), timeout=10)


def t_auth_metadata():
    with channel() as ch:
        stub = Profile_pb2_grpc.ProfileTaskStub(ch)
        req = Profile_pb2.ProfileTaskFinishReport(service="s", taskId="task-77")
        expect_code(lambda: stub.reportTaskFinish(req, timeout=10), grpc.StatusCode.UNAUTHENTICATED)
        expect_code(lambda: stub.reportTaskFinish(req, metadata=[("authentication", TOKEN + "x")], timeout=10),
                    grpc.StatusCode.UNAUTHENTICATED)
        a = args_of(stub.reportTaskFinish(req, metadata=[("authentication", TOKEN), ("x-other", "1")], timeout=10))
        assert a == {"taskId": "task-77"}, a
        # The token is compared exactly: a prefix is not enough.
        expect_code(lambda: stub.reportTaskFinish(req, metadata=[("authentication", TOKEN[:-1])], timeout=10),
                    grpc.StatusCode.UNAUTHENTICATED)


def t_async_finish():
    with channel() as ch:
        stub = Profile_pb2_grpc.ProfileTaskStub(ch)
        data = [Profile_pb2.GoProfileData(taskId="g", payload=b"p" * k) for k in range(1, 51)]
        waits = SRV.proc.output().count("ASYNC_WAIT")
        a = args_of(stub.goProfileReport(iter(data), timeout=10))
        assert a == {"count": "50", "bytes": str(sum(range(1, 51)))}, a
        assert SRV.proc.output().count("ASYNC_WAIT") == waits + 1  # answered from the timer
        e = expect_code(lambda: stub.goProfileReport(iter([Profile_pb2.GoProfileData(payload=b"fail")]), timeout=10),
                        grpc.StatusCode.DATA_LOSS)
        assert e.details() == "commit failed: 100% \u2717", repr(e.details())
        # Several at once on one channel, finishing later in any order.
        futs = [stub.goProfileReport.future(iter(data[:k]), timeout=10) for k in range(1, 21)]
        for k, f in zip(range(1, 21), futs):
            assert args_of(f.result())["count"] == str(k)


def t_client_cancels():
    """The client cancels in the middle of a stream and while the server holds the call for its
    asynchronous answer; the server must close both calls (checked by the accounting at exit)
    and must not touch them afterwards (the pending timer is freed in on_close)."""
    with channel() as ch:
        stub = Profile_pb2_grpc.ProfileTaskStub(ch)
        gate = threading.Event()

        def gen():
            for i in range(250):
                yield snapshot("c", i)
            gate.wait(10)

        f = stub.collectSnapshot.future(gen(), timeout=30)
        wait_until(lambda: "PROGRESS c 200" in SRV.proc.output(), 10, what="stream in flight")
        f.cancel()
        gate.set()
        assert f.cancelled()
        waits = SRV.proc.output().count("ASYNC_WAIT")
        f = stub.goProfileReport.future(iter([Profile_pb2.GoProfileData(payload=b"a")]), timeout=30,
                                        metadata=[("x-delay-ms", "60000")])
        wait_until(lambda: SRV.proc.output().count("ASYNC_WAIT") > waits, 10, what="async call pending")
        f.cancel()
        assert f.cancelled()
        # Deadline expiry: the client resets the stream; the server must close the call.
        expect_code(lambda: stub.goProfileReport(iter([Profile_pb2.GoProfileData(payload=b"a")]), timeout=0.2,
                                                 metadata=[("x-delay-ms", "60000")]),
                    grpc.StatusCode.DEADLINE_EXCEEDED)
        stub.getProfileTaskCommands(Profile_pb2.ProfileTaskCommandQuery(), timeout=10)


def t_settings_and_windows():
    sock, conn = h2_connect()
    with sock:
        sock.settimeout(10)
        deadline = time.monotonic() + 10
        got = False
        while not got and time.monotonic() < deadline:
            for ev in conn.receive_data(sock.recv(65536)):
                if isinstance(ev, h2.events.RemoteSettingsChanged):
                    got = True
            sock.sendall(conn.data_to_send())
        assert got
        # The connection-level WINDOW_UPDATE may arrive right after SETTINGS.
        wait_until(lambda: conn.outbound_flow_control_window >= 16 * 1024 * 1024 - 1 or
                   conn.receive_data(sock.recv(65536)) is None, 10, what="connection window")
        assert conn.remote_settings.initial_window_size == 16 * 1024 * 1024, conn.remote_settings
        assert conn.remote_settings.max_concurrent_streams == 1000, conn.remote_settings
        assert conn.outbound_flow_control_window == 16 * 1024 * 1024, conn.outbound_flow_control_window


# ---------------------------------------------------------------- raw HTTP/2 cases

def read_until_closed(sock, timeout=10.0):
    """Reads until the server closes the connection; returns the bytes. Fails on timeout."""
    sock.settimeout(timeout)
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data
        except socket.timeout:
            break
        if not chunk:
            return data
        data += chunk
    raise AssertionError("server did not close the connection within %.0fs" % timeout)


def raw_connect(port=None):
    return socket.create_connection(("127.0.0.1", port or SRV.port), timeout=10)


def grpcio_still_works():
    with channel() as ch:
        stub = Profile_pb2_grpc.ProfileTaskStub(ch)
        a = args_of(stub.getProfileTaskCommands(Profile_pb2.ProfileTaskCommandQuery(service="after"), timeout=10))
        assert a["service"] == "after"


def h2_connect(port=None):
    sock = raw_connect(port)
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    return sock, conn


def h2_request(headers, body_chunks=(), end=True, sid=1, conn_pair=None):
    """Sends one request and collects the response: (headers dict, data, trailers dict, reset)."""
    sock, conn = conn_pair or h2_connect()
    conn.send_headers(sid, headers, end_stream=not body_chunks and end)
    for i, chunk in enumerate(body_chunks):
        conn.send_data(sid, chunk, end_stream=end and i == len(body_chunks) - 1)
    sock.sendall(conn.data_to_send())
    resp, data, trailers, ended, reset = {}, b"", {}, False, None
    sock.settimeout(10)
    deadline = time.monotonic() + 10
    while not ended and time.monotonic() < deadline:
        chunk = sock.recv(65536)
        if not chunk:
            break
        for ev in conn.receive_data(chunk):
            if isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == sid:
                resp = dict(ev.headers)
            elif isinstance(ev, h2.events.DataReceived) and ev.stream_id == sid:
                data += ev.data
                conn.acknowledge_received_data(ev.flow_controlled_length, sid)
            elif isinstance(ev, h2.events.TrailersReceived) and ev.stream_id == sid:
                trailers = dict(ev.headers)
            elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id == sid:
                ended = True
            elif isinstance(ev, h2.events.StreamReset) and ev.stream_id == sid:
                reset = ev.error_code
                ended = True
        out = conn.data_to_send()
        if out:
            sock.sendall(out)
    assert ended, "no end of stream"
    if conn_pair is None:
        sock.close()
    return resp, data, trailers, reset


def grpc_headers(path, ctype="application/grpc", method="POST"):
    return [(":method", method), (":scheme", "http"), (":path", path), (":authority", "127.0.0.1"),
            ("content-type", ctype), ("te", "trailers")]


def grpc_msg(payload, flag=0):
    return struct.pack(">BI", flag, len(payload)) + payload


def status_of(resp, trailers):
    """grpc-status from trailers, or from the headers of a Trailers-Only response."""
    return int(trailers.get("grpc-status", resp.get("grpc-status", "-1")))


def t_raw_garbage():
    with raw_connect() as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + os.urandom(200))
        read_until_closed(s)
    grpcio_still_works()


def t_raw_truncated_preface():
    with raw_connect() as s:
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM")
        s.shutdown(socket.SHUT_WR)
        read_until_closed(s)
    grpcio_still_works()


def t_raw_corrupt_frame():
    # A valid preface and SETTINGS, then a SETTINGS frame whose length is not a multiple of 6.
    sock, conn = h2_connect()
    with sock:
        sock.sendall(struct.pack(">I", 5)[1:] + bytes([0x4, 0, 0, 0, 0, 0]) + b"\0" * 5)
        data = read_until_closed(sock)
        events = conn.receive_data(data) if data else []
        terms = [e for e in events if isinstance(e, h2.events.ConnectionTerminated)]
        assert terms and terms[0].error_code != 0, events
    # A frame header promising more bytes than ever arrive, then the client gives up.
    sock, conn = h2_connect()
    with sock:
        sock.sendall(struct.pack(">I", 1000)[1:] + bytes([0x0, 0, 0, 0, 0, 1]) + b"abc")
        sock.shutdown(socket.SHUT_WR)
        read_until_closed(sock)
    # HEADERS with a broken HPACK block.
    sock, conn = h2_connect()
    with sock:
        block = b"\xff\xff\xff\xff\xff\x7f"
        sock.sendall(struct.pack(">I", len(block))[1:] + bytes([0x1, 0x5, 0, 0, 0, 1]) + block)
        data = read_until_closed(sock)
        terms = [e for e in conn.receive_data(data) if isinstance(e, h2.events.ConnectionTerminated)]
        assert terms and terms[0].error_code != 0
    grpcio_still_works()


def t_raw_compressed_flag():
    q = Profile_pb2.ProfileTaskCommandQuery(service="c").SerializeToString()
    resp, data, trailers, _ = h2_request(grpc_headers(PFX + "getProfileTaskCommands"), [grpc_msg(q, flag=1)])
    assert resp[":status"] == "200", resp
    assert status_of(resp, trailers) == 12, (resp, trailers)
    assert "compression" in resp.get("grpc-message", ""), resp
    assert data == b""
    grpcio_still_works()


def t_raw_bad_flag_and_truncated_prefix():
    q = Profile_pb2.ProfileTaskCommandQuery(service="c").SerializeToString()
    resp, _, trailers, _ = h2_request(grpc_headers(PFX + "getProfileTaskCommands"), [grpc_msg(q, flag=7)])
    assert status_of(resp, trailers) == 13, resp
    # Three bytes of a prefix, then end of stream.
    resp, _, trailers, _ = h2_request(grpc_headers(PFX + "collectSnapshot"), [b"\0\0\0"])
    assert status_of(resp, trailers) == 13, resp
    # A whole prefix and half the body.
    resp, _, trailers, _ = h2_request(grpc_headers(PFX + "collectSnapshot"), [grpc_msg(b"x" * 40)[:20]])
    assert status_of(resp, trailers) == 13, resp
    grpcio_still_works()


def t_raw_unary_message_count():
    q = Profile_pb2.ProfileTaskCommandQuery(service="two").SerializeToString()
    resp, _, trailers, _ = h2_request(grpc_headers(PFX + "getProfileTaskCommands"), [])
    assert status_of(resp, trailers) == 13, (resp, trailers)
    resp, _, trailers, _ = h2_request(grpc_headers(PFX + "getProfileTaskCommands"), [grpc_msg(q) + grpc_msg(q)])
    assert status_of(resp, trailers) == 13, (resp, trailers)
    # Exactly one, split over three DATA frames: fine, with response HEADERS + DATA + trailers.
    m = grpc_msg(q)
    resp, data, trailers, _ = h2_request(grpc_headers(PFX + "getProfileTaskCommands"), [m[:2], m[2:7], m[7:]])
    assert resp[":status"] == "200" and resp["content-type"] == "application/grpc", resp
    assert resp.get("grpc-accept-encoding") == "identity", resp
    assert "grpc-status" not in resp
    assert trailers.get("grpc-status") == "0", trailers
    flag, n = struct.unpack(">BI", data[:5])
    assert flag == 0 and n == len(data) - 5
    cmds = Command_pb2.Commands.FromString(data[5:])
    assert args_of(cmds)["service"] == "two"


def t_raw_undecodable():
    resp, _, trailers, _ = h2_request(grpc_headers(PFX + "getProfileTaskCommands"), [grpc_msg(b"\xff\xff\xff")])
    assert status_of(resp, trailers) == 3, resp


def t_raw_http_errors():
    resp, _, trailers, _ = h2_request(grpc_headers(PFX + "getProfileTaskCommands", ctype="application/json"),
                                      [b"{}"])
    assert resp[":status"] == "415", resp
    resp, _, trailers, _ = h2_request(grpc_headers(PFX + "getProfileTaskCommands", method="GET"))
    assert resp[":status"] == "405", resp
    # application/grpc+proto is a gRPC content-type.
    q = Profile_pb2.ProfileTaskCommandQuery(service="p").SerializeToString()
    resp, _, trailers, _ = h2_request(grpc_headers(PFX + "getProfileTaskCommands", ctype="application/grpc+proto"),
                                      [grpc_msg(q)])
    assert trailers.get("grpc-status") == "0", (resp, trailers)


def t_raw_early_error_resets_sender():
    """An error answered while the client still sends: Trailers-Only, then RST_STREAM NO_ERROR,
    and the connection stays usable for the next stream."""
    pair = h2_connect()
    resp, _, trailers, reset = h2_request(grpc_headers(PFX + "nope"), [grpc_msg(b"x" * 10)], end=False,
                                          conn_pair=pair)
    assert status_of(resp, trailers) == 12, resp
    q = Profile_pb2.ProfileTaskCommandQuery(service="next").SerializeToString()
    resp, data, trailers, _ = h2_request(grpc_headers(PFX + "getProfileTaskCommands"), [grpc_msg(q)], sid=3,
                                         conn_pair=pair)
    assert trailers.get("grpc-status") == "0", (resp, trailers)
    pair[0].close()


def t_raw_connection_drop_mid_stream():
    sock, conn = h2_connect()
    conn.send_headers(1, grpc_headers(PFX + "collectSnapshot"))
    conn.send_data(1, b"".join(grpc_msg(snapshot("drop", i).SerializeToString()) for i in range(10)))
    conn.send_headers(3, grpc_headers(PFX + "goProfileReport"))
    conn.send_data(3, grpc_msg(b""), end_stream=True)  # waits for its timer when we vanish
    sock.sendall(conn.data_to_send())
    time.sleep(0.05)
    sock.close()
    grpcio_still_works()


# ---------------------------------------------------------------- shutdown + accounting

def t_graceful_shutdown():
    ch = channel()
    stub = Profile_pb2_grpc.ProfileTaskStub(ch)
    stub.getProfileTaskCommands(Profile_pb2.ProfileTaskCommandQuery(), timeout=10)  # connected
    gate = threading.Event()
    msgs = [snapshot("bye", i) for i in range(400)]

    def gen():
        for m in msgs[:200]:
            yield m
        gate.wait(20)
        for m in msgs[200:]:
            yield m

    waits = SRV.proc.output().count("ASYNC_WAIT")
    f = stub.collectSnapshot.future(gen(), timeout=60)
    async_f = stub.goProfileReport.future(iter([Profile_pb2.GoProfileData(payload=b"abc")]), timeout=60)
    # Both calls are in flight on the server: 200 snapshots arrived, the async answer is pending.
    wait_until(lambda: "PROGRESS bye 200" in SRV.proc.output(), 10, what="stream in flight")
    wait_until(lambda: SRV.proc.output().count("ASYNC_WAIT") > waits, 10, what="async call pending")
    SRV.proc.signal(signal.SIGTERM)
    wait_until(lambda: "SHUTDOWN" in SRV.proc.output(), 10, what="SHUTDOWN line")
    wait_until(lambda: not port_open(SRV.port), 10, what="listener closed")
    gate.set()
    a = args_of(f.result(timeout=30))
    assert a == {"count": "400", "checksum": fnv_checksum(msgs)}, a
    assert args_of(async_f.result(timeout=30))["count"] == "1"
    ch.close()
    SRV.proc.p.wait(30)
    rc = SRV.proc.p.returncode
    out = SRV.proc.output()
    assert rc == 0, "exit code %s\n%s" % (rc, out[-3000:])
    calls = re.search(r"CALLS opened=(\d+) closed=(\d+)", out)
    assert calls and calls.group(1) == calls.group(2), out[-2000:]
    stats = dict(re.findall(r"(\w+)=(\d+)", re.search(r"^STATS .*$", out, re.M).group(0)))
    assert int(stats["open"]) == 0, stats
    # garbage, truncated preface, bad SETTINGS length, DATA on an idle stream, broken HPACK
    assert int(stats["protocol_errors"]) == 5, stats
    assert int(stats["failed"]) >= 10, stats
    assert int(stats["messages"]) >= 20000, stats
    assert re.search(r"^LIVE_BYTES 0$", out, re.M), out[-2000:]
    check_sanitizer_clean(SRV.proc)
    print(re.search(r"^STATS .*$", out, re.M).group(0))


def t_connection_limit_and_grace_timeout():
    """A second server with max_connections=2 and a 300 ms shutdown grace period."""
    srv2 = Server(max_conns=2, grace_ms=300)
    try:
        a, b = h2_connect(srv2.port), h2_connect(srv2.port)
        for sock, conn in (a, b):  # both are served: their SETTINGS arrive
            sock.settimeout(10)
            assert sock.recv(65536)
        with socket.create_connection(("127.0.0.1", srv2.port), timeout=10) as third:
            read_until_closed(third)  # refused at once (closed without a byte)
        a[0].close()
        # The freed slot becomes usable once the server has seen the close.
        def served():
            with grpc.insecure_channel(srv2.target) as ch:
                Profile_pb2_grpc.ProfileTaskStub(ch).getProfileTaskCommands(
                    Profile_pb2.ProfileTaskCommandQuery(), timeout=2)
            return True
        wait_until(served, 20, interval=0.1, what="connection slot freed")
        # A stream that never half-closes outlives the grace period: the server drops it.
        gate = threading.Event()

        def gen():
            for i in range(250):
                yield snapshot("stuck", i)
            gate.wait(30)

        b[0].close()
        ch = grpc.insecure_channel(srv2.target)
        # wait_for_ready: a slot may still be taken until the server sees the last close.
        f = Profile_pb2_grpc.ProfileTaskStub(ch).collectSnapshot.future(gen(), timeout=60, wait_for_ready=True)
        wait_until(lambda: "PROGRESS stuck 200" in srv2.proc.output(), 20, what="stream in flight")
        srv2.proc.signal(signal.SIGTERM)
        srv2.proc.p.wait(20)
        gate.set()
        assert srv2.proc.p.returncode == 0, srv2.proc.output()[-3000:]
        e = f.exception(timeout=20)
        assert e is not None and e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
                                              grpc.StatusCode.INTERNAL), e
        ch.close()
        out = srv2.proc.output()
        calls = re.search(r"CALLS opened=(\d+) closed=(\d+)", out)
        assert calls and calls.group(1) == calls.group(2) and int(calls.group(1)) >= 2, out[-2000:]
        assert "grace period over" in out, out[-2000:]
        assert re.search(r"^LIVE_BYTES 0$", out, re.M), out[-2000:]
        check_sanitizer_clean(srv2.proc)
    finally:
        if srv2.proc.alive():
            srv2.proc.kill9()


def main():
    global SRV
    SRV = Server()
    r = Results()
    try:
        for name, fn in [
            ("unary_echo", t_unary_echo),
            ("compat_path", t_compat_path),
            ("stream_10k", t_stream_10k),
            ("stream_empty", t_stream_empty),
            ("stream_out_of_order_rejected", t_stream_out_of_order_rejected),
            ("concurrent_50_streams_200_unary_one_channel", t_concurrent_one_channel),
            ("unknown_method", t_unknown_method),
            ("oversized_message", t_oversized),
            ("auth_metadata", t_auth_metadata),
            ("async_finish", t_async_finish),
            ("client_cancels", t_client_cancels),
            ("settings_and_windows", t_settings_and_windows),
            ("raw_garbage", t_raw_garbage),
            ("raw_truncated_preface", t_raw_truncated_preface),
            ("raw_corrupt_frame", t_raw_corrupt_frame),
            ("raw_compressed_flag", t_raw_compressed_flag),
            ("raw_bad_flag_and_truncated_prefix", t_raw_bad_flag_and_truncated_prefix),
            ("raw_unary_message_count", t_raw_unary_message_count),
            ("raw_undecodable", t_raw_undecodable),
            ("raw_http_errors", t_raw_http_errors),
            ("raw_early_error_resets_sender", t_raw_early_error_resets_sender),
            ("raw_connection_drop_mid_stream", t_raw_connection_drop_mid_stream),
            ("connection_limit_and_grace_timeout", t_connection_limit_and_grace_timeout),
            ("graceful_shutdown", t_graceful_shutdown),
        ]:
            r.run(name, fn)
    finally:
        if SRV.proc.alive():
            SRV.proc.stop()
            sys.stderr.write("---- server output ----\n%s\n" % SRV.proc.output()[-5000:])
    r.finish()


if __name__ == "__main__":
    main()
