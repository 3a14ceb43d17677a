"""Ground truth for tasks with a min-duration threshold (issue 23, item 3): a slow request's
profile covers all of it, and a request that ends under the threshold sends nothing.

Python agent (tests/truth/apps/truth_threshold_app.py, run by `python -m skyprof run`): a trace
task on /thr with minDurationThreshold 300 ms, dump period 10 ms, maxSamplingCount 9.
  - slow requests: early() busy for ~250 ms, then late() sleeping ~250 ms (~500 ms in all); their
    own wall times come back in the answer (time.perf_counter inside the workload);
  - 9 fast requests (~100 ms, under the threshold), sent once a slow one was profiled (the task
    runs), before the other slow ones.
Checks:
  - every profiled segment's first dump (sequence 0) is within 10 periods of the request's start
    (before, sampling began only past the threshold: early() was never seen);
  - at function granularity over the spans' window, early and late (inclusive and self) and the
    handler (inclusive) are within TOL (10 %) of the measured times, summed over CLEAN requests;
    the handler's own self time stays under 5 %;
  - the fast requests have no profiled segment, every snapshot the agent sent belongs to the slow
    requests' segments, the agent captured dumps of the fast requests and freed them (captured
    minus sent minus dropped > 0), and they took no unit of the sampling budget (9 fast requests
    would have spent it: the slow ones after them are still profiled).
C agent (examples/demo_service --mode cpu): method3 -> method2 -> method1 each burning 200 ms to a
monotonic deadline, then 100 ms in the handler, under a 650 ms threshold: all three methods run
before the threshold: each is in every profile, and their inclusive durations (known by
construction) are within TOL on the requests sampled without a starved period (when the machine
starves every one, which happens at load averages above ~10 on 2 cores, that is printed and the
durations are not judged).

Durations are judged on requests whose dumps show no step over 2 periods. A longer step means the
machine starved the sampler (or, natively, the sampled thread that must answer its signal) and
the analysis caps such an interval at one period (docs/accuracy.md): the time is lost by the
machine, not by the agent. Such requests are reported and more are sent, up to the budget.
"""
import json
import os
import sys
import time
import urllib.request

from skp_harness import (Proc, Results, build_path, check_sanitizer_clean, free_port,
                         listening_port, tempdir, wait_until)
from skp_pyagent import Server, python_env, sw8_header, tree_nodes

APPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'apps')
DEMO = build_path('examples', 'demo_service')
TOL = 0.10
IDLE = 0.05
PERIOD = 10
THRESHOLD = 300
MAX_COUNT = 9  # the task's sampling budget (SkyWalking's maximum)
CLEAN = 2      # requests judged: sampled without a step over 2 periods (a starved sampler)
APP = 'truth_threshold_app.py.'


def get_json(port, path, headers=None, timeout=60):
    req = urllib.request.Request('http://127.0.0.1:%d%s' % (port, path), headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        assert r.status == 200, r.status
        return json.loads(r.read())


def analyze_functions(srv, segment_id):
    return srv.api('GET', '/api/v1/profile/segments/%s/analyze?window=span&granularity=functions'
                   % segment_id)


def timeline(srv, segment_id):
    return srv.api('GET', '/api/v1/profile/segments/%s/timeline' % segment_id)


def function_figures(nodes, match):
    """(inclusive, self, count) of the function `match` accepts: inclusive and count over its
    outermost nodes, self over all of them."""
    by_id = {n['id']: n for n in nodes}
    incl = self_ms = count = 0
    for n in nodes:
        if not match(n['codeSignature']):
            continue
        self_ms += n['durationChildExcluded']
        p = by_id.get(n['parentId'])
        if p is None or not match(p['codeSignature']):
            incl += n['duration']
            count += n['count']
    return incl, self_ms, count


def trace_header():
    trace = 'thr-%d-%d' % (os.getpid(), time.monotonic_ns())
    return trace, {'sw8': sw8_header(trace, 'p-' + trace, 1)}


def profiled_segment(srv, task, trace, timeout):
    def find():
        for s in srv.segments(task):
            if s.get('traceId') == trace and s.get('spans'):
                return s
        return None
    return wait_until(find, timeout, interval=0.1, what='profiled segment of ' + trace)


def wait_dumps(srv, seg):
    """The segment's function-granularity analysis once its dumps cover the request (snapshots
    may trail the segment)."""
    need = max(1, int(seg['duration'] * 0.8 / PERIOD))
    last = [0, time.monotonic()]

    def ready():
        a = analyze_functions(srv, seg['segmentId'])
        n = sum(t['elements'][0]['count'] for t in a.get('trees') or [] if t['elements'])
        if n != last[0]:
            last[:] = [n, time.monotonic()]
        # no more dumps for more than 2 send periods (500 ms), and enough of them unless a
        # starved sampler took fewer
        quiet = time.monotonic() - last[1]
        return a if n > 0 and (quiet > 1.2 and n >= need or quiet > 3.0) else None
    try:
        return wait_until(ready, 20, interval=0.2, what='dumps of ' + seg['segmentId'])
    except TimeoutError:
        print('  %s: %d dumps of %d ms, %d expected' % (seg['segmentId'], last[0],
                                                        seg['duration'], need))
        check_covered_from_start(srv, seg, 'short of dumps')
        raise


def check_covered_from_start(srv, seg, label):
    """The first dump is within a few periods of the request's start, sequence 0 first."""
    tl = timeline(srv, seg['segmentId'])
    snaps = tl['snapshots']
    assert snaps and snaps[0]['sequence'] == 0, (label, snaps[:3])
    start = int(seg['start'])
    first = snaps[0]['time'] - start
    steps = [b['time'] - a['time'] for a, b in zip(snaps, snaps[1:])]
    gaps = sum(1 for a, b in zip(snaps, snaps[1:]) if b['sequence'] != a['sequence'] + 1)
    late = [x for x in steps if x > 2 * PERIOD]
    print('  %s: %d dumps, first %d ms after the request started, last %d ms (%d ms long); '
          '%d sequence gaps, %d steps over 2 periods (%d ms)' % (
              label, len(snaps), first, snaps[-1]['time'] - start, seg['duration'], gaps,
              len(late), sum(late)))
    # one period for the sampler's tick, plus slack for a loaded machine; without holds the
    # first dump came after the threshold (300 ms)
    assert first <= 10 * PERIOD, '%s: first dump %d ms after the start' % (label, first)
    return len(snaps), bool(late)


def check(rows, errors_of):
    print('  %-24s %10s %10s %8s %10s' % ('function', 'truth ms', 'incl ms', 'err', 'self ms'))
    errors = []
    for name, truth, incl, self_ms, kind in rows:
        err = (incl - truth) / truth * 100 if truth else 0.0
        print('  %-24s %10.1f %10d %7.1f%% %10d' % (name, truth, incl, err, self_ms))
        if abs(incl - truth) > TOL * truth:
            errors.append('%s: inclusive %d ms, truth %.1f ms' % (name, incl, truth))
        if kind == 'leaf' and abs(self_ms - truth) > TOL * truth:
            errors.append('%s: self %d ms, truth %.1f ms' % (name, self_ms, truth))
        if kind == 'caller' and self_ms > IDLE * truth:
            errors.append('%s: self %d ms of %.1f ms, it only calls' % (name, self_ms, truth))
    sys.stdout.flush()
    assert not errors, errors


def t_python(srv):
    service = 'truth-threshold'
    port = free_port()
    env = python_env({'SW_AGENT_NAME': service, 'SW_AGENT_COLLECTOR_BACKEND_SERVICES':
                      srv.backend, 'SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL': '1',
                      'PYTHONDONTWRITEBYTECODE': '1'})
    app = Proc([sys.executable, '-m', 'skyprof', 'run', 'truth_threshold_app.py', str(port)],
               env=env, cwd=APPS, name=service)
    try:
        listening_port(app, timeout=60)
        task = srv.create_task(service, '/thr', duration=1, threshold=THRESHOLD, period=PERIOD,
                               max_count=MAX_COUNT)
        srv.wait_notified(task)
        slow = []  # (truth, segment, analysis)

        def send_slow(timeout):
            trace, headers = trace_header()
            truth = get_json(port, '/thr?early=250&late=250', headers)
            try:
                seg = profiled_segment(srv, task, trace, timeout)
            except TimeoutError:
                # what the agent and skyprofd saw: was the budget spent, by which requests?
                listed = [(s.get('traceId'), bool(s.get('spans'))) for s in srv.segments(task)]
                print('  not profiled: %s (%.0f ms); agent stats %s; task segments %s'
                      % (trace, truth['handle'], json.dumps(get_json(port, '/stats')), listed))
                raise
            slow.append((truth, seg, wait_dumps(srv, seg)))

        # 1. a slow request, resent until the agent has activated the task (NOTIFIED is logged
        #    when the command leaves skyprofd)
        for attempt in range(6):
            try:
                send_slow(10)
                break
            except TimeoutError:
                continue
        assert slow, 'no slow request profiled'
        # 2. as many fast requests under the threshold as the task's whole sampling budget,
        #    while the task is known to run: were they to take budget units, no later request
        #    could be profiled
        fast = []
        for _ in range(MAX_COUNT):
            trace, headers = trace_header()
            truth = get_json(port, '/thr?early=50&late=50', headers)
            assert truth['handle'] < THRESHOLD - 50, truth  # really under the threshold
            fast.append(trace)
        # 3. slow requests until CLEAN of them were sampled without a starved period; each one
        #    sent must be profiled (the fast ones left the budget alone)
        judged = []
        figures = []
        for i in range(MAX_COUNT):
            if i > 0:
                send_slow(15)
            n, starved = check_covered_from_start(srv, slow[-1][1], 'slow request %d' % (i + 1))
            figures.append(n)
            if i == 0 and not starved:
                judged.append(slow[0])  # sent before the fast ones; judged as well
            elif i > 0 and not starved:
                judged.append(slow[-1])
            if len(judged) == CLEAN:
                break
        listed = {s.get('traceId') for s in srv.segments(task)}
        assert not listed & set(fast), ('fast request profiled', listed & set(fast))
        st = wait_until(lambda: (lambda st: st if st['snapshots_sent'] + st['snapshots_dropped']
                                 >= sum(figures) else None)(get_json(port, '/stats')), 20,
                        interval=0.2, what='agent sent its snapshots')
        n_dumps = sum(len(timeline(srv, seg['segmentId'])['snapshots']) for _, seg, _ in slow)
        discarded = st['snapshots_captured'] - st['snapshots_sent'] - st['snapshots_dropped']
        print('  agent: %d captured, %d sent, %d dropped: %d held and freed (fast requests)' % (
            st['snapshots_captured'], st['snapshots_sent'], st['snapshots_dropped'], discarded))
        assert st['snapshots_dropped'] == 0, st
        assert st['snapshots_sent'] == n_dumps, ('sent beyond the slow segments', st, n_dumps)
        assert discarded > 0, ('the fast requests were not sampled', st)
        assert len(judged) == CLEAN, starved_note(len(figures))
        rows = []
        for name, kind in (('early', 'leaf'), ('late', 'leaf'), ('handle', 'caller')):
            truth = sum(t[name] for t, _, _ in judged)
            incl = self_ms = 0
            for _, _, a in judged:
                i, s, _ = function_figures(tree_nodes(a), lambda sig: sig.endswith(
                    APP + name) or (APP + name + ':') in sig)
                incl += i
                self_ms += s
            rows.append((name, truth, incl, self_ms, kind))
        check(rows, None)
    finally:
        app.stop()
        out = app.output()
        assert 'Traceback' not in out, out[-3000:]
        assert 'ERROR: AddressSanitizer' not in out and 'runtime error:' not in out, out[-3000:]


def starved_note(n):
    return ('fewer than %d of %d profiled requests were sampled without a step over 2 periods: '
            'the machine starved the sampling (load average %s)' % (
                CLEAN, n, open('/proc/loadavg').read().split()[0]))


def t_native(srv):
    # 200 ms steps: a burn to a deadline overshoots by the time its thread waits for a CPU at
    # the deadline, which is the truth's own error (the profile sees it); 200 ms keeps that
    # under a few % on a loaded machine. The threshold lies between the methods' end (600 ms)
    # and the request's (700 ms).
    step, other = 200, 100
    threshold = 3 * step + other // 2
    service = 'truth-threshold-native'
    env = {'SW_AGENT_NAME': service, 'SW_AGENT_COLLECTOR_BACKEND_SERVICES': srv.backend,
           'SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL': '1',
           'SKYPROF_NATIVE_TIMEOUT_MS': '2000'}
    with Proc([DEMO, '--port', '0', '--mode', 'cpu', '--step-ms', str(step), '--other-ms',
               str(other)], env=env, name='demo-threshold') as demo:
        port = listening_port(demo, 'demo_service:', 20)
        task = srv.create_task(service, '/', duration=1, threshold=threshold, period=PERIOD,
                               max_count=MAX_COUNT)
        srv.wait_notified(task)
        judged = []
        n_profiled = 0
        truth = {'method1': step, 'method2': 2 * step, 'method3': 3 * step,
                 'handle_seed_request': 3 * step + other}
        for attempt in range(MAX_COUNT + 4):
            trace, headers = trace_header()
            req = urllib.request.Request('http://127.0.0.1:%d/' % port, data=b'{}', headers=dict(
                headers, **{'Content-Type': 'application/json'}))
            with urllib.request.urlopen(req, timeout=30) as r:
                assert r.status == 200
            try:
                seg = profiled_segment(srv, task, trace, 10 if n_profiled else 5)
            except TimeoutError:
                continue  # the task was not active yet
            n_profiled += 1
            a = wait_dumps(srv, seg)
            _, starved = check_covered_from_start(srv, seg, 'native request %d' % n_profiled)
            # the three methods run in the request's first 600 ms, before the threshold: each is
            # in the profile (before, none was)
            nodes = tree_nodes(a)
            for name in ('method1', 'method2', 'method3'):
                c = function_figures(nodes, lambda sig: sig.startswith(name + ' ('))[2]
                assert c >= 3, ('%s: %d dumps' % (name, c), nodes)  # ~20 unless starved
            if not starved:
                judged.append(a)
            if len(judged) == CLEAN or n_profiled == MAX_COUNT:
                break
        assert n_profiled >= CLEAN, 'only %d requests profiled' % n_profiled
        demo.stop()
        check_sanitizer_clean(demo)  # the agent in the demo: ASan/UBSan in the ASan pass
        if not judged:
            # The native source needs the sampled thread itself to run (it answers a signal): a
            # CPU-bound thread on a machine this loaded misses periods in every request.
            print('  native durations not judged: %s' % starved_note(n_profiled))
            return
        rows = []
        for name, t in truth.items():
            incl = self_ms = 0
            for a in judged:
                i, s, _ = function_figures(tree_nodes(a), lambda sig: sig.startswith(name + ' ('))
                incl += i
                self_ms += s
            rows.append((name, t * len(judged), incl, self_ms, 'any'))
        check(rows, None)


def main():
    r = Results()
    with tempdir() as tmp:
        srv = Server(tmp)
        try:
            r.run('Python: slow request covered from its start, fast ones send nothing',
                  t_python, srv)
            r.run('native C: methods before the threshold', t_native, srv)
        finally:
            srv.stop()
        r.run('server_sanitizer_clean', srv.check_clean)
    r.finish()


if __name__ == '__main__':
    main()
