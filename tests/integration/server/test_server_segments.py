"""skyprofd's segment ingest split (issue 18), end to end over real gRPC: every segment feeds the
endpoint statistics (GET /api/v1/services/{name}/endpoints/stats), and only profiled segments
are stored under the default --keep-segments profiled, whichever arrives first (snapshots or
segment), including across a restart; unprofiled ones leave no row. --keep-segments all and
sampled:N store others too. Rows are counted in the SQLite file itself."""
import os
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from skp_harness import Results, tempdir, wait_until  # noqa: E402
from skyprofd_util import V3, Skyprofd, Tracing_pb2, snap  # noqa: E402

R = Results()
COLLECT = V3 + "TraceSegmentReportService/collect"


def q(s):
    return urllib.parse.quote(s, safe="")


def segment(seg_id, endpoint, t0, dur=50, error=False, service="svc"):
    return Tracing_pb2.SegmentObject(
        traceId="tr-" + seg_id, traceSegmentId=seg_id, service=service, serviceInstance="inst-1",
        spans=[Tracing_pb2.SpanObject(spanId=1, parentSpanId=0, startTime=t0 + 1, endTime=t0 + 5,
                                      operationName="SELECT", spanType=Tracing_pb2.Exit),
               Tracing_pb2.SpanObject(spanId=0, parentSpanId=-1, startTime=t0, endTime=t0 + dur,
                                      operationName=endpoint, spanType=Tracing_pb2.Entry,
                                      isError=error)])


def stored_segments(S):
    return sorted(r[0] for r in S.sql_rows(
        "SELECT si.segment_id FROM segments g JOIN segids si ON si.id = g.seg"))


def listed(S, tid):
    st, segs = S.json("GET", "/api/v1/profile/tasks/%s/segments" % q(tid), expect=200)
    return {s["segmentId"]: len(s["spans"]) for s in segs}


def t_default_profiled_both_orders(d):
    S = Skyprofd(d, "--keep-grace-s", "2")
    try:
        st, doc = S.create_task("svc", "/pay", duration=5)
        tid = doc["id"]
        now = int(time.time() * 1000)
        # order 1: snapshots first, then the segment
        S.snapshots([snap(tid, "seg-snap-first", 0, ["main", "pay"], now), snap(tid, "seg-snap-first", 1, ["main"], now + 10)])
        S.stream(COLLECT, [segment("seg-snap-first", "/pay", now)])
        # order 2: the segment first (held: its endpoint is under the task), then snapshots
        S.stream(COLLECT, [segment("seg-seg-first", "/pay", now, error=True)])
        assert "seg-seg-first" not in stored_segments(S)
        S.snapshots([snap(tid, "seg-seg-first", 0, ["main", "pay"], now + 5)])
        # unprofiled: same endpoint (held, then dropped at the end of the grace), another
        # endpoint (dropped at once), another service
        S.stream(COLLECT, [segment("seg-plain-pay", "/pay", now, dur=200),
                           segment("seg-other", "/other", now, dur=7),
                           segment("seg-svc2", "/pay", now, service="svc2")])
        wait_until(lambda: S.metric("skyprof_segments_dropped_total") >= 3, 20,
                   what="unprofiled segments dropped after the grace")
        assert stored_segments(S) == ["seg-seg-first", "seg-snap-first"], stored_segments(S)
        assert listed(S, tid) == {"seg-snap-first": 2, "seg-seg-first": 2}, listed(S, tid)
        assert S.metric("skyprof_segments_received_total") == 5
        assert S.metric("skyprof_segments_stored_total") == 2
        # every segment is in the statistics
        st, doc = S.json("GET", "/api/v1/services/svc/endpoints/stats?window=300", expect=200)
        eps = {e["endpoint"]: e for e in doc["endpoints"]}
        assert sorted(eps) == ["/other", "/pay"], doc
        pay = eps["/pay"]
        assert (pay["count"], pay["errors"], pay["instances"]) == (3, 1, 1), pay
        assert pay["p50"] == 50 and pay["p99"] == 200, pay
        assert len(pay["points"]) == 5 and sum(p["count"] for p in pay["points"]) == 3, pay
        assert eps["/other"]["count"] == 1 and eps["/other"]["p99"] == 7
        st, doc = S.json("GET", "/api/v1/services/nobody/endpoints/stats", expect=200)
        assert doc["endpoints"] == [] and doc["window"] == 900, doc
        S.json("GET", "/api/v1/services/svc/endpoints/stats?window=0", expect=400)
        S.json("GET", "/api/v1/services/svc/endpoints/stats?window=abc", expect=400)
        S.json("POST", "/api/v1/services/svc/endpoints/stats", body={}, expect=405)
        # a restart forgets what was held and which ids had snapshots: the store still knows
        S.snapshots([snap(tid, "seg-after-restart", 0, ["main"], now + 20)])
        S.stop()
        S = Skyprofd(d, "--keep-grace-s", "2")
        S.stream(COLLECT, [segment("seg-after-restart", "/pay", now)])
        assert "seg-after-restart" in stored_segments(S), stored_segments(S)
        # per-minute roll-up reaches the store when the daemon stops
        S.stop()
        rows = S.sql_rows("SELECT endpoint, sum(count), sum(errors) FROM endpoint_minutes "
                       "WHERE service = 'svc' GROUP BY endpoint ORDER BY endpoint")
        # two runs wrote their own rows of the same minute(s): together they count all 4
        assert rows == [("/other", 1, 0), ("/pay", 4, 1)], rows
        S = None
    finally:
        if S:
            S.stop()


def t_keep_all_and_sampled(d):
    S = Skyprofd(os.path.join(d, "all"), "--keep-segments", "all")
    try:
        now = int(time.time() * 1000)
        S.stream(COLLECT, [segment("a%d" % i, "/x", now) for i in range(20)])
        assert len(stored_segments(S)) == 20
    finally:
        S.stop()
    S = Skyprofd(os.path.join(d, "sampled"), "--keep-segments", "sampled:4")
    try:
        S.stream(COLLECT, [segment("s%d" % i, "/x", now) for i in range(400)])
        n = len(stored_segments(S))
        assert 50 <= n <= 150, n  # one in four, by a hash of the id
    finally:
        S.stop()
    S = Skyprofd(os.path.join(d, "none"), "--keep-segments", "none")
    try:
        st, doc = S.create_task("svc", "/x", duration=5)
        S.snapshots([snap(doc["id"], "n0", 0, ["main"], now)])
        S.stream(COLLECT, [segment("n0", "/x", now)])
        assert stored_segments(S) == []
        # on PostgreSQL the answer is the collectors' merged partials, written every second
        doc = wait_until(lambda: (lambda d_: d_ if d_["endpoints"] else None)(
            S.json("GET", "/api/v1/services/svc/endpoints/stats", expect=200)[1]), 10,
            what="the request in the statistics")
        assert doc["endpoints"][0]["count"] == 1, doc
    finally:
        S.stop()


def main():
    with tempdir() as d:
        R.run("default policy: profiled kept in both orders, unprofiled dropped, stats",
              lambda: t_default_profiled_both_orders(os.path.join(d, "p")))
        R.run("--keep-segments all / sampled:N / none", lambda: t_keep_all_and_sampled(d))
    R.finish()


if __name__ == "__main__":
    main()
