"""Helpers for the Python agent's end-to-end tests: a real skyprofd, apps running the skyprof
package in child interpreters, and the HTTP API calls the tests make (create task, wait for the
agent to be NOTIFIED, list profiled segments, analyze)."""
import json
import os
import sys
import time
import urllib.request

from skp_harness import Proc, listening_port, start_skyprofd, wait_until, SANITIZE

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get('SKP_SOURCE_DIR', os.path.join(HERE, '..', '..'))


class Server:
    """skyprofd started by the harness (start_skyprofd) with the API calls these tests make."""

    def __init__(self, tmp):
        self.skyprofd = start_skyprofd(tmp, db_name='db')
        self.grpc_port, self.http_port = self.skyprofd.grpc_port, self.skyprofd.http_port
        self.proc = self.skyprofd.proc

    @property
    def backend(self):
        return '127.0.0.1:%d' % self.grpc_port

    def api(self, method, path, body=None, timeout=10):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request('http://127.0.0.1:%d%s' % (self.http_port, path), data=data,
                                     method=method, headers={'Content-Type': 'application/json'})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read().decode() or 'null')

    def create_task(self, service, endpoint, duration=1, threshold=0, period=10, max_count=5):
        r = self.api('POST', '/api/v1/profile/tasks', {
            'service': service, 'endpointName': endpoint, 'duration': duration,
            'minDurationThreshold': threshold, 'dumpPeriod': period, 'maxSamplingCount': max_count})
        return r['id']

    def wait_notified(self, task_id, timeout=60):
        def notified():
            logs = self.api('GET', '/api/v1/profile/tasks/%s/logs' % task_id)
            return any(l.get('operationType') == 'NOTIFIED' for l in logs)
        wait_until(notified, timeout, interval=0.1, what='task %s NOTIFIED' % task_id)

    def segments(self, task_id):
        return self.api('GET', '/api/v1/profile/tasks/%s/segments' % task_id)

    def analyze(self, segment_id, start, end):
        return self.api('POST', '/api/v1/profile/analyze',
                        [{'segmentId': segment_id, 'timeRange': {'start': start, 'end': end}}])

    def stop(self):
        self.skyprofd.stop(expect_rc=None)

    def check_clean(self):
        from skp_harness import check_sanitizer_clean
        check_sanitizer_clean(self.proc)


def python_env(extra=None):
    """Environment for a child interpreter running the skyprof package (inherits PYTHONPATH,
    LD_PRELOAD, ASAN_OPTIONS from the test's environment)."""
    env = {'PYTHONUNBUFFERED': '1'}
    if extra:
        env.update(extra)
    return env


class App:
    """A child Python process printing 'listening on 127.0.0.1:PORT'."""

    def __init__(self, args, env=None, name='app'):
        self.proc = Proc([sys.executable] + list(args), env=python_env(env), name=name)
        self.port = listening_port(self.proc, timeout=30)

    def request(self, method='POST', path='/', headers=None, body=b'', timeout=20):
        req = urllib.request.Request('http://127.0.0.1:%d%s' % (self.port, path),
                                     data=body if method == 'POST' else None, method=method,
                                     headers=headers or {})
        t0 = time.monotonic()
        with urllib.request.urlopen(req, timeout=timeout) as r:
            payload = r.read()
            status = r.status
        return status, payload, time.monotonic() - t0

    def stop(self):
        return self.proc.stop()


def tree_nodes(analysis):
    """All nodes of all trees of an analyze answer."""
    out = []
    for t in analysis.get('trees') or []:
        out.extend(t.get('elements') or [])
    return out


def function_of(sig):
    """'<file>.<func>: <line>' -> '<file>.<func>'."""
    return sig.rsplit(': ', 1)[0]


def function_totals(nodes, func_suffix):
    """(total duration, self duration, count) of a function: the per-line nodes of that function
    whose parent is not the same function (outermost occurrences) summed; self time summed over
    all its nodes."""
    by_id = {n['id']: n for n in nodes}
    total = self_ms = count = 0
    for n in nodes:
        f = function_of(n['codeSignature'])
        if not f.endswith(func_suffix):
            continue
        self_ms += n['durationChildExcluded']
        parent = by_id.get(n['parentId'])
        if parent is None or function_of(parent['codeSignature']) != f:
            total += n['duration']
            count += n['count']
    return total, self_ms, count


def sw8_header(trace_id, segment_id, span_id=0, service='upstream', instance='upstream-1',
               endpoint='/upstream', peer='127.0.0.1:1'):
    import base64

    def b(s):
        return base64.b64encode(s.encode()).decode()
    return '1-%s-%s-%d-%s-%s-%s-%s' % (b(trace_id), b(segment_id), span_id, b(service),
                                       b(instance), b(endpoint), b(peer))


def function_self_count(nodes, func_suffix):
    """Snapshots whose innermost frame is in the function (its self samples)."""
    children = {}
    for n in nodes:
        children.setdefault(n['parentId'], []).append(n)
    c = 0
    for n in nodes:
        if function_of(n['codeSignature']).endswith(func_suffix):
            c += n['count'] - sum(k['count'] for k in children.get(n['id'], []))
    return c
