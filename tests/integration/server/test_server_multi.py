"""Several skyprofd on one PostgreSQL database (tests/harness/pgserver.py gives each run a fresh
database on the tests' server).

- task flow: a task created on collector 1 is picked up by the demo C service (its agent polls
  collector 2 only), the demo's profile is ingested by collector 2 and analysed on collector 3
  (handle_seed_request -> method3 -> method2 -> method1); and the same fixed snapshots sent to
  collector 2 and to a single SQLite skyprofd give the exact same analysis on collector 3.
- kill -9 mid-ingest: clients stream snapshots to collectors 1 and 2, collector 1 is killed with
  -9 while streams are in flight; every stream either collector acknowledged is complete when
  collector 3 reads it.
- racing creators: the same overlapping task posted to collectors 1 and 2 at once, many times:
  exactly one of each pair is created.
- alternating polls: one instance polls collectors 1, 2, 3 in turn with its lastCommandTime
  cursor while tasks are created on all three: every task arrives once, none is missed.
- database away: collector A on a PostgreSQL server of its own, B on the tests' server; the demo
  agent is given "A,B". A's server is stopped: A answers UNAVAILABLE, and the agent moves to B
  (its requests counted there).
"""
import http.client
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402

import pgserver  # noqa: E402
from skp_harness import (Proc, Results, build_path, listening_port, tempdir,  # noqa: E402
                         wait_until)
from skyprofd_util import Skyprofd, root_count, snap  # noqa: E402

R = Results()
DEMO = os.environ.get("SKP_DEMO_SERVICE") or build_path("examples", "demo_service")
FRAMES = ["app.main", "app.handler", "app.service.run", "db.query", "socket.recv", "app.render"]


def collectors(d, url, n=3, extra=()):
    return [Skyprofd(d, *extra, name="skyprofd-c%d" % (i + 1), db_url=url,
                     db_name="c%d.db" % (i + 1)) for i in range(n)]


def stop_all(srvs):
    for s in srvs:
        if s.alive():
            s.stop()


def post(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        c.request("POST", path, body=b"{}", headers={"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        return r.status
    finally:
        c.close()


def fn(sig):
    return sig.split(" (", 1)[0]


def has_chain(analysis):
    for t in analysis["trees"]:
        by_id = {e["id"]: e for e in t["elements"]}
        for e in t["elements"]:
            chain = [fn(e["codeSignature"])]
            p = by_id.get(e["parentId"])
            while p is not None and len(chain) < 4:
                chain.append(fn(p["codeSignature"]))
                p = by_id.get(p["parentId"])
            if chain == ["method1", "method2", "method3", "handle_seed_request"]:
                return True
    return False


def fixed_snapshots(task, seg):
    """A deterministic profile: 60 dumps over a few stacks."""
    out = []
    for i in range(60):
        depth = 3 + (i * 7) % 4
        out.append(snap(task, seg, i, FRAMES[:depth], time_ms=1_800_000_000_000 + i * 10))
    return out


def t_task_flow():
    url = pgserver.test_url("multi_flow")
    with tempdir() as d:
        c1, c2, c3 = collectors(d, url)
        single = Skyprofd(d, name="skyprofd-single", db_name="single.db")
        demo = None
        try:
            # the real agent: polls collector 2 only
            env = {"SW_AGENT_NAME": "multi-demo", "SW_AGENT_COLLECTOR_BACKEND_SERVICES": c2.grpc_target,
                   "SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL": "1",
                   "SW_AGENT_COLLECTOR_HEARTBEAT_PERIOD": "1"}
            demo = Proc([DEMO, "--port", "0", "--step-ms", "20", "--other-ms", "0"], env=env,
                        name="demo")
            port = listening_port(demo, "demo_service:", 60)
            wait_until(lambda: c3.json("GET", "/api/v1/services/multi-demo/instances")[1], 60, 0.2,
                       "the demo's instance, registered through collector 2, listed by collector 3")
            st, task = c1.create_task("multi-demo", "/", duration=2, dump=10)
            assert st in (200, 201), task
            tid = task["id"]

            def notified():
                _, logs = c3.json("GET", "/api/v1/profile/tasks/%s/logs" % tid)
                return any(l.get("operationType") == "NOTIFIED" for l in logs)
            wait_until(notified, 60, 0.2, "NOTIFIED (poll on collector 2) seen on collector 3")

            def profiled():
                assert post(port, "/") == 200
                _, segs = c3.json("GET", "/api/v1/profile/tasks/%s/segments" % tid)
                return segs
            segs = wait_until(profiled, 90, 0.1, "a profiled segment listed by collector 3")
            st, an = c3.json("GET", "/api/v1/profile/tasks/%s/analyze" % tid, expect=200)
            assert root_count(an) > 0, an
            wait_until(lambda: has_chain(c3.json("GET", "/api/v1/profile/tasks/%s/analyze" % tid)[1]),
                       60, 0.5, "handle_seed_request -> method3 -> method2 -> method1 on collector 3")
            print("task %s: %d profiled segment(s) listed by collector 3" % (tid, len(segs)))

            # the exact tree of a single-instance run: the same snapshots, two deployments
            _, t_multi = c1.create_task("multi-fixed", "/fixed", duration=5)
            _, t_single = single.create_task("multi-fixed", "/fixed", duration=5)
            c2.snapshots(fixed_snapshots(t_multi["id"], "seg-fixed"))
            single.snapshots(fixed_snapshots(t_single["id"], "seg-fixed"))
            _, a_multi = c3.json("GET", "/api/v1/profile/segments/seg-fixed/analyze", expect=200)
            _, a_single = single.json("GET", "/api/v1/profile/segments/seg-fixed/analyze",
                                      expect=200)
            assert root_count(a_multi) == 60, a_multi
            assert a_multi == a_single, (json.dumps(a_multi)[:2000], json.dumps(a_single)[:2000])
            _, ta_multi = c3.json("GET", "/api/v1/profile/tasks/%s/analyze" % t_multi["id"],
                                  expect=200)
            _, ta_single = single.json("GET", "/api/v1/profile/tasks/%s/analyze" % t_single["id"],
                                       expect=200)
            assert ta_multi["trees"] == ta_single["trees"], (ta_multi, ta_single)
        finally:
            if demo:
                demo.stop()
            stop_all([c1, c2, c3, single])


PER_STREAM = 1500  # > the collector's snapshot batch: a mid-stream commit and a final one


def t_kill9_mid_ingest():
    url = pgserver.test_url("multi_kill9")
    with tempdir() as d:
        c1, c2, c3 = collectors(d, url)
        try:
            _, task = c3.create_task("svc-multi-k9", "/ingest")
            tid = task["id"]
            acked, lock, stop = [], threading.Lock(), threading.Event()
            in_flight = [0]
            refused = [0]

            def worker(w, target):
                ch = grpc.insecure_channel(target)
                call = ch.stream_unary("/skywalking.v3.ProfileTask/collectSnapshot",
                                       request_serializer=lambda m: m.SerializeToString(),
                                       response_deserializer=lambda b: b)
                k = 0
                try:
                    while not stop.is_set():
                        seg = "seg-mk9-%d-%d" % (w, k)
                        msgs = [snap(tid, seg, i, FRAMES[: 2 + i % 4]) for i in range(PER_STREAM)]
                        with lock:
                            in_flight[0] += 1
                        try:
                            call(iter(msgs), timeout=120)
                        except grpc.RpcError:
                            with lock:
                                refused[0] += 1
                            if target == c1.grpc_target:
                                return  # collector 1 is gone
                            continue
                        finally:
                            with lock:
                                in_flight[0] -= 1
                        with lock:
                            acked.append(seg)
                        k += 1
                finally:
                    ch.close()

            targets = [c1.grpc_target, c1.grpc_target, c2.grpc_target]
            threads = [threading.Thread(target=worker, args=(w, t)) for w, t in enumerate(targets)]
            for t in threads:
                t.start()
            try:
                wait_until(lambda: len(acked) >= 6, 300, what="6 acknowledged streams")
                with lock:
                    flying = in_flight[0]
                c1.kill9()
                time.sleep(0)  # collector 2's clients keep streaming after the kill
                n_after = len(acked)
                wait_until(lambda: len(acked) >= n_after + 2, 300,
                           what="collector 2 still acknowledging after collector 1's death")
            finally:
                stop.set()
                for t in threads:
                    t.join(180)
            with lock:
                done = list(acked)
            print("acknowledged streams: %d, in flight at the kill: %d, failed calls: %d" % (
                len(done), flying, refused[0]))
            for seg in done:
                _, an = c3.json("GET", "/api/v1/profile/segments/%s/analyze" % seg, expect=200)
                n = root_count(an)
                assert n == PER_STREAM, "acknowledged %s has %d of %d snapshots" % (seg, n, PER_STREAM)
            _, segs = c3.json("GET", "/api/v1/profile/tasks/%s/segments?limit=1000" % tid,
                              expect=200)
            listed = {s["segmentId"] for s in segs}
            assert set(done) <= listed, set(done) - listed
        finally:
            stop_all([c1, c2, c3])


def t_racing_creators():
    url = pgserver.test_url("multi_race")
    with tempdir() as d:
        c1, c2 = collectors(d, url, n=2)
        try:
            rounds = 20
            for k in range(rounds):
                svc = "svc-race-%d" % k
                start = int(time.time() * 1000) + 60_000
                results = [None, None]
                go = threading.Barrier(2)

                def create(i, srv):
                    go.wait()
                    results[i] = srv.create_task(svc, "/race", duration=5, start=start + 1000 * i)
                ts = [threading.Thread(target=create, args=(i, s)) for i, s in enumerate((c1, c2))]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join(60)
                codes = sorted(r[0] for r in results)
                assert codes == [200, 400] or codes == [201, 400], (k, results)
                loser = [r for r in results if r[0] == 400][0][1]
                assert "already has monitor task" in loser["errorReason"], loser
                _, listed = c2.json("GET", "/api/v1/profile/tasks?service=%s" % svc)
                assert len(listed) == 1, listed
            print("%d races: one task created in each" % rounds)
        finally:
            stop_all([c1, c2])


def t_alternating_polls():
    url = pgserver.test_url("multi_polls")
    with tempdir() as d:
        cs = collectors(d, url)
        try:
            svc, inst = "svc-polls", "inst-1"
            created, received = [], []
            stop = threading.Event()
            cursor = [-1]
            errors = []

            def poller():
                k = 0
                last = None  # after the creators end: one more full turn of the three
                try:
                    while last is None or k < last:
                        if last is None and stop.is_set():
                            last = k + 3
                        resp = cs[k % 3].query(svc, inst, last=cursor[0])
                        for cmd in resp.commands:
                            a = {kv.key: kv.value for kv in cmd.args}
                            received.append(a["TaskId"])
                            cursor[0] = max(cursor[0], int(a["CreateTime"]))
                        k += 1
                except Exception as e:  # reported below
                    errors.append(e)

            th = threading.Thread(target=poller)
            th.start()
            try:
                # three creators at once, one per collector, of tasks that do not overlap (one
                # a minute ahead of the other): creations race on the service's task lock while
                # the agent polls
                base = int(time.time() * 1000) + 10_000
                clock = threading.Lock()

                def creator(c):
                    for j in range(8):
                        i = j * 3 + c
                        st, doc = cs[c].create_task(svc, "/p%d" % i, duration=1,
                                                    start=base + i * 61_000)
                        assert st in (200, 201), doc
                        with clock:
                            created.append(doc["id"])
                ths = [threading.Thread(target=creator, args=(c,)) for c in range(3)]
                for t in ths:
                    t.start()
                for t in ths:
                    t.join(120)
                assert len(created) == 24, created
            finally:
                stop.set()
                th.join(120)
            assert not errors, errors
            # a final poll on each collector finds nothing new
            for c in cs:
                assert not list(c.query(svc, inst, last=cursor[0]).commands)
            dup = {t for t in received if received.count(t) > 1}
            missed = set(created) - set(received)
            assert not dup, "delivered twice: %s" % dup
            assert not missed, "missed: %s" % missed
            print("%d tasks created on 3 collectors, each delivered once" % len(created))
        finally:
            stop_all(cs)


def t_database_away():
    url_b = pgserver.test_url("multi_away")
    with tempdir() as d, pgserver.temporary() as own:
        a = Skyprofd(d, name="skyprofd-a", db_url=own.url, db_name="a.db")
        b = Skyprofd(d, name="skyprofd-b", db_url=url_b, db_name="b.db")
        demo = None
        stop = threading.Event()
        try:
            env = {"SW_AGENT_NAME": "away-demo",
                   "SW_AGENT_COLLECTOR_BACKEND_SERVICES": "%s,%s" % (a.grpc_target, b.grpc_target),
                   "SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL": "1",
                   "SW_AGENT_COLLECTOR_HEARTBEAT_PERIOD": "1", "SKYPROF_LOG_LEVEL": "info"}
            demo = Proc([DEMO, "--port", "0", "--step-ms", "1", "--other-ms", "0"], env=env,
                        name="demo-away")
            port = listening_port(demo, "demo_service:", 60)

            def load():
                while not stop.is_set():
                    try:
                        post(port, "/cpu")
                    except OSError:
                        pass
                    stop.wait(0.02)
            th = threading.Thread(target=load, daemon=True)
            th.start()

            def count(srv):
                _, doc = srv.json("GET", "/api/v1/services/away-demo/endpoints/stats")
                return sum(e["count"] for e in doc["endpoints"])
            wait_until(lambda: count(a) >= 10, 60, 0.2, "the demo's requests at A")
            assert count(b) == 0
            own.stop(remove=False)  # A's database goes away; A itself keeps running
            wait_until(lambda: count(b) >= 10, 90, 0.2, "the demo's requests at B")
            assert a.alive()
            assert "next calls go to %s" % b.grpc_target in demo.output(), demo.output()[-3000:]
        finally:
            stop.set()
            if demo:
                demo.stop()
            if a.alive():
                a.stop(expect_rc=None)  # its database is gone: no clean exit expected
            stop_all([b])


if __name__ == "__main__":
    R.run("task flow: create on 1, poll on 2, analyse on 3", t_task_flow)
    R.run("kill -9 of a collector mid-ingest loses no acknowledged snapshot", t_kill9_mid_ingest)
    R.run("racing creators on two collectors: one task", t_racing_creators)
    R.run("polls alternating collectors: every task once", t_alternating_polls)
    R.run("a collector whose database is away: the agent moves on", t_database_away)
    R.finish()
