"""Reference figure for bench/wire: Python grpcio client -> skyprof gRPC server.

Starts `bench_grpc_stream --serve` (our server, decoding every ThreadSnapshot), streams the
same ~926-byte ThreadSnapshots as the C benchmark with Debian's grpcio and prints the median
messages/s over several streams. Run by bench/wire/run.sh; PYTHONPATH must hold the stubs.

usage: grpcio_stream.py --server PATH [--messages N] [--rounds R]
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "harness"))
from skp_harness import bind_stub_package  # noqa: E402

bind_stub_package("profile")
import grpc  # noqa: E402
from profile import Profile_pb2, Profile_pb2_grpc  # noqa: E402

FRAMES = 20


def snapshots(n):
    stack = Profile_pb2.ThreadStack(codeSignatures=["app.service.Handler.method_%02d(h.py:%d)" % (i, 100 + i)
                                                    for i in range(FRAMES)])
    return [Profile_pb2.ThreadSnapshot(taskId="3f2a9c1e-8b7d-4e6f-a5c4-1d2e3f4a5b6c",
                                       traceSegmentId="a1b2c3d4e5f60718293a4b5c6d7e8f90.42.17000000000000001",
                                       time=1700000000000 + i, sequence=i, stack=stack) for i in range(n)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--messages", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()

    srv = subprocess.Popen([a.server, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        line = srv.stdout.readline().decode()
        if not line.startswith("PORT "):
            raise SystemExit("server did not start: %r" % line)
        port = int(line.split()[1])
        msgs = snapshots(a.messages)
        with grpc.insecure_channel("127.0.0.1:%d" % port) as ch:
            stub = Profile_pb2_grpc.ProfileTaskStub(ch)
            stub.collectSnapshot(iter(msgs[:1000]), timeout=60)  # warm-up
            rates = []
            for _ in range(a.rounds):
                t0 = time.perf_counter()
                resp = stub.collectSnapshot(iter(msgs), timeout=300)
                dt = time.perf_counter() - t0
                count = {kv.key: kv.value for kv in resp.commands[0].args}["count"]
                if int(count) != a.messages:
                    raise SystemExit("server acknowledged %s of %d" % (count, a.messages))
                rates.append(a.messages / dt)
        rates.sort()
        print("grpcio client -> skyprof server: %8d msgs/stream: median %.0f msg/s (min %.0f, max %.0f, %d streams)"
              % (a.messages, rates[len(rates) // 2], rates[0], rates[-1], len(rates)))
    finally:
        srv.stdin.close()  # the server stops when its stdin closes
        srv.wait(30)
    return srv.returncode


if __name__ == "__main__":
    sys.exit(main())
