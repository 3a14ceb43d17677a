"""Process profiling (PprofTask) cost in a Python service, against the real skyprofd.

  PYTHONPATH=build/release/python/cp3112:build/release/pystubs:tests/harness \
      /usr/bin/python3 bench/python/bench_pprof_agent.py [--phase-s 15] [--threads 50]

1. throughput: a CPU-bound request loop (one worker thread, ~1 ms of pure-Python work per
   request) runs in a child process with the agent; a phase without a task then one with a `cpu`
   task at 100 Hz, twice (two apps: one cpu task per service and minute), same run; prints requests/s per phase, the cost, and
   the sampler's achieved rounds (the file's comment: rounds done of rounds asked).
2. memory: a child with `--threads` threads (a quarter burn CPU, the rest sleep in distinct call
   chains) runs a `wall` task at 100 Hz; prints its RSS before and at the peak during the task.
Timed tasks are cut to the phase length with SKYPROF_PROC_MAX_DURATION_MS."""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.parse

from skp_harness import start_skyprofd, wait_until
from pprof_backend import go_pprof

APP = r'''
import os, sys, threading, time
from skyprof import agent
mode, n = sys.argv[1], int(sys.argv[2])
agent.start()
count = [0]
def request():
    x = 0
    for i in range(4000):
        x = (x * 31 + i) % 1000003
    return x
def worker():
    while True:
        request(); count[0] += 1
def burner():
    while True:
        request()
def make_sleeper(depth):
    def f(d):
        if d: return f(d - 1)
        while True: time.sleep(0.05)
    return lambda: f(depth)
if mode == 'loop':
    threading.Thread(target=worker, daemon=True).start()
else:
    for i in range(n):
        t = burner if i % 4 == 0 else make_sleeper(i % 7)
        threading.Thread(target=t, daemon=True, name='t%d' % i).start()
print('ready', flush=True)
while True:
    time.sleep(0.25)
    print('%.3f %d' % (time.monotonic(), count[0]), flush=True)
'''


def rss_kb(pid):
    with open('/proc/%d/status' % pid) as f:
        return int(re.search(r'VmRSS:\s+(\d+)', f.read()).group(1))


def start_app(S, tmp, mode, n, phase_ms, service):
    env = dict(os.environ, SW_AGENT_NAME=service, PYTHONUNBUFFERED='1',
               SW_AGENT_COLLECTOR_BACKEND_SERVICES=S.grpc_target,
               SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL='1',
               SKYPROF_PROC_MAX_DURATION_MS=str(phase_ms))
    log = open(os.path.join(tmp, service + '.log'), 'w+')
    p = subprocess.Popen([sys.executable, '-c', APP, mode, str(n)], env=env, stdout=log,
                         stderr=subprocess.STDOUT)
    wait_until(lambda: 'ready' in open(log.name).read(), 30, what='app ready')
    def live():
        st, _, body = S.http('GET', '/api/v1/services/%s/instances' % service)
        return st == 200 and b'name' in body
    wait_until(live, 60, interval=0.2, what='registered')
    return p, log


def counts(log):
    out = []
    for line in open(log.name).read().splitlines():
        m = re.match(r'([\d.]+) (\d+)$', line)
        if m:
            out.append((float(m.group(1)), int(m.group(2))))
    return out


def create(S, service, event):
    st, doc = S.json('POST', '/api/v1/pprof/tasks', {'service': service, 'events': event,
                                                     'duration': 1})
    assert st == 201, doc
    return doc['id']


def wait_file(S, tid, tmp, timeout=120):
    q = urllib.parse.quote(tid, safe='')
    t = wait_until(lambda: (lambda t: t if t.get('files') else None)(
        S.json('GET', '/api/v1/pprof/tasks/' + q, expect=200)[1]), timeout, interval=0.2,
        what='file')
    st, _, body = S.http('GET', '/api/v1/pprof/tasks/%s/files/%d' % (q, t['files'][0]['id']))
    path = os.path.join(tmp, tid.replace('/', '_') + '.pb.gz')
    open(path, 'wb').write(body)
    return path


def rate(log, t0, t1):
    c = [x for x in counts(log) if t0 <= x[0] <= t1]
    return (c[-1][1] - c[0][1]) / (c[-1][0] - c[0][0]) if len(c) > 2 else float('nan')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--phase-s', type=float, default=15)
    ap.add_argument('--threads', type=int, default=50)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix='skp-bench-pprof-')
    S = start_skyprofd(tmp)
    phase_ms = int(a.phase_s * 1000)
    try:
        app, log = start_app(S, tmp, 'loop', 1, phase_ms, 'bench-loop')
        rates = []
        rounds = []
        # OAP's rule allows one cpu task per service and minute: one pair per app, two apps
        for i, with_task in enumerate((False, True)):
            if with_task:
                tid = create(S, 'bench-loop', 'cpu')
                # the task starts at the agent's next poll: measure inside its window
                time.sleep(1.5)
                t0 = time.monotonic(); time.sleep(a.phase_s - 3); t1 = time.monotonic()
                rates.append(('cpu task', rate(log, t0, t1)))
                path = wait_file(S, tid, tmp)
                m = re.search(r'(\d+) of (\d+) rounds', go_pprof(path, '-comments'))
                rounds.append((int(m.group(1)), int(m.group(2))))
            else:
                t0 = time.monotonic(); time.sleep(a.phase_s - 3); t1 = time.monotonic()
                rates.append(('no task', rate(log, t0, t1)))
        app.kill()
        # second pair on a fresh service (same machine, same run)
        app, log = start_app(S, tmp, 'loop', 1, phase_ms, 'bench-loop2')
        t0 = time.monotonic(); time.sleep(a.phase_s - 3); t1 = time.monotonic()
        rates.append(('no task', rate(log, t0, t1)))
        tid = create(S, 'bench-loop2', 'cpu')
        time.sleep(1.5)
        t0 = time.monotonic(); time.sleep(a.phase_s - 3); t1 = time.monotonic()
        rates.append(('cpu task', rate(log, t0, t1)))
        path = wait_file(S, tid, tmp)
        m = re.search(r'(\d+) of (\d+) rounds', go_pprof(path, '-comments'))
        rounds.append((int(m.group(1)), int(m.group(2))))
        app.kill()
        for name, r in rates:
            print('throughput %-8s %8.1f requests/s' % (name, r))
        base = [r for n, r in rates if n == 'no task']
        task = [r for n, r in rates if n == 'cpu task']
        for b, t in zip(base, task):
            print('pair: cost %.2f %%' % (100.0 * (1 - t / b)))
        for done, asked in rounds:
            print('cpu task rounds: %d of %d (%.1f %% of the requested 100 Hz)' %
                  (done, asked, 100.0 * done / asked))

        app, log = start_app(S, tmp, 'threads', a.threads, phase_ms, 'bench-threads')
        before = rss_kb(app.pid)
        tid = create(S, 'bench-threads', 'wall')
        peak = before
        end = time.monotonic() + a.phase_s + 3
        while time.monotonic() < end:
            peak = max(peak, rss_kb(app.pid))
            time.sleep(0.2)
        path = wait_file(S, tid, tmp)
        print('wall task on %d threads, %.0f s at 100 Hz: RSS %d kB before, peak %d kB during '
              '(+%d kB); file %d bytes; %s' % (a.threads, a.phase_s, before, peak, peak - before,
                                               os.path.getsize(path),
                                               go_pprof(path, '-comments').strip().splitlines()[-1]))
        app.kill()
    finally:
        S.stop()


if __name__ == '__main__':
    main()
