"""Several collectors act as one (issue 27, item 1): three skyprofd collectors on one PostgreSQL
database (tests/harness/pgserver.py) receive a known traffic split between them over the real
gRPC wire (TraceSegmentReportService/collect); a single SQLite skyprofd receives all of it. Each
collector's GET /api/v1/services/{name}/endpoints/stats must give the single collector's answer:
counts and errors exactly, percentiles within 1 % (the histograms merge exactly, so they are
equal), every collector the same; GET /api/v1/services/{name}/endpoints counts the same. Also a page boundary (limit/cursor) over the merged answer and
a stopped collector's partials still counted (its requests happened in the window)."""
import os
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pgserver  # noqa: E402
from skp_harness import Results, tempdir, wait_until  # noqa: E402
from skyprofd_util import V3, Skyprofd, Tracing_pb2  # noqa: E402

R = Results()
COLLECT = V3 + "TraceSegmentReportService/collect"
SVC = "svc-cluster"
ENDPOINTS = ["/cart", "/checkout", "/pay", "/search"]


def segment(i, t0):
    """Request i: its endpoint, instance, latency and error are fixed by i (ground truth)."""
    ep = ENDPOINTS[i % len(ENDPOINTS)]
    dur = 1 + (i * 37) % 997 + (i % 13) * 150  # 1 .. ~2800 ms, spread over many buckets
    return Tracing_pb2.SegmentObject(
        traceId="tr-%d" % i, traceSegmentId="seg-%d" % i, service=SVC,
        serviceInstance="inst-%d" % (i % 5),
        spans=[Tracing_pb2.SpanObject(spanId=0, parentSpanId=-1, startTime=t0 - dur, endTime=t0,
                                      operationName=ep, spanType=Tracing_pb2.Entry,
                                      isError=(i % 7 == 0))])


def stats(S, extra=""):
    _, doc = S.json("GET", "/api/v1/services/%s/endpoints/stats?window=600%s" % (SVC, extra),
                    expect=200)
    return doc


def key(doc):
    """What must be equal: per endpoint count, errors, instances and the per-minute counts."""
    return {e["endpoint"]: (e["count"], e["errors"], e["instances"],
                            tuple((p["t"], p["count"], p["errors"]) for p in e["points"] if p["count"]))
            for e in doc["endpoints"]}


def close(a, b):
    return abs(a - b) <= 0.01 * max(a, b)


def same_percentiles(doc, ref):
    r = {e["endpoint"]: e for e in ref["endpoints"]}
    for e in doc["endpoints"]:
        for q in ("p50", "p90", "p99"):
            if not close(e[q], r[e["endpoint"]][q]):
                return False
    return True


def send(srv, segs, chunk=50):
    for k in range(0, len(segs), chunk):
        srv.stream(COLLECT, segs[k:k + chunk])


def t_merged_stats():
    url = pgserver.test_url("cluster_stats")
    with tempdir() as d:
        ref = Skyprofd(os.path.join(d, "ref"), name="skyprofd-ref")
        cs = [Skyprofd(d, name="skyprofd-c%d" % (i + 1), db_url=url, db_name="c%d.db" % (i + 1))
              for i in range(3)]
        try:
            now = int(time.time() * 1000)
            n = 1200
            segs = [segment(i, now - (i % 90) * 1000) for i in range(n)]
            # uneven split: collector i gets requests i, i+3, ... but collector 3 only a few
            parts = [[s for j, s in enumerate(segs) if j % 3 == c] for c in range(3)]
            parts[1] += parts[2][40:]
            parts[2] = parts[2][:40]
            for c, p in enumerate(parts):
                send(cs[c], p)
            send(ref, segs)
            want = wait_until(lambda: (lambda d_: d_ if sum(e["count"] for e in d_["endpoints"])
                                       == n else None)(stats(ref)), 20, what="reference counts")
            assert sorted(key(want)) == ENDPOINTS, want
            assert sum(e["errors"] for e in want["endpoints"]) == len(range(0, n, 7))
            for c, S in enumerate(cs):
                got = wait_until(lambda: (lambda d_: d_ if key(d_) == key(want) else None)(
                    stats(S)), 20, what="collector %d's merged counts" % (c + 1))
                assert same_percentiles(got, want), (got, want)
                # a collector alone saw only its share: the answer is the cluster's
                assert len(parts[c]) < n
            # the endpoint listing counts the cluster's requests too
            want_list = {e["name"]: e["count"] for e in
                         ref.json("GET", "/api/v1/services/%s/endpoints" % SVC, expect=200)[1]}
            assert sum(want_list.values()) == n, want_list
            for c, S in enumerate(cs):
                _, lst = S.json("GET", "/api/v1/services/%s/endpoints" % SVC, expect=200)
                assert {e["name"]: e["count"] for e in lst} == want_list, (c, lst, want_list)
                assert all(e["lastSeen"] <= time.time() * 1000 + 1000 for e in lst), lst
            # pages over the merged answer: limit 3, then the rest from the cursor
            _, first = cs[2].json("GET", "/api/v1/services/%s/endpoints/stats?window=600&limit=3"
                                  % SVC, expect=200)
            assert [e["endpoint"] for e in first["endpoints"]] == ENDPOINTS[:3], first
            st, hdrs, _ = cs[2].http("GET", "/api/v1/services/%s/endpoints/stats?window=600"
                                     "&limit=3" % SVC)
            cursor = hdrs.get("x-next-cursor")
            assert st == 200 and cursor, hdrs
            rest = stats(cs[0], "&limit=3&cursor=" + urllib.parse.quote(cursor, safe=""))
            assert [e["endpoint"] for e in rest["endpoints"]] == ENDPOINTS[3:], rest
            # a stopped collector's partials are requests of the window: still counted
            cs[1].stop()
            got = stats(cs[0])
            assert key(got) == key(want), (got, want)
            print("%d requests over 3 collectors (%s): each answers the single collector's "
                  "counts; p50/p90/p99 equal" % (n, "/".join(str(len(p)) for p in parts)))
        finally:
            for s in [ref] + cs:
                if s.alive():
                    s.stop()


if __name__ == "__main__":
    R.run("endpoint statistics merged across 3 collectors = one collector's", t_merged_stats)
    R.finish()
