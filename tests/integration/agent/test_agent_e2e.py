"""Agent core end to end against a real skyprofd.

1. backend down, then up: the demo service starts with no backend listening. Requests are all
   served, the process runs exactly one agent thread (skp-channel, no sampler), its RSS stays
   bounded while thousands of segments cannot be sent. Then skyprofd starts on that port: the agent
   connects (capped backoff), registers, receives a profile task, and a request is profiled into
   handle_seed_request -> method3 -> method2 -> method1; skp-sampler exists while the task runs.
2. fork: a child after fork() does not run the parent's agent (one thread, tracing off), can be
   restarted (explicitly or with SKYPROF_RESTART_IN_CHILD) as a new instance with its own
   connection, and the parent's agent keeps its connection (no reconnect).
"""
import concurrent.futures
import http.client
import json
import os
import re
import time
import urllib.request

from skp_harness import (Proc, Results, build_path, check_sanitizer_clean, free_port,
                         listening_port, start_skyprofd, tempdir, wait_until, SANITIZE)

DEMO = os.environ.get("SKP_DEMO_SERVICE") or build_path("examples", "demo_service")
FORK_APP = os.environ.get("SKP_FORK_APP") or build_path("tests", "integration", "agent",
                                                        "agent_fork_app")


def http_json(method, url, body=None, timeout=10):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, json.loads(r.read().decode() or "null")


def request(port, method="POST", path="/", timeout=30):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=b"{}" if method == "POST" else None)
        r = c.getresponse()
        body = r.read()
        return r.status, body
    finally:
        c.close()


def threads_of(pid):
    names = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                names.append(f.read().strip())
        except OSError:
            pass
    return names


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fn_name(e):
    return e["codeSignature"].split(" (", 1)[0]


def has_chain(elements):
    by_id = {e["id"]: e for e in elements}
    for e in elements:
        if fn_name(e) != "method1":
            continue
        m2 = by_id.get(e["parentId"])
        m3 = by_id.get(m2["parentId"]) if m2 else None
        top = by_id.get(m3["parentId"]) if m3 else None
        if m2 and m3 and top and fn_name(m2) == "method2" and fn_name(m3) == "method3" \
                and fn_name(top) == "handle_seed_request":
            return True
    return False


def start_skyprofd_api(tmp, grpc_port, name="skyprofd"):
    srv = start_skyprofd(tmp, grpc_addr="127.0.0.1:%d" % grpc_port, name=name, db_name=name + ".db")
    return srv, srv.api_base


def test_backend_down_then_up(tmp):
    grpc_port = free_port()
    service = "agent-e2e-demo"
    env = {
        "SW_AGENT_NAME": service,
        "SW_AGENT_COLLECTOR_BACKEND_SERVICES": "127.0.0.1:%d" % grpc_port,
        "SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL": "1",
        "SW_AGENT_COLLECTOR_HEARTBEAT_PERIOD": "1",
        "SKYPROF_LOG_LEVEL": "info",
    }
    with Proc([DEMO, "--port", "0", "--step-ms", "20", "--other-ms", "0"], env=env,
              name="demo") as demo:
        port = listening_port(demo, "demo_service:", 30)
        names = threads_of(demo.pid)
        assert names.count("skp-channel") == 1, names
        assert "skp-sampler" not in names, names
        # No backend: every request is served; segments pile up only to the bounded queue.
        n_req = 400 if SANITIZE else 2000
        for i in range(200):
            assert request(port, "GET", "/health")[0] == 200
        rss0 = rss_kb(demo.pid)
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            statuses = list(ex.map(lambda _: request(port, "GET", "/health")[0], range(n_req)))
        assert statuses.count(200) == n_req, statuses[:10]
        rss1 = rss_kb(demo.pid)
        print("backend down: %d requests served, RSS %d -> %d kB, threads %s" % (
            n_req, rss0, rss1, sorted(set(threads_of(demo.pid)))))
        # The segment queue holds at most 1000 small segments (~1 kB each): far below 16 MB.
        assert rss1 - rss0 < 16 * 1024, (rss0, rss1)
        names = threads_of(demo.pid)
        assert names.count("skp-channel") == 1 and "skp-sampler" not in names, names

        # The backend comes up on the configured port: the agent connects by itself.
        srv, api = start_skyprofd_api(tmp, grpc_port)
        try:
            def registered():
                _, inst = http_json("GET", api + "/services/%s/instances" % service)
                return inst
            wait_until(registered, timeout=60, interval=0.2, what="agent registered after backoff")
            status, created = http_json("POST", api + "/profile/tasks", {
                "service": service, "endpointName": "/", "duration": 1,
                "minDurationThreshold": 0, "dumpPeriod": 10, "maxSamplingCount": 5})
            assert status in (200, 201), created
            task_id = created["id"]

            def notified():
                _, logs = http_json("GET", api + "/profile/tasks/%s/logs" % task_id)
                return any(l.get("operationType") == "NOTIFIED" for l in logs)
            wait_until(notified, timeout=30, interval=0.2, what="task NOTIFIED")
            wait_until(lambda: "skp-sampler" in threads_of(demo.pid), timeout=10,
                       what="skp-sampler running while the task is active")

            def profiled():
                with concurrent.futures.ThreadPoolExecutor(2) as ex:
                    for st, body in ex.map(lambda _: request(port), range(2)):
                        assert st == 200, (st, body)
                _, segs = http_json("GET", api + "/profile/tasks/%s/segments" % task_id)
                for seg in segs:
                    if not seg.get("spans"):
                        continue
                    start = seg["start"]
                    _, a = http_json("POST", api + "/profile/analyze", [
                        {"segmentId": seg["segmentId"],
                         "timeRange": {"start": start, "end": start + max(seg["duration"], 1)}}])
                    for tree in a.get("trees") or []:
                        if has_chain(tree["elements"]):
                            return seg
                return None
            seg = wait_until(profiled, timeout=60, interval=0.1,
                             what="handle_seed_request -> method3 -> method2 -> method1")
            print("profiled segment %s (%d ms)" % (seg["segmentId"], seg["duration"]))
            names = threads_of(demo.pid)
            assert names.count("skp-channel") == 1 and names.count("skp-sampler") == 1, names
        finally:
            srv.stop(expect_rc=None)
            check_sanitizer_clean(srv)
    check_sanitizer_clean(demo)


def run_fork(tmp, mode):
    srv, api = start_skyprofd_api(tmp, 0, name="skyprofd-fork-" + mode)
    grpc_port = srv.grpc_port
    service = "agent-fork-" + mode
    try:
        env = {"SW_AGENT_NAME": service,
               "SW_AGENT_COLLECTOR_BACKEND_SERVICES": "127.0.0.1:%d" % grpc_port,
               "SW_AGENT_COLLECTOR_HEARTBEAT_PERIOD": "1"}
        app = Proc([FORK_APP, mode], env=env, name="fork-" + mode)
        rc = app.p.wait(120)
        out = app.output()
        print(out)
        assert rc == 0, out
        parent = re.search(r"parent instance: (\S+)", out).group(1)
        m = re.search(r"child threads: (\d+) channel: (\d+)", out)
        assert m, out
        if mode != "auto":
            assert m.group(1) == "1" and m.group(2) == "0", out
        if mode == "off":
            assert "child tracing: off" in out, out
            return
        child = re.search(r"child instance: (\S+)", out).group(1)
        assert child != parent
        assert "child heartbeat: ok" in out, out

        def both_registered():
            _, inst = http_json("GET", api + "/services/%s/instances" % service)
            text = json.dumps(inst)
            return parent in text and child in text
        wait_until(both_registered, timeout=20, interval=0.2,
                   what="parent and child registered as two instances")
        check_sanitizer_clean(app)
    finally:
        srv.stop(expect_rc=None)
        check_sanitizer_clean(srv)


def main():
    r = Results()
    with tempdir() as tmp:
        r.run("backend down then up, profiled demo", test_backend_down_then_up, tmp)
        for mode in ("off", "restart", "auto"):
            r.run("fork child (%s)" % mode, run_fork, tmp, mode)
    r.finish()


if __name__ == "__main__":
    main()
