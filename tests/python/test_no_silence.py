""""Never a silent nothing", end to end: an unmodified Flask app under `python -m skyprof run`
reports segments, and then
  - GET /api/v1/services/{name}/endpoints lists the endpoint names seen, with counts and times,
    and `skyprof endpoints SERVICE` prints them;
  - a task for an endpoint no request has: the agent logs one WARNING naming the endpoints it
    does see, and once the task's window has passed its status says why it has no data;
  - a task nobody polled says that no instance was notified."""
import os
import signal
import subprocess
import sys
import time
import urllib.request

from skp_harness import Proc, Results, build_path, free_port, tempdir, wait_until
from skp_pyagent import Server, python_env

APPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'apps', 'svc')
CLI = os.environ.get('SKP_CLI') or build_path('src', 'cli', 'skyprof')
SERVICE = 'quiet-svc'


def get(port, path):
    with urllib.request.urlopen('http://127.0.0.1:%d%s' % (port, path), timeout=30) as r:
        return r.status, r.read()


def serving(port):
    try:
        return get(port, '/hello')[0] == 200
    except Exception:
        return False


def endpoints(srv, service=SERVICE):
    return {e['name']: e for e in srv.api('GET', '/api/v1/services/%s/endpoints' % service)}


def check_endpoint_list(srv, port):
    for _ in range(3):
        get(port, '/slow')
    for _ in range(5):
        get(port, '/hello?x=1')
    eps = wait_until(lambda: (lambda e: e if e.get('/slow', {}).get('count', 0) >= 3 and
                              e.get('/hello', {}).get('count', 0) >= 5 else None)(endpoints(srv)),
                     30, interval=0.3, what='endpoints listed')
    slow = eps['/slow']
    assert slow['firstSeen'] <= slow['lastSeen'] <= time.time() * 1000 + 5000, slow
    assert '/hello?x=1' not in eps, eps  # names, as the agent reports them (no query string)
    order = list(srv.api('GET', '/api/v1/services/%s/endpoints' % SERVICE))
    assert order[0]['name'] == '/hello', order  # most requests first
    assert len(srv.api('GET', '/api/v1/services/%s/endpoints?limit=1' % SERVICE)) == 1
    assert srv.api('GET', '/api/v1/services/no-such-svc/endpoints') == []
    future = int(time.time() * 1000) + 3600 * 1000
    assert srv.api('GET', '/api/v1/services/%s/endpoints?from=%d' % (SERVICE, future)) == []
    out = subprocess.run([CLI, 'endpoints', SERVICE, '--server',
                          'http://127.0.0.1:%d' % srv.http_port], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out
    lines = out.stdout.splitlines()
    assert lines[0].split()[:2] == ['ENDPOINT', 'REQUESTS'], lines
    assert any(l.split()[0] == '/slow' for l in lines[1:]), lines
    empty = subprocess.run([CLI, 'endpoints', 'no-such-svc', '--server',
                            'http://127.0.0.1:%d' % srv.http_port], capture_output=True,
                           text=True, timeout=60)
    assert empty.returncode == 0 and 'no endpoint seen' in empty.stdout, empty


def check_unseen_task(srv, port, proc):
    # A task whose window ends ~15 s from now, for a name no request has.
    start = int(time.time() * 1000) - 45000
    r = srv.api('POST', '/api/v1/profile/tasks', {
        'service': SERVICE, 'endpointName': '/nope', 'duration': 1, 'startTime': start,
        'minDurationThreshold': 0, 'dumpPeriod': 10, 'maxSamplingCount': 5})
    task = r['id']
    srv.wait_notified(task)
    for _ in range(45):
        get(port, '/hello')
    def warned():
        out = proc.output()
        return out if "profile task for endpoint '/nope' is active" in out else None
    out = wait_until(warned, 20, interval=0.2, what='agent warning')
    line = [l for l in out.splitlines() if "endpoint '/nope'" in l]
    assert len(line) == 1, line  # once
    assert 'WARNING' in line[0] and '/hello (' in line[0], line
    # after the window: the status says why there is no data
    def finished():
        t = srv.api('GET', '/api/v1/profile/tasks/%s' % task)
        return t if t.get('status') == 'finished' else None
    t = wait_until(finished, 40, interval=0.5, what='task finished')
    reason = t.get('statusReason', '')
    assert reason.startswith('no request to /nope was seen on the 1 notified instance; '
                             'endpoints seen: /hello ('), t
    listed = [x for x in srv.api('GET', '/api/v1/profile/tasks?service=%s' % SERVICE)
              if x['id'] == task]
    assert listed and listed[0].get('statusReason') == reason, listed


def check_unnotified_task(srv):
    start = int(time.time() * 1000) - 120000
    r = srv.api('POST', '/api/v1/profile/tasks', {
        'service': 'ghost-svc', 'endpointName': '/x', 'duration': 1, 'startTime': start,
        'minDurationThreshold': 0, 'dumpPeriod': 10, 'maxSamplingCount': 5})
    t = srv.api('GET', '/api/v1/profile/tasks/%s' % r['id'])
    assert t['status'] == 'finished', t
    assert t.get('statusReason', '').startswith('no instance of ghost-svc was notified'), t


def main():
    r = Results()
    with tempdir() as tmp:
        srv = Server(tmp)
        port = free_port()
        env = python_env({'SW_AGENT_NAME': SERVICE, 'SW_AGENT_COLLECTOR_BACKEND_SERVICES':
                          srv.backend, 'SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL': '1',
                          'APP_PORT': str(port), 'PYTHONDONTWRITEBYTECODE': '1'})
        proc = Proc([sys.executable, '-m', 'skyprof', 'run', 'flask_app.py'], env=env, cwd=APPS,
                    name='quiet-app')
        try:
            wait_until(lambda: serving(port), 60, interval=0.3, what='app serving')
            r.run('endpoint_list_api_and_cli', check_endpoint_list, srv, port)
            r.run('unseen_task_warning_and_reason', check_unseen_task, srv, port, proc)
            r.run('unnotified_task_reason', check_unnotified_task, srv)
        finally:
            proc.stop(signal.SIGTERM)
            srv.stop()
        out = proc.output()
        r.run('app_clean', lambda: None if 'Traceback' not in out and
              'AddressSanitizer' not in out else (_ for _ in ()).throw(AssertionError(out[-3000:])))
        r.run('server_sanitizer_clean', srv.check_clean)
    r.finish()


if __name__ == '__main__':
    main()
