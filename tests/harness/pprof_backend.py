"""A small SkyWalking-shaped backend over Debian's grpcio for AGENT tests of process profiling
(skywalking.v10.PprofTask), built on our generated stubs. It answers management and trace-profile
calls with empty Commands, hands out queued PprofTaskQuery commands by the lastCommandTime cursor
(as OAP does), and records every `collect` stream: metadata, the answer it gave (SUCCESS, or
TERMINATED_BY_OVERSIZE above `max_bytes`), the content chunks and the order they came in.

    with PprofBackend(max_bytes=30 << 20) as be:
        be.add_task("cpu", duration_min=1)         # returns the task id
        up = be.wait_upload(task_id, timeout=60)   # dict: meta, status, chunks, file, error
"""
import concurrent.futures
import threading
import time
import uuid

import grpc

from skp_harness import bind_stub_package

bind_stub_package("profile")
from common import Command_pb2, Common_pb2  # noqa: E402
from profile import Pprof_pb2  # noqa: E402


def _commands(cmds=()):
    out = Command_pb2.Commands()
    for c in cmds:
        out.commands.append(c)
    return out


class PprofBackend:
    def __init__(self, max_bytes=30 << 20, port=0):
        self.max_bytes = max_bytes
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.tasks = []          # (create_time, Command, instance filter or None)
        self.uploads = {}        # task id -> list of upload dicts
        self.polls = []          # (instance, lastCommandTime)
        self.instances = set()
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=8))
        self.server.add_generic_rpc_handlers((self._handler(),))
        self.port = self.server.add_insecure_port("127.0.0.1:%d" % port)

    # --- grpc ---------------------------------------------------------------------------
    def _handler(self):
        def raw(req, ctx):
            return _commands()

        def drain(it, ctx):
            for _ in it:
                pass
            return _commands()

        unary_empty = grpc.unary_unary_rpc_method_handler(
            raw, request_deserializer=lambda b: b,
            response_serializer=Command_pb2.Commands.SerializeToString)
        stream_empty = grpc.stream_unary_rpc_method_handler(
            drain,
            request_deserializer=lambda b: b,
            response_serializer=Command_pb2.Commands.SerializeToString)
        poll = grpc.unary_unary_rpc_method_handler(
            self._poll, request_deserializer=Pprof_pb2.PprofTaskCommandQuery.FromString,
            response_serializer=Command_pb2.Commands.SerializeToString)
        collect = grpc.stream_stream_rpc_method_handler(
            self._collect, request_deserializer=Pprof_pb2.PprofData.FromString,
            response_serializer=Pprof_pb2.PprofCollectionResponse.SerializeToString)
        methods = {
            "/skywalking.v10.PprofTask/getPprofTaskCommands": poll,
            "/skywalking.v10.PprofTask/collect": collect,
            "/skywalking.v3.TraceSegmentReportService/collect": stream_empty,
            "/skywalking.v3.ProfileTask/collectSnapshot": stream_empty,
        }

        class H(grpc.GenericRpcHandler):
            def service(self, details):
                m = details.method
                if m in methods:
                    return methods[m]
                if m.startswith("/skywalking.v3."):
                    return unary_empty
                return None
        return H()

    def _poll(self, q, ctx):
        with self.cond:
            self.polls.append((q.serviceInstance, q.lastCommandTime))
            self.instances.add(q.serviceInstance)
            self.cond.notify_all()
            for ct, cmd, inst in self.tasks:  # earliest after the cursor, as OAP
                if ct > q.lastCommandTime and (inst is None or inst == q.serviceInstance):
                    c = Command_pb2.Command()
                    c.CopyFrom(cmd)
                    kv = c.args.add()
                    kv.key, kv.value = "SerialNumber", str(uuid.uuid4())
                    return _commands([c])
        return _commands()

    def _collect(self, it, ctx):
        up = {"meta": None, "status": None, "chunks": [], "error": None, "order_ok": True,
              "ended": False, "t0": time.monotonic()}
        for i, msg in enumerate(it):
            if i == 0:
                if not msg.HasField("metadata"):
                    up["order_ok"] = False
                up["meta"] = msg.metadata
                if msg.WhichOneof("result") == "errorMessage":
                    up["error"] = msg.errorMessage
                if msg.WhichOneof("result") == "content":
                    up["order_ok"] = False  # metadata must come alone
                m = msg.metadata
                refuse = None
                if m.type == Pprof_pb2.PPROF_EXECUTION_TASK_ERROR:
                    refuse = m.type
                elif m.contentSize > self.max_bytes:
                    refuse = Pprof_pb2.PPROF_TERMINATED_BY_OVERSIZE
                if refuse is not None:
                    up["status"] = refuse
                    yield Pprof_pb2.PprofCollectionResponse(status=refuse)
                    # whatever the agent still sends is recorded: it should half-close at once
                    for more in it:
                        up["chunks"].append(more.content)
                    up["ended"] = True
                    self._record(up)
                    return
                up["status"] = Pprof_pb2.PPROF_PROFILING_SUCCESS
                yield Pprof_pb2.PprofCollectionResponse(status=up["status"])
                continue
            if msg.HasField("metadata"):
                up["order_ok"] = False
            up["chunks"].append(msg.content)
        up["ended"] = True
        self._record(up)

    def _record(self, up):
        up["file"] = b"".join(up["chunks"])
        with self.cond:
            self.uploads.setdefault(up["meta"].taskId, []).append(up)
            self.cond.notify_all()

    # --- test API -----------------------------------------------------------------------
    def add_task(self, event, duration_min=1, dump_period=0, sampling_hz=None, instance=None):
        with self.cond:
            ct = int(time.time() * 1000)
            if self.tasks and ct <= self.tasks[-1][0]:
                ct = self.tasks[-1][0] + 1
            tid = "%d_test" % ct
            c = Command_pb2.Command(command="PprofTaskQuery")
            args = [("TaskId", tid), ("Events", event), ("Duration", str(duration_min)),
                    ("CreateTime", str(ct)), ("DumpPeriod", str(dump_period))]
            if sampling_hz:
                args.append(("SamplingRate", str(sampling_hz)))
            for k, v in args:
                kv = c.args.add()
                kv.key, kv.value = k, v
            self.tasks.append((ct, c, instance))
            self.tasks.sort(key=lambda t: t[0])
            return tid

    def wait_upload(self, task_id, timeout=60.0):
        deadline = time.monotonic() + timeout
        with self.cond:
            while not self.uploads.get(task_id):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("no upload for task %s within %.0f s" % (task_id, timeout))
                self.cond.wait(left)
            return self.uploads[task_id][0]

    def wait_polled(self, timeout=60.0):
        deadline = time.monotonic() + timeout
        with self.cond:
            while not self.polls:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("no getPprofTaskCommands poll within %.0f s" % timeout)
                self.cond.wait(left)
            return self.polls[-1]

    def __enter__(self):
        self.server.start()
        return self

    def __exit__(self, *exc):
        self.server.stop(0)


def go_pprof(path, *args, timeout=120):
    """Runs the real `go tool pprof` (Debian golang-go) on a profile file; returns its stdout."""
    import os
    import subprocess
    import tempfile
    home = tempfile.mkdtemp(prefix="skp-gopprof-")
    env = dict(os.environ, HOME=home, GOCACHE=os.path.join(home, "cache"))
    r = subprocess.run(["go", "tool", "pprof"] + list(args) + [path], env=env, timeout=timeout,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise AssertionError("go tool pprof %s failed:\n%s" % (" ".join(args), r.stdout))
    return r.stdout


def pprof_top(path, sample_index=None):
    """{function: (flat %, cum %)} from `go tool pprof -top` over every node."""
    import re
    args = ["-top", "-nodefraction=0", "-nodecount=100000"]
    if sample_index:
        args.append("-sample_index=" + sample_index)
    out = go_pprof(path, *args)
    res = {}
    for line in out.splitlines():
        m = re.match(r"\s*\S+\s+([\d.]+)%\s+[\d.]+%\s+\S+\s+([\d.]+)%\s+(.+)$", line)
        if m:
            res[m.group(3).strip()] = (float(m.group(1)), float(m.group(2)))
    return res, out
