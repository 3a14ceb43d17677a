"""A small SkyWalking-v3 agent stand-in for the UI test when the real C demo service is not
used: it registers an instance (properties with language), polls getProfileTaskCommands, and
for every task on its endpoint "serves" a few requests, streaming each one's ThreadSnapshots
(every 10 ms, sequence from 0) and its SegmentObject (entry span, a local child span "method3"
and an exit span to a database), then reports the task finished when the task ends.

Stacks (root first) of one request starting at T (dumps at T+0 .. T+100 ms), each under
serve -> _skyprof_do (an instrumentation frame of skyprof's Python agent, as the real agent's
http.server hook puts in every request's stack; the UI folds it into serve by default):
    T+0..20    handle -> method3
    T+30..70   handle -> method3 -> method2 -> method1     (inside the child span [T+25, T+75])
    T+80..90   handle -> method3 -> method2
    T+100      (in _skyprof_do itself: the span is being finished)
so Include Children shows method1 and Exclude Children (the span minus [T+25, T+75]) does not.
Usage: fake_agent.py GRPC_TARGET SERVICE INSTANCE ENDPOINT [REQUESTS]"""
import os
import signal
import sys
import time
import uuid

import grpc

from skp_harness import bind_stub_package  # noqa: E402

bind_stub_package("profile")
from common import Command_pb2, Common_pb2  # noqa: E402
from language_agent import Tracing_pb2  # noqa: E402
from management import Management_pb2  # noqa: E402
from profile import Profile_pb2  # noqa: E402

V3 = "/skywalking.v3."
FILE = "/srv/shop/app.py"
FRAMES = {
    "serve": FILE + ".serve: 5",
    "agent": "/usr/lib/python3/dist-packages/skyprof/instrument/http_server.py._skyprof_do: 34",
    "handle": FILE + ".handle: 12",
    "method3": FILE + ".method3: 50",
    "method2": FILE + ".method2: 40",
    "method1": FILE + ".method1: 30",
}

stopping = False


def on_term(*_):
    global stopping
    stopping = True


def stack_at(off):
    if off >= 100:
        return [FRAMES["serve"], FRAMES["agent"]]
    s = [FRAMES["serve"], FRAMES["agent"], FRAMES["handle"], FRAMES["method3"]]
    if 30 <= off <= 70:
        s += [FRAMES["method2"], FRAMES["method1"]]
    elif off >= 80:
        s += [FRAMES["method2"]]
    return s


def main():
    target, service, instance, endpoint = sys.argv[1:5]
    n_requests = int(sys.argv[5]) if len(sys.argv) > 5 else 3
    signal.signal(signal.SIGTERM, on_term)
    ch = grpc.insecure_channel(target)
    unary = lambda path, resp=Command_pb2.Commands: ch.unary_unary(  # noqa: E731
        V3 + path, request_serializer=lambda m: m.SerializeToString(), response_deserializer=resp.FromString)
    stream = lambda path: ch.stream_unary(  # noqa: E731
        V3 + path, request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=Command_pb2.Commands.FromString)
    unary("ManagementService/reportInstanceProperties")(Management_pb2.InstanceProperties(
        service=service, serviceInstance=instance, layer="GENERAL",
        properties=[Common_pb2.KeyStringValuePair(key="language", value="python"),
                    Common_pb2.KeyStringValuePair(key="hostname", value="ui-test-host"),
                    Common_pb2.KeyStringValuePair(key="Process No.", value=str(os.getpid()))]), timeout=10)
    print("fake_agent: registered %s/%s" % (service, instance), flush=True)
    last = -1
    running = []   # (task_id, end_ms)
    while not stopping:
        unary("ManagementService/keepAlive")(Management_pb2.InstancePingPkg(
            service=service, serviceInstance=instance), timeout=10)
        cmds = unary("ProfileTask/getProfileTaskCommands")(Profile_pb2.ProfileTaskCommandQuery(
            service=service, serviceInstance=instance, lastCommandTime=last), timeout=10)
        for c in cmds.commands:
            if c.command != "ProfileTaskQuery":
                continue
            args = {kv.key: kv.value for kv in c.args}
            last = max(last, int(args.get("CreateTime", "0")))
            if args.get("EndpointName") != endpoint:
                continue
            task_id = args["TaskId"]
            end = int(args.get("StartTime", "0")) + int(args.get("Duration", "1")) * 60000
            print("fake_agent: task %s" % task_id, flush=True)
            for _ in range(n_requests):
                serve(stream, task_id, service, instance, endpoint)
            running.append((task_id, end))
        now = int(time.time() * 1000)
        for t in [t for t in running if t[1] <= now]:
            unary("ProfileTask/reportTaskFinish")(Profile_pb2.ProfileTaskFinishReport(
                service=service, serviceInstance=instance, taskId=t[0]), timeout=10)
            running.remove(t)
        time.sleep(0.3)


def serve(stream, task_id, service, instance, endpoint):
    seg_id = uuid.uuid4().hex + ".1"
    trace_id = uuid.uuid4().hex + ".2"
    t0 = int(time.time() * 1000) - 200
    snaps = [Profile_pb2.ThreadSnapshot(taskId=task_id, traceSegmentId=seg_id, time=t0 + off, sequence=i,
                                        stack=Profile_pb2.ThreadStack(codeSignatures=stack_at(off)))
             for i, off in enumerate(range(0, 101, 10))]
    stream("ProfileTask/collectSnapshot")(iter(snaps), timeout=10)
    seg = Tracing_pb2.SegmentObject(
        traceId=trace_id, traceSegmentId=seg_id, service=service, serviceInstance=instance,
        spans=[
            Tracing_pb2.SpanObject(spanId=0, parentSpanId=-1, startTime=t0, endTime=t0 + 100,
                                   operationName=endpoint, spanType=Tracing_pb2.Entry,
                                   spanLayer=Tracing_pb2.Http, componentId=7000),
            Tracing_pb2.SpanObject(spanId=1, parentSpanId=0, startTime=t0 + 25, endTime=t0 + 75,
                                   operationName="method3-inner", spanType=Tracing_pb2.Local),
            Tracing_pb2.SpanObject(spanId=2, parentSpanId=1, startTime=t0 + 40, endTime=t0 + 60,
                                   operationName="SELECT orders", peer="db:5432", spanType=Tracing_pb2.Exit,
                                   spanLayer=Tracing_pb2.Database, componentId=22),
        ])
    stream("TraceSegmentReportService/collect")(iter([seg]), timeout=10)


if __name__ == "__main__":
    main()
