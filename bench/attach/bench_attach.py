"""Out-of-process profiling benchmark (skyprof dump/record, src/attach), side by side with the
in-process reader (the Python extension) in the same run:

    SKP_BUILD_DIR=build/release /usr/bin/python3 bench/attach/bench_attach.py [--quick]

1. per-sample cost of reading a 50-frame stack of ANOTHER process (bench_attach: median, p99),
   its thread parked and running; next to it the in-process reader's capture of another thread
   of its own process at the same depth (bench/python's bench_capture);
2. the sampling rate `skyprof record --rate 1000` reaches;
3. the CPU `skyprof record --rate 100` uses (user+sys of the recorder / wall time, % of a core);
4. the target's slowdown while recorded at 100 Hz (non-blocking): loop iterations of a CPU-bound
   target per second of its own CPU time (and of wall time), recorded vs not, in alternating
   pairs of phases; the median over the pairs.
Prints a table and one JSON line. Figures depend on the machine's load: the load average is
printed with them."""
import json
import mmap
import os
import re
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("SKP_BUILD_DIR", os.path.join(SRC, "build", "release"))
CLI = os.path.join(BUILD, "src", "cli", "skyprof")
BENCH = os.path.join(BUILD, "bench", "attach", "bench_attach")
PY = "/usr/bin/python3.11"
DEPTH = 50

TARGET = r'''
import mmap, os, struct, sys, threading, time
mode, path = sys.argv[1], sys.argv[2]
with open(path, "wb") as f:
    f.write(b"\0" * 16)
with open(path, "r+b") as f:
    m = mmap.mmap(f.fileno(), 16)

def unit():
    x = 0
    for i in range(400):
        x += i * i % 7
    return x

def deep(n, fn):
    if n <= 0:
        return fn()
    return deep(n - 1, fn)

def leaf():
    struct.pack_into("<d", m, 8, 1.0)      # ready: at depth
    if mode == "parked":
        threading.Event().wait()
    k = 0
    while True:
        unit()
        k += 1
        struct.pack_into("<d", m, 0, float(k))

# <module> + deep() x (DEPTH - 2) + leaf: DEPTH frames on the main thread
deep(DEPTH_MINUS_2, leaf)
'''.replace("DEPTH_MINUS_2", str(DEPTH - 2))


class Target:
    def __init__(self, mode, tmp):
        self.path = os.path.join(tmp, "t-%s-%d" % (mode, time.monotonic_ns()))
        self.p = subprocess.Popen([PY, "-c", TARGET, mode, self.path])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if os.path.exists(self.path) and os.path.getsize(self.path) == 16 and self.read()[1] == 1.0:
                return
            time.sleep(0.01)
        raise RuntimeError("target did not start")

    def read(self):
        with open(self.path, "rb") as f:
            return struct.unpack("<dd", f.read(16))

    def iterations(self):
        # read() of a page the target is storing into may see a half-written double: take a
        # value only when a second read agrees that it is a close, non-decreasing count
        for _ in range(100):
            a = self.read()[0]
            b = self.read()[0]
            if 0 <= b - a < 1000:
                return b
        raise RuntimeError("iteration counter unreadable")

    def stop(self):
        self.p.kill()
        self.p.wait()


def out_of_process_cost(tmp, n):
    res = {}
    for mode in ("parked", "running"):
        t = Target(mode, tmp)
        try:
            out = subprocess.run([BENCH, str(t.p.pid), str(n)], capture_output=True, text=True,
                                 check=True).stdout
            res[mode] = json.loads(out)
        finally:
            t.stop()
    return res


def in_process_cost(n):
    sys.path.insert(0, os.path.join(SRC, "bench", "python"))
    py = [d for d in os.listdir(os.path.join(BUILD, "python")) if d.startswith("cp3112")]
    if not py:
        return None
    sys.path.insert(0, os.path.join(BUILD, "python", py[0]))
    import bench_python  # noqa: E402  (the in-process benchmark's own capture measurement)
    return bench_python.bench_capture(n)


def record(pid, rate, seconds, tmp):
    out = os.path.join(tmp, "rec-%d.txt" % rate)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.monotonic()
    p = subprocess.run([CLI, "record", "--pid", str(pid), "--rate", str(rate), "--duration",
                        str(seconds), "-o", out], capture_output=True, text=True, check=True)
    wall = time.monotonic() - w0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    m = re.search(r"(\d+) samples in ([\d.]+) s \(([\d.]+) Hz\)", p.stderr)
    return dict(hz=float(m.group(3)), ticks=int(m.group(1)), cpu_pct=100.0 * cpu / wall,
                stderr=p.stderr.strip().splitlines()[-2])


def cpu_ns(pid):
    """CPU time the target's main thread has run, in ns (schedstat: ns resolution, unlike the
    10 ms ticks of /proc/PID/stat)."""
    with open("/proc/%d/task/%d/schedstat" % (pid, pid)) as f:
        return int(f.read().split()[0])


def slowdown(tmp, seconds, rounds):
    """The target's loop iterations per second of wall time AND per second of its own CPU time,
    unrecorded vs recorded at 100 Hz, in `rounds` alternating pairs (off, on). On a loaded machine
    the wall rate mostly measures the scheduler's share; the rate per CPU-second measures what the
    recording costs the target itself (cache and page-table effects of process_vm_readv), so the
    slowdown is the median over the pairs of 1 - (on / off) per CPU-second."""
    t = Target("running", tmp)
    try:
        def phase(sec, recorded):
            i0, c0, w0 = t.iterations(), cpu_ns(t.p.pid), time.monotonic()
            if recorded:
                record(t.p.pid, 100, sec, tmp)
            else:
                time.sleep(sec)
            i1, c1, w1 = t.iterations(), cpu_ns(t.p.pid), time.monotonic()
            return (i1 - i0) / (w1 - w0), (i1 - i0) / ((c1 - c0) / 1e9)
        pairs = []
        for _ in range(rounds):
            off = phase(seconds, False)
            on = phase(seconds, True)
            pairs.append(dict(off_wall=off[0], on_wall=on[0], off_cpu=off[1], on_cpu=on[1],
                              slowdown_cpu_pct=100.0 * (1 - on[1] / off[1]),
                              slowdown_wall_pct=100.0 * (1 - on[0] / off[0])))
        return dict(pairs=pairs,
                    slowdown_cpu_pct=statistics.median(p["slowdown_cpu_pct"] for p in pairs),
                    slowdown_wall_pct=statistics.median(p["slowdown_wall_pct"] for p in pairs))
    finally:
        t.stop()


def main():
    quick = "--quick" in sys.argv
    n = 1000 if quick else 5000
    secs = 2 if quick else 5
    with tempfile.TemporaryDirectory(prefix="skp-bench-attach-") as tmp:
        print("load average: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
        oop = out_of_process_cost(tmp, n)
        inp = in_process_cost(2000 if quick else 5000)
        t = Target("running", tmp)
        try:
            r1000 = record(t.p.pid, 1000, 3, tmp)
            r100 = record(t.p.pid, 100, secs, tmp)
        finally:
            t.stop()
        slow = slowdown(tmp, secs, 2 if quick else 5)
        print("load average: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
    for mode in ("parked", "running"):
        o = oop[mode]
        line = "%-8s out-of-process: %5.1f frames, median %6.1f us, p99 %6.1f us, %.1f syscalls, %d torn" % (
            mode, o["frames_per_sample"], o["median_us"], o["p99_us"], o["syscalls_per_sample"], o["torn"])
        if inp:
            i = inp[mode]
            line += " | in-process: %d frames, median %.1f us, p99 %.1f us" % (
                i["frames"], i["skyprof_median_us"], i["skyprof_p99_us"])
        print(line)
    print("record --rate 1000: %.1f Hz reached (%s)" % (r1000["hz"], r1000["stderr"]))
    print("record --rate 100: recorder CPU %.2f %% of one core" % r100["cpu_pct"])
    print("target slowdown at 100 Hz (non-blocking), median of %d off/on pairs: %.2f %% per CPU-second "
          "(pairs: %s), %.2f %% per wall second (pairs: %s)" % (
              len(slow["pairs"]), slow["slowdown_cpu_pct"],
              " ".join("%.2f" % p["slowdown_cpu_pct"] for p in slow["pairs"]),
              slow["slowdown_wall_pct"],
              " ".join("%.1f" % p["slowdown_wall_pct"] for p in slow["pairs"])))
    print(json.dumps(dict(out_of_process=oop, in_process=inp, rate1000=r1000, rate100=r100, slowdown=slow)))


if __name__ == "__main__":
    main()
