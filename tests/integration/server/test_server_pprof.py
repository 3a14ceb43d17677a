"""skyprofd's process profiling (pprof tasks, issue 10), end to end against the real daemon with
Debian's grpcio and stubs generated from our proto/profile/Pprof.proto:
tasks over HTTP (OAP's validation texts in order, our events, all-live instances, overlap),
getPprofTaskCommands (the PprofTaskQuery args, NOTIFIED logs, lastCommandTime cursor, only the
listed instances), collect (metadata first and the answer before any content, SUCCESS +
chunks -> stored file + EXECUTION_FINISHED, TERMINATED_BY_OVERSIZE against --pprof-max-bytes,
error uploads as logs, a stream that ends early or breaks stores nothing and says so, unknown
task), analysis (value-weighted trees per sample type, sparse ids, inlined lines, instance
filter, corrupt files reported), downloads (stored file byte-exact, merged pprof read back by
`go tool pprof -top`), a real producer (a Go program writing runtime/pprof CPU and heap
profiles), and files surviving a restart.
"""
import gzip
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402

from skp_harness import Results, tempdir, wait_until  # noqa: E402
from skyprofd_util import Command_pb2, Management_pb2, Skyprofd, args_of  # noqa: E402
from profile import Pprof_pb2  # noqa: E402
from pprof_util import Profile, sample_profile  # noqa: E402

S = None
R = Results()
V10 = "/skywalking.v10.PprofTask/"
HERE = os.path.dirname(os.path.abspath(__file__))
MAX_BYTES = 200000  # the shared server's --pprof-max-bytes


def q(s):
    return urllib.parse.quote(s, safe="")


def create(service, events="cpu", instances=("inst-a", "inst-b"), duration=1, dump=None, expect=201, **extra):
    body = {"service": service, "events": events, "duration": duration}
    if instances is not None:
        body["serviceInstanceIds"] = list(instances)
    if dump is not None:
        body["dumpPeriod"] = dump
    body.update(extra)
    st, doc = S.json("POST", "/api/v1/pprof/tasks", body)
    assert st == expect, (st, doc)
    return doc


def query(service, instance, last=-1, server=None):
    s = server or S
    return s.unary(V10 + "getPprofTaskCommands", Pprof_pb2.PprofTaskCommandQuery(
        service=service, serviceInstance=instance, lastCommandTime=last))


def get_task(tid, server=None):
    return (server or S).json("GET", "/api/v1/pprof/tasks/" + q(tid), expect=200)[1]


class Upload:
    """A collect stream driven step by step: send(), then read the server's answers."""

    def __init__(self, server=None, timeout=60):
        s = server or S
        self.q = queue.Queue()
        call = s.channel().stream_stream(
            V10 + "collect", request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=Pprof_pb2.PprofCollectionResponse.FromString)
        self.responses = call(self._gen(), timeout=timeout)

    def _gen(self):
        while True:
            m = self.q.get()
            if m is None:
                return
            yield m

    def send(self, msg):
        self.q.put(msg)

    def close(self):
        self.q.put(None)

    def next(self):
        return next(self.responses)

    def rest(self):
        """Remaining answers and the final status code."""
        out = []
        try:
            for r in self.responses:
                out.append(r)
            return out, grpc.StatusCode.OK
        except grpc.RpcError as e:
            return out, e.code()


def meta(task, instance, size, typ=Pprof_pb2.PPROF_PROFILING_SUCCESS, service="svc"):
    return Pprof_pb2.PprofData(metadata=Pprof_pb2.PprofMetaData(
        service=service, serviceInstance=instance, taskId=task, type=typ, contentSize=size))


def upload(task, instance, data, chunk=65536, server=None, service="svc"):
    """Uploads as the Go agent does: metadata, wait for SUCCESS, chunks, half-close."""
    u = Upload(server)
    u.send(meta(task, instance, len(data), service=service))
    first = u.next()
    assert first.status == Pprof_pb2.PPROF_PROFILING_SUCCESS, first
    for i in range(0, len(data), chunk):
        u.send(Pprof_pb2.PprofData(content=data[i:i + chunk]))
    u.close()
    rest, code = u.rest()
    assert code == grpc.StatusCode.OK and rest == [], (rest, code)


def ops(task):
    return [(l["instanceName"], l["operationType"]) for l in task["logs"]]


# ------------------------------------------------------------------ tasks

def t_validation():
    base = {"service": "svc-v", "events": "cpu", "duration": 1, "serviceInstanceIds": ["i"]}
    cases = [
        ({"service": None}, "service cannot be null"),
        ({"service": ""}, "service cannot be null"),
        ({"events": []}, "events cannot be empty"),
        ({"events": None}, "events cannot be empty"),
        ({"duration": 0}, "duration cannot be negative"),
        ({"duration": -3}, "duration cannot be negative"),
        ({"duration": 16}, "duration cannot be greater than 15 minutes"),
        ({"events": "block", "dumpPeriod": 0}, "dumpPeriod cannot be negative"),
        ({"events": "mutex"}, "dumpPeriod cannot be negative"),
        ({"events": ["cpu", "heap"]}, "a pprof task takes exactly one event"),
        ({"events": "itimer"}, "unknown event"),
        ({"samplingRate": 5000}, "samplingRate must be between 1 and 1000"),
        ({"serviceInstanceIds": [""]}, "serviceInstanceIds must be non-empty"),
        # OAP's order: service before events before duration.
        ({"service": None, "events": [], "duration": 0}, "service cannot be null"),
        ({"events": [], "duration": 0}, "events cannot be empty"),
    ]
    for change, text in cases:
        body = dict(base)
        body.update(change)
        st, doc = S.json("POST", "/api/v1/pprof/tasks", body)
        assert st == 400 and doc["errorReason"].startswith(text), (change, st, doc)
    # A dump event needs no duration; wall is ours.
    for ev in ("heap", "allocs", "goroutine", "threadcreate", "wall"):
        create("svc-v-" + ev, events=ev, duration=0 if ev != "wall" else 1)
    st, doc = S.json("POST", "/api/v1/pprof/tasks", "not json")
    assert st == 400, doc
    st, doc = S.json("POST", "/api/v1/pprof/tasks", {"service": "x", "events": 5})
    assert st == 400 and doc["field"] == "events", doc


def t_overlap_and_all_live():
    tid = create("svc-o", events="cpu", duration=2)["id"]
    st, doc = S.json("POST", "/api/v1/pprof/tasks", {"service": "svc-o", "events": "cpu", "duration": 1,
                                                     "serviceInstanceIds": ["x"]})
    assert st == 400 and doc["errorReason"] == \
        "current service already has monitor pprof task execute at this time", doc
    create("svc-o", events="heap", duration=0)  # another event does not clash
    # No instance named: every live instance; none alive -> OAP's text.
    st, doc = S.json("POST", "/api/v1/pprof/tasks", {"service": "svc-live", "events": "cpu", "duration": 1})
    assert st == 400 and doc["errorReason"] == "serviceInstanceIds cannot be empty", doc
    for inst in ("live-1", "live-2"):
        S.unary("/skywalking.v3.ManagementService/keepAlive", Management_pb2.InstancePingPkg(
            service="svc-live", serviceInstance=inst))
    tid2 = create("svc-live", events="cpu", instances=None)["id"]
    t = get_task(tid2)
    assert t["serviceInstanceIds"] == ["live-1", "live-2"] and t["allLiveInstances"] is True, t
    assert [p["state"] for p in t["progress"]] == ["waiting", "waiting"], t
    st, lst = S.json("GET", "/api/v1/pprof/tasks?service=svc-o", expect=200)
    assert tid in [x["id"] for x in lst] and len(lst) == 2, lst
    S.json("GET", "/api/v1/pprof/tasks/nope", expect=404)
    st, _ = S.json("DELETE", "/api/v1/pprof/tasks")
    assert st == 405


# ------------------------------------------------------------------ commands

def t_commands_cursor_notified():
    tid = create("svc-q", events="block", duration=3, dump=1000, samplingRate=100)["id"]
    ct = int(tid.split("_")[0])
    cmds = query("svc-q", "inst-a")
    assert len(cmds.commands) == 1 and cmds.commands[0].command == "PprofTaskQuery", cmds
    a = args_of(cmds.commands[0])
    assert a["TaskId"] == tid and a["Events"] == "block" and a["Duration"] == "3", a
    assert a["CreateTime"] == str(ct) and a["DumpPeriod"] == "1000" and a["SamplingRate"] == "100", a
    assert re.match(r"^[0-9a-f-]{36}$", a["SerialNumber"]), a
    assert args_of(query("svc-q", "inst-a").commands[0])["SerialNumber"] != a["SerialNumber"]
    # The cursor: nothing newer than the task's create time.
    assert len(query("svc-q", "inst-a", last=ct).commands) == 0
    # Only listed instances get it; other services do not.
    assert len(query("svc-q", "inst-z").commands) == 0
    assert len(query("svc-other", "inst-a").commands) == 0
    t = get_task(tid)
    assert ops(t) == [("inst-a", "NOTIFIED")], t  # once per instance, however often it polls
    prog = {p["instanceName"]: p for p in t["progress"]}
    assert prog["inst-a"]["state"] == "notified" and prog["inst-b"]["state"] == "waiting", prog
    # The earliest task after the cursor comes first; then the next one.
    tid2 = create("svc-q", events="heap", duration=0)["id"]
    assert args_of(query("svc-q", "inst-b").commands[0])["TaskId"] == tid
    assert args_of(query("svc-q", "inst-b", last=ct).commands[0])["TaskId"] == tid2
    # No instance name: INVALID_ARGUMENT.
    try:
        query("svc-q", "")
        raise AssertionError("expected INVALID_ARGUMENT")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
    # Compat path without the package.
    r = S.unary("/PprofTask/getPprofTaskCommands", Pprof_pb2.PprofTaskCommandQuery(
        service="svc-q", serviceInstance="inst-a", lastCommandTime=-1))
    assert len(r.commands) == 1


# ------------------------------------------------------------------ collect

def t_collect_metadata_first():
    tid = create("svc-c", events="cpu")["id"]
    data = sample_profile().gz()
    u = Upload()
    u.send(meta(tid, "inst-a", len(data), service="svc-c"))
    # The answer arrives before any content was sent.
    first = u.next()
    assert first.status == Pprof_pb2.PPROF_PROFILING_SUCCESS, first
    half = len(data) // 2
    u.send(Pprof_pb2.PprofData(content=data[:half]))
    u.send(Pprof_pb2.PprofData(content=data[half:]))
    u.close()
    rest, code = u.rest()
    assert code == grpc.StatusCode.OK and rest == [], (rest, code)
    t = get_task(tid)
    assert ops(t) == [("inst-a", "EXECUTION_FINISHED")], t
    assert [(f["instanceName"], f["size"]) for f in t["files"]] == [("inst-a", len(data))], t
    prog = {p["instanceName"]: p for p in t["progress"]}
    assert prog["inst-a"]["state"] == "uploaded" and prog["inst-a"]["uploadedTime"] > 0, prog
    st, hdrs, body = S.http("GET", "/api/v1/pprof/tasks/%s/files/%d" % (q(tid), t["files"][0]["id"]))
    assert st == 200 and body == data, (st, len(body))
    assert "attachment" in hdrs["content-disposition"], hdrs
    S.json("GET", "/api/v1/pprof/tasks/%s/files/999999" % q(tid), expect=404)
    S.json("GET", "/api/v1/pprof/tasks/%s/files/abc" % q(tid), expect=404)


def t_collect_large(d):
    """Issue 25: a file of the largest size (30 MiB) was written in one statement on the event
    loop: 0.1-0.4 s of stalled loop, and on PostgreSQL past --db-stall-ms, so the upload failed
    (UNAVAILABLE, nothing stored). Now it is written a 256 KiB piece per transaction and loop
    turn, answered after the last, listed once complete, and read back byte for byte."""
    B = Skyprofd(os.path.join(d, "large"), log_level="warn")
    try:
        B.unary("/skywalking.v3.ManagementService/keepAlive", Management_pb2.InstancePingPkg(
            service="svc-l", serviceInstance="inst-l"))
        st, doc = B.json("POST", "/api/v1/pprof/tasks", {
            "service": "svc-l", "events": "cpu", "duration": 1, "serviceInstanceIds": ["inst-l"]})
        assert st == 201, (st, doc)
        tid = doc["id"]
        data = os.urandom(30 << 20)
        upload(tid, "inst-l", data, chunk=1 << 20, server=B, service="svc-l")
        t = get_task(tid, server=B)
        assert [(f["instanceName"], f["size"]) for f in t["files"]] == [("inst-l", len(data))], t
        assert ops(t) == [("inst-l", "EXECUTION_FINISHED")], t
        st, _, body = B.http("GET", "/api/v1/pprof/tasks/%s/files/%d" % (q(tid), t["files"][0]["id"]),
                             timeout=120)
        assert st == 200 and body == data, (st, len(body))
        assert B.sql_rows("SELECT count(*) FROM proc_file_pieces")[0][0] == 120
    finally:
        B.stop()


def t_collect_oversize():
    tid = create("svc-big", events="cpu")["id"]
    u = Upload()
    u.send(meta(tid, "inst-a", MAX_BYTES + 1, service="svc-big"))
    assert u.next().status == Pprof_pb2.PPROF_TERMINATED_BY_OVERSIZE
    u.close()
    rest, code = u.rest()
    assert code == grpc.StatusCode.OK and rest == [], (rest, code)
    # Exactly the limit is fine.
    u = Upload()
    u.send(meta(tid, "inst-b", MAX_BYTES, service="svc-big"))
    assert u.next().status == Pprof_pb2.PPROF_PROFILING_SUCCESS
    u.send(Pprof_pb2.PprofData(content=b"\0" * MAX_BYTES))
    u.close()
    assert u.rest() == ([], grpc.StatusCode.OK)
    # More content than declared: refused, nothing stored.
    u = Upload()
    u.send(meta(tid, "inst-c", 10, service="svc-big"))
    assert u.next().status == Pprof_pb2.PPROF_PROFILING_SUCCESS
    u.send(Pprof_pb2.PprofData(content=b"x" * 11))
    u.close()
    rest, code = u.rest()
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, code
    t = get_task(tid)
    o = ops(t)
    assert ("inst-a", "PPROF_UPLOAD_FILE_TOO_LARGE_ERROR") in o and ("inst-b", "EXECUTION_FINISHED") in o, o
    assert ("inst-c", "UPLOAD_INCOMPLETE") in o, o
    msg = [l for l in t["logs"] if l["instanceName"] == "inst-a"][0]["message"]
    assert str(MAX_BYTES + 1) in msg and str(MAX_BYTES) in msg, msg
    assert [f["instanceName"] for f in t["files"]] == ["inst-b"], t["files"]
    prog = {p["instanceName"]: p for p in t["progress"]}
    assert prog["inst-a"]["state"] == "failed" and \
        prog["inst-a"]["failedOperation"] == "PPROF_UPLOAD_FILE_TOO_LARGE_ERROR", prog


def t_collect_early_end_and_break():
    tid = create("svc-early", events="cpu")["id"]
    u = Upload()
    u.send(meta(tid, "inst-a", 1000, service="svc-early"))
    assert u.next().status == Pprof_pb2.PPROF_PROFILING_SUCCESS
    u.send(Pprof_pb2.PprofData(content=b"y" * 400))
    u.close()
    rest, code = u.rest()
    assert code == grpc.StatusCode.INVALID_ARGUMENT, code
    # A client that cancels mid-file.
    u = Upload()
    u.send(meta(tid, "inst-b", 1000, service="svc-early"))
    assert u.next().status == Pprof_pb2.PPROF_PROFILING_SUCCESS
    u.send(Pprof_pb2.PprofData(content=b"y" * 300))
    u.responses.cancel()
    wait_until(lambda: ("inst-b", "UPLOAD_INCOMPLETE") in ops(get_task(tid)), 30,
               what="UPLOAD_INCOMPLETE log of the broken stream")
    t = get_task(tid)
    assert t["files"] == [], t
    msgs = {l["instanceName"]: l["message"] for l in t["logs"]}
    assert "after 400 of 1000 bytes; nothing stored" in msgs["inst-a"], msgs
    assert "nothing stored" in msgs["inst-b"], msgs
    # A stream without metadata.
    u = Upload()
    u.send(Pprof_pb2.PprofData(content=b"zz"))
    u.close()
    assert u.rest()[1] == grpc.StatusCode.INVALID_ARGUMENT


def t_collect_error_and_unknown():
    tid = create("svc-err", events="heap", duration=0)["id"]
    u = Upload()
    m = meta(tid, "inst-a", 0, typ=Pprof_pb2.PPROF_EXECUTION_TASK_ERROR, service="svc-err")
    m.errorMessage = "heap profiling is not available: tracemalloc disabled"
    u.send(m)
    assert u.next().status == Pprof_pb2.PPROF_EXECUTION_TASK_ERROR
    u.close()
    assert u.rest() == ([], grpc.StatusCode.OK)
    t = get_task(tid)
    assert t["logs"][0]["operationType"] == "EXECUTION_TASK_ERROR", t
    assert t["logs"][0]["message"] == "heap profiling is not available: tracemalloc disabled", t
    prog = {p["instanceName"]: p for p in t["progress"]}
    assert prog["inst-a"]["state"] == "failed" and "tracemalloc" in prog["inst-a"]["failedReason"]
    u = Upload()
    u.send(meta("no-such-task", "inst-a", 10))
    u.close()
    assert u.rest()[1] == grpc.StatusCode.NOT_FOUND


# ------------------------------------------------------------------ analysis

def analyze(tid, **params):
    qs = urllib.parse.urlencode(params)
    return S.json("GET", "/api/v1/pprof/tasks/%s/analyze?%s" % (q(tid), qs), expect=200)[1]


def elements(doc):
    return [e for t in doc["trees"] for e in t["elements"]]


def by_function(doc):
    """Inclusive value per function name (frames 'name (file...)'), summed over nodes."""
    out = {}
    for e in elements(doc):
        name = e["codeSignature"].split(" (")[0]
        out[name] = out.get(name, 0) + int(e["duration"])
    return out


def t_analysis():
    tid = create("svc-an", events="cpu")["id"]
    p = sample_profile()
    upload(tid, "inst-a", p.gz(), service="svc-an")
    upload(tid, "inst-b", p.encode(packed=False, strings_first=True), service="svc-an")  # raw
    doc = analyze(tid)
    assert doc["sampleType"] == "cpu" and doc["unit"] == "nanoseconds", doc  # the last type
    assert doc["sampleTypes"] == ["samples/count", "cpu/nanoseconds"], doc
    assert doc["total"] == 2 * 40000000 and doc["errors"] == [], doc
    assert len(doc["files"]) == 2
    sigs = {e["codeSignature"]: e for e in elements(doc)}
    assert int(sigs["main (app.go:5)"]["duration"]) == 80000000, sigs
    # The inlined helper is a child of hot, weighted by value, self time at the leaf.
    hot, helper = sigs["hot (hot.go:22)"], sigs["helper (hot.go:33)"]
    assert int(hot["duration"]) == 60000000 and int(helper["duration"]) == 60000000, sigs
    assert helper["parentId"] == hot["id"] and int(helper["durationChildExcluded"]) == 60000000
    assert int(sigs["cold (cold.go:44)"]["duration"]) == 20000000
    # Sample type switch and instance filter.
    doc = analyze(tid, sampleType="samples", instances="inst-b")
    assert doc["total"] == 4 and [f["instanceName"] for f in doc["files"]] == ["inst-b"], doc
    doc = analyze(tid, sampleType="nope")
    assert doc["total"] == 0 and doc["filesWithoutSampleType"] == 2, doc
    doc = analyze(tid, granularity="functions")
    assert "hot (hot.go)" in {e["codeSignature"] for e in elements(doc)}, doc
    S.json("GET", "/api/v1/pprof/tasks/%s/analyze?granularity=x" % q(tid), expect=400)
    # A corrupt file is reported and the rest still merges.
    upload(tid, "inst-c", b"\x1f\x8b garbage", service="svc-an")
    doc = analyze(tid)
    assert len(doc["errors"]) == 1 and doc["errors"][0]["instanceName"] == "inst-c", doc
    assert "gzip" in doc["errors"][0]["error"] and doc["total"] == 80000000, doc
    # Downloads of the merged profile.
    for fmt, check in [("pprof", lambda b: b[:2] == b"\x1f\x8b"),
                       ("collapsed", lambda b: b"main (app.go:5);handler (app.go:12);hot (hot.go:22);"
                                               b"helper (hot.go:33) 30000000" in b),
                       ("speedscope", lambda b: json.loads(b)["profiles"][0]["unit"] == "nanoseconds"),
                       ("html", lambda b: b"<html" in b[:500].lower())]:
        st, hdrs, body = S.http("GET", "/api/v1/pprof/tasks/%s/download?format=%s&instances=inst-a" % (q(tid), fmt))
        assert st == 200 and check(body), (fmt, st, body[:300])
    S.json("GET", "/api/v1/pprof/tasks/%s/download?format=json" % q(tid), expect=400)
    S.json("GET", "/api/v1/pprof/tasks/nope/analyze", expect=404)
    return tid


def go_tool_top(path, *extra):
    env = dict(os.environ, HOME=os.environ.get("HOME", "/tmp"))
    out = subprocess.run(["go", "tool", "pprof", "-top", "-nodecount=50"] + list(extra) + [path],
                         capture_output=True,
                         text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout


def t_go_tool_reads_merged(tid, d):
    if not shutil.which("go"):
        raise AssertionError("go not installed (scripts/bootstrap installs golang-go)")
    st, _, body = S.http("GET", "/api/v1/pprof/tasks/%s/download?format=pprof" % q(tid))
    assert st == 200
    path = os.path.join(d, "merged.pb.gz")
    with open(path, "wb") as f:
        f.write(body)
    top = go_tool_top(path)
    assert "Type: cpu" in top, top
    # Function.name is the function alone; file and line are in their own fields (issue 15).
    assert re.search(r"\shelper$", top, re.M), top
    assert re.search(r"\shelper hot\.go:33$", go_tool_top(path, "-lines"), re.M), top


def cli(*args, expect=0):
    from skp_harness import build_path
    r = subprocess.run([build_path("src", "cli", "skyprof"), "--server", "http://127.0.0.1:%d" % S.http_port]
                       + list(args), capture_output=True, text=True, timeout=60)
    assert r.returncode == expect, (args, r.returncode, r.stdout, r.stderr)
    return r.stdout, r.stderr


def t_cli(tid, d):
    out, _ = cli("pprof", "create", "--service", "svc-cli", "--event", "heap", "--duration", "0",
                 "--instance", "c-1", "--instance", "c-2")
    new = out.strip()
    assert re.match(r"^\d{13}_", new), out
    out, _ = cli("pprof", "list", "--service", "svc-cli")
    assert new in out and "heap" in out and "0/2" in out, out
    out, _ = cli("pprof", "show", new)
    assert "c-1" in out and "waiting" in out and "(none yet)" in out, out
    _, err = cli("pprof", "create", "--service", "svc-cli", "--event", "cpu", "--duration", "99", expect=1)
    assert "duration cannot be greater than 15 minutes" in err, err
    out, _ = cli("pprof", "show", tid)
    assert "uploaded" in out and "inst-a" in out and "#" in out, out
    out, _ = cli("pprof", "analyze", tid, "--instances", "inst-a", "--functions")
    assert "sample type cpu (nanoseconds)" in out and "helper  hot.go" in out, out
    out, _ = cli("--json", "pprof", "analyze", tid, "--sample-type", "samples")
    assert json.loads(out)["sampleType"] == "samples"
    path = os.path.join(d, "cli.collapsed")
    cli("pprof", "download", tid, "--format", "collapsed", "--instances", "inst-a", "-o", path)
    assert b"helper (hot.go:33) 30000000" in open(path, "rb").read()
    fid = get_task(tid)["files"][0]["id"]
    path = os.path.join(d, "cli.pb.gz")
    cli("pprof", "download", tid, "--file", str(fid), "-o", path)
    st, _, body = S.http("GET", "/api/v1/pprof/tasks/%s/files/%d" % (q(tid), fid))
    assert open(path, "rb").read() == body
    cli("pprof", "show", "nope", expect=4)
    cli("pprof", "frobnicate", expect=2)


def build_go_producer(d):
    exe = os.path.join(d, "pprofburn")
    env = dict(os.environ, GOCACHE=os.path.join(d, "gocache"), GOFLAGS="-mod=mod", CGO_ENABLED="0",
               HOME=d, GOPATH=os.path.join(d, "gopath"))
    r = subprocess.run(["go", "build", "-o", exe, "."], cwd=os.path.join(HERE, "pprof_go"), env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return exe


def t_go_producer(d):
    """A real pprof producer: Go's runtime/pprof (CPU: burnHeavy 3x burnLight; heap)."""
    if not shutil.which("go"):
        raise AssertionError("go not installed (scripts/bootstrap installs golang-go)")
    exe = build_go_producer(d)
    cpu, heap = os.path.join(d, "cpu.pprof"), os.path.join(d, "heap.pprof")
    r = subprocess.run([exe, "-cpu", cpu, "-heap", heap, "-seconds", "3"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    tcpu = create("svc-go", events="cpu", instances=["go-1"])["id"]
    theap = create("svc-go", events="heap", instances=["go-1"], duration=0)["id"]
    upload(tcpu, "go-1", open(cpu, "rb").read(), chunk=1 << 20, service="svc-go")
    upload(theap, "go-1", open(heap, "rb").read(), chunk=1 << 20, service="svc-go")

    doc = analyze(tcpu, granularity="functions")
    assert doc["sampleType"] == "cpu" and doc["unit"] == "nanoseconds", doc
    f = by_function(doc)
    heavy, light = f.get("main.burnHeavy", 0), f.get("main.burnLight", 0)
    assert heavy > 0 and light > 0, f
    # 3:1 by design, but the split is the Go runtime's sampling of a loaded machine (few samples,
    # a band failed under ctest -j2): only the order is asserted; the weights are checked exactly
    # against go tool pprof's reading of the same file below.
    assert heavy > light, f
    assert f["main.spin"] >= (heavy + light) * 0.95, f
    # Our weights equal Go's own reading of the same file (cum of each function, in ns).
    top = go_tool_top(cpu, "-unit=ns")
    m = re.search(r"(\d+)ns\s+\S+%\s+main\.burnHeavy$", top, re.M)
    assert m, top
    assert int(m.group(1)) == heavy, (m.group(0), heavy)

    doc = analyze(theap, granularity="functions")
    assert "inuse_space/bytes" in doc["sampleTypes"], doc
    doc = analyze(theap, sampleType="alloc_space", granularity="functions")
    f = by_function(doc)
    assert f.get("main.allocateBuffers", 0) >= 0.8 * doc["total"], (doc["total"], f)
    # `go tool pprof` reads what skyprofd serves back (stored file and merged profile).
    st, _, body = S.http("GET", "/api/v1/pprof/tasks/%s/download?format=pprof" % q(tcpu))
    path = os.path.join(d, "served.pb.gz")
    open(path, "wb").write(body)
    top = go_tool_top(path)
    assert "main.burnHeavy" in top and "main.burnLight" in top, top
    return tcpu


def t_restart(d, tid):
    global S
    S.stop()
    S = Skyprofd(d, "--pprof-max-bytes", str(MAX_BYTES))
    t = get_task(tid)
    assert len(t["files"]) == 1, t
    doc = analyze(tid, granularity="functions")
    assert by_function(doc).get("main.burnHeavy", 0) > 0, doc


def t_flags():
    from skyprofd_util import SKYPROFD
    r = subprocess.run([SKYPROFD, "--pprof-max-bytes", "0"], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "--pprof-max-bytes" in r.stderr, r.stderr
    r = subprocess.run([SKYPROFD, "--help"], capture_output=True, text=True, timeout=30)
    assert "--pprof-max-bytes" in r.stdout + r.stderr


def main():
    global S
    with tempdir() as d:
        S = Skyprofd(os.path.join(d, "data"), "--pprof-max-bytes", str(MAX_BYTES))
        try:
            R.run("validation texts", t_validation)
            R.run("overlap + all live instances", t_overlap_and_all_live)
            R.run("commands + cursor + NOTIFIED", t_commands_cursor_notified)
            R.run("collect: metadata first, stored, download", t_collect_metadata_first)
            R.run("collect: oversize", t_collect_oversize)
            R.run("collect: a 30 MiB file, stored in pieces", t_collect_large, d)
            R.run("collect: early end, broken stream", t_collect_early_end_and_break)
            R.run("collect: error upload, unknown task", t_collect_error_and_unknown)
            R.run("goProfileReport -> trace snapshots", t_go_profile_report)
            box = {}
            R.run("analysis + downloads", lambda: box.setdefault("an", t_analysis()))
            if "an" in box:
                R.run("go tool pprof reads the merged profile", t_go_tool_reads_merged, box["an"], d)
                R.run("skyprof pprof CLI", t_cli, box["an"], d)
            R.run("Go runtime/pprof producer", lambda: box.setdefault("go", t_go_producer(d)))
            if "go" in box:
                R.run("files survive a restart", t_restart, os.path.join(d, "data"), box["go"])
        finally:
            S.stop()
    R.run("flags", t_flags)
    R.finish()



# ------------------------------------------------------------------ goProfileReport

def t_go_profile_report():
    """A Go agent's trace profiling: one pprof in chunks, samples labelled by segment_id ->
    snapshots of the trace task, visible in the segment views."""
    st, doc = S.create_task("svc-gotrace", "/checkout", duration=5)
    assert st == 201, doc
    tid = doc["id"]
    p = Profile([("samples", "count"), ("cpu", "nanoseconds")], ("cpu", "nanoseconds"), 10000000)
    fm = p.function(1, "main.handler", "h.go")
    fd = p.function(2, "db.Query", "db.go")
    fj = p.function(3, "json.Marshal", "j.go")
    lm, ld, lj = p.location(1, [(fm, 7)]), p.location(2, [(fd, 70)]), p.location(3, [(fj, 9)])
    p.sample([ld, lm], [3, 30000000], [("segment_id", "seg-go-1"), ("trace_id", "t1"), ("span_id", "0")])
    p.sample([lj, lm], [1, 10000000], [("segment_id", "seg-go-1"), ("trace_id", "t1")])
    p.sample([lj, lm], [2, 20000000], [("segment_id", "seg-go-2"), ("trace_id", "t2")])
    p.sample([lj, lm], [5, 50000000])  # no segment: skipped
    data = p.gz()
    call = S.channel().stream_unary(
        "/skywalking.v3.ProfileTask/goProfileReport", request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=Command_pb2.Commands.FromString)
    from profile import Profile_pb2
    chunks = [data[i:i + 100] for i in range(0, len(data), 100)]
    msgs = [Profile_pb2.GoProfileData(taskId=tid, payload=c, isLast=(i == len(chunks) - 1))
            for i, c in enumerate(chunks)]
    call(iter(msgs), timeout=30)
    st, segs = S.json("GET", "/api/v1/profile/tasks/%s/segments" % q(tid), expect=200)
    ids = sorted(s["segmentId"] for s in segs)
    assert ids == ["seg-go-1", "seg-go-2"], segs
    st, an = S.json("GET", "/api/v1/profile/segments/seg-go-1/analyze", expect=200)
    sig = {e["codeSignature"]: int(e["count"]) for t in an["trees"] for e in t["elements"]}
    assert sig == {"main.handler (h.go:7)": 4, "db.Query (db.go:70)": 3, "json.Marshal (j.go:9)": 1}, sig
    # A corrupt file is refused with a reason.
    try:
        call(iter([Profile_pb2.GoProfileData(taskId=tid, payload=b"\x1f\x8bbad", isLast=True)]), timeout=30)
        raise AssertionError("expected INVALID_ARGUMENT")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "gzip" in e.details(), e


if __name__ == "__main__":
    main()
