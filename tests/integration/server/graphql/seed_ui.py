"""Seeds a running skyprofd for the browser test of SkyWalking's UI (tests/ui/skywalking_ui_test.mjs):
service shop-api (instance inst-1) with a trace-profiling task on /pay and two profiled
segments, a pprof task with a Go-style profile uploaded, an async-profiler task with a real JDK 17
recording uploaded; everything through skyprofd's real gRPC services and its GraphQL mutations.
Prints one JSON line: the ids the test looks for.

    seed_ui.py GRPC_PORT HTTP_PORT"""
import base64
import json
import os
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import grpc  # noqa: E402

import skp_harness  # noqa: E402,F401  (binds the generated "profile" package over the stdlib one)

from common import Common_pb2  # noqa: E402
from language_agent import Tracing_pb2  # noqa: E402
from management import Management_pb2  # noqa: E402
from profile import AsyncProfiler_pb2 as AP, Pprof_pb2, Profile_pb2  # noqa: E402
from pprof_util import sample_profile  # noqa: E402

SRC = os.environ.get("SKP_SOURCE_DIR", os.path.join(HERE, "..", "..", "..", ".."))


def b64(s):
    return base64.b64encode(s.encode()).decode()


def main():
    grpc_port, http_port = int(sys.argv[1]), int(sys.argv[2])
    ch = grpc.insecure_channel("127.0.0.1:%d" % grpc_port)

    def unary(path, msg):
        return ch.unary_unary(path, request_serializer=type(msg).SerializeToString,
                              response_deserializer=lambda b: b)(msg, timeout=30)

    def stream(path, msgs, resp=lambda b: b):
        return ch.stream_unary(path, request_serializer=lambda m: m.SerializeToString(),
                               response_deserializer=resp)(iter(msgs), timeout=60)

    def gql(query, variables):
        req = urllib.request.Request(
            "http://127.0.0.1:%d/graphql" % http_port,
            data=json.dumps({"query": query, "variables": variables}).encode(),
            headers={"Content-Type": "application/json"})
        ans = json.loads(urllib.request.urlopen(req, timeout=30).read())
        assert "errors" not in ans, ans
        return ans["data"]

    svc, inst = "shop-api", "inst-1"
    sid = b64(svc) + ".1"
    iid = sid + "_" + b64(inst)
    for s, i in ((svc, inst),):
        unary("/skywalking.v3.ManagementService/reportInstanceProperties",
              Management_pb2.InstanceProperties(service=s, serviceInstance=i, properties=[
                  Common_pb2.KeyStringValuePair(key="language", value="python")]))
    tid = gql("mutation($r: ProfileTaskCreationRequest) { createProfileTask(creationRequest: $r)"
              " { id errorReason } }", {"r": {
                  "serviceId": sid, "endpointName": "/pay", "duration": 5,
                  "minDurationThreshold": 0, "dumpPeriod": 10,
                  "maxSamplingCount": 5}})["createProfileTask"]["id"]
    unary("/skywalking.v3.ProfileTask/getProfileTaskCommands",
          Profile_pb2.ProfileTaskCommandQuery(service=svc, serviceInstance=inst,
                                              lastCommandTime=-1))
    now = int(time.time() * 1000)
    frames = [["main.py.main: 3", "shop.py.handle_pay: 41", "shop.py.charge_card: 77"],
              ["main.py.main: 3", "shop.py.handle_pay: 41", "db.py.query: 12"],
              ["main.py.main: 3", "shop.py.handle_pay: 41", "shop.py.charge_card: 77"]]
    snaps = [Profile_pb2.ThreadSnapshot(taskId=tid, traceSegmentId="seg-ui", time=now + k * 10,
                                        sequence=k, stack=Profile_pb2.ThreadStack(
                                            codeSignatures=f)) for k, f in enumerate(frames)]
    stream("/skywalking.v3.ProfileTask/collectSnapshot", snaps)
    stream("/skywalking.v3.TraceSegmentReportService/collect", [Tracing_pb2.SegmentObject(
        traceId="trace-ui", traceSegmentId="seg-ui", service=svc, serviceInstance=inst,
        spans=[Tracing_pb2.SpanObject(spanId=0, parentSpanId=-1, startTime=now,
                                      endTime=now + 40, operationName="/pay",
                                      spanType=Tracing_pb2.Entry, componentId=7002)])])
    # pprof
    pid = gql("mutation($r: PprofTaskCreationRequest!) { createPprofTask("
              "pprofTaskCreationRequest: $r) { id code } }", {"r": {
                  "serviceId": sid, "serviceInstanceIds": [iid], "duration": 1,
                  "events": "CPU"}})["createPprofTask"]["id"]
    unary("/skywalking.v10.PprofTask/getPprofTaskCommands", Pprof_pb2.PprofTaskCommandQuery(
        service=svc, serviceInstance=inst, lastCommandTime=-1))
    data = sample_profile().gz()
    list(ch.stream_stream("/skywalking.v10.PprofTask/collect",
                          request_serializer=lambda m: m.SerializeToString(),
                          response_deserializer=lambda b: b)(iter([
                              Pprof_pb2.PprofData(metadata=Pprof_pb2.PprofMetaData(
                                  service=svc, serviceInstance=inst, taskId=pid,
                                  type=Pprof_pb2.PPROF_PROFILING_SUCCESS,
                                  contentSize=len(data))),
                              Pprof_pb2.PprofData(content=data)]), timeout=60))
    # async-profiler
    aid = gql("mutation($r: AsyncProfilerTaskCreationRequest!) { createAsyncProfilerTask("
              "asyncProfilerTaskCreationRequest: $r) { id code } }", {"r": {
                  "serviceId": sid, "serviceInstanceIds": [iid], "duration": 30,
                  "events": ["CPU"]}})["createAsyncProfilerTask"]["id"]
    unary("/skywalking.v10.AsyncProfilerTask/getAsyncProfilerTaskCommands",
          AP.AsyncProfilerTaskCommandQuery(service=svc, serviceInstance=inst,
                                           lastCommandTime=-1))
    jfr = open(os.path.join(SRC, "tests/fuzz/jfr/corpus/jdk17-min-all.jfr"), "rb").read()
    list(ch.stream_stream("/skywalking.v10.AsyncProfilerTask/collect",
                          request_serializer=lambda m: m.SerializeToString(),
                          response_deserializer=lambda b: b)(iter([
                              AP.AsyncProfilerData(metaData=AP.AsyncProfilerMetaData(
                                  service=svc, serviceInstance=inst, taskId=aid,
                                  type=AP.PROFILING_SUCCESS, contentSize=len(jfr))),
                              AP.AsyncProfilerData(content=jfr)]), timeout=60))
    print(json.dumps({"serviceId": sid, "instanceId": iid, "taskId": tid, "pprofTaskId": pid,
                      "asyncTaskId": aid, "segmentId": "seg-ui"}))


if __name__ == "__main__":
    main()
