"""Continuous (threshold-triggered) profiling in the agents, end to end over the real gRPC wire:
a PROCESS_CPU policy with an ON_CPU target reaches a busy process (Python: apps/proc_app.py's
burn_cpu thread; C: examples/demo_service under /cpu load, burn_ms) through
ContinuousProfilingService.queryPolicies (uuid cursor: "" first, the policy's UUID after); the
agent's local check fires -> reportProfilingTask with a ProcessCPU cause whose current value is
above the threshold; the process registers through EBPFProcessService.reportProcesses (the id is
OAP's sha256) and keeps alive; the CPU profile it then takes is uploaded through
collectProfilingData and skyprofd's analysis of the task shows the busy function. While no
policy exists for a service, the agent runs no thread but skp-channel.

Everything is skyprofd's: the policy is PUT through its HTTP API (executeDuration 3 s, which the
agent takes from the policy JSON), the trigger is read back from /api/v1/profile/triggers. A
recording grpcio pass-through between agent and skyprofd keeps the ContinuousProfilingService
requests for the wire checks (uuid cursor, report fields). Time is compressed with
SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL=1 (policy polls) and the policy's durations."""
import base64
import concurrent.futures
import hashlib
import http.client
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

import grpc

from skp_harness import Proc, Results, build_path, listening_port, start_skyprofd, wait_until
from common import Command_pb2  # noqa: E402
from ebpf.profiling import ContinuousProfiling_pb2 as CP  # noqa: E402

APPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'apps')
DEMO = build_path('examples', 'demo_service')
EXECUTE_S = 3
# Low, so the check fires whatever the machine's load (2 cores shared by many builds: a busy
# thread may get 10 % of a core); the test is that the cause's value is above it.
THRESHOLD = 5


def q(s):
    return urllib.parse.quote(s, safe='')


def oap_process_id(service, instance, process):
    b = lambda s: base64.b64encode(s.encode()).decode()  # noqa: E731
    return hashlib.sha256(('%s_%s.1_%s' % (process, b(service), b(instance))).encode()).hexdigest()


class Front:
    """A recording pass-through in front of skyprofd: every call is forwarded as bytes; the
    ContinuousProfilingService requests are decoded and kept for the wire checks."""

    def __init__(self, target):
        self.lock = threading.Lock()
        self.queries = []        # (service, uuid sent)
        self.reports = []        # (ContinuousProfilingReport, task id answered)
        self.up = grpc.insecure_channel(target)
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=16))
        self.server.add_generic_rpc_handlers((self,))
        self.port = self.server.add_insecure_port('127.0.0.1:0')
        self.server.start()

    def stop(self):
        self.server.stop(0)
        self.up.close()

    def _note(self, m, req, resp):
        with self.lock:
            if m.endswith('/queryPolicies'):
                for p in CP.ContinuousProfilingPolicyQuery.FromString(req).policies:
                    self.queries.append((p.serviceName, p.uuid))
            elif m.endswith('/reportProfilingTask'):
                tid = ''
                for c in Command_pb2.Commands.FromString(resp).commands:
                    for a in c.args:
                        if a.key == 'TaskId':
                            tid = a.value
                self.reports.append((CP.ContinuousProfilingReport.FromString(req), tid))

    def service(self, details):
        m = details.method
        ident = lambda b: b  # noqa: E731
        if m.startswith('/skywalking.v10.PprofTask/collect'):
            return None  # bidirectional; not used here

        def fwd_unary(req, ctx):
            try:
                resp = self.up.unary_unary(m, request_serializer=ident,
                                           response_deserializer=ident)(req, timeout=30)
            except grpc.RpcError as e:
                ctx.abort(e.code(), e.details() or '')
            if 'ContinuousProfilingService' in m:
                self._note(m, req, resp)
            return resp

        def fwd_stream(it, ctx):
            try:
                return self.up.stream_unary(m, request_serializer=ident,
                                            response_deserializer=ident)(it, timeout=60)
            except grpc.RpcError as e:
                ctx.abort(e.code(), e.details() or '')
        if m.endswith('/collect') or m.endswith('/collectSnapshot') or \
                m.endswith('/collectProfilingData'):
            return grpc.stream_unary_rpc_method_handler(fwd_stream, request_deserializer=ident,
                                                        response_serializer=ident)
        return grpc.unary_unary_rpc_method_handler(fwd_unary, request_deserializer=ident,
                                                   response_serializer=ident)

    def report_of(self, service):
        with self.lock:
            for r, tid in self.reports:
                if r.serviceName == service:
                    return r, tid
        return None

    def uuids_sent(self, service):
        with self.lock:
            return [u for s, u in self.queries if s == service]


CPU_POLICY = ('ON_CPU', {'type': 'PROCESS_CPU', 'threshold': str(THRESHOLD), 'period': 4,
                        'count': 2})


def put_policy(S, service, policy=CPU_POLICY):
    target, item = policy
    body = {'targets': [{'targetType': target, 'checkItems': [item]}],
            'executeDuration': EXECUTE_S, 'silenceDuration': 600}
    st, doc = S.json('PUT', '/api/v1/continuous/policies/' + q(service), body)
    assert st == 200, (st, doc)
    return doc['uuid']


def agent_threads(pid):
    names = []
    for t in os.listdir('/proc/%d/task' % pid):
        try:
            with open('/proc/%d/task/%s/comm' % (pid, t)) as f:
                n = f.read().strip()
        except OSError:
            continue
        if n.startswith('skp-'):
            names.append(n)
    return sorted(names)


def check_trigger(S, front, service, pid, busy, policy=CPU_POLICY, min_share=0.5):
    """The checks every agent must pass once its policy is set; returns the task id. `busy`
    must hold min_share of the profile (a wall profile also holds every idle thread)."""
    uid = put_policy(S, service, policy)
    target, item = policy
    got = wait_until(lambda: front.report_of(service), 60, interval=0.1,
                     what='%s reportProfilingTask' % service)
    rep, tid = got
    assert rep.WhichOneof('target') == {'ON_CPU': 'onCPU', 'OFF_CPU': 'offCPU'}[target], rep
    assert rep.duration == EXECUTE_S, rep
    assert rep.layer == 'GENERAL' and rep.instanceName and rep.processName, rep
    wire_type = {'PROCESS_CPU': CP.ProcessCPU,
                 'HTTP_AVG_RESPONSE_TIME': CP.HTTPAvgResponseTime}[item['type']]
    causes = [c for c in rep.causes if c.type == wire_type]
    assert causes, rep
    if item.get('uriList'):
        c = causes[0].uri
        assert c.path == item['uriList'][0], c
    else:
        c = causes[0].singleValue
    assert c.threshold == float(item['threshold']) and c.current > c.threshold, (c.threshold,
                                                                                 c.current)
    # the uuid cursor: "" first, then the policy's own
    sent = front.uuids_sent(service)
    assert sent[0] == '' and uid in sent, sent[:5]
    # skyprofd recorded the trigger with the agent's cause and the task the data belongs to
    trig = S.json('GET', '/api/v1/profile/triggers?service=' + q(service), expect=200)[1]
    mine = [t for t in trig['triggers'] if t.get('taskId') == tid]
    assert len(mine) == 1 and mine[0]['source'] == 'agent' and mine[0]['target'] == target, trig
    cause = mine[0]['causes'][0]
    assert cause['type'] == item['type'] and cause['current'] > cause['threshold'], cause
    # the process registered with OAP's id, then the profile arrives
    # (registered right after the report)
    procs = wait_until(lambda: S.json('GET', '/api/v1/ebpf/processes?service=' + q(service),
                                      expect=200)[1], 30, interval=0.1, what='process registered')
    assert len(procs) == 1, procs
    p = procs[0]
    assert p['pid'] == pid and p['instanceName'] == rep.instanceName, (p, pid)
    assert p['id'] == oap_process_id(service, rep.instanceName, rep.processName), p

    def analysed():
        st, doc = S.json('GET', '/api/v1/ebpf/tasks/%s/analyze' % q(tid))
        return doc if st == 200 else None
    doc = wait_until(analysed, 60 + 3 * EXECUTE_S, interval=0.2, what='%s stacks' % service)
    assert doc['target'] == target, doc
    assert doc['unit'] == ('count' if target == 'ON_CPU' else 'nanoseconds'), doc
    assert list(doc['processes']) == [p['id']], doc['processes']
    total = doc['total']
    # the busy function's inclusive samples over every path it appears on (outermost frames)
    hot = 0
    for t in doc['trees']:
        by_id = {e['id']: e for e in t['elements']}
        for e in t['elements']:
            parent = by_id.get(e['parentId'])
            if busy in e['codeSignature'] and not (parent and busy in parent['codeSignature']):
                hot += e['count']
    if not (total > 0 and hot >= min_share * total):
        st, _, body = S.http('GET', '/api/v1/ebpf/tasks/%s/download?format=collapsed' % q(tid))
        lines = sorted(body.decode(errors='replace').splitlines(),
                       key=lambda l: -int(l.rsplit(' ', 1)[-1]))
        raise AssertionError('busy function %s has %d of %d samples; heaviest stacks:\n%s' % (
            busy, hot, total, '\n'.join(lines[:12])))
    return tid, doc


def python_app(S, front, res, tmp):
    env = dict(os.environ, PYTHONUNBUFFERED='1', SW_AGENT_NAME='cont-py',
               SW_AGENT_COLLECTOR_BACKEND_SERVICES='127.0.0.1:%d' % front.port,
               SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL='1',
               )
    log = open(os.path.join(tmp, 'py-app.log'), 'w+')
    app = subprocess.Popen([sys.executable, os.path.join(APPS, 'proc_app.py')], env=env,
                           stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT)

    def out():
        log.flush()
        with open(log.name) as f:
            return f.read()
    try:
        wait_until(lambda: 'ready' in out() or app.poll() is not None, 30, what='app ready')
        assert 'agent=True' in out(), out()

        def no_policy_no_thread():
            # several policy polls answered "none" (no command) and the agent holds no policy
            wait_until(lambda: len(front.uuids_sent('cont-py')) >= 3, 30, interval=0.1,
                       what='policy polls')
            assert set(front.uuids_sent('cont-py')) == {''}
            assert agent_threads(app.pid) == ['skp-channel'], agent_threads(app.pid)
        res.run('python: no policy -> polls, no thread but skp-channel', no_policy_no_thread)

        def trigger():
            check_trigger(S, front, 'cont-py', app.pid, 'burn_cpu')
            # one trigger: the silence holds the next one off
            time.sleep(2)
            assert len([r for r in front.reports if r[0].serviceName == 'cont-py']) == 1
            trig = S.json('GET', '/api/v1/profile/triggers?service=cont-py', expect=200)[1]
            assert len(trig['triggers']) == 1, trig
        res.run('python: PROCESS_CPU fires, ON_CPU stacks show burn_cpu', trigger)
    finally:
        try:
            app.stdin.close()
            app.wait(timeout=30)
        except Exception:
            app.kill()
        if res.failed:
            sys.stderr.write(out()[-4000:])


class Load:
    def __init__(self, port, path):
        self.port, self.path, self.stop = port, path, threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        while not self.stop.is_set():
            try:
                c = http.client.HTTPConnection('127.0.0.1', self.port, timeout=30)
                while not self.stop.is_set():
                    c.request('POST', self.path, body=b'{}')
                    c.getresponse().read()
            except OSError:
                time.sleep(0.05)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=30)


def native_demo(S, front, res):
    env = {'SW_AGENT_NAME': 'cont-c',
           'SW_AGENT_COLLECTOR_BACKEND_SERVICES': '127.0.0.1:%d' % front.port,
           'SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL': '1'}
    with Proc([DEMO, '--port', '0', '--step-ms', '20', '--other-ms', '100'], env=env,
              name='demo') as demo:
        port = listening_port(demo, 'demo_service:')
        with Load(port, '/cpu'):
            res.run('C demo: PROCESS_CPU fires, ON_CPU stacks show burn_ms',
                    lambda: check_trigger(S, front, 'cont-c', demo.pid, 'burn_ms'))


def native_demo_http(S, front, res):
    """OFF_CPU from the segment API's entry spans: /sleep answers in ~100 ms x 3."""
    env = {'SW_AGENT_NAME': 'cont-c-http',
           'SW_AGENT_COLLECTOR_BACKEND_SERVICES': '127.0.0.1:%d' % front.port,
           'SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL': '1'}
    policy = ('OFF_CPU', {'type': 'HTTP_AVG_RESPONSE_TIME', 'threshold': '50', 'period': 4,
                          'count': 2, 'uriList': ['/sleep']})
    with Proc([DEMO, '--port', '0', '--step-ms', '20', '--other-ms', '100'], env=env,
              name='demo-http') as demo:
        port = listening_port(demo, 'demo_service:')
        with Load(port, '/sleep'):
            res.run('C demo: HTTP_AVG_RESPONSE_TIME of /sleep fires, OFF_CPU stacks show sleep_ms',
                    lambda: check_trigger(S, front, 'cont-c-http', demo.pid, 'sleep_ms', policy,
                                          min_share=0.1))


def python_http(S, front, res, tmp):
    """OFF_CPU from the Python agent's instrumented entry spans (http.server under
    `python -m skyprof run`): /work sleeps 300 ms in inner_work."""
    env = dict(os.environ, PYTHONUNBUFFERED='1', SW_AGENT_NAME='cont-py-http',
               SW_AGENT_COLLECTOR_BACKEND_SERVICES='127.0.0.1:%d' % front.port,
               SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL='1', SKP_APP_NO_START='1')
    policy = ('OFF_CPU', {'type': 'HTTP_AVG_RESPONSE_TIME', 'threshold': '200', 'period': 4,
                          'count': 2, 'uriList': ['/work']})
    with Proc([sys.executable, '-m', 'skyprof', 'run', os.path.join(APPS, 'http_app.py')],
              env=env, name='py-http') as app:
        port = listening_port(app)
        with Load(port, '/work?x=1'), Load(port, '/work'):
            res.run('python: HTTP_AVG_RESPONSE_TIME of /work fires, OFF_CPU stacks show '
                    'inner_work', lambda: check_trigger(S, front, 'cont-py-http', app.pid,
                                                        'inner_work', policy, min_share=0.1))


def main():
    res = Results()
    tmp = tempfile.mkdtemp(prefix='skp-cont-agent-')
    S = start_skyprofd(tmp)
    front = Front(S.grpc_target)
    try:
        python_app(S, front, res, tmp)
        python_http(S, front, res, tmp)
        if os.path.exists(DEMO):
            native_demo(S, front, res)
            native_demo_http(S, front, res)
    finally:
        front.stop()
        S.stop()
    res.finish()


if __name__ == '__main__':
    main()
