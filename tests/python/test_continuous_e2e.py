"""Continuous profiling end to end (issue 11, "Done when"): skyprofd with a TRACE policy on
ENDPOINT_AVG_RESPONSE_TIME of /slow (threshold 200 ms, 3 of 10 slots; --continuous-slot-ms
shortens slots) and a Python service running our agent (tests/python/apps/slow_app.py) under a
steady load. While /slow is fast nothing fires; once it turns slow (300 ms) skyprofd records a
trigger within one window with its cause, creates the trace task (endpoint /slow, min-duration
threshold 200 ms), the agent takes it and profiles the slow requests, and the task's analysis
shows the slow function (checkout_query under place_order). No second trigger while that task
runs and during the silence after it; a new one after."""
import os
import threading
import time
import urllib.request

from skp_harness import Results, check_sanitizer_clean, start_skyprofd, tempdir, wait_until
from skp_pyagent import App, SOURCE, tree_nodes

SLOT_MS = 200


class Load:
    """4 threads calling /slow and one calling /fast until stopped."""

    def __init__(self, app):
        self.app = app
        self.stop_ev = threading.Event()
        self.errors = 0
        self.threads = [threading.Thread(target=self.run, args=(p,), daemon=True)
                        for p in ['/slow'] * 4 + ['/fast']]
        for t in self.threads:
            t.start()

    def run(self, path):
        while not self.stop_ev.is_set():
            try:
                self.app.request('GET', path, timeout=20)
            except Exception:
                self.errors += 1
                time.sleep(0.05)
            time.sleep(0.01)

    def stop(self):
        self.stop_ev.set()
        for t in self.threads:
            t.join(30)


def main():
    r = Results()
    with tempdir() as tmp:
        srv = start_skyprofd(tmp, '--continuous-slot-ms', str(SLOT_MS), db_name='db')
        app = App([os.path.join(SOURCE, 'tests', 'python', 'apps', 'slow_app.py'), '0'], env={
            'SW_AGENT_COLLECTOR_BACKEND_SERVICES': srv.grpc_target,
            'SW_AGENT_NAME': 'shop',
            'SW_AGENT_INSTANCE_NAME': 'shop-1',
            'SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL': '1'}, name='slow_app')
        load = None
        st = {}

        def triggers():
            _, doc = srv.json('GET', '/api/v1/profile/triggers?service=shop', expect=200)
            return doc['triggers']

        try:
            def policy_set():
                # periods and durations count slots of 200 ms: a 2 s window, silence 2 s; the
                # trace task itself lasts its real minute
                _, doc = srv.json('PUT', '/api/v1/continuous/policies/shop', {
                    'targets': [{'targetType': 'TRACE', 'checkItems': [{
                        'type': 'ENDPOINT_AVG_RESPONSE_TIME', 'threshold': '200', 'period': 10,
                        'count': 3, 'uriList': ['/slow']}]}],
                    'executeDuration': 5, 'silenceDuration': 10}, expect=200)
                st['uuid'] = doc['uuid']

            def quiet_while_fast():
                nonlocal load
                load = Load(app)

                def seen():
                    _, v = srv.json('GET', '/api/v1/continuous/policies/shop/values', expect=200)
                    vals = [x for s in v['series'] for x in s['values'] if x is not None]
                    return len(vals) >= 8 and vals
                vals = wait_until(seen, 60, interval=0.2, what='/slow slots with values')
                assert max(vals) < 200, vals
                assert triggers() == [], triggers()

            def trigger_when_slow():
                app.request('GET', '/mode?slow=300')
                st['t_slow'] = time.time()
                got = wait_until(triggers, 60, interval=0.1, what='a trigger for /slow')
                took = time.time() - st['t_slow']
                print('trigger %.2f s after /slow turned slow (window %.1f s)' % (
                    took, 10 * SLOT_MS / 1000.0))
                assert len(got) == 1, got
                t = got[0]
                st['trigger'] = t
                c = t['causes'][0]
                assert t['target'] == 'TRACE' and t['taskKind'] == 'trace', t
                assert c['type'] == 'ENDPOINT_AVG_RESPONSE_TIME' and c['uri'] == '/slow', c
                assert c['current'] >= 200 and c['threshold'] == 200 and c['hits'] >= 3, c
                # within one window of slots, plus the agent's reporting delay
                assert took < 10 * SLOT_MS / 1000.0 + 10, took

            def task_created():
                tid = st['trigger']['taskId']
                _, task = srv.json('GET', '/api/v1/profile/tasks/%s' % tid, expect=200)
                assert task['endpointName'] == '/slow' and task['minDurationThreshold'] == 200, task
                assert task['triggeredBy'].startswith(
                    'triggered by ENDPOINT_AVG_RESPONSE_TIME of /slow: '), task
                st['task'] = tid

            def agent_profiles_slow_function():
                tid = st['task']

                def profiled():
                    _, segs = srv.json('GET', '/api/v1/profile/tasks/%s/segments' % tid, expect=200)
                    return len([s for s in segs if s.get('spans')]) >= 2 and segs
                wait_until(profiled, 90, interval=0.5, what='profiled /slow segments')

                def analysed():
                    _, a = srv.json('GET', '/api/v1/profile/tasks/%s/analyze' % tid, expect=200)
                    sigs = [n['codeSignature'] for n in tree_nodes(a)]
                    return any('checkout_query' in s for s in sigs) and sigs
                sigs = wait_until(analysed, 60, interval=0.5, what='checkout_query in the tree')
                assert any('place_order' in s for s in sigs), sigs

            def no_second_during_task_and_silence():
                # the trace task runs one real minute, then the silence (10 slots): under the
                # same slow load no trigger before the task's end
                t1 = st['trigger']['time']
                _, task = srv.json('GET', '/api/v1/profile/tasks/%s' % st['task'], expect=200)
                end = task['startTime'] + task['duration'] * 60000
                while time.time() * 1000 < end - 2000:
                    assert len(triggers()) == 1, triggers()
                    time.sleep(1)
                st['end'] = end
                assert end - t1 >= 59000, (end, t1)

            def new_one_after():
                got = wait_until(lambda: len(triggers()) >= 2 and triggers(), 60, interval=0.2,
                                 what='a second trigger after the silence')
                t2 = got[0]
                assert t2['time'] >= st['end'] + 10 * SLOT_MS - 5, (t2, st['end'])
                assert t2['taskId'] and t2['taskId'] != st['task'], t2

            r.run('policy set', policy_set)
            r.run('no trigger while /slow is fast', quiet_while_fast)
            r.run('trigger within one window once /slow is slow', trigger_when_slow)
            r.run('TRACE task created with the policy threshold', task_created)
            r.run('the agent profiles it: checkout_query in the analysis',
                  agent_profiles_slow_function)
            r.run('no second trigger during the task and the silence',
                  no_second_during_task_and_silence)
            r.run('a new trigger after the silence', new_one_after)
        finally:
            if load:
                load.stop()
            code = app.stop()
            srv.stop(expect_rc=None)
        r.run('app exit clean', lambda: None if code in (0, -15, 143) else (_ for _ in ()).throw(
            AssertionError('slow_app exit %r:\n%s' % (code, app.proc.output()[-3000:]))))
        r.run('app sanitizer clean', check_sanitizer_clean, app.proc)
    r.finish()


if __name__ == '__main__':
    main()
