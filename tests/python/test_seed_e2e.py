"""The seed scenario end to end: skyprofd + examples/python/seed_app.py (the SkyWalking Python
agent's profiling example, importing skyprof), a task on endpoint "/", POSTs, profiled segments,
analysis, the collapsed export read by FlameGraph's flamegraph.pl, the pprof export read by
`go tool pprof -functions/-lines`. Asserts the stack tree of the seed (do_POST ~560 ms: method3 ~60 > method2 ~40 >
method1 ~20, the 0.5 s sleep as do_POST's self time) within sampling error, that snapshots stop
when each request ends (the idle single-threaded server is not sampled), and that an incoming
sw8 header makes the segment continue the caller's trace."""
import html
import os
import re
import subprocess
import time
import urllib.request

from skp_harness import Results, check_sanitizer_clean, tempdir, wait_until, SANITIZE
from skp_pyagent import (App, Server, function_self_count, function_totals, tree_nodes, sw8_header,
                         SOURCE)

PERIOD_MS = 10


def main():
    r = Results()
    with tempdir() as tmp:
        srv = Server(tmp)
        app = App([os.path.join(SOURCE, 'examples', 'python', 'seed_app.py'), '0'], env={
            'SW_AGENT_COLLECTOR_BACKEND_SERVICES': srv.backend,
            'SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL': '1',
            'SEED_LOG_LEVEL': 'INFO'}, name='seed_app')
        state = {}
        try:
            def task_notified():
                state['task'] = srv.create_task('provider', '/', duration=1, threshold=0,
                                                period=PERIOD_MS, max_count=5)
                srv.wait_notified(state['task'])

            def requests_profiled():
                state['client'] = []
                # NOTIFIED is logged when the command leaves the server; the agent activates the
                # task a moment later. Requests are sent until 3 of them were profiled (budget 5).
                def profiled():
                    return [x for x in srv.segments(state['task']) if x.get('spans')]
                for i in range(8):
                    headers = {'sw8': sw8_header('seed-trace-%d' % i, 'seed-parent-seg-%d' % i, 3)}
                    status, body, secs = app.request('POST', '/', headers=headers)
                    assert status == 200 and b'Despacito' in body
                    time.sleep(1.0)  # idle server between requests: must not be sampled
                    got = [x for x in profiled()]
                    state['client'] = got
                    if len(got) >= 3:
                        break
                segs = wait_until(lambda: (lambda s: s if len(s) >= 3 else None)(profiled()), 60,
                                  interval=0.2, what='3 profiled segments with their spans')
                state['segments'] = sorted(segs, key=lambda s: s['start'])

            def tree_matches_seed():
                for seg in state['segments']:
                    a = srv.analyze(seg['segmentId'], seg['start'], seg['start'] + seg['duration'])
                    nodes = tree_nodes(a)
                    assert nodes, a
                    do_post, do_post_self, c_post = function_totals(nodes, 'seed_app.py.do_POST')
                    m3, _, c3 = function_totals(nodes, 'seed_app.py.method3')
                    m2, _, c2 = function_totals(nodes, 'seed_app.py.method2')
                    m1, m1_self, c1 = function_totals(nodes, 'seed_app.py.method1')
                    c_post_self = function_self_count(nodes, 'seed_app.py.do_POST')
                    print('segment %s: span %d ms, do_POST %d (self %d), method3 %d, method2 %d, '
                          'method1 %d; samples x period: do_POST %d (self %d), method3 %d, '
                          'method2 %d, method1 %d' % (
                              seg['segmentId'], seg['duration'], do_post, do_post_self, m3, m2, m1,
                              c_post * PERIOD_MS, c_post_self * PERIOD_MS, c3 * PERIOD_MS,
                              c2 * PERIOD_MS, c1 * PERIOD_MS))
                    # Sample counts x period estimate time directly (the analyzer's run-based
                    # durations lose one period per run and per line node, SkyWalking's algorithm).
                    # Tolerance: a few periods of sampling error, plus what a loaded machine adds
                    # (sleeps overshooting: the span's excess over 560 ms; late sampler wake-ups).
                    # A sampler that missed ticks (a loaded machine: it was not scheduled in time)
                    # took fewer snapshots, each standing for more time: counts are weighed by
                    # the achieved period (span / snapshots), never shorter than the asked one.
                    n_snap = sum(n['count'] for n in nodes if n['parentId'] == 0)
                    per = max(PERIOD_MS, seg['duration'] / n_snap) if n_snap else PERIOD_MS
                    over = max(0, seg['duration'] - 560)
                    tol = PERIOD_MS * (6 if not SANITIZE else 10) + over
                    assert abs(c_post * per - 560) <= tol + 20, (c_post, per)
                    assert abs(c_post_self * per - 500) <= tol, (c_post_self, per)
                    assert abs(c3 * per - 60) <= tol, (c3, per)
                    assert abs(c2 * per - 40) <= tol, (c2, per)
                    assert abs(c1 * per - 20) <= tol, (c1, per)
                    assert c3 >= c2 >= c1 > 0, (c3, c2, c1)
                    # The analyzer's run-based durations (SkyWalking's algorithm) lose up to one
                    # period per run and per line node: checked loosely, with the tolerance above.
                    assert abs(do_post - 560) <= tol + 40, do_post
                    assert abs(do_post_self - 500) <= tol + 40, do_post_self
                    assert 0 < m3 <= 60 + tol and 0 <= m2 <= 40 + tol and 0 <= m1 <= 20 + tol, \
                        (m3, m2, m1)

            def sampling_stops_with_request():
                for seg in state['segments']:
                    # a window reaching 0.9 s past the request: an idle server sampled after the
                    # request ended would add ~90 snapshots here
                    a = srv.analyze(seg['segmentId'], seg['start'] - 500,
                                    seg['start'] + seg['duration'] + 900)
                    roots = [n for n in tree_nodes(a) if n['parentId'] == 0]
                    n_snap = sum(n['count'] for n in roots)
                    expect = seg['duration'] / PERIOD_MS
                    print('segment %s: %d snapshots for %d ms' % (seg['segmentId'], n_snap,
                                                                  seg['duration']))
                    assert n_snap <= expect + 3, (n_snap, expect)
                    assert n_snap >= expect * (0.5 if not SANITIZE else 0.3), (n_snap, expect)

            def sw8_continues_trace():
                for seg in state['segments']:
                    span = seg['spans'][0]
                    refs = span['refs']
                    assert refs and refs[0]['traceId'].startswith('seed-trace-'), span
                    i = refs[0]['traceId'][len('seed-trace-'):]
                    assert refs[0]['parentSegmentId'] == 'seed-parent-seg-' + i, refs[0]
                    assert seg['traceId'] == refs[0]['traceId'], seg['traceId']
                    assert span['endpointName'] == '/' and span['type'] == 'Entry'
                    tags = {t['key']: t['value'] for t in span['tags']}
                    assert tags.get('http.method') == 'POST', tags
                    assert tags.get('http.status_code') == '200', tags

            def flamegraph_reads_collapsed():
                # The task's collapsed export through FlameGraph's own flamegraph.pl (vendored as
                # test data): every line's leaf frame must come out as a frame of the graph with
                # its full name, e.g. "method1 (seed_app.py:23)" (readable names, py-spy's form;
                # `names=full` keeps "…seed_app.py.method1:23"), and no line may be taken for a
                # differential profile (a frame ending in ": 23" looked like a count column).
                url = 'http://127.0.0.1:%d/api/v1/profile/tasks/%s/export?format=collapsed' % (
                    srv.http_port, state['task'])
                with urllib.request.urlopen(url, timeout=30) as resp:
                    text = resp.read().decode()
                lines = [l for l in text.splitlines() if l]
                assert lines, text
                fg = os.path.join(SOURCE, 'tests', 'data', 'flamegraph', 'flamegraph.pl')
                svg = subprocess.run(['perl', fg], input=text.encode(), capture_output=True,
                                     timeout=60, check=True).stdout.decode()
                titles = re.findall(r'<title>([^<]*)</title>', svg)
                total = sum(int(l.rsplit(' ', 1)[1]) for l in lines)
                assert 'all (%s samples, 100%%)' % format(total, ',') in titles, titles[:5]
                assert not any('%; ' in t for t in titles), [t for t in titles if '%; ' in t][:3]
                names = {html.unescape(t.rsplit(' (', 1)[0]) for t in titles}
                leaves = {l.rsplit(' ', 1)[0].split(';')[-1] for l in lines}
                assert leaves <= names, sorted(leaves - names)[:5]
                for f in ('method1', 'method2', 'method3'):
                    assert any(re.fullmatch(r'%s \(seed_app\.py:\d+\)' % f, x) for x in leaves), \
                        (f, sorted(leaves))
                with urllib.request.urlopen(url + '&names=full', timeout=30) as resp:
                    full = resp.read().decode()
                assert re.search(r'seed_app\.py\.method3:\d+ \d+$', full, re.M), full[:500]

            def pprof_functions_merge_lines():
                # The task's pprof export through `go tool pprof`: -functions shows each function
                # once (Function.name is the function alone, file and line in their own fields),
                # -lines shows its lines under the file.
                url = 'http://127.0.0.1:%d/api/v1/profile/tasks/%s/export?format=pprof' % (
                    srv.http_port, state['task'])
                path = os.path.join(tmp, 'task.pb.gz')
                with urllib.request.urlopen(url, timeout=30) as resp, open(path, 'wb') as f:
                    f.write(resp.read())
                env = dict(os.environ, HOME=tmp, PPROF_TMPDIR=tmp)

                def top(granularity):
                    out = subprocess.run(['go', 'tool', 'pprof', '-top', '-nodecount=1000',
                                          granularity, path], capture_output=True, timeout=120,
                                         env=env, check=True).stdout.decode()
                    return [l.split()[-2:] for l in out.splitlines()
                            if re.match(r'\s*[\d.]+\w*\s+[\d.]+%', l)]
                funcs = [row[-1] for row in top('-functions')]
                print('go tool pprof -functions:', funcs)
                for f in ('do_POST', 'method1', 'method2', 'method3'):
                    assert funcs.count(f) == 1, (f, funcs)
                lines = top('-lines')
                assert any(n == 'method3' and re.search(r'seed_app\.py:\d+$', where)
                           for n, where in lines), lines

            r.run('task_notified', task_notified)
            r.run('requests_profiled', requests_profiled)
            r.run('tree_matches_seed', tree_matches_seed)
            r.run('sampling_stops_with_request', sampling_stops_with_request)
            r.run('sw8_continues_trace', sw8_continues_trace)
            r.run('flamegraph_reads_collapsed', flamegraph_reads_collapsed)
            r.run('pprof_functions_merge_lines', pprof_functions_merge_lines)
        finally:
            code = app.stop()
            srv.stop()
        r.run('app_exit_clean', lambda: None if code in (0, -15, 143) else (_ for _ in ()).throw(
            AssertionError('seed_app exit %r:\n%s' % (code, app.proc.output()[-3000:]))))
        r.run('server_sanitizer_clean', srv.check_clean)
        r.run('app_sanitizer_clean', check_sanitizer_clean, app.proc)
    r.finish()


if __name__ == '__main__':
    main()
