"""The CLI a newcomer meets first (issue 26), against a real skyprofd fed over gRPC as agents
feed it: --help lists every command the CLI dispatches (read from src/cli/main.c); analysis with
no data exits 6 with a sentence and writes no file; an empty --segment (what `awk` gives on an
empty listing) is a usage error, not "no such API route"; `task create --wait` returns once an
instance fetched the task and otherwise names the instances and the poll interval; the tree
shows the UI's labels and folds the agent's and runpy's frames (--all-frames keeps them); profiles
an agent-side policy started (ON_CPU/OFF_CPU) are listed, shown, analysed with their unit and
downloaded; pprof and jfr analyses without a file exit 6 (--wait asks again); `pprof create
--duration 0` on a timed event says what is wrong."""
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("SKP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                                "tests", "integration", "server"))
from skp_harness import SOURCE_DIR, Results, build_path, tempdir, wait_until  # noqa: E402
from skyprofd_util import V3, Common_pb2, Management_pb2, Skyprofd, snap  # noqa: E402
from ebpf.profiling import ContinuousProfiling_pb2 as CP  # noqa: E402
from ebpf.profiling import Profile_pb2 as EP  # noqa: E402

CLI = os.environ.get("SKP_CLI") or build_path("src", "cli", "skyprof")
S = None
R = Results()
T0 = int(time.time() * 1000) - 60000


def run(*args, timeout=60):
    e = dict(os.environ, COLUMNS="120")
    e.pop("SKYPROF_SERVER", None)
    p = subprocess.run([CLI, "--server", "http://127.0.0.1:%d" % S.http_port] + list(args),
                       capture_output=True, env=e, timeout=timeout)
    err = p.stderr.decode(errors="replace")
    assert "AddressSanitizer" not in err and "runtime error" not in err, err
    return p.returncode, p.stdout.decode(errors="replace"), err


def expect(rc, *args, **kw):
    got, out, err = run(*args, **kw)
    assert got == rc, "skyprof %s -> %d (want %d)\nstdout:%s\nstderr:%s" % (" ".join(args), got, rc, out, err)
    return out, err


def register(service, instance):
    S.unary(V3 + "ManagementService/reportInstanceProperties", Management_pb2.InstanceProperties(
        service=service, serviceInstance=instance, layer="GENERAL",
        properties=[Common_pb2.KeyStringValuePair(key="language", value="python")]))


def t_help_lists_every_command():
    src = open(os.path.join(SOURCE_DIR, "src", "cli", "main.c")).read()
    table = src[src.index("g_commands[] = {"):]
    table = table[:table.index("};")]
    names = re.findall(r'\{"([a-z]+)", cmd_', table)
    assert len(names) >= 15 and "compare" in names and "ebpf" in names, names
    out, _ = expect(0, "--help")
    for n in names:
        if n == "tasks":        # an alias of task
            continue
        assert re.search(r"^  %s\b" % n, out, re.M), (n, out)
        h, _ = expect(0, n, "--help")
        assert "Usage" in h or "usage" in h, (n, h)
    for sub in ("task create", "task cancel", "ebpf list", "--wait", "--all-frames", "6 no data"):
        assert sub in out, (sub, out)


def t_no_data_is_an_error():
    tid = expect(0, "task", "create", "--service", "svc-empty", "--endpoint", "/x")[0].strip()
    out, err = expect(6, "analyze", "--task", tid)
    assert not out and "no profile data for task %s" % tid in err and "--wait" in err, err
    out, err = expect(6, "analyze", "--segment", "nope")
    assert "no profile data for segment nope: Data not found" in err, err
    with tempdir() as d:
        path = os.path.join(d, "p.speedscope.json")
        out, err = expect(6, "analyze", "--task", tid, "--format", "speedscope", "-o", path)
        assert not os.path.exists(path), "an empty profile was written"
        # --json prints the analysis (for scripts) and still says there was nothing
        out, err = expect(6, "--json", "analyze", "--task", tid)
        assert json.loads(out)["trees"] == [], out
    # cli.md's old example: seg=$(... | awk 'NR==2 {print $1}') on an empty listing
    out, err = expect(2, "analyze", "--segment", "")
    assert "empty id" in err and "segments TASK" in err and "API route" not in err, err
    # --wait S asks again until S seconds passed
    t = time.monotonic()
    expect(6, "analyze", "--task", tid, "--wait", "2")
    assert time.monotonic() - t >= 1.9
    expect(0, "task", "cancel", tid)


def t_wait_for_notified():
    # no instance at all: exit 6, said why
    out, err = expect(6, "task", "create", "--service", "svc-wait", "--endpoint", "/w",
                      "--wait-timeout", "1")
    tid = out.strip()
    assert re.match(r"^\S+$", tid), out
    assert "no instance of svc-wait fetched task %s within 1 s" % tid in err, err
    assert "has registered with this server" in err and "SW_AGENT_COLLECTOR_BACKEND_SERVICES" in err, err
    expect(0, "task", "cancel", tid)
    # an instance that registered but does not poll: named with its heartbeat and the interval
    register("svc-wait", "inst-quiet")
    out, err = expect(6, "task", "create", "--service", "svc-wait", "--endpoint", "/w",
                      "--wait-timeout", "1")
    assert "inst-quiet" in err and "last heartbeat" in err, err
    assert "SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL" in err and "20 by default" in err, err
    expect(0, "task", "cancel", out.strip())
    # an instance that polls: --wait returns 0 once it fetched the task
    e = dict(os.environ)
    p = subprocess.Popen([CLI, "--server", "http://127.0.0.1:%d" % S.http_port, "task", "create",
                          "--service", "svc-wait", "--endpoint", "/w", "--wait", "--wait-timeout", "30"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
    try:
        tid = p.stdout.readline().decode().strip()       # the id comes first, before the wait
        assert re.match(r"^\S+$", tid), tid
        assert p.poll() is None, "returned before any instance fetched the task"
        cmds = S.query("svc-wait", "inst-poller", last=0)
        assert len(cmds.commands) == 1, cmds
        rc = p.wait(timeout=30)
        err = p.stderr.read().decode()
        assert rc == 0, (rc, err)
        assert "inst-poller fetched the task" in err, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()
        p.stderr.close()


RUNPY = "<frozen runpy>._run_module_as_main: 198"
MAIN = "/srv/venv/lib/python3.11/site-packages/skyprof/__main__.py.<module>: 12"
APP = "/srv/app/seed_app.py.<module>: 60"
DO = "/srv/venv/lib/python3.11/site-packages/skyprof/instrument/http_server.py._skyprof_do: 34"
POST = "/srv/app/seed_app.py.do_POST: 44"
M3 = "/srv/app/seed_app.py.method3: 28"
SEND = "/usr/lib/python3.11/http/server.py.send_response: 500"


def t_tree_labels_and_hidden_frames():
    tid = expect(0, "task", "create", "--service", "svc-tree", "--endpoint", "/")[0].strip()
    stacks = [[RUNPY, MAIN, APP, DO, POST, M3]] * 3 + [[RUNPY, MAIN, APP, DO, POST, SEND]]
    S.snapshots([snap(tid, "seg-T", i, st, T0 + i * 10) for i, st in enumerate(stacks)])
    out, _ = expect(0, "analyze", "--task", tid)
    body = [l for l in out.splitlines()[1:] if l and not l.startswith("(")]
    labels = [l[35:] for l in body]
    assert labels == ["<module>  seed_app.py:60", "  do_POST  seed_app.py:44",
                      "    method3  seed_app.py:28", "    send_response  server.py:500"], out
    assert "/srv/" not in out and "..." not in out, out
    assert "3 frame(s) of the agent and the runner folded" in out and "--all-frames" in out, out
    out, _ = expect(0, "analyze", "--task", tid, "--all-frames")
    assert "<frozen runpy>._run_module_as_main: 198" in out and "_skyprof_do  http_server.py:34" in out, out
    assert "<module>  __main__.py:12" in out and "folded" not in out, out
    expect(0, "task", "cancel", tid)


def t_ebpf_profiles():
    out, _ = expect(0, "ebpf", "list")
    assert "no profile was started by an agent-side policy" in out, out
    rep = CP.ContinuousProfilingReport(
        layer="GENERAL", serviceName="svc-bpf", instanceName="inst-b", processName="python3",
        duration=30, offCPU=CP.ContinuousOffCPUProfilingTask(),
        causes=[CP.ContinuousProfilingCause(type=CP.ProcessCPU, singleValue=CP.ContinuousProfilingSingleValueCause(
            threshold=50, current=87.5))])
    resp = S.unary(V3 + "ContinuousProfilingService/reportProfilingTask", rep)
    tid = [a.value for a in resp.commands[0].args if a.key == "TaskId"][0]
    out, _ = expect(0, "ebpf", "list", "--service", "svc-bpf")
    assert tid in out and "OFF_CPU" in out and "inst-b" in out and "triggered by PROCESS_CPU" in out, out
    out, _ = expect(0, "ebpf", "show", tid)
    assert "target:         OFF_CPU" in out and "uploads:        none yet" in out, out
    out, err = expect(6, "ebpf", "analyze", tid)
    assert "no profile data for profile %s" % tid in err, err
    # the agent uploads its off-CPU stacks (innermost first, as on the wire)
    st = EP.EBPFProfilingStackMetadata(stackType=EP.PROCESS_USER_SPACE, stackId=1,
                                       stackSymbols=["sleep", "wait_io (app.py:3)", "main (app.py:20)"])
    S.stream("/skywalking.v3.EBPFProfilingService/collectProfilingData", [EP.EBPFProfilingData(
        task=EP.EBPFProfilingTaskMetadata(taskId=tid, processId="p-1", currentTime=int(time.time() * 1000)),
        offCPU=EP.EBPFOffCPUProfiling(stacks=[st], switchCount=4, duration=400_000_000))])
    out, _ = expect(0, "ebpf", "show", tid)
    assert "400000000 nanoseconds (off_cpu)" in out and "process p-1" in out, out
    out, _ = expect(0, "ebpf", "analyze", tid)
    assert "TOTAL(ns)" in out and "SELF(ns)" in out and "DURATION(ms)" not in out, out
    assert re.search(r"^\s+400000000\s+0\s+\S+\s+main  app\.py:20$", out, re.M), out
    assert re.search(r"^\s+400000000\s+400000000\*\s+\S+\s+sleep$", out, re.M), out
    with tempdir() as d:
        path = os.path.join(d, "off.collapsed")
        expect(0, "ebpf", "download", tid, "--format", "collapsed", "-o", path)
        assert "main (app.py:20);wait_io (app.py:3);sleep 400000000" in open(path).read()
    out, _ = expect(0, "--json", "ebpf", "list")
    assert [t["taskId"] for t in json.loads(out)] == [tid], out


def t_process_profiles_without_files():
    register("svc-proc", "inst-p")
    S.unary(V3 + "ManagementService/keepAlive", Management_pb2.InstancePingPkg(
        service="svc-proc", serviceInstance="inst-p"))
    pid = expect(0, "pprof", "create", "--service", "svc-proc", "--event", "goroutine")[0].strip()
    out, err = expect(6, "pprof", "analyze", pid)
    assert "no profile data for pprof task %s" % pid in err and "pprof show" in err and not out, err
    t = time.monotonic()
    expect(6, "pprof", "analyze", pid, "--wait", "1")
    assert time.monotonic() - t >= 0.9
    jid = expect(0, "jfr", "create", "--service", "svc-proc", "--duration", "20", "--event", "cpu")[0].strip()
    out, err = expect(6, "jfr", "analyze", jid)
    assert "no profile data for async-profiler task %s" % jid in err and "jfr show" in err, err


def t_pprof_duration_zero():
    out, err = expect(2, "pprof", "create", "--service", "s", "--event", "cpu", "--duration", "0")
    assert "--duration is the sampling time of cpu in minutes: 1 to 15" in err, err


def main():
    global S
    with tempdir() as d:
        S = Skyprofd(d)
        try:
            R.run("--help lists every command", t_help_lists_every_command)
            R.run("no data: exit 6 with a sentence, no file", t_no_data_is_an_error)
            R.run("task create --wait", t_wait_for_notified)
            R.run("tree: the UI's labels, agent and runpy frames folded", t_tree_labels_and_hidden_frames)
            R.run("ebpf list/show/analyze/download", t_ebpf_profiles)
            R.run("pprof/jfr analyze without files: exit 6", t_process_profiles_without_files)
            R.run("pprof create --duration 0", t_pprof_duration_zero)
        finally:
            S.stop()
    R.finish()


if __name__ == "__main__":
    main()
