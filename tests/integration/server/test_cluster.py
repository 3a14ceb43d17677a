"""Several collectors act as one (issue 27, item 1): three skyprofd collectors on one PostgreSQL
database (tests/harness/pgserver.py) receive a known traffic split between them over the real
gRPC wire (TraceSegmentReportService/collect); a single SQLite skyprofd receives all of it. Each
collector's GET /api/v1/services/{name}/endpoints/stats must give the single collector's answer:
counts and errors exactly, percentiles within 1 % (the histograms merge exactly, so they are
equal), every collector the same; GET /api/v1/services/{name}/endpoints counts the same. Also a page boundary (limit/cursor) over the merged answer and
a stopped collector's partials still counted (its requests happened in the window).

The continuous-profiling evaluator across the same 3 collectors (issue 27, item 2): a policy
whose count of slots over the threshold is reached only by the cluster's traffic (each slot's
requests go to one collector in turn, so each collector alone has a value in at most half of
the slots) fires exactly once - one trigger row, one task, one firing claim - with one lease
holder evaluating; killing the holder (kill -9) hands the lease to a live collector within the
lease's expiry plus a few ticks, and a crossing after that fires once too."""
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


SLOT_MS = 100
PID_BITS = 22  # the low bits of a collector's writer id are its process id


def put_policy(S, service):
    """TRACE when 7 of the last 10 slots have an average response time >= 100 ms on /slow."""
    body = {"targets": [{"targetType": "TRACE", "checkItems": [
        {"type": "ENDPOINT_AVG_RESPONSE_TIME", "threshold": "100", "period": 10, "count": 7,
         "uriList": ["/slow"]}]}], "executeDuration": 5, "silenceDuration": 5}
    st, doc = S.json("PUT", "/api/v1/continuous/policies/" + service, body)
    assert st == 200, (st, doc)


def rotate(service, targets, seconds):
    """Slow requests for `seconds`; each slot's requests all go to one target, in turn."""
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        now = int(time.time() * 1000)
        S = targets[(now // SLOT_MS) % len(targets)]
        seg = Tracing_pb2.SegmentObject(
            traceId="tr-%s-%d" % (service, n), traceSegmentId="seg-%s-%d" % (service, n),
            service=service, serviceInstance="inst-1",
            spans=[Tracing_pb2.SpanObject(spanId=0, parentSpanId=-1, startTime=now - 300,
                                          endTime=now, operationName="/slow",
                                          spanType=Tracing_pb2.Entry)])
        S.stream(COLLECT, [seg])
        n += 1
        time.sleep(SLOT_MS / 4000.0)
    return n


def triggers(S, service):
    _, doc = S.json("GET", "/api/v1/profile/triggers?service=" + service, expect=200)
    return doc["triggers"]


def trace_tasks(S, service):
    _, doc = S.json("GET", "/api/v1/profile/tasks?service=" + service, expect=200)
    tasks = doc["tasks"] if isinstance(doc, dict) else doc
    return [t for t in tasks if t["service"] == service]


def lease(pg, db):
    """(holder's pid, seconds until it expires) of the evaluator's lease, None when none."""
    out = pg.psql("SELECT holder, expires_ms - (extract(epoch from clock_timestamp()) * 1000)"
                  "::bigint FROM cont_lease", dbname=db, check=False).strip()
    if not out or "|" not in out:
        return None
    holder, left = out.split("|")
    return int(holder) & ((1 << PID_BITS) - 1), int(left) / 1000.0


def fired_once(cs, service):
    """One trigger (the same from every live collector), one task, one claim; else None."""
    ts = [triggers(S, service) for S in cs if S.alive()]
    if not ts[0]:
        return None
    assert all(len(t) == 1 and t[0]["id"] == ts[0][0]["id"] for t in ts), ts
    return ts[0][0]


def t_cluster_evaluator():
    url = pgserver.test_url("cluster_eval")
    pg, db = pgserver.server(), pgserver.dbname_of(url)
    with tempdir() as d:
        cs = [Skyprofd(d, "--continuous-slot-ms", str(SLOT_MS), name="skyprofd-e%d" % (i + 1),
                       db_url=url, db_name="e%d.db" % (i + 1)) for i in range(3)]
        try:
            put_policy(cs[0], "svc-a")  # through one collector: the others read it from the store
            put_policy(cs[1], "svc-b")
            pids = {S.pid: S for S in cs}
            holder = wait_until(lambda: (lambda l_: l_ if l_ and l_[0] in pids else None)(
                lease(pg, db)), 15, what="a lease holder")[0]
            # /metrics says which collector judges: the holder 1, the others 0
            wait_until(lambda: [S.metric("skyprof_continuous_evaluator") for S in cs]
                       == [1.0 if S.pid == holder else 0.0 for S in cs], 15,
                       what="skyprof_continuous_evaluator 1 on the holder only")
            # each collector gets every third slot: alone at most 4 of 10 slots have a value
            rotate("svc-a", cs, 1.0)  # the others have read the policies by now (2 s at most)
            t0 = time.monotonic()
            rotate("svc-a", cs, 3.0)
            t = wait_until(lambda: fired_once(cs, "svc-a"), 20, what="svc-a's trigger")
            assert t["target"] == "TRACE" and t["source"] == "server" and t["taskId"], t
            c = t["causes"][0]
            assert c["uri"] == "/slow" and c["hits"] >= 7 and abs(c["current"] - 300) < 1, c
            assert [x["id"] for x in trace_tasks(cs[2], "svc-a")] == [t["taskId"]]
            fired_after = time.monotonic() - t0
            # the holder is killed: a live collector takes the lease over within its expiry
            pids[holder].proc.kill9()
            t1 = time.monotonic()
            new = wait_until(lambda: (lambda l_: l_[0] if l_ and l_[0] != holder and l_[0] in pids
                                      and l_[1] > 0 else None)(lease(pg, db)), 15,
                             what="the lease taken over")
            took = time.monotonic() - t1
            assert pids[new].alive(), new
            wait_until(lambda: pids[new].metric("skyprof_continuous_evaluator") == 1.0
                       and pids[new].metric("skyprof_continuous_lease_takeovers_total") >= 1, 15,
                       what="the new holder's /metrics")
            assert all(S.metric("skyprof_continuous_shares_written_total") > 0
                       for S in cs if S.alive())
            assert took < 3.0 + 3.0, took  # the 3 s lease, plus ticks on a loaded machine
            live = [S for S in cs if S.alive()]
            rotate("svc-b", live, 3.0)  # alone: at most 5 of 10 slots
            t = wait_until(lambda: fired_once(live, "svc-b"), 20, what="svc-b's trigger")
            assert [x["id"] for x in trace_tasks(live[0], "svc-b")] == [t["taskId"]]
            # svc-a did not fire again on the new holder (its trigger replayed: quiet time)
            assert len(fired_once(live, "svc-a")["causes"]) >= 1
            claims = pg.psql("SELECT service || ':' || count(*) FROM cont_fired GROUP BY service"
                             " ORDER BY 1", dbname=db).split()
            assert claims == ["svc-a:1", "svc-b:1"], claims
            writers = int(pg.psql("SELECT count(DISTINCT writer) FROM cont_slots WHERE service ="
                                  " 'svc-a'", dbname=db))
            assert writers == 3, writers
            print("svc-a fired once %.1f s after the traffic began (1 trigger, 1 task); lease "
                  "taken over %.1f s after kill -9; svc-b fired once on the new holder"
                  % (fired_after, took))
        finally:
            for S in cs:
                if S.alive():
                    S.stop()


if __name__ == "__main__":
    R.run("endpoint statistics merged across 3 collectors = one collector's", t_merged_stats)
    R.run("one evaluator on the cluster's statistics; the lease handed over", t_cluster_evaluator)
    R.finish()
