"""Process profiling of thread-per-request services, two builds side by side (issue 23, item 4):
the agents' cost per sampling round and the share of the process's CPU the cpu profile holds.

  SKP_BUILD_DIR=build/release PYTHONPATH=tests/harness:tests/truth \\
      /usr/bin/python3 bench/python/bench_proc_threads.py --old OLD_BUILD --new NEW_BUILD \\
      [--seconds 4]

OLD_BUILD and NEW_BUILD are build directories (e.g. the tree before the change built in /tmp);
each gives its Python extension (python/cp3112) and examples/demo_service. skyprofd is
SKP_BUILD_DIR's (the server is not what is measured). For each build and workload, one `cpu`
task of --seconds at 100 Hz while two clients keep the service busy:
  - python: tests/truth/apps/truth_threads_app.py --agent (ThreadingHTTPServer, a new thread per
    request, 15 ms of CPU each);
  - native: examples/demo_service (a thread per connection; each request opens one) POST /cpu
    with 3 x 5 ms of CPU.
Printed per build: sampling rounds done of asked, skp-proc's CPU per round (its thread's
schedstat, polled until the thread ends; the task's start and encoding included), and the CPU
the profile holds / the CPU the process used in the task's window (/proc/PID/stat).
Then `skyprof record` (NEW_BUILD's) of the Python service, default (CPU accounting) and --idle
(a stack per thread per tick, no accounting): the recorder's CPU per tick (rusage) and the CPU
the profile holds."""
import argparse
import glob
import gzip
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request

from skp_harness import Proc, listening_port, start_skyprofd, tempdir, wait_until
import test_truth_process as T

HERE = os.path.dirname(os.path.abspath(__file__))
APP = os.path.join(HERE, '..', '..', 'tests', 'truth', 'apps', 'truth_threads_app.py')


class ProcThread(threading.Thread):
    """Follows the target's skp-proc thread: its CPU (ns) at the last poll before it ended."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.cpu_ns, self.halt = pid, 0, threading.Event()

    def run(self):
        tid = None
        while not self.halt.is_set():
            if tid is None:
                for p in glob.glob('/proc/%d/task/*/comm' % self.pid):
                    try:
                        if open(p).read().strip() == 'skp-proc':
                            tid = p.split('/')[-2]
                    except OSError:
                        pass
            else:
                try:
                    with open('/proc/%d/task/%s/schedstat' % (self.pid, tid)) as f:
                        self.cpu_ns = int(f.read().split()[0])
                except OSError:
                    return  # ended
            self.halt.wait(0.005)


class Clients:
    def __init__(self, url, n=2, post=False):
        self.url, self.post, self.halt = url, post, threading.Event()
        self.threads = [threading.Thread(target=self.loop, daemon=True) for _ in range(n)]
        for t in self.threads:
            t.start()

    def loop(self):
        while not self.halt.is_set():
            try:
                req = urllib.request.Request(self.url, data=b'{}' if self.post else None,
                                             headers={'Connection': 'close'})
                urllib.request.urlopen(req, timeout=30).read()
            except OSError:
                self.halt.wait(0.05)

    def stop(self):
        self.halt.set()
        for t in self.threads:
            t.join(timeout=30)


def measure(S, app, service, url, post):
    clients = Clients(url, post=post)
    truth = T.Truth(app.pid, lambda: 0.0)
    truth.start()
    follow = ProcThread(app.pid)
    follow.start()
    try:
        T.wait_instance(S, service)
        data = T.cpu_task(S, service)
        follow.join(timeout=30)
        prof = T.read_pprof(data)
        t0 = prof['time_ns'] / 1e9
        t1 = t0 + prof['duration_ns'] / 1e9
        wait_until(lambda: truth.rows[-1][0] > t1 + 0.1, 30, what='samples past the window')
        proc, _ = truth.window(t0, t1)
        k = prof['types'].index('cpu')
        total = sum(v[k] for _, v, _ in prof['samples']) / 1e9
        m = re.search(rb'(\d+) of (\d+) rounds', gzip.decompress(data))
        done, asked = int(m.group(1)), int(m.group(2))
        return {'rounds': '%d/%d' % (done, asked),
                'us_per_round': follow.cpu_ns / 1e3 / max(done, 1),
                'held': total / proc if proc > 0 else 0.0, 'proc_s': proc}
    finally:
        follow.halt.set()
        truth.stop()
        clients.stop()


def record_cost(skyprof, seconds, extra, port, pid, tmp):
    """Runs `skyprof record` on the Python app; returns (recorder CPU us per tick, profile CPU /
    process CPU or None with --idle)."""
    out = os.path.join(tmp, 'rec.txt')
    p = subprocess.Popen([skyprof, 'record', '--pid', str(pid), '--duration', str(seconds),
                          '--rate', '100', '--format', 'collapsed', '-o', out] + extra,
                         stderr=subprocess.PIPE, text=True)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = status
    ticks = int(re.search(r'(\d+) samples in', err).group(1))
    cpu_us = (ru.ru_utime + ru.ru_stime) * 1e6 / max(ticks, 1)
    m = re.search(r'CPU ([\d.]+) s from (\d+) to (\d+)', err)
    return cpu_us, (float(m.group(1)), int(m.group(2)) / 1e3, int(m.group(3)) / 1e3) if m else None


def run_record(build_skyprof, seconds, tmp):
    """`skyprof record` of the Python app: the default (CPU accounting) and --idle (no
    accounting: every thread's stack at every tick, as the default did before, plus the idle
    ones) with the same binary."""
    res = {}
    with Proc([sys.executable, APP], env={'PYTHONUNBUFFERED': '1'}, name='app-rec') as app:
        port = listening_port(app, 'truth_threads_app:')
        clients = Clients('http://127.0.0.1:%d/work?ms=15' % port)
        truth = T.Truth(app.pid, lambda: 0.0)
        truth.start()
        try:
            for name, extra in (('cpu (default)', []), ('--idle', ['--idle'])):
                us, win = record_cost(build_skyprof, seconds, extra, port, app.pid, tmp)
                held = None
                if win:
                    wait_until(lambda: truth.rows[-1][0] > win[2] + 0.1, 30, what='samples')
                    held = win[0] / truth.window(win[1], win[2])[0]
                res[name] = (us, held)
        finally:
            truth.stop()
            clients.stop()
    return res


def run_build(S, build, seconds, tmp, tag):
    env_common = {'SW_AGENT_COLLECTOR_BACKEND_SERVICES': S.grpc_target,
                  'SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL': '1',
                  'SKYPROF_PROC_MAX_DURATION_MS': str(int(seconds * 1000))}
    out = {}
    svc = 'bench-threads-py-' + tag
    env = dict(env_common, SW_AGENT_NAME=svc, PYTHONUNBUFFERED='1',
               PYTHONPATH=os.path.join(build, 'python', 'cp3112'))
    with Proc([sys.executable, APP, '--agent'], env=env, name='app-' + tag) as app:
        port = listening_port(app, 'truth_threads_app:')
        out['python'] = measure(S, app, svc, 'http://127.0.0.1:%d/work?ms=15' % port, False)
    svc = 'bench-threads-c-' + tag
    demo = os.path.join(build, 'examples', 'demo_service')
    with Proc([demo, '--port', '0', '--step-ms', '5', '--other-ms', '0'],
              env=dict(env_common, SW_AGENT_NAME=svc), name='demo-' + tag) as app:
        port = listening_port(app, 'demo_service:')
        out['native'] = measure(S, app, svc, 'http://127.0.0.1:%d/cpu' % port, True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--old', required=True)
    ap.add_argument('--new', required=True)
    ap.add_argument('--seconds', type=float, default=4.0)
    a = ap.parse_args()
    with tempdir() as tmp:
        S = start_skyprofd(tmp)
        try:
            res = {'old': run_build(S, os.path.abspath(a.old), a.seconds, tmp, 'old'),
                   'new': run_build(S, os.path.abspath(a.new), a.seconds, tmp, 'new')}
        finally:
            S.stop()
        rec = run_record(os.path.join(os.path.abspath(a.new), 'src', 'cli', 'skyprof'),
                         a.seconds, tmp)
    print('cpu task of %.0f s at 100 Hz, thread-per-request services, two clients' % a.seconds)
    print('%-8s %-5s %10s %16s %22s' % ('workload', 'build', 'rounds', 'skp-proc us/round',
                                         'profile CPU / process'))
    for w in ('python', 'native'):
        for b in ('old', 'new'):
            r = res[b][w]
            print('%-8s %-5s %10s %16.0f %15.1f %% of %.2f s' % (
                w, b, r['rounds'], r['us_per_round'], 100 * r['held'], r['proc_s']))
    print('skyprof record of the Python service (NEW build), 100 Hz, %.0f s:' % a.seconds)
    print('%-14s %18s %22s' % ('mode', 'recorder us/tick', 'profile CPU / process'))
    for name, (us, held) in rec.items():
        print('%-14s %18.0f %22s' % (name, us, '%.1f %%' % (100 * held) if held else '-'))


if __name__ == '__main__':
    main()
