"""skyprofd's gRPC listener under hostile connections (issue 15, findings 1-4), over loopback with
raw HTTP/2 sockets beside a real grpcio agent. Small limits given as flags make tens of
connections show what thousands would: per-peer caps, accepting paused (not spinning) when the
process runs out of file descriptors, idle timeouts for connections and streams, the server-wide
memory budget, and the decode limit of one message. Every wait is on a condition with a deadline."""
import os
import resource
import sys
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import h2raw  # noqa: E402
import rawsock  # noqa: E402
from rawsock import wait_for  # noqa: E402
from skp_harness import Results, tempdir  # noqa: E402
from skyprofd_util import V3, Skyprofd, Management_pb2, Tracing_pb2  # noqa: E402

R = Results()
HEARTBEAT = V3 + "ManagementService/keepAlive"
COLLECT = V3 + "TraceSegmentReportService/collect"
IN_SYNC = V3 + "TraceSegmentReportService/collectInSync"


def agent_ok(S):
    """A real agent call (grpcio, fresh channel) and /healthz both answer."""
    with grpc.insecure_channel(S.grpc_target) as ch:
        call = ch.unary_unary(HEARTBEAT, request_serializer=lambda m: m.SerializeToString(),
                              response_deserializer=lambda b: b)
        call(Management_pb2.InstancePingPkg(service="svc", serviceInstance="i1"), timeout=20)
    st, _, _ = S.http("GET", "/healthz", timeout=20)
    assert st == 200


def closed_by_server(s, deadline_s):
    _, closed = h2raw.read_frames(s, lambda f: False, deadline_s)
    return closed


def t_per_peer_cap(d):
    S = Skyprofd(d, "--max-conns-per-peer", "10")
    socks = []
    try:
        for _ in range(25):
            s = rawsock.connect(S.grpc_port, "127.0.0.2")
            socks.append(s)
            try:
                h2raw.handshake(s)
            except OSError:
                pass  # refused already: the server closed it
        wait_for(lambda: (S.metric("skyprof_grpc_connections_refused_total") or 0) >= 15,
                 "15 refusals")
        open_ = S.metric("skyprof_grpc_connections_open")
        assert open_ <= 10, open_
        agent_ok(S)  # another address still gets in
    finally:
        for s in socks:
            s.close()
        S.stop()


def t_out_of_fds_pauses_accept(d):
    S = Skyprofd(d, "--max-conns-per-peer", "100000")
    socks = []
    try:
        # Leave the daemon a few fds more than it uses now: its caps (from the limit it saw at
        # start) are far above, so accept() itself runs out.
        n_open = len(os.listdir("/proc/%d/fd" % S.pid))
        soft, hard = resource.prlimit(S.pid, resource.RLIMIT_NOFILE)
        resource.prlimit(S.pid, resource.RLIMIT_NOFILE, (n_open + 20, hard))
        for _ in range(60):
            try:
                socks.append(rawsock.connect(S.grpc_port, "127.0.0.3", timeout=2))
            except OSError:
                break
        # (no HTTP until the limit is back: the API's listener is out of fds too)
        wait_for(lambda: "accepting paused" in S.output(), "a pause")
        c0, logged0 = rawsock.cpu_seconds(S.pid), S.output().count("accept failed")
        time.sleep(2.0)
        used = rawsock.cpu_seconds(S.pid) - c0
        logged = S.output().count("accept failed") - logged0
        print("  while out of fds: %.2f s CPU and %d log lines in 2 s" % (used, logged))
        assert used < 0.5, "the daemon spins: %.2f s CPU in 2 s" % used
        assert logged <= 6, "%d accept failure lines in 2 s" % logged
        for s in socks:
            s.close()
        socks = []
        resource.prlimit(S.pid, resource.RLIMIT_NOFILE, (soft, hard))
        assert S.metric("skyprof_grpc_accept_pauses_total") >= 1
        agent_ok(S)  # accepting resumed
    finally:
        for s in socks:
            s.close()
        S.stop()


def t_idle_connections_closed(d):
    S = Skyprofd(d, "--grpc-idle-timeout-ms", "400", "--max-conns-per-peer", "1000")
    socks = []
    try:
        for _ in range(30):
            s = rawsock.connect(S.grpc_port, "127.0.0.4")
            h2raw.handshake(s)
            socks.append(s)
        for s in socks:
            frames, closed = h2raw.read_frames(
                s, lambda f: any(t == h2raw.GOAWAY for t, _, _, _ in f), 10)
            assert any(t == h2raw.GOAWAY for t, _, _, _ in frames) or closed
        wait_for(lambda: S.metric("skyprof_grpc_connections_open") == 0, "all closed")
        assert S.metric("skyprof_grpc_idle_closed_total") >= 30
        agent_ok(S)
    finally:
        for s in socks:
            s.close()
        S.stop()


def t_idle_stream_cancelled(d):
    S = Skyprofd(d, "--grpc-stream-idle-timeout-ms", "400")
    try:
        s = rawsock.connect(S.grpc_port)
        h2raw.handshake(s)
        s.sendall(h2raw.frame(h2raw.HEADERS, h2raw.END_HEADERS, 1, h2raw.grpc_headers(COLLECT)))
        frames, _ = h2raw.read_frames(
            s, lambda f: any(st == 1 and (t == h2raw.RST_STREAM or fl & h2raw.END_STREAM)
                             for t, fl, st, _ in f), 10)
        assert any(st == 1 and (t == h2raw.RST_STREAM or fl & h2raw.END_STREAM)
                   for t, fl, st, _ in frames), frames
        assert S.metric("skyprof_grpc_streams_idle_cancelled_total") == 1
        s.close()
    finally:
        S.stop()


def t_memory_budget(d):
    budget = 2 * 1024 * 1024
    S = Skyprofd(d, "--grpc-memory-budget", str(budget), "--max-conns-per-peer", "1000")
    socks = []
    try:
        # 12 connections, each with a 1 MiB message of which 300 KB arrived: 3.6 MB wanted.
        # A connection that arrives over the budget is refused (counted) and closed at once:
        # writing to it then fails, which depends on how fast the server read the others.
        for i in range(12):
            s = rawsock.connect(S.grpc_port, "127.0.0.5")
            socks.append(s)
            try:
                h2raw.handshake(s)
                s.sendall(h2raw.frame(h2raw.HEADERS, h2raw.END_HEADERS, 1,
                                      h2raw.grpc_headers(COLLECT)))
                part = b"\x00" + (1 << 20).to_bytes(4, "big") + b"\x0a" * (300 * 1000)
                for off in range(0, len(part), 16384):
                    s.sendall(h2raw.frame(h2raw.DATA, 0, 1, part[off:off + 16384]))
            except OSError:
                pass
        wait_for(lambda: (S.metric("skyprof_grpc_budget_refused_total") or 0) >= 1,
                 "a budget refusal")
        held = S.metric("skyprof_grpc_buffered_bytes")
        assert held <= budget + 512 * 1024, held
        # The calls still held and their connections' nghttp2 state count in the budget now
        # (issue 25): new calls are refused until they go away, then fit again.
        for s in socks:
            s.close()
        socks = []
        wait_for(lambda: S.metric("skyprof_grpc_buffered_bytes") == 0, "buffers freed")
        agent_ok(S)
    finally:
        for s in socks:
            s.close()
        S.stop()


def t_decode_limit(d):
    # collectInSync arrives decoded by the server: 300k empty spans in one SegmentCollection.
    S = Skyprofd(d, "--max-decoded-bytes", "4000000", "--max-segment-spans", "1000000")
    try:
        seg = Tracing_pb2.SegmentObject(traceId="t", traceSegmentId="s", service="svc",
                                        serviceInstance="i").SerializeToString()
        seg += b"\x1a\x00" * 300000
        coll = b"\x0a" + _varint(len(seg)) + seg
        t0 = time.monotonic()
        try:
            S.unary(IN_SYNC, coll, raw=True, timeout=60)
            raise AssertionError("accepted")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e
        print("  300000 empty spans via collectInSync refused in %.2f s" % (time.monotonic() - t0))
        assert S.metric("skyprof_grpc_decode_refused_total") == 1
        agent_ok(S)
    finally:
        S.stop()


def t_segment_decode_limit(d):
    # collect (streamed, decoded by the collector): 5000 spans of 200 empty tags each, 2 MB on
    # the wire, tens of MB once every tag is a struct.
    S = Skyprofd(d, "--max-decoded-bytes", "4000000", "--keep-segments", "all")
    try:
        seg = Tracing_pb2.SegmentObject(traceId="t", traceSegmentId="s", service="svc",
                                        serviceInstance="i").SerializeToString()
        span = b"\x62\x00" * 200
        seg += (b"\x1a" + _varint(len(span)) + span) * 5000
        t0 = time.monotonic()
        try:
            S.stream(COLLECT, [seg], raw=True, timeout=60)
            raise AssertionError("accepted")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e
        print("  1M empty tags via collect refused in %.2f s" % (time.monotonic() - t0))
        assert S.metric("skyprof_segments_refused_total") == 1
        agent_ok(S)
    finally:
        S.stop()


def _varint(v):
    out = b""
    while v >= 0x80:
        out += bytes([(v & 0x7f) | 0x80])
        v >>= 7
    return out + bytes([v])


if __name__ == "__main__":
    only = sys.argv[1:]
    cases = [("per_peer_cap", t_per_peer_cap),
             ("out_of_fds_pauses_accept", t_out_of_fds_pauses_accept),
             ("idle_connections_closed", t_idle_connections_closed),
             ("idle_stream_cancelled", t_idle_stream_cancelled),
             ("memory_budget", t_memory_budget),
             ("decode_limit", t_decode_limit),
             ("segment_decode_limit", t_segment_decode_limit)]
    for name, fn in cases:
        if only and name not in only:
            continue
        with tempdir() as d:
            R.run(name, fn, d)
    R.finish()
