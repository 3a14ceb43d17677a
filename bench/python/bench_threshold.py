"""App cost of sampling requests under a min-duration threshold (issue 23, item 3), old agent vs
new agent vs no agent, side by side in one run.

Since item 3 a slotted request under a task's threshold is sampled from its start (its dumps held
in the agent, sent only if it passes the threshold); before, it was not sampled until it passed.
The cost lands on requests that end under the threshold: they are now sampled and their dumps
freed. The workload is that worst case: THREADS request threads, each looping over requests of
REQ_MS of pure-Python CPU work (`skyprof.entry('/thr')`), under a task with a threshold far above
the request (every request ends under it, every slot sampled at every 10 ms period, every dump
freed). Two figures: the app's work per CPU second of the whole process (request threads and
agent threads), as bench_python.py's "throughput vs no agent" (ratio = mode / no agent, the
median of each round's pair), and the agent threads' own CPU time (schedstat, ns) in % of the
process's CPU time, which a loaded machine disturbs much less.

Each phase runs in a fresh child process; modes alternate within each round (machine drift hits
every mode), medians over the rounds.

  /usr/bin/python3 bench/python/bench_threshold.py --old OLD_BUILD/python/cp3112 \
      --new build/release/python/cp3112 [--seconds 3] [--rounds 5]

(OLD_BUILD: a build of the commit before the change, e.g. `git archive e409628 | tar -x -C DIR`
then cmake + `ninja skp_pyext_cp3112`.)"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

THREADS = 4
REQ_MS = 50
THRESHOLD_MS = 5000
PERIOD_MS = 10


def cpu_unit():
    x = 0
    for i in range(200):
        x = (x * 31 + i) % 1000003
    return x


def deep(n, fn):
    if n == 0:
        return fn()
    return deep(n - 1, fn)


def agent_threads_cpu_ns():
    """CPU time (ns, schedstat) of this process's agent threads (named skp-*)."""
    total = 0
    for tid in os.listdir('/proc/self/task'):
        try:
            with open('/proc/self/task/%s/comm' % tid) as f:
                if not f.read().startswith('skp-'):
                    continue
            with open('/proc/self/task/%s/schedstat' % tid) as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # the thread ended
    return total


def child(mode, seconds):
    """mode: none (no agent) | task (agent + a task with a threshold on /thr)."""
    import skyprof
    out = {}
    if mode == 'task':
        from skyprof import agent, config, _skyprof as native
        config.collector_address = '127.0.0.1:1'   # no backend: a local task only
        config.report_segments = False
        assert agent.start()
        native.add_task('/thr', 1, THRESHOLD_MS, PERIOD_MS, 9)
        deadline = time.monotonic() + 5
        while not native.task_active() and time.monotonic() < deadline:
            time.sleep(0.005)
        assert native.task_active()
    units = [0] * THREADS
    start = threading.Event()
    end_at = [0.0]

    def worker(k):
        start.wait()
        while time.perf_counter() < end_at[0]:
            with skyprof.entry('/thr') if mode == 'task' else _Null():
                t_end = time.perf_counter() + REQ_MS / 1000.0
                while time.perf_counter() < t_end:
                    deep(10, cpu_unit)
                    units[k] += 1
    ths = [threading.Thread(target=worker, args=(k,)) for k in range(THREADS)]
    for t in ths:
        t.start()
    a0 = agent_threads_cpu_ns() / 1e9
    c0 = time.process_time()
    t0 = time.perf_counter()
    end_at[0] = t0 + seconds
    start.set()
    for t in ths:
        t.join()
    cpu = time.process_time() - c0
    wall = time.perf_counter() - t0
    out['agent_cpu_s'] = agent_threads_cpu_ns() / 1e9 - a0
    out['rate_cpu'] = sum(units) / max(cpu, 1e-9)
    out['cpu_s'] = cpu
    out['rate'] = sum(units) / wall
    if mode == 'task':
        st = native.stats()
        out['captured'] = st['snapshots_captured']
        out['sent_or_queued'] = st['snapshots_sent']
        out['slots'] = st['slots_taken']
        out['runs'] = st['sampler_runs']
        agent.stop(flush_ms=0)
    print(json.dumps(out))


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def run_child(pypath, mode, seconds):
    env = dict(os.environ, PYTHONPATH=pypath)
    out = subprocess.check_output([sys.executable, os.path.abspath(__file__), '--child', mode,
                                   str(seconds)], env=env, text=True)
    return json.loads(out.strip().splitlines()[-1])


def loadavg():
    with open('/proc/loadavg') as f:
        return f.read().split()[0]


def main():
    if len(sys.argv) > 1 and sys.argv[1] == '--child':
        return child(sys.argv[2], float(sys.argv[3]))
    ap = argparse.ArgumentParser()
    ap.add_argument('--old', required=True, help='PYTHONPATH of the old build (python/<tag>)')
    ap.add_argument('--new', required=True, help='PYTHONPATH of the new build (python/<tag>)')
    ap.add_argument('--seconds', type=float, default=3.0)
    ap.add_argument('--rounds', type=int, default=5)
    a = ap.parse_args()
    modes = [('none', a.new, 'none'), ('old', a.old, 'task'), ('new', a.new, 'task')]
    res = {m: [] for m, _, _ in modes}
    print('threshold app cost: %d request threads x %d ms requests, task threshold %d ms, '
          'period %d ms; %d rounds of %.1f s; load average %s' % (
              THREADS, REQ_MS, THRESHOLD_MS, PERIOD_MS, a.rounds, a.seconds, loadavg()))
    for r in range(a.rounds):
        for m, path, kind in modes:
            res[m].append(run_child(path, kind, a.seconds))
        print('  round %d: %s' % (r + 1, '  '.join(
            '%s %.0f' % (m, res[m][-1]['rate_cpu']) for m, _, _ in modes)))
        sys.stdout.flush()
    print('\n  %-8s %14s %22s %14s %12s' % ('mode', 'units/cpu-s', 'vs none (paired median)',
                                            'agent CPU', 'captured/s'))
    for m, _, _ in modes:
        v = statistics.median(x['rate_cpu'] for x in res[m])
        paired = statistics.median(x['rate_cpu'] / y['rate_cpu']
                                   for x, y in zip(res[m], res['none']))
        agent = statistics.median(100.0 * x['agent_cpu_s'] / x['cpu_s'] for x in res[m])
        agent_s = statistics.median(x['agent_cpu_s'] / a.seconds for x in res[m])
        cap = statistics.median(x.get('captured', 0) for x in res[m]) / a.seconds
        print('  %-8s %14.0f %21.2f%% %13.3f%% %12.0f %10.2f ms/s' % (
            m, v, 100.0 * paired, agent, cap, 1000.0 * agent_s))
    print('  (agent CPU: the skp-* threads\' CPU time, from schedstat, in % of the process\'s and'
          ' in ms per second of the phase)')
    print('  load average at end: %s' % loadavg())


if __name__ == '__main__':
    main()
