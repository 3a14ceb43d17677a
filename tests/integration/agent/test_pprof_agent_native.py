"""Process profiling (PprofTask) of the C demo service, over the real gRPC wire (Debian grpcio
backend, tests/harness/pprof_backend.py), checked with the real `go tool pprof`.

One client loop keeps requests to /cpu busy (burn_ms) and another to /sleep (sleep_ms):
- cpu: burn_ms >= 80 % of the CPU time, sleep_ms absent (sleeping threads are never sampled);
- wall: both burn_ms and sleep_ms; thread_name/thread_id labels; period and duration set;
- goroutine: answered within 5 s with one sample per host thread (agent threads left out);
- heap: EXECUTION_TASK_ERROR naming the event (the native agent does not change malloc);
- a second task while one runs: EXECUTION_TASK_ERROR; the metadata always comes first;
- a backend answering TERMINATED_BY_OVERSIZE gets no content.
Timed tasks are shortened with SKYPROF_PROC_MAX_DURATION_MS (the test knob).
"""
import http.client
import os
import re
import tempfile
import threading
import time

from skp_harness import Proc, Results, build_path, check_sanitizer_clean, listening_port
from pprof_backend import PprofBackend, Pprof_pb2, go_pprof, pprof_top

DEMO = os.environ.get("SKP_DEMO_SERVICE") or build_path("examples", "demo_service")
TASK_MS = 4000


class Load:
    def __init__(self, port, paths):
        self.port, self.stop, self.n = port, threading.Event(), 0
        self.threads = [threading.Thread(target=self.loop, args=(p,), daemon=True) for p in paths]

    def loop(self, path):
        while not self.stop.is_set():
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                while not self.stop.is_set():
                    c.request("POST", path, body=b"{}")
                    c.getresponse().read()
                    self.n += 1
            except OSError:
                time.sleep(0.05)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)


def save(up, tmp, name):
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        f.write(up["file"])
    return path


def main():
    res = Results()
    tmp = tempfile.mkdtemp(prefix="skp-pprof-native-")
    with PprofBackend() as be:
        env = {"SW_AGENT_NAME": "demo-pprof",
               "SW_AGENT_COLLECTOR_BACKEND_SERVICES": "127.0.0.1:%d" % be.port,
               "SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL": "1",
               "SKYPROF_PROC_MAX_DURATION_MS": str(TASK_MS)}
        demo = Proc([DEMO, "--port", "0", "--step-ms", "20", "--other-ms", "100"], env=env,
                    name="demo")
        with demo:
            port = listening_port(demo, 'demo_service:')
            be.wait_polled(timeout=60)
            with Load(port, ["/cpu", "/sleep"]):

                def cpu():
                    tid = be.add_task("cpu", duration_min=1)
                    up = be.wait_upload(tid, timeout=90)
                    assert up["order_ok"], "metadata must come first and alone"
                    assert up["status"] == Pprof_pb2.PPROF_PROFILING_SUCCESS, up
                    assert up["ended"] and up["meta"].contentSize == len(up["file"]), \
                        (up["meta"].contentSize, len(up["file"]))
                    assert all(len(c) <= 1 << 20 for c in up["chunks"])
                    top, out = pprof_top(save(up, tmp, "cpu.pb.gz"), "cpu")
                    assert "Type: cpu" in out, out
                    burn = top.get("burn_ms", (0, 0))[1]
                    assert burn >= 80.0, "burn_ms has %.1f%% of cpu:\n%s" % (burn, out)
                    assert "sleep_ms" not in top, "a sleeping thread was sampled:\n" + out
                res.run("cpu task: burn_ms >= 80 %, no sleep_ms", cpu)

                def wall():
                    tid = be.add_task("wall", duration_min=1)
                    up = be.wait_upload(tid, timeout=90)
                    assert up["status"] == Pprof_pb2.PPROF_PROFILING_SUCCESS, up
                    path = save(up, tmp, "wall.pb.gz")
                    top, out = pprof_top(path)
                    assert "Type: wall" in out, out
                    assert "burn_ms" in top and "sleep_ms" in top, out
                    assert top["sleep_ms"][1] > 10.0, out
                    tags = go_pprof(path, "-tags")
                    assert "thread_name" in tags and "thread_id" in tags, tags
                    raw = go_pprof(path, "-raw")
                    assert re.search(r"Period: 10000000", raw), raw[:400]
                    m = re.search(r"Duration: ([\d.]+)s", out)
                    assert m and float(m.group(1)) >= TASK_MS / 1000 * 0.8, out
                res.run("wall task: burn_ms and sleep_ms, labels, period, duration", wall)

                def dump():
                    t0 = time.monotonic()
                    tid = be.add_task("goroutine", duration_min=0)
                    up = be.wait_upload(tid, timeout=30)
                    took = up["t0"] - t0
                    assert up["status"] == Pprof_pb2.PPROF_PROFILING_SUCCESS, up
                    path = save(up, tmp, "dump.pb.gz")
                    tags = go_pprof(path, "-tags")
                    host = [t for t in os.listdir("/proc/%d/task" % demo.pid)
                            if not open("/proc/%d/task/%s/comm" % (demo.pid, t)).read()
                            .startswith("skp-")]
                    ids = re.findall(r"^\s+[\d.]+ \(\s*[\d.]+%\): (\d+)$", tags.split("thread_id")[1]
                                     .split("thread_name")[0], re.M)
                    assert len(ids) >= len(host) - 2, (ids, host, tags)
                    assert "skp-" not in tags, tags
                    # polled every second: the answer comes within one poll + the dump
                    assert took < 5.0, "thread dump took %.1f s" % took
                res.run("goroutine task: every host thread, < 5 s", dump)

                def heap():
                    tid = be.add_task("heap", duration_min=0)
                    up = be.wait_upload(tid, timeout=30)
                    assert up["status"] == Pprof_pb2.PPROF_EXECUTION_TASK_ERROR, up
                    assert "heap" in up["error"] and "native" in up["error"], up["error"]
                    assert not up["chunks"]
                res.run("heap task: EXECUTION_TASK_ERROR naming the event", heap)

                def busy():
                    a = be.add_task("wall", duration_min=1)
                    b = be.add_task("cpu", duration_min=1)
                    upb = be.wait_upload(b, timeout=30)
                    assert upb["status"] == Pprof_pb2.PPROF_EXECUTION_TASK_ERROR, upb
                    assert "another" in upb["error"], upb["error"]
                    upa = be.wait_upload(a, timeout=90)
                    assert upa["status"] == Pprof_pb2.PPROF_PROFILING_SUCCESS
                res.run("second task while one runs: EXECUTION_TASK_ERROR", busy)

                def oversize():
                    be.max_bytes = 16
                    try:
                        tid = be.add_task("goroutine", duration_min=0)
                        up = be.wait_upload(tid, timeout=30)
                    finally:
                        be.max_bytes = 30 << 20
                    assert up["status"] == Pprof_pb2.PPROF_TERMINATED_BY_OVERSIZE, up
                    assert up["meta"].contentSize > 16
                    # the agent stopped after the metadata: nothing else arrived
                    assert not up["chunks"], len(up["chunks"])
                res.run("OVERSIZE answer: no content sent", oversize)
            demo.stop()
            res.run("demo exits cleanly, sanitizer clean", check_sanitizer_clean, demo)
    res.finish()


if __name__ == "__main__":
    main()
