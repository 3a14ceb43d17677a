"""Process profiling (PprofTask) events `block`, `mutex` and the asyncio part of `goroutine` in
the Python agent, over the real gRPC wire (Debian grpcio backend), files read by the real
`go tool pprof`. The app (apps/lock_app.py) runs hold_lock / wait_for_lock contending on one
threading.Lock, a CPU-busy burn_cpu, wait_for_event (an Event wait part of its time) and an
asyncio loop with 3 pending tasks:
- block: wait_for_lock is the heaviest function by delay, and its delay share of the task
  matches the share of time the app itself measured waiting (perf_counter around the acquire)
  within 0.25; burn_cpu (which only competes for the GIL) has no visible share and hold_lock
  (which sleeps holding the lock) nearly so; the Event wait (Condition.wait) is present;
  contentions are counted;
- mutex: wait_for_lock again, the Event wait left out;
- goroutine: beside the threads, each asyncio task is its own stack labelled task=<name> and
  task_state, with its await chain under a `(waiting)` leaf (consumer-task: Queue.get, get_item,
  queue_consumer; napper-task: sleep, nap_deeper, nap_deep, napper; watcher-task: Event.wait,
  event_watcher);
- threadcreate: the stacks that started threads during the window - spawn_workers (one start
  every 50 ms) with a count near the window's length / 50 ms.
Timed tasks are shortened with SKYPROF_PROC_MAX_DURATION_MS (the test knob)."""
import os
import re
import subprocess
import sys
import tempfile

from skp_harness import Results, wait_until
from pprof_backend import PprofBackend, Pprof_pb2, go_pprof

APPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'apps')
TASK_MS = 4000
UNITS = {'ns': 1e-9, 'us': 1e-6, 'µs': 1e-6, 'ms': 1e-3, 's': 1.0, 'm': 60.0, 'h': 3600.0}


def seconds(text):
    m = re.match(r'([\d.]+)(ns|us|µs|ms|s|m|h)?$', text)
    if not m:
        raise ValueError(text)
    return float(m.group(1)) * (UNITS[m.group(2)] if m.group(2) else 1.0)


def top_values(path, index):
    """({function: flat value}, duration seconds, text) of `go tool pprof -top` on `index`."""
    out = go_pprof(path, '-top', '-nodefraction=0', '-nodecount=100000', '-sample_index=' + index)
    dur = re.search(r'Duration: ([\d.]+(?:ns|us|µs|ms|s|m|h)?)', out)
    res = {}
    for line in out.splitlines():
        m = re.match(r'\s*(\S+)\s+[\d.]+%\s+[\d.]+%\s+\S+\s+[\d.]+%\s+(.+)$', line)
        if m:
            res[m.group(2).strip()] = seconds(m.group(1)) if index == 'delay' \
                else float(m.group(1))
    return res, seconds(dur.group(1)) if dur else 0.0, out


def main():
    res = Results()
    tmp = tempfile.mkdtemp(prefix='skp-pprof-locks-')
    with PprofBackend() as be:
        env = dict(os.environ, PYTHONUNBUFFERED='1', SW_AGENT_NAME='py-locks',
                   SW_AGENT_COLLECTOR_BACKEND_SERVICES='127.0.0.1:%d' % be.port,
                   SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL='1',
                   SKYPROF_PROC_MAX_DURATION_MS=str(TASK_MS))
        log = open(os.path.join(tmp, 'app.log'), 'w+')
        app = subprocess.Popen([sys.executable, os.path.join(APPS, 'lock_app.py')], env=env,
                               stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                               text=True)

        def out():
            log.flush()
            with open(log.name) as f:
                return f.read()

        def waited():
            """(seconds wait_for_lock waited so far, the app's monotonic clock)."""
            before = out().count('waited ')
            app.stdin.write('w\n')
            app.stdin.flush()
            wait_until(lambda: out().count('waited ') > before, 30, what='waited answer')
            last = re.findall(r'waited ([\d.]+) ([\d.]+)', out())[-1]
            return float(last[0]), float(last[1])

        def save(up, name):
            assert up['status'] == Pprof_pb2.PPROF_PROFILING_SUCCESS, (up, out()[-3000:])
            path = os.path.join(tmp, name)
            with open(path, 'wb') as f:
                f.write(up['file'])
            return path

        try:
            wait_until(lambda: 'ready' in out() or app.poll() is not None, 60, what='app ready')
            assert 'agent=True' in out(), out()
            be.wait_polled(timeout=60)

            def block():
                w0, t0 = waited()
                up = be.wait_upload(be.add_task('block', duration_min=1), timeout=120)
                w1, t1 = waited()
                path = save(up, 'block.pb.gz')
                delay, dur, text = top_values(path, 'delay')
                assert 'Type: delay' in text, text
                assert delay, text
                heaviest = max(delay, key=delay.get)
                assert heaviest == 'wait_for_lock', 'heaviest %s:\n%s' % (heaviest, text)
                # burn_cpu only competes for the GIL, which is never counted; a rare sample of it
                # in a futex that is not the GIL's (1 of 342 samples in one ASan run) is a real
                # wait, so it may appear, but never with a visible share
                assert delay.get('burn_cpu', 0) < 0.02 * sum(delay.values()), text
                # hold_lock sleeps holding the lock; it waits only when it comes back while
                # wait_for_lock has the lock for its moment
                assert delay.get('hold_lock', 0) < 0.1 * dur, text
                assert 'Condition.wait' in delay, text
                measured = (w1 - w0) / (t1 - t0)
                sampled = delay['wait_for_lock'] / dur
                print('block: wait_for_lock waited %.0f %% of the time (measured), %.0f %% '
                      '(profile, %.2f s of %.2f s)' % (measured * 100, sampled * 100,
                                                       delay['wait_for_lock'], dur))
                assert measured > 0.5, 'the app barely waited: %.2f' % measured
                assert abs(sampled - measured) <= 0.25, (sampled, measured, text)
                cont, _, ctext = top_values(path, 'contentions')
                # one contention per wait (about 18 a second), not one per 10 ms sample
                n = cont.get('wait_for_lock', 0)
                assert n >= 10, ctext
                assert n <= 0.9 * delay['wait_for_lock'] / 0.01, (n, ctext)
            res.run('block: wait_for_lock heaviest, delay = measured wait, no burn_cpu', block)

            def mutex():
                up = be.wait_upload(be.add_task('mutex', duration_min=1), timeout=120)
                path = save(up, 'mutex.pb.gz')
                delay, dur, text = top_values(path, 'delay')
                assert max(delay, key=delay.get) == 'wait_for_lock', text
                assert 'Condition.wait' not in delay, text
                assert delay.get('burn_cpu', 0) < 0.02 * sum(delay.values()), text
                tags = go_pprof(path, '-tags')
                assert 'wait_for_lock-thread' in tags, tags
            res.run('mutex: wait_for_lock, event waits left out', mutex)

            def dump():
                up = be.wait_upload(be.add_task('goroutine', duration_min=0), timeout=60)
                path = save(up, 'dump.pb.gz')
                tags = go_pprof(path, '-tags')
                for name in ('consumer-task', 'watcher-task', 'napper-task', 'waiting',
                             'wait_for_lock-thread', 'asyncio-thread'):
                    assert name in tags, (name, tags)
                traces = go_pprof(path, '-traces')
                blocks = traces.split('-----------+')

                def chain(task):
                    """The frames (innermost first) of the one sample labelled task=<task>."""
                    found = [b for b in blocks if re.search(r'\btask:\s+%s\n' % task, b)]
                    assert len(found) == 1, (task, traces)
                    return [ln.split()[-1] for ln in found[0].splitlines()
                            if ln.strip() and ':' not in ln and not ln.startswith('-')]

                def in_order(frames, want):
                    pos = [frames.index(w) if w in frames else -1 for w in want]
                    return -1 not in pos and pos == sorted(pos)
                c = chain('consumer-task')
                assert c[0] == '(waiting)', (c, traces)
                assert in_order(c, ['Queue.get', 'get_item', 'queue_consumer']), (c, traces)
                n = chain('napper-task')
                assert n[0] == '(waiting)', (n, traces)
                assert in_order(n, ['sleep', 'nap_deeper', 'nap_deep', 'napper']), (n, traces)
                w = chain('watcher-task')
                assert w[0] == '(waiting)', (w, traces)
                assert in_order(w, ['Event.wait', 'event_watcher']), (w, traces)
                assert 'task_state:  waiting' in traces, traces
            res.run('goroutine: 3 asyncio tasks with their await chains, labelled', dump)

            def threadcreate():
                up = be.wait_upload(be.add_task('threadcreate', duration_min=0), timeout=60)
                assert up['status'] == Pprof_pb2.PPROF_PROFILING_SUCCESS, up
                path = os.path.join(tmp, 'threadcreate.pb.gz')
                with open(path, 'wb') as f:
                    f.write(up['file'])
                top, _, text = top_values(path, 'threadcreate')
                # the stack that started them, innermost first: spawn_workers called start
                assert 'spawn_workers' in top, text
                # one start per 50 ms over the window (TASK_MS), whatever the machine's load:
                # at least a quarter of them, at most the window allows
                assert TASK_MS / 50 / 4 <= top['spawn_workers'] <= TASK_MS / 50 + 5, text
                assert 'short_job' not in top, text  # created, not creating
            res.run('threadcreate: spawn_workers started the threads of the window', threadcreate)
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
