"""Cost of skyprof's automatic instrumentation on a Flask "hello" endpoint with no task active:
the same app served in-process through its WSGI callable (no network, so the figure is the
instrumentation's own cost), once bare and once with the agent started (post-import hook
installed, Flask instrumented, connected to nothing), in two child processes run alternately
several times; prints the per-request time of each and their difference.
Times are CPU time of the serving thread (time.thread_time), so a loaded machine inflates
them less than wall time would. Target (issue 9): <= 15 us per request.  Usage: bench_autoinstrument.py [requests] [rounds]"""
import os
import statistics
import subprocess
import sys

CHILD = r'''
import os, sys, time
mode = sys.argv[1]; n = int(sys.argv[2])
if mode == 'agent':
    from skyprof import agent
    assert agent.start(agent_name='bench-flask', agent_collector_backend_services='127.0.0.1:9')
from flask import Flask
app = Flask('bench')

@app.route('/hello')
def hello():
    return 'hello'

if mode == 'agent':
    from skyprof import _tracer
    assert 'flask' in _tracer.frameworks, 'flask not instrumented'
environ = {'REQUEST_METHOD': 'GET', 'PATH_INFO': '/hello', 'SCRIPT_NAME': '', 'QUERY_STRING': '',
           'SERVER_NAME': '127.0.0.1', 'SERVER_PORT': '5000', 'SERVER_PROTOCOL': 'HTTP/1.1',
           'REMOTE_ADDR': '127.0.0.1', 'REMOTE_PORT': '40000', 'HTTP_HOST': '127.0.0.1:5000',
           'wsgi.url_scheme': 'http', 'wsgi.input': None, 'wsgi.errors': sys.stderr,
           'wsgi.multithread': False, 'wsgi.multiprocess': False, 'wsgi.run_once': False,
           'wsgi.version': (1, 0)}
def start_response(status, headers, exc_info=None):
    return None
def one():
    body = app(dict(environ), start_response)
    for _ in body:
        pass
    close = getattr(body, 'close', None)
    if close:
        close()
for _ in range(2000):
    one()
t0 = time.thread_time()  # CPU time of this thread: robust to a loaded machine
for _ in range(n):
    one()
dt = time.thread_time() - t0
print('%.3f' % (dt / n * 1e6))
'''


PATH = r'''
import sys, time
from skyprof import agent, _tracer
from skyprof.instrument.fw_flask import _url
assert agent.start(agent_name='bench-flask', agent_collector_backend_services='127.0.0.1:9')
env = {'REMOTE_ADDR': '127.0.0.1', 'REMOTE_PORT': '40000', 'HTTP_HOST': '127.0.0.1:5000',
       'PATH_INFO': '/hello', 'wsgi.url_scheme': 'http'}
def one():  # what fw_flask does around a request: open, peer, tags, status, end (+ report)
    s = _tracer.begin('/hello', env.get('HTTP_SW8'), 7001, 3,
                      peer='%s:%s' % (env['REMOTE_ADDR'], env['REMOTE_PORT']))
    _tracer.tag(s, 'http.method', 'GET')
    _tracer.tag(s, 'http.url', _url(env))
    _tracer.finish(s, 200)
n = int(sys.argv[1])
for _ in range(2000):
    one()
t0 = time.thread_time()
for _ in range(n):
    one()
print('%.3f' % ((time.thread_time() - t0) / n * 1e6))
'''


def run(mode, n):
    env = dict(os.environ)
    if mode == 'bare':
        env['SKYPROF_INSTRUMENT'] = '0'
    if mode == 'path':
        args = [sys.executable, '-c', PATH, str(n)]
    else:
        args = [sys.executable, '-c', CHILD, mode, str(n)]
    out = subprocess.run(args, env=env, check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    bare, inst, path = [], [], []
    for _ in range(rounds):
        bare.append(run('bare', n))
        inst.append(run('agent', n))
        path.append(run('path', n))
    b, i, p = statistics.median(bare), statistics.median(inst), statistics.median(path)
    print('flask hello, %d requests x %d rounds (median of rounds), no task active' % (n, rounds))
    print('  bare app:              %8.2f us/request  (rounds: %s)' % (b, ' '.join('%.1f' % x for x in bare)))
    print('  auto-instrumented:     %8.2f us/request  (rounds: %s)' % (i, ' '.join('%.1f' % x for x in inst)))
    print('  instrumentation cost:  %8.2f us/request  (difference; target <= 15 us)' % (i - b))
    print('  the instrumentation path alone (span open, peer, 2 tags, status, end): %.2f us '
          '(rounds: %s)' % (p, ' '.join('%.2f' % x for x in path)))
    print('(CPU time of the serving thread: the agent\'s own threads, e.g. the segment reporter, '
          'are not counted)')


if __name__ == '__main__':
    main()
