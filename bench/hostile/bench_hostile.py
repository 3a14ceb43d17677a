"""skyprofd under hostile uploads (issue 25): for each case a fresh skyprofd (SQLite in a temporary
folder) gets one hostile goProfileReport upload for a real trace task while a client polls
/healthz every 10 ms; printed per case and binary: the largest /healthz latency while the upload
was handled (the event loop's stall), the process's peak RSS (VmHWM), the upload's answer and
its time, and the snapshot rows it stored. Targets: no stall above 100 ms, no case above
256 MiB.

Cases:
  rows       100,000 samples of count 100 in a 3 KB gzip: 10 M snapshot rows before
  tables     20 M empty samples in a 40 KB gzip: decoded tables of ~0.5 GB before
  inflate    a 520 KB gzip inflating to 512 MiB of zeros
  segments   150,000 distinct segment ids (a linear segment lookup before)
  normal     an ordinary file: 2,000 samples of 20 segments (the price of the worker)
  streams16  not an upload: 16 raw HTTP/2 connections x 1000 collectSnapshot streams, each
             with one small snapshot and never half-closed; "rows" is the largest
             skyprof_grpc_buffered_bytes (KiB; its value after the streams opened without the
             _peak gauge), "answer" the streams
             refused with RESOURCE_EXHAUSTED; peak is the process's VmHWM
  streams64  the same with 64 connections (the issue: 786 MB above the 256 MiB budget)
  jfr        not a goProfileReport: a 30 MiB async-profiler upload (the --jfr-max-bytes default;
             stored whole, parsed only when analysed) through AsyncProfilerTask/collect; "rows"
             the files stored
  ebpf       not a goProfileReport: one collectProfilingData stream of 200,000 ON_CPU samples
             (the per-stream limit), each its own 8-frame stack, stored when the stream ends;
             "rows" the eBPF rows stored (skyprof_ebpf_rows_stored_total when present)
  listing    not an upload: 20,000 endpoints of one service (one segment each, sent over gRPC),
             then every page of GET …/endpoints/stats?limit=1000 read in turn while /healthz is
             polled (the pages were built and serialised on the loop before; the "bytes" column
             is the number of endpoints, the answer the pages read)

    PYTHONPATH=build/release/pystubs:tests/harness /usr/bin/python3 bench/hostile/bench_hostile.py \
        [--build build/release] [--before OLD_SKYPROFD] [--cases rows,tables,...]
--before: a skyprofd binary of an earlier commit (e.g. built in a `git worktree` of the commit
before issue 25's changes): both binaries run each case, printed side by side.
The machine's load average is printed: under load, latency figures are the scheduler's too."""
import argparse
import gzip
import os
import sys
import tempfile
import time

import skp_harness  # noqa: E402,F401
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "integration", "server"))
from skyprofd_util import Command_pb2, Profile_pb2, Skyprofd  # noqa: E402
from pprof_util import Profile, f_bytes  # noqa: E402

GOPROF = "/skywalking.v3.ProfileTask/goProfileReport"


def case_rows():
    p = Profile([("samples", "count")], ("cpu", "nanoseconds"), 10000000)
    f = p.function(1, "main.spin", "s.go")
    loc = p.location(1, [(f, 1)])
    for i in range(100000):
        p.sample([loc], [100], [("segment_id", "seg-%d" % (i % 10))])
    return p.gz()


def case_tables():
    return gzip.compress(f_bytes(2, b"") * 20000000, 9)


def case_inflate():
    return gzip.compress(b"\0" * (512 << 20), 9)


def case_segments():
    p = Profile([("samples", "count")], ("cpu", "nanoseconds"), 10000000)
    f = p.function(1, "main.spin", "s.go")
    loc = p.location(1, [(f, 1)])
    for i in range(150000):
        p.sample([loc], [1], [("segment_id", "seg-%d" % i)])
    return p.gz()


def case_normal():
    p = Profile([("samples", "count"), ("cpu", "nanoseconds")], ("cpu", "nanoseconds"), 10000000)
    fs = [p.function(i + 1, "main.f%d" % i, "f.go") for i in range(30)]
    locs = [p.location(i + 1, [(fs[i], 10 + i)]) for i in range(30)]
    for i in range(2000):
        stack = [locs[(i + k) % 30] for k in range(8)]
        p.sample(stack, [3, 30000000], [("segment_id", "seg-%d" % (i % 20))])
    return p.gz()


def case_listing():
    return LISTING_ENDPOINTS


LISTING_ENDPOINTS = 20000
JFR_BYTES = 30 << 20
EBPF_SAMPLES = 200000
CASES = {"jfr": lambda: JFR_BYTES, "ebpf": lambda: EBPF_SAMPLES, "streams16": lambda: 16, "streams64": lambda: 64, "rows": case_rows, "tables": case_tables, "inflate": case_inflate,
         "segments": case_segments, "normal": case_normal, "listing": case_listing}


def vm_hwm(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


POLLER = r"""
import http.client, sys, threading, time
port, stop, worst, n = int(sys.argv[1]), [], 0.0, 0
threading.Thread(target=lambda: (sys.stdin.read(), stop.append(1)), daemon=True).start()
while not stop:
    t = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        c.request("GET", "/healthz")
        c.getresponse().read()
    except OSError:
        pass
    finally:
        c.close()
    worst = max(worst, (time.monotonic() - t) * 1000)
    n += 1
    time.sleep(0.01)
print(worst, n)
"""


class Poller:
    """Polls /healthz every 10 ms from its own process (a thread of this one would also wait
    for the GIL while the client encodes its messages), a new connection per probe (a stalled
    loop may close a kept-alive one): the time counted is connect + request + answer. The
    interface of a thread: start(), stop = True, join(), then max_ms and n."""

    def __init__(self, port):
        self.port, self.stop, self.max_ms, self.n, self.p = port, False, 0.0, 0, None

    def start(self):
        import subprocess
        self.p = subprocess.Popen([sys.executable, "-c", POLLER, str(self.port)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def join(self):
        out, _ = self.p.communicate("", timeout=600)
        worst, n = out.split()
        self.max_ms, self.n = float(worst), int(n)


def under_poll(S, call):
    """Runs call() (an upload) while /healthz is polled: its answer ("OK" or the gRPC status
    name), its seconds, the largest /healthz latency (ms) and the peak RSS so far."""
    rss0 = vm_hwm(S.pid)
    poll = Poller(S.http_port)
    poll.start()
    t = time.monotonic()
    try:
        call()
        answer = "OK"
    except Exception as e:  # grpc.RpcError
        answer = e.code().name if hasattr(e, "code") else type(e).__name__
    took = time.monotonic() - t
    time.sleep(0.05)
    poll.stop = True
    poll.join()
    return answer, took, poll.max_ms, max(vm_hwm(S.pid), rss0)


def run_listing(binary, n_ep):
    from skyprofd_util import Tracing_pb2
    import json
    import urllib.parse
    skp_harness.SKYPROFD = binary
    with tempfile.TemporaryDirectory(prefix="skp-hostile-") as d:
        S = Skyprofd(d, "--max-endpoints-per-service", str(n_ep), log_level="warn")
        try:
            t0 = int(time.time() * 1000) - 1000
            segs = (Tracing_pb2.SegmentObject(
                traceId="tr-%d" % i, traceSegmentId="sg-%d" % i, service="svc-many",
                serviceInstance="i1", spans=[Tracing_pb2.SpanObject(
                    spanId=0, parentSpanId=-1, startTime=t0, endTime=t0 + 5 + i % 50,
                    operationName="/e%06d" % i, spanType=Tracing_pb2.Entry)])
                for i in range(n_ep))
            S.stream("/skywalking.v3.TraceSegmentReportService/collect", segs, timeout=600)
            path = "/api/v1/services/svc-many/endpoints/stats?limit=1000"
            last = ("/e%06d" % (n_ep - 2)).encode().hex()
            deadline = time.monotonic() + 120
            while True:  # recorded after the call returns
                _, _, body = S.http("GET", path + "&cursor=" + last)
                if json.loads(body)["endpoints"]:
                    break
                assert time.monotonic() < deadline, "endpoints not recorded"
                time.sleep(0.1)
            rss0 = vm_hwm(S.pid)
            poll = Poller(S.http_port)
            poll.start()
            t = time.monotonic()
            cur, pages, listed = None, 0, 0
            while True:
                st, h, body = S.http("GET", path + ("&cursor=" + urllib.parse.quote(cur)
                                                    if cur else ""), timeout=300)
                assert st == 200, (st, body[:200])
                listed += len(json.loads(body)["endpoints"])
                pages += 1
                cur = h.get("x-next-cursor")
                if not cur:
                    break
            took = time.monotonic() - t
            time.sleep(0.05)
            poll.stop = True
            poll.join()
            return {"stall_ms": poll.max_ms, "rss": max(vm_hwm(S.pid), rss0),
                    "answer": "%d pages" % pages, "s": took, "rows": listed}
        finally:
            S.stop()


def run_streams(binary, n_conns, per_conn=1000):
    """Opens n_conns x per_conn streams (HEADERS + one snapshot, no END_STREAM) and holds
    them while reading the answers; then reads /metrics and VmHWM."""
    import socket
    import struct
    import h2raw
    skp_harness.SKYPROFD = binary
    msg = Profile_pb2.ThreadSnapshot(
        taskId="t-streams", traceSegmentId="seg-s", time=1, sequence=0,
        stack=Profile_pb2.ThreadStack(codeSignatures=["f (a.py:1)"])).SerializeToString()
    data = b"\x00" + struct.pack(">I", len(msg)) + msg
    blk = h2raw.grpc_headers("/skywalking.v3.ProfileTask/collectSnapshot")
    with tempfile.TemporaryDirectory(prefix="skp-hostile-") as d:
        S = Skyprofd(d, log_level="error")
        socks = []
        try:
            rss0 = vm_hwm(S.pid)
            poll = Poller(S.http_port)
            poll.start()
            t = time.monotonic()
            sent = 0
            for _ in range(n_conns):
                s = socket.create_connection(("127.0.0.1", S.grpc_port))
                socks.append(s)
                h2raw.handshake(s)
                out = b"".join(h2raw.frame(h2raw.HEADERS, h2raw.END_HEADERS, 1 + 2 * i, blk) +
                               h2raw.frame(h2raw.DATA, 0, 1 + 2 * i, data)
                               for i in range(per_conn))
                s.sendall(out)
                sent += len(out)
            for s in socks:  # the answers (refusals), so the server's output drains
                h2raw.read_frames(s, lambda fr: False, deadline_s=0.5)
            refused = int(S.metric("skyprof_grpc_budget_refused_total") or 0)
            peak_buf = S.metric("skyprof_grpc_buffered_bytes_peak")
            if peak_buf is None:  # a binary before the peak gauge: the figure now
                peak_buf = S.metric("skyprof_grpc_buffered_bytes") or 0
            took = time.monotonic() - t
            rss = vm_hwm(S.pid)
            poll.stop = True
            poll.join()
            return {"stall_ms": poll.max_ms, "rss": max(rss, rss0),
                    "answer": "%d refused, %d KB sent" % (refused, sent // 1000), "s": took,
                    "rows": int(peak_buf) // 1024}
        finally:
            for s in socks:
                s.close()
            S.stop()


def run_jfr(binary, size):
    """One async-profiler file of `size` bytes for a live Java instance's task."""
    from profile import AsyncProfiler_pb2 as AP
    from skyprofd_util import Management_pb2
    import json
    skp_harness.SKYPROFD = binary
    v10 = "/skywalking.v10.AsyncProfilerTask/"
    with tempfile.TemporaryDirectory(prefix="skp-hostile-") as d:
        S = Skyprofd(d, log_level="warn")
        try:
            S.unary("/skywalking.v3.ManagementService/keepAlive", Management_pb2.InstancePingPkg(
                service="svc-java", serviceInstance="j1"))
            st, _, body = S.http("POST", "/api/v1/async-profiler/tasks", json.dumps(
                {"service": "svc-java", "duration": 60, "events": ["CPU"]}).encode(),
                {"Content-Type": "application/json"})
            assert st == 201, (st, body)
            tid = json.loads(body)["id"]
            data = os.urandom(size)
            msgs = [AP.AsyncProfilerData(metaData=AP.AsyncProfilerMetaData(
                service="svc-java", serviceInstance="j1", taskId=tid, type=AP.PROFILING_SUCCESS,
                contentSize=size))] + [AP.AsyncProfilerData(content=data[i:i + (1 << 20)])
                                       for i in range(0, size, 1 << 20)]
            call = S.channel().stream_stream(
                v10 + "collect", request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=AP.AsyncProfilerCollectionResponse.FromString)
            answer, took, stall, rss = under_poll(
                S, lambda: [None for _ in call(iter(msgs), timeout=600)])
            doc = json.loads(S.http("GET", "/api/v1/async-profiler/tasks/" + tid)[2])
            files = sum(len(x.get("files", [])) for x in doc.get("instances", [])) \
                if isinstance(doc.get("instances"), list) else len(doc.get("files", []))
            return {"stall_ms": stall, "rss": rss, "answer": answer, "s": took, "rows": files}
        finally:
            S.stop()


def run_ebpf(binary, n):
    """One collectProfilingData stream of n ON_CPU samples, each its own stack."""
    from ebpf.profiling import Profile_pb2  # noqa: F811 (the eBPF messages' module)
    skp_harness.SKYPROFD = binary
    with tempfile.TemporaryDirectory(prefix="skp-hostile-") as d:
        S = Skyprofd(d, log_level="warn")
        try:
            now = int(time.time() * 1000)
            msgs = (Profile_pb2.EBPFProfilingData(
                task=Profile_pb2.EBPFProfilingTaskMetadata(
                    taskId="task-bench", processId="p-bench", profilingStartTime=now - 1000,
                    currentTime=now),
                onCPU=Profile_pb2.EBPFOnCPUProfiling(stacks=[Profile_pb2.EBPFProfilingStackMetadata(
                    stackType=Profile_pb2.PROCESS_USER_SPACE, stackId=i,
                    stackSymbols=["f%d_%d (app.py:%d)" % (i, k, k) for k in range(8)])],
                    dumpCount=1)) for i in range(n))
            answer, took, stall, rss = under_poll(S, lambda: S.stream(
                "/skywalking.v3.EBPFProfilingService/collectProfilingData", msgs, timeout=600))
            rows = S.sql_rows("SELECT count(*) FROM ebpf_stacks")[0][0]
            return {"stall_ms": stall, "rss": rss, "answer": answer, "s": took,
                    "rows": int(rows)}
        finally:
            S.stop()


def run_case(binary, name, data):
    if name == "jfr":
        return run_jfr(binary, data)
    if name == "ebpf":
        return run_ebpf(binary, data)
    if name == "listing":
        return run_listing(binary, data)
    if name.startswith("streams"):
        return run_streams(binary, data)
    skp_harness.SKYPROFD = binary
    with tempfile.TemporaryDirectory(prefix="skp-hostile-") as d:
        S = Skyprofd(d, log_level="warn")
        try:
            st, doc = S.create_task("svc-hostile", "/h", duration=5)
            assert st == 201, doc
            tid = doc["id"]
            call = S.channel().stream_unary(
                GOPROF, request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=Command_pb2.Commands.FromString)
            chunks = [data[i:i + 65536] for i in range(0, len(data), 65536)]
            msgs = [Profile_pb2.GoProfileData(taskId=tid, payload=c, isLast=i == len(chunks) - 1)
                    for i, c in enumerate(chunks)]
            answer, took, stall, rss = under_poll(S, lambda: call(iter(msgs), timeout=600))
            rows = S.metric("skyprof_snapshots_stored_total") or 0
            return {"stall_ms": stall, "rss": rss, "answer": answer, "s": took, "rows": int(rows)}
        finally:
            S.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=skp_harness.BUILD_DIR)
    ap.add_argument("--before", default=None, help="skyprofd binary of an earlier commit")
    ap.add_argument("--cases", default=",".join(CASES))
    a = ap.parse_args()
    after = os.path.abspath(os.path.join(a.build, "src", "server", "skyprofd"))
    bins = ([("before", os.path.abspath(a.before))] if a.before else []) + [("after", after)]
    print("load average: %.2f %.2f %.2f" % os.getloadavg())
    print("%-9s %-7s %8s %10s %9s %7s %-20s" % ("case", "build", "bytes", "stall ms", "peak MiB",
                                                 "time s", "answer (rows stored)"))
    for name in a.cases.split(","):
        data = CASES[name]()
        for label, binary in bins:
            r = run_case(binary, name, data)
            print("%-9s %-7s %8d %10.0f %9.0f %7.2f %s (%d)" % (
                name, label, data if isinstance(data, int) else len(data), r["stall_ms"],
                r["rss"] / 1048576.0, r["s"], r["answer"],
                r["rows"]), flush=True)


if __name__ == "__main__":
    main()
