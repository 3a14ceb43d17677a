"""One segment per request whatever combination of hand-made and automatic instrumentation sees
it (issue 23, item 5). Each app wraps its requests BY HAND as docs/python.md shows (the ASGI and
WSGI middlewares, `skyprof.entry`) and runs under `python -m skyprof run`, which instruments its
framework or server automatically as well:
- FastAPI in SkyprofASGIMiddleware under uvicorn (Starlette plugin inside);
- Flask's wsgi_app in SkyprofWSGIMiddleware, on Flask's dev server and under gunicorn;
- Django's WSGI application in SkyprofWSGIMiddleware under gunicorn;
- a plain WSGI app in SkyprofWSGIMiddleware on werkzeug's dev server (run_wsgi instrumented);
- an http.server handler (do_GET instrumented) and an aiohttp handler (its server instrumented)
  that also open `skyprof.entry` themselves.
For each, against a real skyprofd: N requests give exactly N segments (the endpoint's count in
the endpoint statistics grows by N, never 2N), each segment has one entry span with the
framework's component (the General 7000 of the outer middleware adopts the inner framework's),
the trace ids are N distinct ones, and a profile task allowing 2N profiled requests profiles each
request once: N profiled segments."""
import os
import signal
import sys
import urllib.request

from skp_harness import Proc, Results, free_port, tempdir, wait_until
from skp_pyagent import Server, python_env

APPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'apps', 'svc')
PY = sys.executable
N = 3

# name, argv after `python -m skyprof run`, env, endpoint, component of the entry span
CASES = [
    ('asgi_fastapi_uvicorn', ['-m', 'uvicorn', '--port', '{port}', 'wrapped_apps:asgi_fastapi'],
     {'WRAPPED': 'fastapi'}, '/slow', 7014),
    ('wsgi_flask_dev', ['wrapped_apps.py'], {'WRAPPED': 'flask'}, '/slow', 7001),
    ('wsgi_flask_gunicorn', ['-m', 'gunicorn', '-w', '1', '-b', '127.0.0.1:{port}',
                             'wrapped_apps:wsgi_flask'], {'WRAPPED': 'flask'}, '/slow', 7001),
    ('wsgi_django_gunicorn', ['-m', 'gunicorn', '-w', '1', '-b', '127.0.0.1:{port}',
                              'wrapped_apps:wsgi_django'], {'WRAPPED': 'django'}, '/slow', 7004),
    ('wsgi_plain_werkzeug', ['wrapped_apps.py'], {}, '/slow', 7000),
    ('entry_http_server', ['entry_http.py'], {}, '/slow', 7000),
    ('entry_aiohttp', ['entry_aiohttp.py'], {}, '/slow', 7008),
]


def get(port, path, timeout=30):
    with urllib.request.urlopen('http://127.0.0.1:%d%s' % (port, path), timeout=timeout) as r:
        return r.status, r.read()


def stop_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        wait_until(lambda: not proc.alive(), 20, interval=0.1, what='app exit')
    except TimeoutError:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.p.wait()


def endpoint_count(srv, service, endpoint):
    stats = srv.api('GET', '/api/v1/services/%s/endpoints/stats?window=900' % service)
    return sum(e['count'] for e in stats.get('endpoints') or [] if e['endpoint'] == endpoint)


def run_case(srv, name, argv, env, endpoint, component):
    service = 'one-' + name.replace('_', '-')
    port = free_port()
    full_env = python_env({'SW_AGENT_NAME': service,
                           'SW_AGENT_COLLECTOR_BACKEND_SERVICES': srv.backend,
                           'SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL': '1',
                           'APP_PORT': str(port), 'PYTHONDONTWRITEBYTECODE': '1'})
    full_env.update(env)
    args = [PY, '-m', 'skyprof', 'run'] + [a.replace('{port}', str(port)) for a in argv]
    proc = Proc(args, env=full_env, cwd=APPS, name=name)
    try:
        def up():
            if not proc.alive():
                raise RuntimeError('%s exited:\n%s' % (name, proc.output()[-4000:]))
            try:
                return get(port, endpoint, timeout=10)[0] == 200
            except OSError:
                return False
        wait_until(up, 90, interval=0.3, what='%s serving' % name)
        # the first request's segment reached skyprofd: from here on counts are exact
        wait_until(lambda: endpoint_count(srv, service, endpoint) >= 1, 30, interval=0.2,
                   what='first segment of %s' % service)
        task = srv.create_task(service, endpoint, duration=1, threshold=0, period=10,
                               max_count=2 * N)
        srv.wait_notified(task)
        # NOTIFIED is logged as the command leaves the server: one request until the agent
        # samples (its segment is profiled), then N more, counted from there
        for attempt in range(10):
            get(port, endpoint)
            try:
                wait_until(lambda: [s for s in srv.segments(task) if s.get('spans')], 5,
                           interval=0.2, what='a profiled segment')
                break
            except TimeoutError:
                continue
        else:
            raise AssertionError('no request of %s was profiled' % name)
        first = wait_until(lambda: [s for s in srv.segments(task) if s.get('spans')], 5,
                           interval=0.2)
        assert len(first) == 1, ('one request, profiled twice', first)
        before = endpoint_count(srv, service, endpoint)
        for _ in range(N):
            status, body = get(port, endpoint)
            assert status == 200 and b'slow done' in body, (status, body)
        wait_until(lambda: endpoint_count(srv, service, endpoint) >= before + N, 30,
                   interval=0.2, what='%d more requests counted' % N)
        segs = wait_until(lambda: (lambda s: s if len(s) >= 1 + N else None)(
            [x for x in srv.segments(task) if x.get('spans')]), 30, interval=0.2,
            what='%d profiled segments' % (1 + N))
        count = endpoint_count(srv, service, endpoint)
        print('%s: endpoint count +%d for %d requests; %d profiled segments, components %s'
              % (name, count - before, N, len(segs),
                 sorted({str(sp['component']) for s in segs for sp in s['spans']})))
        assert count == before + N, ('requests counted twice', name, before, count)
        # every profiled request once (a second layer's segment would take a second slot)
        assert len(segs) == 1 + N, [(s['segmentId'], s['traceId']) for s in segs]
        assert len({s['traceId'] for s in segs}) == 1 + N, [s['traceId'] for s in segs]
        for s in segs:
            entries = [sp for sp in s['spans'] if sp['type'] == 'Entry']
            assert len(entries) == 1, ('a second entry span in the segment', s['spans'])
            sp = entries[0]
            assert sp['endpointName'] == endpoint, sp
            assert str(sp['component']) == str(component), sp
            tags = {t['key']: t['value'] for t in sp['tags']}
            assert tags.get('http.method') == 'GET', tags
            assert tags.get('http.status_code') == '200', tags
    except BaseException:
        stop_group(proc)
        sys.stdout.write('---- output of %s ----\n%s\n' % (name, proc.output()[-6000:]))
        raise
    finally:
        stop_group(proc)
        out = proc.output()
        assert 'Traceback' not in out, out[-4000:]
        assert 'ERROR: AddressSanitizer' not in out and 'runtime error:' not in out, out[-3000:]


def main():
    r = Results()
    only = os.environ.get('SKP_ONLY')
    with tempdir() as tmp:
        srv = Server(tmp)
        try:
            for case in CASES:
                if only and case[0] not in only.split(','):
                    continue
                r.run(case[0], run_case, srv, *case)
        finally:
            srv.stop()
        r.run('server_sanitizer_clean', srv.check_clean)
    r.finish()


if __name__ == '__main__':
    main()
