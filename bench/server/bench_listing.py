"""Listing routes under a large task (issue 15, finding 6): a trace task with N profiled segments
(each with its SegmentObject of 5 spans), then
  - one page of GET …/segments (default limit 100, and limit 1000): time and bytes;
  - page 1 and page 1,000 of 100 segments (the second with the cursor of segment 99,900), each
    the median of 5 calls: with a keyset index (schema v8) both cost the same;
  - every page, following X-Next-Cursor with limit=1000 (the CLI's way): total time;
  - /healthz latency (p50, p99, max) while C clients each request page after page and C more
    send a request for a page and never read the answer (the finding's stall).
Before this change one GET …/segments answered every segment at once on the event loop
(100k segments: 13.9 MB in 1.7 s, and 20 clients that never read stalled /healthz 15 s).

    PYTHONPATH=build/release/pystubs:tests/harness /usr/bin/python3 bench/server/bench_listing.py \
        [--segments 100000] [--clients 20] [--seconds 10] [--build build/release] \
        [--before OLD_SKYPROFD]
--before: a skyprofd binary of an earlier commit. The data is then loaded by it, the page
timings taken with it, and the same database reopened by this build (which migrates it) for
the same timings: before and after in one run.
PostgreSQL: with SKP_TEST_DB=pg in the environment skyprofd's database is a fresh PostgreSQL
one (tests/harness: the server of SKP_PG_DIR, e.g. one of `pgserver.py start DIR`, or a private
server the harness starts and stops); --before then reopens the same database.
The machine's load average is printed: under load, latency figures are the scheduler's too."""
import argparse
import json
import os
import socket
import sys
import tempfile
import threading
import time
import urllib.parse

import skp_harness  # noqa: E402,F401
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "integration", "server"))
from skyprofd_util import Skyprofd  # noqa: E402
from profile import Profile_pb2  # noqa: E402
from language_agent import Tracing_pb2  # noqa: E402

V3 = "/skywalking.v3."


def q(s):
    return urllib.parse.quote(s, safe="")


def get(port, path, timeout=120):
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        return r.status, r.getheader("X-Next-Cursor"), body
    finally:
        c.close()


def cursor_after(start_ms, segment_id):
    """The cursor skyprofd would send after this segment. Its encoding is the server's private
    business (hex of "start NUL id", http_page.c); the benchmark builds it to jump to page 1,000
    without walking 999 pages."""
    return (str(start_ms).encode() + b"\0" + segment_id.encode()).hex()


def pages_1_and_1000(S, base, n_segments, label):
    def timed(path):
        times = []
        for _ in range(5):
            t = time.monotonic()
            st, cur, body = get(S.http_port, path)
            times.append(time.monotonic() - t)
            assert st == 200, (st, body[:200])
        times.sort()
        return times[2], json.loads(body), cur
    t1, first, _ = timed(base + "?limit=100")
    skip = min(99900, max(0, n_segments - 100))
    start = first[0]["start"]
    cur = cursor_after(start, "seg-%07d" % (skip - 1)) if skip else ""
    t1000, page, nxt = timed(base + "?limit=100" + ("&cursor=" + q(cur) if cur else ""))
    assert page and page[0]["segmentId"] == "seg-%07d" % skip, page[:1]
    print("%-10s page 1: %d segments in %.4f s; page %d: %d segments (from %s) in %.4f s "
          "(medians of 5)" % (label, len(first), t1, skip // 100 + 1, len(page),
                               page[0]["segmentId"], t1000))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--segments", type=int, default=100000)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--before", default=None, help="skyprofd binary of an earlier commit")
    a = ap.parse_args()
    os.environ.setdefault("SKP_BUILD_DIR", os.path.abspath(a.build))
    print("load average at start: %.1f %.1f %.1f" % os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="skp-bench-listing-") as d:
        new_binary = skp_harness.SKYPROFD
        if a.before:
            skp_harness.SKYPROFD = os.path.abspath(a.before)
        S = Skyprofd(d, "--keep-segments", "all")
        try:
            st, doc = S.json("POST", "/api/v1/profile/tasks", {
                "service": "svc-bench", "endpointName": "/b", "duration": 15,
                "minDurationThreshold": 0, "dumpPeriod": 10, "maxSamplingCount": 5})
            tid = doc["id"]
            t0 = time.time()
            now = int(time.time() * 1000)
            B = 5000
            for lo in range(0, a.segments, B):
                ids = ["seg-%07d" % i for i in range(lo, min(lo + B, a.segments))]
                S.snapshots([Profile_pb2.ThreadSnapshot(
                    taskId=tid, traceSegmentId=s, time=now + i, sequence=0,
                    stack=Profile_pb2.ThreadStack(codeSignatures=["main", "handler", "work"]))
                    for i, s in enumerate(ids)], timeout=600)
                S.stream(V3 + "TraceSegmentReportService/collect", [Tracing_pb2.SegmentObject(
                    traceId="tr-" + s, traceSegmentId=s, service="svc-bench", serviceInstance="inst-1",
                    spans=[Tracing_pb2.SpanObject(
                        spanId=k, parentSpanId=k - 1, startTime=now + k, endTime=now + 50 - k,
                        operationName="/b" if k == 0 else "op-%d" % k,
                        spanType=Tracing_pb2.Entry if k == 0 else Tracing_pb2.Local)
                        for k in range(5)]) for s in ids], timeout=600)
            print("loaded %d segments in %.1f s" % (a.segments, time.time() - t0))
            base = "/api/v1/profile/tasks/%s/segments" % q(tid)
            pages_1_and_1000(S, base, a.segments, "before" if a.before else "this build")
            if a.before:
                S.stop(expect_rc=None)
                skp_harness.SKYPROFD = new_binary
                t = time.monotonic()
                S = Skyprofd(d, "--keep-segments", "all")
                print("this build reopened the database (migration included) in %.1f s"
                      % (time.monotonic() - t))
                pages_1_and_1000(S, base, a.segments, "this build")
            for lim in ("", "?limit=1000"):
                t = time.monotonic()
                st, cur, body = get(S.http_port, base + lim)
                n = len(json.loads(body))
                print("one page %-12s %4d segments, %8d bytes, %.3f s (next cursor: %s)"
                      % (lim or "(default)", n, len(body), time.monotonic() - t, "yes" if cur else "no"))
            t = time.monotonic()
            total, pages, cur = 0, 0, None
            while True:
                st, cur, body = get(S.http_port, base + "?limit=1000" + ("&cursor=" + q(cur) if cur else ""))
                total += len(json.loads(body))
                pages += 1
                if not cur:
                    break
            print("all pages (limit=1000): %d segments in %d pages, %.1f s" % (total, pages, time.monotonic() - t))

            stop = time.monotonic() + a.seconds
            def reader():
                while time.monotonic() < stop:
                    get(S.http_port, base + "?limit=1000")
            hung = []
            for _ in range(a.clients):
                sk = socket.create_connection(("127.0.0.1", S.http_port))
                sk.sendall(("GET %s?limit=1000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % base).encode())
                hung.append(sk)             # never read
            ths = [threading.Thread(target=reader) for _ in range(a.clients)]
            for th in ths:
                th.start()
            lat = []
            while time.monotonic() < stop:
                t = time.monotonic()
                st, _, _ = get(S.http_port, "/healthz", timeout=60)
                lat.append(time.monotonic() - t)
                time.sleep(0.05)
            for th in ths:
                th.join()
            for sk in hung:
                sk.close()
            lat.sort()
            print("/healthz during %d reading + %d never-reading clients of 1000-segment pages: "
                  "%d calls, p50 %.1f ms, p99 %.1f ms, max %.1f ms"
                  % (a.clients, a.clients, len(lat), lat[len(lat) // 2] * 1e3,
                     lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3, lat[-1] * 1e3))
            rss = [l for l in S.http("GET", "/metrics")[2].decode().splitlines()
                   if "resident" in l and not l.startswith("#")]
            print("skyprofd " + (", ".join(rss) if rss else "rss: n/a"))
        finally:
            S.stop(expect_rc=None)
    print("load average at end: %.1f %.1f %.1f" % os.getloadavg())


if __name__ == "__main__":
    main()
