"""Real profile producers behind a small agent stand-in, for the UI test of the Process profiles
page: it makes a Go runtime/pprof CPU + heap profile with tests/integration/server/pprof_go
(burnHeavy 3x burnLight) and a JFR recording of tests/integration/jfr/JfrWorkload.java with
Debian's OpenJDK 17 (-XX:StartFlightRecording, spinHot on thread "burner"), registers one Go and
one Java instance (two Go instances, go-1 and go-2, uploading the same files), then polls getPprofTaskCommands / getAsyncProfilerTaskCommands as SkyWalking's
Go and Java agents do and uploads the matching file through `collect` (metadata, wait for the
answer, chunks, half-close). A pprof event it has no file for is answered with
PPROF_EXECUTION_TASK_ERROR and a message, as an agent that cannot run it does.
Prints "proc_agent: ready" once both files exist and both instances are registered.
Usage: proc_agent.py GRPC_TARGET GO_SERVICE JAVA_SERVICE WORKDIR"""
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import grpc

from skp_harness import SOURCE_DIR, bind_stub_package

bind_stub_package("profile")
from common import Command_pb2, Common_pb2  # noqa: E402
from management import Management_pb2  # noqa: E402
from profile import AsyncProfiler_pb2 as AP  # noqa: E402
from profile import Pprof_pb2  # noqa: E402

V3 = "/skywalking.v3."
V10 = "/skywalking.v10."
GO_INSTANCES = ("go-1", "go-2")   # both upload the same file: the UI merges them
JAVA_INSTANCE = "jvm-1"
stopping = False


def on_term(*_):
    global stopping
    stopping = True


def make_pprof(d):
    src = os.path.join(SOURCE_DIR, "tests", "integration", "server", "pprof_go")
    exe = os.path.join(d, "pprofburn")
    env = dict(os.environ, GOCACHE=os.path.join(d, "gocache"), GOFLAGS="-mod=mod", CGO_ENABLED="0",
               HOME=d, GOPATH=os.path.join(d, "gopath"))
    subprocess.run(["go", "build", "-o", exe, "."], cwd=src, env=env, check=True, timeout=600,
                   capture_output=True)
    cpu, heap = os.path.join(d, "cpu.pprof"), os.path.join(d, "heap.pprof")
    subprocess.run([exe, "-cpu", cpu, "-heap", heap, "-seconds", "2"], check=True, timeout=120,
                   capture_output=True)
    return {"cpu": open(cpu, "rb").read(), "heap": open(heap, "rb").read(),
            "allocs": open(heap, "rb").read()}


def make_jfr(d):
    classes = os.path.join(d, "classes")
    src = os.path.join(SOURCE_DIR, "tests", "integration", "jfr", "JfrWorkload.java")
    subprocess.run(["javac", "-d", classes, src], check=True, timeout=300, capture_output=True)
    out = os.path.join(d, "workload.jfr")
    subprocess.run(["java", "-XX:StartFlightRecording=filename=%s,settings=profile" % out,
                    "-cp", classes, "JfrWorkload", "4000"], check=True, timeout=300, capture_output=True)
    return open(out, "rb").read()


class Stream:
    """A client stream driven step by step (the agents wait for the first answer)."""

    def __init__(self, ch, path, resp):
        self.q = queue.Queue()
        call = ch.stream_stream(path, request_serializer=lambda m: m.SerializeToString(),
                                response_deserializer=resp.FromString)
        self.responses = call(iter(self.q.get, None), timeout=60)

    def send(self, m):
        self.q.put(m)

    def close(self):
        self.q.put(None)

    def finish(self):
        self.close()
        for _ in self.responses:
            pass


def upload_pprof(ch, service, instance, task, data, error=None):
    s = Stream(ch, V10 + "PprofTask/collect", Pprof_pb2.PprofCollectionResponse)
    if error:
        s.send(Pprof_pb2.PprofData(metadata=Pprof_pb2.PprofMetaData(
            service=service, serviceInstance=instance, taskId=task,
            type=Pprof_pb2.PPROF_EXECUTION_TASK_ERROR, contentSize=0), errorMessage=error))
        s.finish()
        return
    s.send(Pprof_pb2.PprofData(metadata=Pprof_pb2.PprofMetaData(
        service=service, serviceInstance=instance, taskId=task,
        type=Pprof_pb2.PPROF_PROFILING_SUCCESS, contentSize=len(data))))
    first = next(s.responses)
    if first.status != Pprof_pb2.PPROF_PROFILING_SUCCESS:
        s.close()
        return
    for i in range(0, len(data), 1 << 20):
        s.send(Pprof_pb2.PprofData(content=data[i:i + (1 << 20)]))
    s.finish()


def upload_jfr(ch, service, task, data):
    s = Stream(ch, V10 + "AsyncProfilerTask/collect", AP.AsyncProfilerCollectionResponse)
    s.send(AP.AsyncProfilerData(metaData=AP.AsyncProfilerMetaData(
        service=service, serviceInstance=JAVA_INSTANCE, taskId=task, type=AP.PROFILING_SUCCESS,
        contentSize=len(data))))
    first = next(s.responses)
    if first.type != AP.PROFILING_SUCCESS:
        s.close()
        return
    for i in range(0, len(data), 64 * 1024):
        s.send(AP.AsyncProfilerData(content=data[i:i + 64 * 1024]))
    s.finish()


def main():
    target, go_service, java_service, workdir = sys.argv[1:5]
    signal.signal(signal.SIGTERM, on_term)
    files = {}

    def produce(name, fn):
        try:
            files[name] = fn(os.path.join(workdir, name))
        except Exception as e:  # reported, and the test fails waiting for "ready"
            print("proc_agent: %s producer failed: %r %s" % (name, e, getattr(e, "stderr", b"")), flush=True)
    for name, fn in (("go", make_pprof), ("java", make_jfr)):
        os.makedirs(os.path.join(workdir, name), exist_ok=True)
    ts = [threading.Thread(target=produce, args=a) for a in (("go", make_pprof), ("java", make_jfr))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if len(files) != 2:
        sys.exit(1)

    ch = grpc.insecure_channel(target)

    def unary(path, req, resp=Command_pb2.Commands):
        return ch.unary_unary(path, request_serializer=lambda m: m.SerializeToString(),
                              response_deserializer=resp.FromString)(req, timeout=10)
    agents = [(go_service, i, "go") for i in GO_INSTANCES] + [(java_service, JAVA_INSTANCE, "java")]
    for svc, inst, lang in agents:
        unary(V3 + "ManagementService/reportInstanceProperties", Management_pb2.InstanceProperties(
            service=svc, serviceInstance=inst, layer="GENERAL",
            properties=[Common_pb2.KeyStringValuePair(key="language", value=lang)]))
    print("proc_agent: ready", flush=True)
    last_go = {i: -1 for i in GO_INSTANCES}
    last_java = -1
    while not stopping:
        for svc, inst, _ in agents:
            unary(V3 + "ManagementService/keepAlive", Management_pb2.InstancePingPkg(
                service=svc, serviceInstance=inst))
        for inst in GO_INSTANCES:
            cmds = unary(V10 + "PprofTask/getPprofTaskCommands", Pprof_pb2.PprofTaskCommandQuery(
                service=go_service, serviceInstance=inst, lastCommandTime=last_go[inst]))
            for c in cmds.commands:
                a = {kv.key: kv.value for kv in c.args}
                last_go[inst] = max(last_go[inst], int(a.get("CreateTime", "0")))
                ev = a.get("Events", "")
                print("proc_agent: %s: pprof task %s %s" % (inst, a.get("TaskId"), ev), flush=True)
                data = files["go"].get(ev)
                upload_pprof(ch, go_service, inst, a["TaskId"], data,
                             None if data else "event %s is not produced by the test's Go program" % ev)
        cmds = unary(V10 + "AsyncProfilerTask/getAsyncProfilerTaskCommands", AP.AsyncProfilerTaskCommandQuery(
            service=java_service, serviceInstance=JAVA_INSTANCE, lastCommandTime=last_java))
        for c in cmds.commands:
            a = {kv.key: kv.value for kv in c.args}
            last_java = max(last_java, int(a.get("CreateTime", "0")))
            print("proc_agent: async-profiler task %s %s" % (a.get("TaskId"), a.get("ExecArgs")), flush=True)
            upload_jfr(ch, java_service, a["TaskId"], files["java"])
        time.sleep(0.3)


if __name__ == "__main__":
    main()
