"""goProfileReport's sample counts are a weight on one row (issue 25): a pprof sample of count
N used to be stored as N snapshot rows (so a few KB of gzip wrote millions of rows); now it is
ONE row of weight N, and the analyses count it N times and give it N profiling periods, exactly
what the N repeated rows gave.

Ground truth by construction: segment "gw-go" gets a Go profile (period 10 ms) whose samples are
main.work x100 then main.idle x50; segment "gw-ref" gets the same 150 dumps as plain thread
snapshots (collectSnapshot, 10 ms apart: main.work for 100 dumps, then main.idle for 50). Both
analyses must show main.work count 100, 1000 ms and main.idle count 50, 500 ms (tolerance
+-1 ms: integer milliseconds), by line and by function, and the Go upload must have stored 2 rows
(sum of weights 150). Run on SQLite and on PostgreSQL (the ctest fixture's server).
"""
import os
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pgserver  # noqa: E402
from skp_harness import Results, tempdir  # noqa: E402
from skyprofd_util import Command_pb2, Profile_pb2, Skyprofd, snap  # noqa: E402
from pprof_util import Profile  # noqa: E402

R = Results()
GOPROF = "/skywalking.v3.ProfileTask/goProfileReport"
PERIOD_MS = 10
TOL_MS = 1


def go_report(S, tid, data):
    call = S.channel().stream_unary(
        GOPROF, request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=Command_pb2.Commands.FromString)
    return call(iter([Profile_pb2.GoProfileData(taskId=tid, payload=data, isLast=True)]),
                timeout=60)


def go_profile(segment):
    p = Profile([("samples", "count"), ("cpu", "nanoseconds")], ("cpu", "nanoseconds"),
                PERIOD_MS * 1000000)
    fmain, fwork, fidle = (p.function(1, "main.main", "m.go"), p.function(2, "main.work", "w.go"),
                           p.function(3, "main.idle", "i.go"))
    lmain, lwork, lidle = (p.location(1, [(fmain, 5)]), p.location(2, [(fwork, 3)]),
                           p.location(3, [(fidle, 7)]))
    p.sample([lwork, lmain], [100, 100 * PERIOD_MS * 1000000], [("segment_id", segment)])
    p.sample([lidle, lmain], [50, 50 * PERIOD_MS * 1000000], [("segment_id", segment)])
    return p


def analysis(S, segment, by_function=False):
    q = "?granularity=functions" if by_function else ""
    st, an = S.json("GET", "/api/v1/profile/segments/%s/analyze%s"
                    % (urllib.parse.quote(segment, safe=""), q), expect=200)
    return {e["codeSignature"]: (int(e["count"]), int(e["duration"]))
            for t in an["trees"] for e in t["elements"]}


def check(got, want, what):
    assert set(got) == set(want), (what, got)
    for sig, (count, dur) in want.items():
        c, d = got[sig]
        assert c == count, (what, sig, got)
        assert abs(d - dur) <= TOL_MS, (what, sig, d, dur, got)


def weighted_rows(S, db_url):
    with tempdir() as d:
        S = Skyprofd(os.path.join(d, "data"), db_url=db_url)
        try:
            st, doc = S.create_task("svc-goweight", "/gw", duration=5, dump=PERIOD_MS)
            assert st == 201, doc
            tid = doc["id"]
            go_report(S, tid, go_profile("gw-go").gz())
            rows = S.sql_rows("SELECT count(*), sum(weight) FROM snapshots")
            assert rows == [(2, 150)], rows  # 150 rows before
            # the same dumps as weight-1 rows: the reference the weighted rows must equal
            t0 = 1700000000000
            work, idle = ["main.main (m.go:5)", "main.work (w.go:3)"], ["main.main (m.go:5)",
                                                                        "main.idle (i.go:7)"]
            S.snapshots([snap(tid, "gw-ref", i, work if i < 100 else idle, t0 + i * PERIOD_MS)
                         for i in range(150)])
            want = {"main.main (m.go:5)": (150, 1500), "main.work (w.go:3)": (100, 1000),
                    "main.idle (i.go:7)": (50, 500)}
            check(analysis(S, "gw-go"), want, "goProfileReport rows")
            check(analysis(S, "gw-ref"), want, "thread snapshots")
            want_fn = {"main.main (m.go)": (150, 1500), "main.work (w.go)": (100, 1000),
                       "main.idle (i.go)": (50, 500)}
            check(analysis(S, "gw-go", True), want_fn, "goProfileReport rows by function")
            check(analysis(S, "gw-ref", True), want_fn, "thread snapshots by function")
        finally:
            S.stop()


def main():
    R.run("SQLite: a count is one weighted row", weighted_rows, None, None)
    if pgserver.available():
        R.run("PostgreSQL: a count is one weighted row", weighted_rows, None,
              pgserver.test_url("goweight"))
    R.finish()


if __name__ == "__main__":
    main()
