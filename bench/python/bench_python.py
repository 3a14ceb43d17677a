"""skyprof Python agent benchmark: skyprof's C stack reader and sampler side by side with a
reference sampler written the way SkyWalking's Python agent samples (a Python thread doing
sys._current_frames() + traceback.extract_stack + formatting "<file>.<func>: <line>" per frame).

    PYTHONPATH=<build>/python/cp3112 python3 bench/python/bench_python.py [--quick]

Prints one table; each figure is measured in this run, on this machine. Throughput phases run in
fresh child processes (same script, --child ...) so that the phases do not share state.
"""
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import traceback

DEPTH = 50


# ---------------------------------------------------------------------------------------------
# the reference sampler (SkyWalking Python agent's ThreadProfiler.build_snapshot, in essence)
# ---------------------------------------------------------------------------------------------
def reference_snapshot(ident, max_depth=500):
    frame = sys._current_frames().get(ident)
    if frame is None:
        return None
    stack = []
    for idx, item in enumerate(traceback.extract_stack(frame)):
        if idx > max_depth:
            break
        stack.append(f'{item.filename}.{item.name}: {item.lineno}')
    return stack


class ReferenceSampler(threading.Thread):
    """Samples one thread every period_ms from a Python thread, as SkyWalking's ProfileThread."""

    def __init__(self, ident, period_ms):
        super().__init__(daemon=True)
        self.target_ident = ident
        self.period = period_ms / 1000.0
        self.stop_ev = threading.Event()
        self.samples = []
        self.t_start = self.t_end = None

    def run(self):
        self.t_start = time.monotonic()
        while not self.stop_ev.is_set():
            t0 = time.monotonic()
            s = reference_snapshot(self.target_ident)
            if s:
                self.samples.append(s)
            left = t0 + self.period - time.monotonic()
            self.stop_ev.wait(left if left > 0 else self.period)
        self.t_end = time.monotonic()


# ---------------------------------------------------------------------------------------------
# workloads
# ---------------------------------------------------------------------------------------------
def deep(n, fn):
    if n <= 0:
        return fn()
    return deep(n - 1, fn)


def cpu_unit():
    """One unit of pure-Python CPU work (~50 us)."""
    x = 0
    for i in range(400):
        x += i * i % 7
    return x


# ---------------------------------------------------------------------------------------------
# 1. per-sample capture cost of a 50-frame stack of another thread
# ---------------------------------------------------------------------------------------------
def bench_capture(n):
    from skyprof import _skyprof as native
    results = {}
    for state in ('parked', 'running'):
        box = []
        stop = threading.Event()

        def leaf():
            box.append((native._attach_current(), threading.get_ident()))
            if state == 'parked':
                stop.wait()
            else:
                while not stop.is_set():
                    cpu_unit()

        # deep() plus the thread's bootstrap frames: DEPTH frames in total
        th = threading.Thread(target=lambda: deep(DEPTH - 6, leaf))
        th.start()
        while not box:
            time.sleep(0.001)
        handle, ident = box[0]
        frames = len(native._capture_handle(handle, 500, False, 1))
        native._bench_capture(handle, 200)  # warm the code cache
        ns = native._bench_capture(handle, n)
        sk_med = statistics.median(ns) / 1000.0
        sk_p99 = sorted(ns)[int(len(ns) * 0.99)] / 1000.0
        ref = []
        n_ref = max(200, n // 20)
        for _ in range(n_ref):
            t0 = time.perf_counter_ns()
            s = reference_snapshot(ident)
            ref.append(time.perf_counter_ns() - t0)
            # a running thread's depth moves by a frame or two (the loop vs. cpu_unit)
            assert s and abs(len(s) - frames) <= 2, (len(s or []), frames)
        ref_med = statistics.median(ref) / 1000.0
        stop.set()
        th.join()
        native._release_handle(handle)
        results[state] = dict(frames=frames, skyprof_median_us=sk_med, skyprof_p99_us=sk_p99,
                              reference_median_us=ref_med, ratio=ref_med / sk_med)
    return results


# ---------------------------------------------------------------------------------------------
# 2./3. throughput of a CPU-bound handler while profiled (child process per phase)
# ---------------------------------------------------------------------------------------------
def child_throughput(mode, period_ms, seconds):
    """mode: none (no agent) | idle (agent, no task) | skyprof (task on the request) | reference"""
    import skyprof
    from skyprof import agent, config, _skyprof as native
    if mode in ('idle', 'skyprof'):
        config.collector_address = '127.0.0.1:1'   # no backend: local task only
        config.min_dump_period_ms = 1
        config.report_segments = False
        assert agent.start()
    if mode == 'skyprof':
        native.add_task('/cpu', 1, 0, period_ms, 9)
        deadline = time.monotonic() + 5
        while not native.task_active() and time.monotonic() < deadline:
            time.sleep(0.005)
    result = {}
    ready = threading.Event()

    def worker():
        with skyprof.entry('/cpu'):
            ready.set()
            for _ in range(200):          # warm-up (and let the task pick up the request)
                cpu_unit()
            iters = 0
            t0 = time.perf_counter()
            c0 = time.process_time()
            end = t0 + seconds
            while True:
                for _ in range(20):
                    deep(10, cpu_unit)
                iters += 20
                if time.perf_counter() >= end:
                    break
            result['rate'] = iters / (time.perf_counter() - t0)
            # per CPU second of the whole process (worker + agent/sampler threads): stable when
            # other processes load the machine, and it charges the sampler's own CPU
            result['rate_cpu'] = iters / max(1e-9, time.process_time() - c0)

    th = threading.Thread(target=worker)
    sampler = None
    th.start()
    ready.wait()
    if mode == 'reference':
        sampler = ReferenceSampler(th.ident, period_ms)
        sampler.start()
    th.join()
    out = {'rate': result['rate'], 'rate_cpu': result['rate_cpu']}
    if sampler:
        sampler.stop_ev.set()
        sampler.join()
        out['achieved_hz'] = len(sampler.samples) / (sampler.t_end - sampler.t_start)
    if mode == 'skyprof':
        st = native.stats()
        out['achieved_hz'] = st['achieved_dump_rate_hz']
        out['snapshots'] = st['snapshots_captured']
        out['dropped'] = st['snapshots_dropped']
        agent.stop(flush_ms=0)
    elif mode == 'idle':
        agent.stop(flush_ms=0)
    print(json.dumps(out))


def run_child(*args):
    out = subprocess.check_output([sys.executable, os.path.abspath(__file__), '--child'] +
                                  [str(a) for a in args], text=True)
    return json.loads(out.strip().splitlines()[-1])


def bench_throughput(period_ms, seconds, rounds, modes):
    rates = {m: [] for m in modes}
    cpu = {m: [] for m in modes}
    extra = {m: [] for m in modes}
    for _ in range(rounds):
        for m in modes:          # interleaved rounds: drift of the machine hits every mode
            r = run_child(m, period_ms, seconds)
            rates[m].append(r['rate'])
            cpu[m].append(r['rate_cpu'])
            extra[m].append(r)
    return ({m: statistics.median(v) for m, v in rates.items()},
            {m: statistics.median(v) for m, v in cpu.items()}, extra)


# ---------------------------------------------------------------------------------------------
# 4. memory: RSS added by `import skyprof` + one active task
# ---------------------------------------------------------------------------------------------
def rss_kb():
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return 0


def child_rss():
    base = rss_kb()
    import skyprof
    from skyprof import agent, config, _skyprof as native
    after_import = rss_kb()
    config.collector_address = '127.0.0.1:1'
    agent.start()
    native.add_task('/rss', 1, 0, 10, 9)
    while not native.task_active():
        time.sleep(0.005)
    with skyprof.entry('/rss'):
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.0:
            deep(40, cpu_unit)
    st = native.stats()
    after_task = rss_kb()
    agent.stop(flush_ms=0)
    print(json.dumps({'import_kb': after_import - base, 'task_kb': after_task - base,
                      'snapshots': st['snapshots_captured']}))


def loadavg():
    with open('/proc/loadavg') as f:
        return f.read().split()[0]


def main():
    if len(sys.argv) > 1 and sys.argv[1] == '--child':
        if sys.argv[2] == 'rss':
            return child_rss()
        return child_throughput(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    quick = '--quick' in sys.argv
    from skyprof import _skyprof as native
    print('skyprof Python benchmark: %s, reader %s, load average %s'
          % (sys.version.split()[0], native.reader_info()['layout'], loadavg()))

    cap = bench_capture(5000 if quick else 50000)
    print('\n1. capture of another thread\'s %d-frame stack (per sample)' % cap['parked']['frames'])
    print('   %-10s %14s %14s %16s %8s' % ('target', 'skyprof median', 'skyprof p99',
                                           'reference median', 'ratio'))
    for k, v in cap.items():
        print('   %-10s %11.2f us %11.2f us %13.1f us %7.0fx' % (
            k, v['skyprof_median_us'], v['skyprof_p99_us'], v['reference_median_us'], v['ratio']))

    secs = 1.5 if quick else 2.0
    rounds = 1 if quick else 5
    rates, cpu, extra = bench_throughput(10, secs, rounds,
                                         ['none', 'idle', 'skyprof', 'reference'])
    print('\n2. CPU-bound handler (pure Python), profiled at a 10 ms dump period; median of %d '
          'interleaved rounds of %.1f s, each in a fresh process' % (rounds, secs))
    print('   %-30s %10s %8s %12s %8s %16s' % ('mode', 'units/s', 'vs none', 'units/cpu-s',
                                               'vs none', 'achieved rate'))
    for m, label in (('none', 'no agent'), ('idle', 'skyprof agent, no task'),
                     ('skyprof', 'skyprof, task active (10 ms)'),
                     ('reference', 'reference sampler (10 ms)')):
        hz = [e.get('achieved_hz') for e in extra[m] if e.get('achieved_hz') is not None]
        print('   %-30s %10.0f %7.1f%% %12.0f %7.1f%% %16s' % (
            label, rates[m], 100.0 * rates[m] / rates['none'], cpu[m],
            100.0 * cpu[m] / cpu['none'],
            ('%.1f Hz (%.0f%%)' % (statistics.median(hz), statistics.median(hz)) if hz else '-')))

    rates1, cpu1, extra1 = bench_throughput(1, secs, rounds, ['none', 'skyprof'])
    hz1 = statistics.median(e['achieved_hz'] for e in extra1['skyprof'])
    print('\n3. sampler at a 1 ms period (task with dumpPeriod 1 ms, min_dump_period_ms=1)')
    print('   units/s: no agent %.0f, skyprof %.0f = %.1f%%; units per CPU second: no agent %.0f, '
          'skyprof %.0f = %.1f%% (slowdown %.1f%%); achieved %.0f Hz (%.0f%% of 1000)' % (
              rates1['none'], rates1['skyprof'], 100.0 * rates1['skyprof'] / rates1['none'],
              cpu1['none'], cpu1['skyprof'], 100.0 * cpu1['skyprof'] / cpu1['none'],
              100.0 - 100.0 * cpu1['skyprof'] / cpu1['none'], hz1, hz1 / 10.0))

    r = run_child('rss')
    print('\n4. RSS added: import skyprof %.2f MB; + agent + one active task sampling a request '
          '(%d snapshots) %.2f MB' % (r['import_kb'] / 1024.0, r['snapshots'],
                                      r['task_kb'] / 1024.0))
    print('\nload average at end: %s' % loadavg())


if __name__ == '__main__':
    main()
