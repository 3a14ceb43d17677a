"""Instrumentation per framework shape, end to end against skyprofd: http.server (started through
the `python -m skyprof run` runner), WSGI (wsgiref + middleware), ASGI (hand-written asyncio
server + middleware) and the manual API (entry_point decorator, `with skyprof.entry`). For each:
a profile task on the framework's endpoint name (path without query string), a request carrying
an sw8 header, then the profiled segment must name the endpoint, continue the caller's trace, and
its snapshots must show the handler's own function."""
import os
import socket

from skp_harness import Results, tempdir, wait_until
from skp_pyagent import App, Server, tree_nodes, sw8_header

APPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'apps')


def line_request(port, line):
    with socket.create_connection(('127.0.0.1', port), timeout=20) as s:
        s.sendall((line + '\n').encode())
        data = b''
        while not data.endswith(b'\n'):
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    return data.decode().strip()


CASES = [
    # name, argv, extra env, endpoint, request path, function expected in the stacks
    ('http_server_runner', ['-m', 'skyprof', 'run', os.path.join(APPS, 'http_app.py')],
     {'SKP_APP_NO_START': '1'}, '/work', '/work?x=1&y=2', 'http_app.py.inner_work'),
    ('wsgi', [os.path.join(APPS, 'wsgi_app.py')], {}, '/wsgi/hello', '/wsgi/hello?q=1',
     'wsgi_app.py.wsgi_slow_part'),
    ('asgi', [os.path.join(APPS, 'asgi_app.py')], {}, '/asgi/hello', '/asgi/hello?q=1',
     'asgi_app.py.asgi_blocking_part'),
    ('manual', [os.path.join(APPS, 'manual_app.py')], {}, 'manual-job', None,
     'manual_app.py.manual_inner'),
]


def run_case(srv, name, argv, env, endpoint, path, func):
    service = 'svc-' + name.replace('_', '-')
    full_env = {'SW_AGENT_NAME': service, 'SW_AGENT_COLLECTOR_BACKEND_SERVICES': srv.backend,
                'SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL': '1'}
    full_env.update(env)
    app = App(argv, env=full_env, name=name)
    try:
        task = srv.create_task(service, endpoint, duration=1, threshold=0, period=10, max_count=5)
        srv.wait_notified(task)
        trace = 'fw-%s-trace' % name
        sw8 = sw8_header(trace, 'fw-%s-parent' % name, 1)

        def profiled():
            return [x for x in srv.segments(task) if x.get('spans')]
        # NOTIFIED is logged when the command leaves the server and the agent activates the task
        # a moment later: repeat the request until one was profiled (budget: 5).
        segs = []
        for attempt in range(4):
            if path is not None:
                status, body, _ = app.request('POST' if name == 'asgi' else 'GET', path,
                                              headers={'sw8': sw8})
                assert status == 200, status
            else:
                got = line_request(app.port, sw8)
                assert got == trace, got
            try:
                segs = wait_until(profiled, 10, interval=0.2, what='profiled segment')
                break
            except TimeoutError:
                continue
        assert segs, 'no request was profiled'
        if path is None:
            # the `with` form honours sw8 too (not profiled: other endpoint name)
            got = line_request(app.port, 'with ' + sw8_header('fw-with-trace', 'p', 2))
            assert got == 'fw-with-trace', got
        seg = segs[0]
        span = seg['spans'][0]
        assert seg['endpointNames'] == [endpoint], seg['endpointNames']
        assert span['endpointName'] == endpoint and span['type'] == 'Entry', span
        assert span['refs'] and span['refs'][0]['traceId'] == trace, span['refs']
        assert seg['traceId'] == trace, seg['traceId']
        tags = {t['key']: t['value'] for t in span['tags']}
        if path is not None:
            assert tags.get('http.status_code') == '200', tags
            url = tags.get('http.url', '')
            assert 'url' not in tags and (url.endswith(path.split('?')[0]) or '?' in url), tags
        a = srv.analyze(seg['segmentId'], seg['start'], seg['start'] + seg['duration'])
        sigs = [n['codeSignature'] for n in tree_nodes(a)]
        assert any(func + ': ' in s for s in sigs), (func, sigs, seg['start'], seg['duration'],
                                                     [x['segmentId'] for x in segs], attempt, a)
    finally:
        code = app.stop()
        out = app.proc.output()
        assert 'Traceback' not in out, out[-3000:]
        assert 'ERROR: AddressSanitizer' not in out and 'runtime error:' not in out, out[-3000:]
        assert code in (0, -15, 143), (code, out[-2000:])


def main():
    r = Results()
    with tempdir() as tmp:
        srv = Server(tmp)
        try:
            for case in CASES:
                r.run(case[0], run_case, srv, *case)
        finally:
            srv.stop()
        r.run('server_sanitizer_clean', srv.check_clean)
    r.finish()


if __name__ == '__main__':
    main()
