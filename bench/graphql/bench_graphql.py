"""getSegmentsProfileAnalyze (POST /graphql, SkyWalking's UI's query) against the HTTP API's
analysis (POST /api/v1/profile/analyze) on the same data, in one run (issue 24: target within
10 % of the HTTP API's round trip). skyprofd gets one trace task with --segments profiled
segments, each with --dumps snapshots of stacks --depth frames deep drawn from a pool of
functions (so the merged tree has thousands of nodes), then each door is asked for the analysis
of every segment's window --rounds times, alternating; the medians of the round trips (request
sent to answer read, on a fresh connection) and the answer sizes are printed side by side.

    PYTHONPATH=build/release/pystubs:tests/harness /usr/bin/python3 bench/graphql/bench_graphql.py \
        [--segments 20] [--dumps 400] [--depth 30] [--rounds 15] [--build build/release]
The machine's load average is printed: under load, the figures are the scheduler's too."""
import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time

# the harness finds skyprofd through SKP_BUILD_DIR when it is imported
if "--build" in sys.argv:
    os.environ["SKP_BUILD_DIR"] = os.path.abspath(sys.argv[sys.argv.index("--build") + 1])
import skp_harness  # noqa: E402,F401
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "integration", "server"))
from skyprofd_util import V3, Skyprofd, snap  # noqa: E402
from language_agent import Tracing_pb2  # noqa: E402

QUERY = ("query getProfileAnalyze($queries: [SegmentProfileAnalyzeQuery!]!) {\n  analyze: "
         "getSegmentsProfileAnalyze(queries: $queries) {\n    tip\n    trees {\n"
         "      elements {\n        id\n        parentId\n        codeSignature\n"
         "        duration\n        durationChildExcluded\n        count\n      }\n    }\n  }\n}")


def post(port, path, body):
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        data = json.dumps(body)
        t0 = time.perf_counter()
        c.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        out = r.read()
        dt = time.perf_counter() - t0
        assert r.status == 200, (r.status, out[:200])
        return dt, out
    finally:
        c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--segments", type=int, default=20)
    ap.add_argument("--dumps", type=int, default=400)
    ap.add_argument("--depth", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--build", default=os.environ.get("SKP_BUILD_DIR", "build/release"))
    a = ap.parse_args()
    rnd = random.Random(24)
    pool = ["pkg/mod%d.py.func_%d: %d" % (i % 17, i, 10 + i % 90) for i in range(400)]
    with tempfile.TemporaryDirectory(prefix="skp-bench-gql-") as d:
        with Skyprofd(d, "--log-level", "warn") as S:
            st, doc = S.create_task("bench", "/work", duration=15)
            tid = doc["id"]
            now = int(time.time() * 1000)
            queries = []
            for k in range(a.segments):
                sid = "seg-%03d" % k
                t0 = now + k * 10
                snaps = []
                stack = [rnd.choice(pool) for _ in range(a.depth)]
                for i in range(a.dumps):
                    # the stack drifts: its tail changes often, its head rarely
                    cut = a.depth - 1 - min(a.depth - 1, int(rnd.expovariate(0.3)))
                    stack = stack[:cut] + [rnd.choice(pool) for _ in range(a.depth - cut)]
                    snaps.append(snap(tid, sid, i, ["main"] + stack, t0 + i * 10))
                S.snapshots(snaps)
                S.stream(V3 + "TraceSegmentReportService/collect", [Tracing_pb2.SegmentObject(
                    traceId="t-" + sid, traceSegmentId=sid, service="bench",
                    serviceInstance="i", spans=[Tracing_pb2.SpanObject(
                        spanId=0, parentSpanId=-1, startTime=t0, endTime=t0 + a.dumps * 10,
                        operationName="/work", spanType=Tracing_pb2.Entry)])])
                queries.append({"segmentId": sid,
                                "timeRange": {"start": t0, "end": t0 + a.dumps * 10}})
            http_t, gql_t = [], []
            http_body = gql_body = b""
            for r in range(a.rounds + 1):  # the first round warms the caches and is not counted
                dt_h, http_body = post(S.http_port, "/api/v1/profile/analyze", queries)
                dt_g, gql_body = post(S.http_port, "/graphql",
                                      {"query": QUERY, "variables": {"queries": queries}})
                if r:
                    http_t.append(dt_h)
                    gql_t.append(dt_g)
            h = json.loads(http_body)
            g = json.loads(gql_body)
            assert "errors" not in g, g.get("errors")
            nodes = sum(len(t["elements"]) for t in h["trees"])
            assert nodes == sum(len(t["elements"]) for t in g["data"]["analyze"]["trees"])
            mh, mg = statistics.median(http_t), statistics.median(gql_t)
            print("load average %.2f %.2f %.2f" % os.getloadavg())
            print("%d segments x %d dumps, depth %d: %d tree nodes; median of %d round trips"
                  % (a.segments, a.dumps, a.depth, nodes, a.rounds))
            print("%-44s %10s %12s" % ("", "ms", "bytes"))
            print("%-44s %10.1f %12d" % ("HTTP API  POST /api/v1/profile/analyze", mh * 1000,
                                        len(http_body)))
            print("%-44s %10.1f %12d" % ("GraphQL   getSegmentsProfileAnalyze", mg * 1000,
                                        len(gql_body)))
            print("GraphQL / HTTP API: %.3f (target <= 1.10)" % (mg / mh))


if __name__ == "__main__":
    main()
