"""End-to-end test of native profiling: skyprofd + examples/demo_service (the SkyWalking seed
example in C). A profile task for endpoint "/" must yield, for one profiled request, the stack
tree handler -> method3 -> method2 -> method1 with durations close to 60/40/20 ms, for the
sleeping variant and for the CPU-burning variant.
"""
import concurrent.futures
import http.client
import json
import os
import re
import sys
import time
import urllib.request

from skp_harness import Proc, Results, build_path, check_sanitizer_clean, tempdir, wait_until

SKYPROFD = os.environ.get("SKP_SKYPROFD") or build_path("src", "server", "skyprofd")
DEMO = os.environ.get("SKP_DEMO_SERVICE") or build_path("examples", "demo_service")


def http_json(method, url, body=None, timeout=10):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, json.loads(r.read().decode() or "null")


def port_from(proc, pattern, what):
    def find():
        m = re.search(pattern, proc.output())
        return int(m.group(1)) if m else None
    return wait_until(find, timeout=20, what=what)


def post_seed(port, path="/"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("POST", path, body=b"{}", headers={"Content-Type": "application/json"})
        r = c.getresponse()
        body = r.read()
        assert r.status == 200, (r.status, body)
        assert b"Despacito" in body
    finally:
        c.close()


def fn_name(e):
    return e["codeSignature"].split(" (", 1)[0]


def find_chain(elements):
    """Checks that some method1 node hangs under method2 under method3 under the request handler
    and returns, per method, the sum over its nodes (code signatures carry the line, so a function
    appears once per call site, like Java's `Class.method:line`) of (duration, count)."""
    by_id = {e["id"]: e for e in elements}
    chained = False
    for e in elements:
        if fn_name(e) != "method1":
            continue
        m2 = by_id.get(e["parentId"])
        m3 = by_id.get(m2["parentId"]) if m2 else None
        top = by_id.get(m3["parentId"]) if m3 else None
        if m2 and m3 and top and fn_name(m2) == "method2" and fn_name(m3) == "method3" \
                and fn_name(top) == "handle_seed_request":
            chained = True
    if not chained:
        return None
    totals = {}
    for e in elements:
        name = fn_name(e)
        if name in ("method1", "method2", "method3"):
            d, c = totals.get(name, (0, 0))
            totals[name] = (d + e["duration"], c + e["count"])
    return totals


def profile_variant(tmp, mode):
    service = "demo-c" if mode == "sleep" else "demo-c-cpu"
    db = os.path.join(tmp, "skyprof-%s.db" % mode)
    with Proc([SKYPROFD, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--db", db],
              name="skyprofd-" + mode) as srv:
        grpc_port = port_from(srv, r"skyprofd: grpc listening on [0-9.]+:(\d+)", "skyprofd grpc port")
        http_port = port_from(srv, r"skyprofd: http listening on [0-9.]+:(\d+)", "skyprofd http port")
        api = "http://127.0.0.1:%d/api/v1" % http_port
        env = {
            "SW_AGENT_NAME": service,
            "SW_AGENT_COLLECTOR_BACKEND_SERVICES": "127.0.0.1:%d" % grpc_port,
            "SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL": "1",
            "SKYPROF_LOG_LEVEL": "info",
            # The agent core stops sampling a request after one lost sample; on a test machine
            # loaded by parallel builds give preempted threads time to answer.
            "SKYPROF_NATIVE_TIMEOUT_MS": "2000",
        }
        with Proc([DEMO, "--port", "0", "--mode", mode], env=env, name="demo-" + mode) as demo:
            port = port_from(demo, r"demo_service: listening on [0-9.]+:(\d+)", "demo port")
            status, created = http_json("POST", api + "/profile/tasks", {
                "service": service, "endpointName": "/", "duration": 1,
                "minDurationThreshold": 0, "dumpPeriod": 10, "maxSamplingCount": 5})
            assert status in (200, 201), (status, created)
            task_id = created["id"]

            def notified():
                _, logs = http_json("GET", api + "/profile/tasks/%s/logs" % task_id)
                return any(l.get("operationType") == "NOTIFIED" for l in logs)
            wait_until(notified, timeout=30, interval=0.2, what="task NOTIFIED to the agent")
            # The agent schedules the task right after receiving it; a request arriving before
            # the task is active is simply not profiled, so keep sending until segments show up.
            # Sleeping requests overlap freely; CPU-burning ones are sent one at a time so that
            # the 2-core test machine is not oversubscribed (a preempted thread answers the
            # sampling signal only when it runs again, which stretches the dump period).
            parallel = 3 if mode == "sleep" else 1
            def profiled_segment():
                with concurrent.futures.ThreadPoolExecutor(parallel) as ex:
                    list(ex.map(lambda _: post_seed(port), range(parallel)))
                _, segs = http_json("GET", api + "/profile/tasks/%s/segments" % task_id)
                return [s for s in segs if s.get("spans")] or None
            segs = wait_until(profiled_segment, timeout=60, interval=0.1,
                              what="a profiled segment with its spans")
            results = []
            for seg in segs:
                start = seg["start"]
                end = start + max(seg["duration"], 1)
                _, analysis = http_json("POST", api + "/profile/analyze", [
                    {"segmentId": seg["segmentId"], "timeRange": {"start": start, "end": end}}])
                for tree in analysis.get("trees") or []:
                    chain = find_chain(tree["elements"])
                    if chain:
                        # The achieved dump spacing, from the root (present in every dump).
                        root = [e for e in tree["elements"] if e["parentId"] == 0][0]
                        chain["period"] = root["duration"] / max(root["count"] - 1, 1)
                        results.append(chain)
            if not results:
                raise AssertionError("no method3->method2->method1 chain in %d segments: %s" % (
                    len(segs), json.dumps(analysis)[:4000]))
            if os.environ.get("SKP_NATIVE_DEBUG"):
                print(json.dumps(segs[0], indent=1)[:3000])
                print(json.dumps(analysis, indent=1)[:12000])
            # One request's profile. Each method spends 20 ms itself: method3 60 ms in total, method2
            # 40, method1 20. count x period estimates that time; SkyWalking's duration (sum of
            # last-first dump time per run of consecutive dumps) undercounts by one period per
            # node, and each call site is its own node. Allow a period or two of sampling error.
            ok = []
            for t in results:
                period = t["period"]
                (d3, c3), (d2, c2), (d1, c1) = t["method3"], t["method2"], t["method1"]
                print("  %s: dump spacing %.1f ms; sampled time method3=%d ms method2=%d ms "
                      "method1=%d ms; durations %d/%d/%d ms" % (
                          mode, period, c3 * period, c2 * period, c1 * period, d3, d2, d1))
                ok.append(40 <= c3 * period <= 80 and 25 <= c2 * period <= 55 and 10 <= c1 * period <= 35
                          and d3 > d2 >= d1 > 0)
            assert any(ok), "times outside the expected ranges: %r" % results
            sigs = {e["codeSignature"] for tree in analysis["trees"] for e in tree["elements"]}
            assert any(re.match(r"method3 \(demo_service\.c:\d+\)$", s) for s in sigs), sorted(sigs)[:20]
        assert demo.p.returncode == 0, demo.output()[-3000:]
        check_sanitizer_clean(demo)
    check_sanitizer_clean(srv)


def main():
    res = Results()
    with tempdir() as tmp:
        res.run("sleeping variant: method3 -> method2 -> method1", profile_variant, tmp, "sleep")
        res.run("cpu variant: method3 -> method2 -> method1", profile_variant, tmp, "cpu")
    res.finish()


if __name__ == "__main__":
    main()
