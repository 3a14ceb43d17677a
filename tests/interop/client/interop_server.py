"""grpcio implementation of skywalking.v3.ProfileTask used to exercise our C gRPC client.

- getProfileTaskCommands echoes the query (and the `authentication` metadata it saw) into one
  Command "QueryEcho"; service "big" returns a ~200 KB response (max_msg tests).
- collectSnapshot counts the streamed ThreadSnapshots and CRC32s their contents in the same byte
  order as grpc_client_driver.c (each field followed by a NUL byte).
- reportTaskFinish: taskId "abort" aborts with FAILED_PRECONDITION and a non-ASCII message;
  taskId "slow" waits until the RPC is terminated (client cancel / deadline) and records it.
- An interceptor rejects calls whose `authentication` metadata differs from the token.

Run as a script (`interop_server.py --port N --token T`) for the kill/restart scenario; it
prints "listening <port>" once serving.
"""
import argparse
import os
import sys
import threading
import time
import zlib
from concurrent import futures

from skp_harness import bind_stub_package  # noqa: E402

bind_stub_package("profile")
import grpc  # noqa: E402
from common import Command_pb2, Common_pb2  # noqa: E402
from profile import Profile_pb2, Profile_pb2_grpc  # noqa: E402

ABORT_MESSAGE = "t\u00e2che refus\u00e9e: \u00fcn\u00efc\u00f6d\u00e9 \u2713 100% done\u00a0!"
ABORT_CODE = grpc.StatusCode.FAILED_PRECONDITION


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.auth_seen = []
        self.snapshot_calls = []   # (count, crc) per completed collectSnapshot
        self.slow_started = threading.Event()
        self.slow_terminated = threading.Event()
        self.slow_time_remaining = None
        self.queries = 0


def _meta(ctx, key):
    for k, v in ctx.invocation_metadata():
        if k == key:
            return v
    return None


class ProfileTask(Profile_pb2_grpc.ProfileTaskServicer):
    def __init__(self, state):
        self.st = state

    def getProfileTaskCommands(self, req, ctx):
        with self.st.lock:
            self.st.queries += 1
        cmd = Command_pb2.Command(command="QueryEcho")
        args = [("service", req.service), ("serviceInstance", req.serviceInstance),
                ("lastCommandTime", str(req.lastCommandTime)),
                ("authentication", _meta(ctx, "authentication") or "")]
        if req.service == "big":
            args.append(("padding", "x" * 200000))
        for k, v in args:
            cmd.args.append(Common_pb2.KeyStringValuePair(key=k, value=v))
        return Command_pb2.Commands(commands=[cmd])

    def collectSnapshot(self, request_iterator, ctx):
        count = 0
        crc = 0
        for s in request_iterator:
            data = "\0".join([s.taskId, s.traceSegmentId, str(s.time), str(s.sequence)]
                             + list(s.stack.codeSignatures)) + "\0"
            crc = zlib.crc32(data.encode(), crc)
            count += 1
        with self.st.lock:
            self.st.snapshot_calls.append((count, crc))
        cmd = Command_pb2.Command(command="SnapshotAck")
        cmd.args.append(Common_pb2.KeyStringValuePair(key="count", value=str(count)))
        cmd.args.append(Common_pb2.KeyStringValuePair(key="crc", value=str(crc)))
        return Command_pb2.Commands(commands=[cmd])

    def reportTaskFinish(self, req, ctx):
        if req.taskId == "abort":
            ctx.abort(ABORT_CODE, ABORT_MESSAGE)
        if req.taskId == "slow":
            self.st.slow_time_remaining = ctx.time_remaining()
            done = threading.Event()
            ctx.add_callback(done.set)
            self.st.slow_started.set()
            done.wait(30)
            if done.is_set() or not ctx.is_active():
                self.st.slow_terminated.set()
            return Command_pb2.Commands()
        return Command_pb2.Commands()


class AuthInterceptor(grpc.ServerInterceptor):
    def __init__(self, state, token):
        self.st = state
        self.token = token

    def intercept_service(self, continuation, details):
        got = None
        for k, v in details.invocation_metadata:
            if k == "authentication":
                got = v
        with self.st.lock:
            self.st.auth_seen.append(got)
        if self.token is None or got == self.token:
            return continuation(details)

        def deny_unary(req, ctx):
            ctx.abort(grpc.StatusCode.UNAUTHENTICATED, "bad or missing authentication")

        def deny_stream(it, ctx):
            ctx.abort(grpc.StatusCode.UNAUTHENTICATED, "bad or missing authentication")

        if details.method.endswith("collectSnapshot") or details.method.endswith("goProfileReport"):
            return grpc.stream_unary_rpc_method_handler(deny_stream)
        return grpc.unary_unary_rpc_method_handler(deny_unary)


def start(port=0, token=None, workers=8):
    """Starts a server on 127.0.0.1:port; returns (server, bound_port, state)."""
    st = State()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers),
                         interceptors=[AuthInterceptor(st, token)],
                         options=[("grpc.so_reuseport", 1)])
    Profile_pb2_grpc.add_ProfileTaskServicer_to_server(ProfileTask(st), server)
    bound = server.add_insecure_port("127.0.0.1:%d" % port)
    if bound == 0:
        raise RuntimeError("cannot bind 127.0.0.1:%d" % port)
    server.start()
    return server, bound, st


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--token", default=None)
    a = ap.parse_args()
    server, port, _ = start(a.port, a.token)
    print("listening %d" % port, flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
