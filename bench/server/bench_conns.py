"""skyprofd with many idle connections and a few busy agents (issue 15's load test).

Holds N idle gRPC connections (HTTP/2 preface + SETTINGS, then nothing; spread over 127.0.0.x
source addresses, 250 per address, under the default per-peer cap of 256) while A agents (real
grpcio channels, in 5 processes) each make a call every 100 ms: keepAlive, a one-segment
`collect` stream and a task-command poll in turn. Prints the agents' call latency (p50, p99,
max), /healthz latency, and skyprofd's RSS: at start, with the idle connections, at its peak
under load, and after the idle connections closed (memory handed back by the trim timer).

    PYTHONPATH=build/release/pystubs:tests/harness /usr/bin/python3 bench/server/bench_conns.py \
        [--idle 5000] [--agents 50] [--seconds 20] [--build build/release]
Targets (issue 15): agents' p99 <= 50 ms, RSS <= 200 MB. The machine's load average is printed:
on a loaded machine the latency figures are the scheduler's as much as skyprofd's."""
import argparse
import multiprocessing as mp
import os
import re
import resource
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

# PYTHONPATH=<build>/pystubs:tests/harness: the harness binds the stub package `profile` (the
# standard library has a module of that name).
import skp_harness  # noqa: E402,F401
from profile import Profile_pb2  # noqa: E402
from common import Command_pb2  # noqa: E402
from language_agent import Tracing_pb2  # noqa: E402
from management import Management_pb2  # noqa: E402
import grpc  # noqa: E402

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def h2_frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream) + payload


def rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        m = re.search(r"VmRSS:\s+(\d+) kB", f.read())
    return int(m.group(1)) / 1024.0 if m else 0.0


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100.0))]


def agent_proc(target, n_threads, seconds, q):
    lat, errors = [], [0]
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def one(idx):
        ch = grpc.insecure_channel(target)
        ka = ch.unary_unary("/skywalking.v3.ManagementService/keepAlive",
                            request_serializer=lambda m: m.SerializeToString(),
                            response_deserializer=Command_pb2.Commands.FromString)
        col = ch.stream_unary("/skywalking.v3.TraceSegmentReportService/collect",
                              request_serializer=lambda m: m.SerializeToString(),
                              response_deserializer=Command_pb2.Commands.FromString)
        poll = ch.unary_unary("/skywalking.v3.ProfileTask/getProfileTaskCommands",
                              request_serializer=lambda m: m.SerializeToString(),
                              response_deserializer=Command_pb2.Commands.FromString)
        svc, inst = "bench-svc", "inst-%d-%d" % (os.getpid(), idx)
        ka(Management_pb2.InstancePingPkg(service=svc, serviceInstance=inst), timeout=30)
        k = 0
        mine = []
        while time.monotonic() < end:
            t0 = time.monotonic()
            try:
                if k % 3 == 0:
                    ka(Management_pb2.InstancePingPkg(service=svc, serviceInstance=inst),
                       timeout=30)
                elif k % 3 == 1:
                    now = int(time.time() * 1000)
                    seg = Tracing_pb2.SegmentObject(
                        traceId="t%d" % k, traceSegmentId="%s-%d" % (inst, k), service=svc,
                        serviceInstance=inst,
                        spans=[Tracing_pb2.SpanObject(spanId=0, parentSpanId=-1, startTime=now - 5,
                                                      endTime=now, operationName="/bench",
                                                      spanType=0)])
                    col(iter([seg]), timeout=30)
                else:
                    poll(Profile_pb2.ProfileTaskCommandQuery(service=svc, serviceInstance=inst,
                                                            lastCommandTime=-1), timeout=30)
                mine.append((time.monotonic() - t0) * 1000.0)
            except Exception:
                with lock:
                    errors[0] += 1
            k += 1
            left = 0.1 - (time.monotonic() - t0)
            if left > 0:
                time.sleep(left)
        ch.close()
        with lock:
            lat.extend(mine)

    ts = [threading.Thread(target=one, args=(i,)) for i in range(n_threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    q.put((lat, errors[0]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--idle", type=int, default=5000)
    ap.add_argument("--agents", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--build", default=os.environ.get("SKP_BUILD_DIR", "build/release"))
    a = ap.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, a.idle + 1000) if hard != resource.RLIM_INFINITY else a.idle + 1000
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))

    tmp = tempfile.mkdtemp(prefix="skp-bench-conns.")
    exe = os.path.join(a.build, "src", "server", "skyprofd")
    p = subprocess.Popen([exe, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
                          "--db", os.path.join(tmp, "b.db"), "--log-level", "warn"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ports = {}
    while len(ports) < 2:
        line = p.stdout.readline()
        if not line:
            sys.exit("skyprofd exited")
        m = re.match(r"skyprofd: (grpc|http) listening on .*:(\d+)", line)
        if m:
            ports[m.group(1)] = int(m.group(2))
    print("load average: %s" % open("/proc/loadavg").read().split()[:3])
    print("skyprofd pid %d, RSS at start %.1f MB" % (p.pid, rss_mb(p.pid)))

    idle = []
    t0 = time.monotonic()
    for i in range(a.idle):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.%d" % (10 + i // 250), 0))
        s.connect(("127.0.0.1", ports["grpc"]))
        s.sendall(PREFACE + h2_frame(4, 0, 0) + h2_frame(4, 1, 0))
        idle.append(s)
    time.sleep(1.0)
    print("%d idle connections open in %.1f s; RSS %.1f MB" % (a.idle, time.monotonic() - t0,
                                                              rss_mb(p.pid)))

    q = mp.Queue()
    per = [a.agents // 5 + (1 if i < a.agents % 5 else 0) for i in range(5)]
    procs = [mp.Process(target=agent_proc, args=("127.0.0.1:%d" % ports["grpc"], n, a.seconds, q))
             for n in per if n]
    c0, w0 = cpu_s(p.pid), time.monotonic()
    for pr in procs:
        pr.start()
    peak, health = 0.0, []
    import http.client
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        peak = max(peak, rss_mb(p.pid))
        h0 = time.monotonic()
        c = http.client.HTTPConnection("127.0.0.1", ports["http"], timeout=30)
        c.request("GET", "/healthz")
        c.getresponse().read()
        c.close()
        health.append((time.monotonic() - h0) * 1000.0)
        time.sleep(0.5)
    lat, errors = [], 0
    for _ in procs:
        l, e = q.get()
        lat.extend(l)
        errors += e
    for pr in procs:
        pr.join()
    peak = max(peak, rss_mb(p.pid))
    busy = cpu_s(p.pid) - c0
    print("skyprofd CPU while the agents ran: %.2f s in %.1f s (%.0f %% of one core)"
          % (busy, time.monotonic() - w0, 100.0 * busy / (time.monotonic() - w0)))
    print("load average: %s" % open("/proc/loadavg").read().split()[:3])
    print("agents: %d calls, %d errors; latency p50 %.2f ms, p99 %.2f ms, max %.2f ms "
          "(target p99 <= 50 ms)" % (len(lat), errors, pct(lat, 50), pct(lat, 99), max(lat or [0])))
    print("/healthz under load: p50 %.2f ms, max %.2f ms (%d requests)"
          % (pct(health, 50), max(health or [0]), len(health)))
    print("skyprofd RSS peak %.1f MB (target <= 200 MB)" % peak)
    for s in idle:
        s.close()
    time.sleep(5.0)
    print("RSS 5 s after the idle connections closed: %.1f MB" % rss_mb(p.pid))
    p.terminate()
    p.wait(timeout=30)
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
