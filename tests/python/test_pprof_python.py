"""Process profiling (PprofTask) of a Python app by the Python agent, over the real gRPC wire
(Debian grpcio backend, tests/harness/pprof_backend.py), files read by the real `go tool pprof`.
The app (apps/proc_app.py) runs threads burn_cpu, sleepy, allocate_blocks and lock_waiter:
- cpu: burn_cpu >= 80 % of the CPU samples and sleepy (its wake-ups only) < 1 %;
- wall: both burn_cpu and sleepy; Python frames as function / file / line; thread names;
- goroutine (thread dump): every Python thread, answered in < 5 s;
- heap: tracemalloc started for the task names allocate_blocks, and is off again after;
- an event the Python agent does not know (itimer): EXECUTION_TASK_ERROR naming it
  (block, mutex and the asyncio tasks of goroutine: test_pprof_python_locks.py).
Timed tasks are shortened with SKYPROF_PROC_MAX_DURATION_MS (the test knob)."""
import os
import re
import subprocess
import sys
import tempfile
import time

from skp_harness import Results, wait_until
from pprof_backend import PprofBackend, Pprof_pb2, go_pprof, pprof_top

APPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'apps')
TASK_MS = 4000


def main():
    res = Results()
    tmp = tempfile.mkdtemp(prefix='skp-pprof-py-')
    with PprofBackend() as be:
        env = dict(os.environ, PYTHONUNBUFFERED='1', SW_AGENT_NAME='py-pprof',
                   SW_AGENT_COLLECTOR_BACKEND_SERVICES='127.0.0.1:%d' % be.port,
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
            be.wait_polled(timeout=60)

            def save(up, name):
                assert up['status'] == Pprof_pb2.PPROF_PROFILING_SUCCESS, (up, out())
                path = os.path.join(tmp, name)
                with open(path, 'wb') as f:
                    f.write(up['file'])
                return path

            def cpu():
                up = be.wait_upload(be.add_task('cpu', duration_min=1), timeout=90)
                top, text = pprof_top(save(up, 'cpu.pb.gz'), 'cpu')
                assert 'Type: cpu' in text, text
                burn = top.get('burn_cpu', (0, 0))[1]
                assert burn >= 80.0, 'burn_cpu %.1f%%:\n%s' % (burn, text)
                # A sleeping thread is never sampled; the only CPU `sleepy` has is its wake-ups
                # (20 a second, each re-taking the GIL), which a true CPU profile does show: under
                # ASan on a loaded machine one such wake-up can cost a few ms. A wall-style
                # sampler would give sleepy a share near burn_cpu's, far above this bound.
                sleepy = top.get('sleepy', (0, 0))[1]
                assert sleepy < 1.0, 'sleepy %.2f%%:\n%s' % (sleepy, text)
            res.run('cpu task: burn_cpu >= 80 %, sleepy (wake-ups only) < 1 %', cpu)

            def wall():
                up = be.wait_upload(be.add_task('wall', duration_min=1), timeout=90)
                path = save(up, 'wall.pb.gz')
                top, text = pprof_top(path)
                assert 'burn_cpu' in top and 'sleepy' in top, text
                lines = go_pprof(path, '-top', '-lines', '-nodecount=1000')
                assert re.search(r'sleepy .*proc_app\.py:\d+', lines), lines
                # sampled frames name the qualified function (co_qualname), file and line apart
                assert re.search(r'Napper\.nap .*proc_app\.py:\d+', lines), lines
                tags = go_pprof(path, '-tags')
                assert 'sleepy-thread' in tags and 'burn_cpu-thread' in tags, tags
            res.run('wall task: burn_cpu, sleepy, Napper.nap, file:line, thread names', wall)

            def dump():
                t0 = time.monotonic()
                up = be.wait_upload(be.add_task('goroutine', duration_min=0), timeout=30)
                took = up['t0'] - t0
                path = save(up, 'dump.pb.gz')
                tags = go_pprof(path, '-tags')
                for name in ('burn_cpu-thread', 'sleepy-thread', 'allocate_blocks-thread',
                             'lock_waiter-thread', 'MainThread'):
                    assert name in tags, (name, tags)
                assert took < 5.0, 'thread dump took %.1f s' % took
            res.run('goroutine task: every thread in < 5 s', dump)

            def heap():
                up = be.wait_upload(be.add_task('heap', duration_min=0), timeout=60)
                path = save(up, 'heap.pb.gz')
                top, text = pprof_top(path, 'inuse_space')
                assert 'allocate_blocks' in top, text
                assert top['allocate_blocks'][1] > 50.0, text
            res.run('heap task: names allocate_blocks (tracemalloc)', heap)

            def unsupported():
                up = be.wait_upload(be.add_task('itimer', duration_min=1, dump_period=1),
                                    timeout=60)
                assert up['status'] == Pprof_pb2.PPROF_EXECUTION_TASK_ERROR, up
                assert 'itimer' in up['error'], up['error']
            res.run('an unknown event: EXECUTION_TASK_ERROR naming it', unsupported)
        finally:
            try:
                app.stdin.close()
                app.wait(timeout=30)
            except Exception:
                app.kill()
            sys.stdout.write(out()[-3000:] if res.failed else '')
        res.run('app exits cleanly', lambda: None if app.returncode == 0 else
                (_ for _ in ()).throw(AssertionError('exit %s:\n%s' % (app.returncode, out()))))
    res.finish()


if __name__ == '__main__':
    main()
