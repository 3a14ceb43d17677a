"""skyprofd under hostile input (issue 15), end to end over real gRPC: a segment made of many
empty spans (2 bytes each on the wire) is refused with RESOURCE_EXHAUSTED before it is decoded
(--max-segment-spans), counted in /metrics, and the daemon keeps answering promptly; a segment
within the limit is still accepted."""
import os
import sys
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from skp_harness import Results, tempdir  # noqa: E402
from skyprofd_util import V3, Skyprofd, Tracing_pb2  # noqa: E402

R = Results()
COLLECT = V3 + "TraceSegmentReportService/collect"


def empty_spans_segment(seg_id, n):
    # Each empty SpanObject is the two bytes 0x1a 0x00 (field 3, length 0) inside the segment.
    head = Tracing_pb2.SegmentObject(traceId="t-" + seg_id, traceSegmentId=seg_id,
                                     service="svc", serviceInstance="inst").SerializeToString()
    return head + b"\x1a\x00" * n


def metric(S, name):
    st, _, body = S.http("GET", "/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError("metric %s missing" % name)


def t_many_empty_spans_refused(d):
    S = Skyprofd(d, "--max-segment-spans", "1000", "--keep-segments", "all")
    try:
        t0 = time.monotonic()
        try:
            S.stream(COLLECT, [empty_spans_segment("bomb", 300000)], raw=True, timeout=60)
            raise AssertionError("a 300000-span segment was accepted")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e
        took = time.monotonic() - t0
        print("  300000 empty spans (600 KB) refused in %.2f s" % took)
        assert metric(S, "skyprof_segments_refused_total") == 1
        # a normal segment still goes through, and /healthz answers
        S.stream(COLLECT, [empty_spans_segment("fine", 10)], raw=True)
        st, _, _ = S.http("GET", "/healthz")
        assert st == 200
        assert metric(S, "skyprof_segments_refused_total") == 1
    finally:
        S.stop()


if __name__ == "__main__":
  with tempdir() as d:
      R.run("many_empty_spans_refused", t_many_empty_spans_refused, d)
  R.finish()
