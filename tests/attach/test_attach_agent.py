"""`skyprof attach`: a real /usr/bin/python3.11 target with NO agent inside it is registered with
the real skyprofd by `skyprof attach --pid P --service S --backend ...`; process-profiling tasks
created over skyprofd's HTTP API are answered by reading the target from outside:
- cpu: the uploaded profile's top function is the target's busy c() (>= 60 % flat), the sleeping
  thread is absent;
- wall: the sleeping thread's sleeper() is there too;
- goroutine: every Python thread once, with its name;
- continuous profiling: a PROCESS_CPU policy fires on the target's CPU %, the ON_CPU profile it
  starts shows c();
- the instance carries the target's pid ("Process No.") and language Python;
- attach exits by itself when the target exits.
Checked with the real `go tool pprof`. Timed tasks are shortened with SKYPROF_PROC_MAX_DURATION_MS
(the agents' test knob, read by the agent inside `skyprof attach`)."""
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse

from skp_harness import Proc, Results, SANITIZE, build_path, start_skyprofd, wait_until
from pprof_backend import go_pprof, pprof_top

CLI = os.environ.get("SKP_CLI") or build_path("src", "cli", "skyprof")
HERE = os.path.dirname(os.path.abspath(__file__))
SPIN = os.path.join(HERE, "apps", "spin_abc.py")
PY = "/usr/bin/python3.11"
SERVICE = "attached-py"
TASK_MS = 3000


def q(s):
    return urllib.parse.quote(s, safe="")


def run_task(S, event, tmp, duration=1, timeout=120):
    st, doc = S.json("POST", "/api/v1/pprof/tasks",
                     {"service": SERVICE, "events": event, "duration": duration})
    assert st == 201, (st, doc)
    tid = doc["id"]

    def uploaded():
        t = S.json("GET", "/api/v1/pprof/tasks/" + q(tid), expect=200)[1]
        states = [p.get("state") for p in t.get("progress", [])]
        if "failed" in states:
            raise AssertionError("task failed: %r" % t)
        return t if "uploaded" in states and t.get("files") else None
    t = wait_until(uploaded, timeout, interval=0.1, what="%s uploaded" % event)
    st, _, body = S.http("GET", "/api/v1/pprof/tasks/%s/files/%d" % (q(tid), t["files"][0]["id"]))
    assert st == 200, (st, body[:300])
    path = os.path.join(tmp, "attach-%s.pb.gz" % event)
    with open(path, "wb") as f:
        f.write(body)
    return path


def main():
    res = Results()
    tmp = tempfile.mkdtemp(prefix="skp-attach-agent-")
    S = start_skyprofd(tmp)
    stats = os.path.join(tmp, "stats")
    target = Proc([PY, SPIN, stats], name="spin_abc")
    att = None
    try:
        wait_until(lambda: os.path.exists(stats) and os.path.getsize(stats) == 16, 30,
                   what="the target's stats file")
        env = {"SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL": "1",
               "SKYPROF_PROC_MAX_DURATION_MS": str(TASK_MS)}
        att = Proc([CLI, "attach", "--pid", str(target.pid), "--service", SERVICE,
                    "--backend", S.grpc_target, "--verbose"], env=env, name="skyprof-attach")
        wait_until(lambda: "serving process-profiling tasks" in att.output() or not att.alive(),
                   60, what="attach started")
        assert att.alive(), att.output()

        def registered():
            st, doc = S.json("GET", "/api/v1/services/%s/instances" % q(SERVICE))
            return doc if st == 200 and doc else None
        inst = wait_until(registered, 60, interval=0.2, what="the attached instance")

        def instance_props():
            text = json.dumps(inst)
            assert str(target.pid) in text and "Python" in text, inst
        res.run("the instance is registered with the target's pid and language", instance_props)

        def cpu():
            path = run_task(S, "cpu", tmp)
            top, text = pprof_top(path, "cpu")
            best = max(top.items(), key=lambda kv: kv[1][0])[0] if top else None
            assert best == "c", (best, text)
            assert top["c"][0] >= 60.0, text
            assert "sleeper" not in top, text
            with open(path, "rb") as f:
                assert SPIN.encode() in gzip.decompress(f.read()), "no file names"
        res.run("cpu task: top function is the target's c() (>= 60 %), no sleeper", cpu)

        def wall():
            path = run_task(S, "wall", tmp)
            top, text = pprof_top(path)
            assert "c" in top and "sleeper" in top, text
        res.run("wall task: c() and the sleeping thread's sleeper()", wall)

        def dump():
            path = run_task(S, "goroutine", tmp, duration=0)
            tags = go_pprof(path, "-tags")
            assert "skp-sleeper" in tags, tags
            top, text = pprof_top(path)
            assert "sleeper" in top and "a" in top, text
        res.run("goroutine task: every Python thread with its name", dump)

        def continuous():
            # PROCESS_CPU of the TARGET (it spins one core: ~100 % on a quiet machine, far less
            # on a loaded one, hence the low threshold), read by attach from /proc/PID/stat; the
            # ON_CPU profile it triggers is taken from outside too. attach itself (the process
            # the agent runs in) uses ~0 % between tasks: a trigger can only come from the target.
            body = {"targets": [{"targetType": "ON_CPU", "checkItems": [
                        {"type": "PROCESS_CPU", "threshold": "5", "period": 4, "count": 2}]}],
                    "executeDuration": 3, "silenceDuration": 600}
            st, doc = S.json("PUT", "/api/v1/continuous/policies/" + q(SERVICE), body)
            assert st == 200, (st, doc)

            def trig():
                doc = S.json("GET", "/api/v1/profile/triggers?service=" + q(SERVICE),
                             expect=200)[1]
                return doc["triggers"] or None
            t = wait_until(trig, 90, interval=0.2, what="a PROCESS_CPU trigger")[0]
            cause = t["causes"][0]
            assert t["source"] == "agent" and cause["type"] == "PROCESS_CPU", t
            assert cause["current"] > 5, cause
            procs = wait_until(lambda: S.json("GET", "/api/v1/ebpf/processes?service=" +
                                              q(SERVICE), expect=200)[1], 30, interval=0.2,
                               what="the process registered")
            assert procs[0]["pid"] == target.pid, procs

            def analysed():
                st, doc = S.json("GET", "/api/v1/ebpf/tasks/%s/analyze" % q(t["taskId"]))
                return doc if st == 200 and doc.get("total") else None
            doc = wait_until(analysed, 90, interval=0.2, what="the triggered task's stacks")
            sigs = [e["codeSignature"] for tr in doc["trees"] for e in tr["elements"]]
            assert any(sig.startswith("c") and "spin_abc.py" in sig for sig in sigs), sigs[:20]
        res.run("continuous: PROCESS_CPU of the target fires, ON_CPU stacks show c()",
                continuous)

        def exits_with_target():
            target.stop()
            wait_until(lambda: not att.alive(), 30, what="attach to exit after the target")
            assert att.p.returncode == 0, att.output()
            assert "exited; detaching" in att.output(), att.output()
        res.run("attach detaches when the target exits", exits_with_target)
    finally:
        target.stop()
        if att:
            att.stop()
            out = att.output()
            assert "AddressSanitizer" not in out and "runtime error" not in out, out
            if res.failed:
                sys.stdout.write(out[-4000:])
        S.stop()
    res.finish()


if __name__ == "__main__":
    main()
