"""Feeds skyprofd trace segments for the continuous-profiling UI test: service SERVICE, /slow
taking SLOW_MS and /fast 5 ms, a few of each every 50 ms over gRPC until killed.
Usage: continuous_feed.py GRPC_ADDR SERVICE SLOW_MS"""
import sys
import time

import grpc

from common import Command_pb2
from language_agent import Tracing_pb2


def segment(n, endpoint, dur, service):
    now = int(time.time() * 1000)
    return Tracing_pb2.SegmentObject(
        traceId="ui-tr-%d" % n, traceSegmentId="ui-seg-%s-%d" % (endpoint.strip('/'), n),
        service=service, serviceInstance=service + "-1",
        spans=[Tracing_pb2.SpanObject(spanId=0, parentSpanId=-1, startTime=now - dur, endTime=now,
                                      operationName=endpoint, spanType=Tracing_pb2.Entry)])


def main():
    addr, service, slow = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ch = grpc.insecure_channel(addr)
    collect = ch.stream_unary("/skywalking.v3.TraceSegmentReportService/collect",
                              request_serializer=lambda m: m.SerializeToString(),
                              response_deserializer=Command_pb2.Commands.FromString)
    n = 0
    print("feeding", flush=True)
    while True:
        segs = []
        for _ in range(3):
            n += 1
            segs.append(segment(n, "/slow", slow, service))
            segs.append(segment(n, "/fast", 5, service))
        try:
            collect(iter(segs), timeout=10)
        except grpc.RpcError:
            pass
        time.sleep(0.05)


if __name__ == "__main__":
    main()
