"""Process profiling end to end against the real skyprofd: tasks created through its HTTP API
(/api/v1/pprof/tasks, every live instance of the service), the agents poll getPprofTaskCommands,
run the task and upload through collect; the test reads the task's progress and downloads what
skyprofd serves back, checked with the real `go tool pprof`.
- Python app (apps/proc_app.py: burn_cpu, sleepy, allocate_blocks threads): cpu has burn_cpu
  >= 80 % of the application's CPU and sleepy < 2 %; wall has both; goroutine answers in < 5 s
  with every thread; heap names allocate_blocks.
- C demo service (examples/demo_service, /cpu and /sleep requests): cpu has burn_ms >= 80 % of
  the application's CPU and sleep_ms < 2 %; wall has both.
Timed tasks are shortened on the agents with SKYPROF_PROC_MAX_DURATION_MS (the test knob)."""
import http.client
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

from skp_harness import Proc, Results, build_path, listening_port, start_skyprofd, wait_until
from pprof_backend import go_pprof, pprof_top

APPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'apps')
DEMO = build_path('examples', 'demo_service')
TASK_MS = 4000


def q(s):
    return urllib.parse.quote(s, safe='')


def run_task(S, service, event, tmp, duration=1, timeout=120):
    """Creates a task for every live instance of `service`, waits until one file is uploaded,
    downloads the merged pprof; returns (path, seconds from create to upload)."""
    t0 = time.monotonic()
    st, doc = S.json('POST', '/api/v1/pprof/tasks',
                     {'service': service, 'events': event, 'duration': duration})
    assert st == 201, (st, doc)
    tid = doc['id']

    def uploaded():
        t = S.json('GET', '/api/v1/pprof/tasks/' + q(tid), expect=200)[1]
        states = [p.get('state') for p in t.get('progress', [])]
        if 'failed' in states:
            raise AssertionError('task failed: %r' % t)
        return t if 'uploaded' in states and t.get('files') else None
    t = wait_until(uploaded, timeout, interval=0.1, what='%s %s uploaded' % (service, event))
    took = time.monotonic() - t0
    # the merged profile skyprofd serves back reads with go tool pprof ...
    st, _, body = S.http('GET', '/api/v1/pprof/tasks/%s/download?format=pprof' % q(tid))
    assert st == 200, (st, body[:300])
    merged = os.path.join(tmp, '%s-%s-merged.pb.gz' % (service, event))
    with open(merged, 'wb') as f:
        f.write(body)
    assert 'Type:' in go_pprof(merged, '-top')
    # ... and the agent's own file, stored as uploaded, is what the checks read
    st, _, body = S.http('GET', '/api/v1/pprof/tasks/%s/files/%d' % (q(tid), t['files'][0]['id']))
    assert st == 200, (st, body[:300])
    path = os.path.join(tmp, '%s-%s.pb.gz' % (service, event))
    with open(path, 'wb') as f:
        f.write(body)
    return path, took, t


def wait_instance(S, service):
    def live():
        st, _, body = S.http('GET', '/api/v1/services/%s/instances' % q(service))
        return st == 200 and b'name' in body
    wait_until(live, 60, interval=0.2, what='%s registered' % service)


class Load:
    def __init__(self, port, paths):
        self.port, self.stop = port, threading.Event()
        self.threads = [threading.Thread(target=self.loop, args=(p,), daemon=True) for p in paths]

    def loop(self, path):
        while not self.stop.is_set():
            try:
                c = http.client.HTTPConnection('127.0.0.1', self.port, timeout=30)
                while not self.stop.is_set():
                    c.request('POST', path, body=b'{}')
                    c.getresponse().read()
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


def python_app(S, res, tmp):
    env = dict(os.environ, PYTHONUNBUFFERED='1', SW_AGENT_NAME='pprof-py',
               SW_AGENT_COLLECTOR_BACKEND_SERVICES=S.grpc_target,
               SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL='1',
               SKYPROF_PROC_MAX_DURATION_MS=str(TASK_MS))
    log = open(os.path.join(tmp, 'app.log'), 'w+')
    app = subprocess.Popen([sys.executable, os.path.join(APPS, 'proc_app.py')], env=env,
                           stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT)

    def out():
        log.flush()
        with open(log.name) as f:
            return f.read()
    try:
        wait_until(lambda: 'ready' in out() or app.poll() is not None, 30, what='app ready')
        assert 'agent=True' in out(), out()
        wait_instance(S, 'pprof-py')

        def cpu():
            path, _, _ = run_task(S, 'pprof-py', 'cpu', tmp)
            top, text = pprof_top(path, 'cpu')
            # of the application's CPU (the profile also holds the agent's own thread); a
            # sleeping thread holds only the little CPU its wake-ups use (the profile holds all
            # the CPU the process used, tests/truth/test_truth_process.py)
            agent = top.get('(skyprof agent)', (0, 0))[0]
            assert top.get('burn_cpu', (0, 0))[1] >= 0.8 * (100.0 - agent), text
            assert top.get('sleepy', (0, 0))[1] < 2.0, text
        res.run('python cpu: burn_cpu >= 80 %, no sleepy', cpu)

        def wall():
            path, _, _ = run_task(S, 'pprof-py', 'wall', tmp)
            top, text = pprof_top(path)
            assert 'burn_cpu' in top and 'sleepy' in top, text
        res.run('python wall: burn_cpu and sleepy', wall)

        def dump():
            path, took, _ = run_task(S, 'pprof-py', 'goroutine', tmp, duration=0)
            tags = go_pprof(path, '-tags')
            for name in ('burn_cpu-thread', 'sleepy-thread', 'allocate_blocks-thread',
                         'lock_waiter-thread', 'MainThread'):
                assert name in tags, (name, tags)
            assert took < 5.0, 'thread dump took %.1f s' % took
        res.run('python goroutine: every thread, < 5 s', dump)

        def heap():
            path, _, _ = run_task(S, 'pprof-py', 'heap', tmp, duration=0)
            top, text = pprof_top(path, 'inuse_space')
            assert 'allocate_blocks' in top, text
        res.run('python heap: names allocate_blocks', heap)
    finally:
        try:
            app.stdin.close()
            app.wait(timeout=30)
        except Exception:
            app.kill()
        if res.failed:
            sys.stdout.write(out()[-3000:])


def native_demo(S, res, tmp):
    env = {'SW_AGENT_NAME': 'pprof-c', 'SW_AGENT_COLLECTOR_BACKEND_SERVICES': S.grpc_target,
           'SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL': '1',
           'SKYPROF_PROC_MAX_DURATION_MS': str(TASK_MS)}
    with Proc([DEMO, '--port', '0', '--step-ms', '20', '--other-ms', '100'], env=env,
              name='demo') as demo:
        p = listening_port(demo, 'demo_service:')
        wait_instance(S, 'pprof-c')
        with Load(p, ['/cpu', '/sleep']):
            def cpu():
                path, _, _ = run_task(S, 'pprof-c', 'cpu', tmp)
                top, text = pprof_top(path, 'cpu')
                # of the application's CPU: the profile also holds the agent's own thread
                agent = top.get('(skyprof agent)', (0, 0))[0]
                assert top.get('burn_ms', (0, 0))[1] >= 0.8 * (100.0 - agent), text
                assert top.get('sleep_ms', (0, 0))[1] < 2.0, text
            res.run('C demo cpu: burn_ms >= 80 %, no sleep_ms', cpu)

            def wall():
                path, _, _ = run_task(S, 'pprof-c', 'wall', tmp)
                top, text = pprof_top(path)
                assert 'burn_ms' in top and 'sleep_ms' in top, text
            res.run('C demo wall: burn_ms and sleep_ms', wall)


def main():
    res = Results()
    tmp = tempfile.mkdtemp(prefix='skp-pprof-e2e-')
    S = start_skyprofd(tmp)
    try:
        python_app(S, res, tmp)
        # the C demo once (with the system interpreter), not once per Python build
        if os.path.exists(DEMO) and os.path.realpath(sys.executable).startswith('/usr/bin/'):
            native_demo(S, res, tmp)
    finally:
        S.stop()
    res.finish()


if __name__ == '__main__':
    main()
