"""skyprofd's HTTP API under hostile use (issue 15, API findings), end to end against the real
daemon over real gRPC and HTTP:
- finding 12: agent times at the ends of int64 (snapshots at INT64_MIN/INT64_MAX, a span from
  INT64_MIN to INT64_MAX) give clamped durations in the analysis and the segment listing, and
  the UBSan build does not abort."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from skp_harness import Results, tempdir  # noqa: E402
from skyprofd_util import V3, Skyprofd, Tracing_pb2, snap  # noqa: E402

R = Results()
I64_MIN = -(1 << 63)
I64_MAX = (1 << 63) - 1
COLLECT = V3 + "TraceSegmentReportService/collect"


def t_extreme_agent_times(S):
    st, doc = S.create_task("svc-times", "/t")
    assert st == 201, doc
    tid = doc["id"]
    S.snapshots([snap(tid, "seg-x", 0, ["A", "B"], I64_MIN), snap(tid, "seg-x", 1, ["A", "B"], I64_MAX),
                 snap(tid, "seg-x", 2, ["A"], I64_MIN)])
    S.stream(COLLECT, [Tracing_pb2.SegmentObject(
        traceId="tr-x", traceSegmentId="seg-x", service="svc-times", serviceInstance="i",
        spans=[Tracing_pb2.SpanObject(spanId=0, parentSpanId=-1, startTime=I64_MIN, endTime=I64_MAX,
                                      operationName="/t", spanType=Tracing_pb2.Entry)])])
    st, segs = S.json("GET", "/api/v1/profile/tasks/%s/segments" % tid, expect=200)
    seg = [s for s in (segs["items"] if isinstance(segs, dict) else segs) if s["segmentId"] == "seg-x"]
    assert seg and seg[0]["start"] == I64_MIN and seg[0]["duration"] == I64_MAX, seg
    st, a = S.json("GET", "/api/v1/profile/tasks/%s/analyze" % tid, expect=200)
    root = [e for e in a["trees"][0]["elements"] if e["codeSignature"] == "A"][0]
    # MAX - MIN clamps to MAX, then MIN - MAX clamps to MIN: MAX + MIN = -1, never a wrap
    assert int(root["duration"]) == -1, root
    b = [e for e in a["trees"][0]["elements"] if e["codeSignature"] == "B"][0]
    assert int(b["duration"]) == I64_MAX, b
    st, a = S.json("GET", "/api/v1/profile/segments/seg-x/analyze", expect=200)
    assert a["trees"], a
    assert S.alive()


def main():
    with tempdir() as d:
        S = Skyprofd(os.path.join(d, "a"), "--keep-segments", "all")
        try:
            R.run("finding 12: agent times at the ends of int64", t_extreme_agent_times, S)
        finally:
            S.stop()
    R.finish()


if __name__ == "__main__":
    main()
