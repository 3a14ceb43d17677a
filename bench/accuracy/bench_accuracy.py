"""Accuracy of the trace analysis: the old estimate (SkyWalking OAP's runs of consecutive dumps)
and the new one (each dump's interval to its whole stack, analyzer.c) side by side, on the SAME
recorded dumps.

Recording (real workloads, not synthesized): the workloads of tests/truth/apps/truth_app.py run
under `python -m skyprof run` and the C demo (examples/demo_service --mode cpu) run against a real
skyprofd with a 10 ms dump period; every request answers the wall time of its named functions
(time.perf_counter inside the workload; the C demo's split is known by construction). Then
skyprofd is stopped and bench_accuracy_analyze analyses every profiled segment from the stored
dumps with both estimators (over the segment's span window, as the web UI does).

    B=build/release
    PYTHONPATH=$B/python/cp3112:$B/pystubs:tests/harness:tests/python:tests/truth \\
      SKP_BUILD_DIR=$B /usr/bin/python3 bench/accuracy/bench_accuracy.py [--requests N]

(pystubs: the gRPC stubs.) Per workload and function it prints the
relative error of the inclusive duration (|estimate - truth| / truth, max and mean over the
requests) and of the self duration (relative to the function's inclusive truth, so that frames
whose truth is 0 self are measured too), old vs new, then the max and mean per workload.
"Old" is what a user saw: the line-level tree with run-based durations, a function's lines
summed (the UI's former "Group by function"); "new" is the function-granularity analysis.
"""
import json
import os
import re
import subprocess
import sys
import urllib.request

from skp_harness import Proc, build_path, listening_port, tempdir
from skp_pyagent import Server
import test_truth_trace as T

REQUESTS = int(sys.argv[sys.argv.index('--requests') + 1]) if '--requests' in sys.argv else 5
APP = 'truth_app.py.'


def function_of(sig):
    m = re.match(r'^(.*\S)\s*:\s*\d+$', sig)
    if m:
        return m.group(1)
    m = re.match(r'^(.*\([^()]*?):\d+\)$', sig)
    return m.group(1) + ')' if m else sig


def py(name):
    return lambda f: f.endswith(APP + name)


def native(name):
    return lambda f: f.startswith(name + ' (')


# workload, ms, {function: (matcher, 'leaf'|'caller')}
PY_WORKLOADS = [
    ('loop', 300, {'work': (py('work'), 'caller'), 'cpu_loop': (py('cpu_loop'), 'leaf'),
                   'sleeper': (py('sleeper'), 'leaf')}),
    ('alt', 1000, {'f': (py('f'), 'caller'), 'g': (py('g'), 'caller'), 'h': (py('h'), 'caller')}),
    ('altfixed', 1000, {'f': (py('f'), 'caller'), 'g': (py('g'), 'caller'),
                        'h': (py('h'), 'caller')}),
    ('io', 400, {'io_work': (py('io_work'), 'caller'), 'napper': (py('napper'), 'leaf'),
                 'reader': (py('reader'), 'leaf')}),
    ('thread', 400, {'spawner': (py('spawner'), 'caller'),
                     'join': (lambda f: f.endswith('threading.py.join'), 'caller')}),
]
NATIVE = ('native', {n: (native(n), 'caller') for n in
                     ('method1', 'method2', 'method3', 'handle_seed_request')})
STEP, OTHER = 100, 150


def figures(analysis, match):
    """(inclusive, self) of a function in an analysis, whatever its granularity: outermost
    nodes' durations summed, every node's self summed."""
    nodes = [e for t in analysis.get('trees') or [] for e in t['elements']]
    by_id = {n['id']: n for n in nodes}
    incl = self_ms = 0
    for n in nodes:
        if not match(function_of(n['codeSignature'])):
            continue
        self_ms += n['durationChildExcluded']
        p = by_id.get(n['parentId'])
        if p is None or not match(function_of(p['codeSignature'])):
            incl += n['duration']
    return incl, self_ms


def record(srv, tmp):
    """Runs every workload; returns [(workload, functions, truth dict, segment id)]."""
    out = []
    for name, ms, funcs in PY_WORKLOADS:
        service = 'acc-' + name
        app = T.App(srv, service)
        try:
            task = srv.create_task(service, '/truth', duration=1, threshold=0, period=T.PERIOD,
                                   max_count=9)
            srv.wait_notified(task)
            p = T.Profiled(srv, task, app.send(name, ms), REQUESTS, attempts=REQUESTS + 4)
            for truth, seg, _ in p.items:
                if name == 'thread':
                    truth['join'] = truth['thread_work']
                out.append((name, funcs, truth, seg['segmentId']))
        finally:
            app.stop()
        print('recorded %-9s %d requests' % (name, REQUESTS), file=sys.stderr)
    env = {'SW_AGENT_NAME': 'acc-native', 'SW_AGENT_COLLECTOR_BACKEND_SERVICES': srv.backend,
           'SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL': '1', 'SKYPROF_NATIVE_TIMEOUT_MS': '2000'}
    with Proc([T.DEMO, '--port', '0', '--mode', 'cpu', '--step-ms', str(STEP), '--other-ms',
               str(OTHER)], env=env, name='demo-acc') as demo:
        port = listening_port(demo, 'demo_service:', 20)
        task = srv.create_task('acc-native', '/', duration=1, threshold=0, period=T.PERIOD,
                               max_count=9)
        srv.wait_notified(task)

        def send(headers):
            req = urllib.request.Request('http://127.0.0.1:%d/' % port, data=b'{}',
                                         headers=dict(headers, **{'Content-Type':
                                                                  'application/json'}))
            with urllib.request.urlopen(req, timeout=30) as r:
                r.read()
            return {'method1': STEP, 'method2': 2 * STEP, 'method3': 3 * STEP,
                    'handle_seed_request': 3 * STEP + OTHER}
        p = T.Profiled(srv, task, send, REQUESTS, attempts=REQUESTS + 4)
        for truth, seg, _ in p.items:
            out.append((NATIVE[0], NATIVE[1], truth, seg['segmentId']))
    print('recorded native    %d requests' % REQUESTS, file=sys.stderr)
    return out


def pct(x):
    return '%6.1f%%' % (100 * x)


def main():
    with tempdir() as tmp:
        srv = Server(tmp)
        try:
            rec = record(srv, tmp)
        finally:
            srv.stop()
        tool = build_path('bench', 'accuracy', 'bench_accuracy_analyze')
        res = subprocess.run([tool, srv.skyprofd.db] + [r[3] for r in rec], capture_output=True,
                             text=True)
        if res.returncode != 0:
            raise SystemExit('bench_accuracy_analyze failed:\n' + res.stderr[-3000:])
        analyses = {}
        for line in res.stdout.splitlines():
            d = json.loads(line)
            analyses[d['segment']] = d

    # errors[(workload, function, kind)] = {'old': [...], 'new': [...], 'truth': [...]}
    errors = {}
    order = []
    for workload, funcs, truth, seg in rec:
        a = analyses[seg]
        for fname, (match, role) in funcs.items():
            t = truth[fname]
            old_incl, old_self = figures(a['old_lines'], match)
            new_incl, new_self = figures(a['new_functions'], match)
            self_truth = t if role == 'leaf' else 0.0
            for kind, old, new, tr in (('incl', old_incl, new_incl, t),
                                       ('self', old_self, new_self, self_truth)):
                key = (workload, fname, kind)
                if key not in errors:
                    errors[key] = {'old': [], 'new': [], 'truth': []}
                    order.append(key)
                errors[key]['old'].append(abs(old - tr) / t)
                errors[key]['new'].append(abs(new - tr) / t)
                errors[key]['truth'].append(tr)

    print('Trace analysis accuracy: old (OAP runs, lines summed per function) vs new (per-dump '
          'intervals, function granularity)')
    print('%d requests per workload, dump period %d ms; error = |estimate - truth| / inclusive '
          'truth, per request' % (REQUESTS, T.PERIOD))
    print()
    print('%-9s %-20s %-4s %9s   %-17s %-17s' % ('workload', 'function', '', 'truth ms',
                                                 'old max / mean', 'new max / mean'))
    per_wl = {}
    for key in order:
        e = errors[key]
        wl, fn, kind = key
        mean_truth = sum(e['truth']) / len(e['truth'])
        print('%-9s %-20s %-4s %9.1f   %s / %s   %s / %s' % (
            wl, fn, kind, mean_truth, pct(max(e['old'])), pct(sum(e['old']) / len(e['old'])),
            pct(max(e['new'])), pct(sum(e['new']) / len(e['new']))))
        w = per_wl.setdefault(wl, {'old': [], 'new': []})
        w['old'] += e['old']
        w['new'] += e['new']
    print()
    print('%-9s   %-17s %-17s' % ('workload', 'old max / mean', 'new max / mean'))
    for wl, w in per_wl.items():
        print('%-9s   %s / %s   %s / %s' % (wl, pct(max(w['old'])), pct(sum(w['old']) / len(w['old'])),
                                           pct(max(w['new'])), pct(sum(w['new']) / len(w['new']))))


if __name__ == '__main__':
    main()
