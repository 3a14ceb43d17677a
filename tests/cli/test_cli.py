"""Tests of the `skyprof` CLI against a real skyprofd fed over gRPC like an agent would
(management report, snapshots of the worked example of spec §5.6, a trace segment):
every subcommand's output, the export formats (pprof decoded by the independent npm
`pprof-format`, speedscope's required fields, collapsed totals, self-contained HTML), and the
exit codes scripts rely on (0 ok, 1 API error, 2 usage, 3 cannot connect, 4 not found)."""
import gzip
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("SKP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                                "tests", "integration", "server"))
from skp_harness import Results, build_path, free_port, tempdir  # noqa: E402
from skyprofd_util import (V3, Common_pb2, Management_pb2, Profile_pb2, Skyprofd, Tracing_pb2,  # noqa: E402
                           root_count, snap)

CLI = os.environ.get("SKP_CLI") or build_path("src", "cli", "skyprof")
WEB_DIR = os.environ.get("SKP_WEB_DIR") or os.path.join(os.environ.get("SKP_SOURCE_DIR", "."), "web")
TOKEN = "cli-test-token"
T0 = 1700000000000
# Spec §5.6's worked example: (seq, time offset, stack root->leaf).
EXAMPLE = [(0, 0, ["A", "B", "C"]), (1, 10, ["A", "B", "C"]), (2, 20, ["A", "B", "D"]),
           (3, 30, ["A", "B"]), (4, 40, ["A", "B", "C"])]

S = None
TID = None


def run(*args, env=None, token=True, server=True):
    cmd = [CLI]
    if server:
        cmd += ["--server", "http://127.0.0.1:%d" % S.http_port]
    cmd += list(args)
    e = dict(os.environ)
    e.pop("SKYPROF_SERVER", None)
    e.pop("SKYPROF_API_TOKEN", None)
    e["COLUMNS"] = "120"
    if token:
        e["SKYPROF_API_TOKEN"] = TOKEN
    if env:
        e.update(env)
    p = subprocess.run(cmd, capture_output=True, env=e, timeout=60)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def ok(*args, **kw):
    rc, out, err = run(*args, **kw)
    assert rc == 0, "skyprof %s -> %d\nstdout:%s\nstderr:%s" % (" ".join(args), rc, out, err)
    assert "AddressSanitizer" not in err and "runtime error" not in err, err
    return out


def expect_rc(want, *args, **kw):
    rc, out, err = run(*args, **kw)
    assert rc == want, "skyprof %s -> %d (want %d)\nstdout:%s\nstderr:%s" % (" ".join(args), rc, want, out, err)
    assert "AddressSanitizer" not in err and "runtime error" not in err, err
    return out, err


def setup_data():
    global TID
    md = Management_pb2
    S.unary(V3 + "ManagementService/reportInstanceProperties", md.InstanceProperties(
        service="svc-cli", serviceInstance="inst-1", layer="GENERAL",
        properties=[Common_pb2.KeyStringValuePair(key="language", value="c"),
                    Common_pb2.KeyStringValuePair(key="hostname", value="box-1")]))
    TID = ok("task", "create", "--service", "svc-cli", "--endpoint", "/pay", "--duration", "5",
             "--dump-period", "10").strip()
    assert re.match(r"^\S+$", TID), TID
    snaps = [snap(TID, "seg-A", s, st, T0 + t) for s, t, st in EXAMPLE]
    snaps += [snap(TID, "seg-B", s, ["X", "Y"], T0 + 5000 + s * 10) for s in range(3)]
    S.snapshots(snaps)
    seg = Tracing_pb2.SegmentObject(
        traceId="trace-1", traceSegmentId="seg-A", service="svc-cli", serviceInstance="inst-1",
        spans=[Tracing_pb2.SpanObject(spanId=0, parentSpanId=-1, startTime=T0, endTime=T0 + 60,
                                      operationName="/pay", spanType=Tracing_pb2.Entry,
                                      spanLayer=Tracing_pb2.Http, componentId=1)])
    S.stream(V3 + "TraceSegmentReportService/collect", [seg])


# ---- cases ----

def t_version_and_help():
    out = ok("--version", server=False)
    assert re.match(r"^skyprof \d+\.\d+\.\d+\n$", out), out
    out = ok("--help", server=False)
    for word in ("task create", "segments", "analyze", "services", "Exit codes"):
        assert word in out, out
    for cmd in (["task", "--help"], ["segments", "--help"], ["analyze", "--help"], ["services", "--help"],
                ["task", "create", "--help"]):
        out = ok(*cmd, server=False)
        assert "Usage" in out, (cmd, out)
    # a command that takes a subcommand: none -> its usage on stderr (2); --help, -h or help ->
    # on stdout (0); jfr takes --help and -h only
    for cmd in ("task", "pprof", "ebpf", "jfr"):
        out, err = expect_rc(2, cmd, server=False)
        assert out == "" and err.startswith("Usage:") and "skyprof " + cmd in err, (cmd, out, err)
        for h in ("--help", "-h", "help") if cmd != "jfr" else ("--help", "-h"):
            assert ok(cmd, h, server=False) == err, (cmd, h)
    _, err = expect_rc(2, "jfr", "help", server=False)
    assert "unknown subcommand 'help'" in err, err


def t_usage_errors():
    cases = [
        [], ["frobnicate"], ["--bogus"], ["task"], ["task", "frob"],
        ["task", "create", "--bogus"], ["task", "create", "--service", "s"],
        ["task", "create", "--service", "s", "--endpoint", "e", "--duration", "five"],
        ["task", "create", "--service", "s", "--endpoint", "e", "--start", "yesterday-ish"],
        ["task", "show"], ["task", "logs", "a", "b"], ["segments"], ["analyze"],
        ["analyze", "--segment", "x", "--task", "y"], ["analyze", "--task", "y", "--from", "1"],
        ["analyze", "--segment", "x", "--format", "svg"], ["analyze", "--segment", "x", "--from", "5", "--to", "1"],
        ["services", "a", "b"], ["--server", "ftp://host", "task", "list"], ["--timeout", "0", "task", "list"],
    ]
    for args in cases:
        out, err = expect_rc(2, *args, server=False)
        assert err.strip(), ("no message on stderr", args)
    # a service name too long for the route: one usage error for both service listings
    for cmd in ("services", "endpoints"):
        _, err = expect_rc(2, cmd, "s" * 5000, server=False)
        assert err == "skyprof: service name too long\n", (cmd, err)
    # an unknown format names the command and every format it knows, in the table's order
    _, err = expect_rc(2, "analyze", "--segment", "x", "--format", "svg", server=False)
    assert err == ("skyprof: analyze: unknown format 'svg' (tree, json, collapsed, pprof, "
                   "speedscope, html)\n"), err
    _, err = expect_rc(2, "jfr", "analyze", "t1", "--format", "svg", server=False)
    assert err == ("skyprof: jfr analyze: unknown format 'svg' (top, json, collapsed, pprof, "
                   "speedscope, html)\n"), err
    for cmd in ("dump", "record", "top", "attach"):
        _, err = expect_rc(2, cmd, "--pid", "12x", server=False)
        assert err == "skyprof: %s: --pid wants a process id, got '12x'\n" % cmd, err
    # options stored through the commands' option tables keep their own messages
    for args, msg in (
            (["top", "--rate", "0"], "top: --rate wants 1..1000 samples/s, got '0'"),
            (["dump", "--retries", "2000"], "dump: --retries wants 0..1000, got '2000'"),
            (["task", "create", "--max-sampling-count", "x"],
             "--max-sampling-count: expected an integer, got 'x'"),
            (["pprof", "create", "--sampling-rate", "x"], "expected an integer, got 'x'"),
            (["analyze", "--wait", "9999"], "--wait: expected seconds (0-3600), got '9999'"),
            (["jfr", "create", "--duration", "0"], "--duration: expected seconds in 1..3600, got '0'")):
        _, err = expect_rc(2, *args, server=False)
        assert err == "skyprof: %s\n" % msg, (args, err)


def t_server_down():
    port = free_port()
    out, err = expect_rc(3, "--server", "http://127.0.0.1:%d" % port, "task", "list", server=False)
    assert "cannot connect" in err, err
    out, err = expect_rc(3, "task", "list", server=False,
                         env={"SKYPROF_SERVER": "http://127.0.0.1:%d" % port})
    assert "cannot connect" in err, err


def t_not_found():
    for args in (["task", "show", "no-such-task"], ["task", "logs", "no-such-task"],
                 ["segments", "no-such-task"], ["analyze", "--task", "no-such-task"],
                 ["analyze", "--task", "no-such-task", "--format", "collapsed"],
                 ["services", "no-such-service"]):
        out, err = expect_rc(4, *args)
        assert err.strip(), args


def t_validation_errors():
    out, err = expect_rc(1, "task", "create", "--service", "svc-v", "--endpoint", "/x", "--duration", "0")
    assert "duration: monitor duration must greater than 1 minutes" in err, err
    out, err = expect_rc(1, "task", "create", "--service", "svc-v", "--endpoint", "/x", "--dump-period", "5")
    assert "dumpPeriod" in err and "10 milliseconds" in err, err
    out, err = expect_rc(1, "task", "create", "--service", "svc-v", "--endpoint", "/x", "--max-sampling-count", "10")
    assert "maxSamplingCount" in err, err
    # One task per service at a time (OAP's rule): the second create for svc-cli is refused.
    out, err = expect_rc(1, "task", "create", "--service", "svc-cli", "--endpoint", "/other")
    assert "already has monitor task" in err, err
    # Mutating calls need the API token.
    out, err = expect_rc(1, "task", "create", "--service", "svc-t", "--endpoint", "/x", token=False)
    assert "token" in err, err
    out, err = expect_rc(1, "task", "create", "--service", "svc-t", "--endpoint", "/x", "--token", "wrong", token=False)
    assert "token" in err, err


def t_task_list_show_logs():
    out = ok("task", "list")
    line = [l for l in out.splitlines() if l.startswith(TID)]
    assert line and "/pay" in line[0] and "svc-cli" in line[0] and re.search(r"\b(pending|running)\b", line[0]), out
    assert out.splitlines()[0].split()[:3] == ["ID", "STATUS", "SERVICE"], out
    out = ok("task", "list", "--service", "no-such-svc")
    assert out.strip() == "no tasks", out
    doc = json.loads(ok("--json", "task", "list", "--service", "svc-cli", "--endpoint", "/pay"))
    assert [t["id"] for t in doc] == [TID], doc
    out = ok("task", "show", TID)
    assert "endpoint:             /pay" in out and "dump period:          10 ms" in out, out
    assert "no instance has fetched" in out, out
    # The agent's poll writes a NOTIFIED log for its instance.
    S.query("svc-cli", "inst-1")
    out = ok("task", "logs", TID)
    assert re.search(r"^  inst-1\n    \d{4}-\d\d-\d\d \d\d:\d\d:\d\d  NOTIFIED$", out, re.M), out
    doc = json.loads(ok("task", "logs", TID, "--json"))
    assert doc and doc[0]["operationType"] == "NOTIFIED", doc


def t_future_task_is_pending():
    tid = ok("task", "create", "--service", "svc-later", "--endpoint", "/later",
             "--start", "2099-01-02 03:04", "--duration", "15", "--threshold", "250",
             "--max-sampling-count", "9").strip()
    doc = json.loads(ok("task", "show", tid, "--json"))
    assert doc["status"] == "pending", doc
    assert doc["duration"] == 15 and doc["minDurationThreshold"] == 250 and doc["maxSamplingCount"] == 9, doc
    assert doc["startTime"] == int(__import__("time").mktime((2099, 1, 2, 3, 4, 0, 0, 0, -1)) * 1000), doc
    out = ok("task", "show", tid)
    assert "monitor time:         2099-01-02 03:04:00 .. 2099-01-02 03:19:00" in out, out
    ms = str(doc["startTime"] + 60000)  # inside the first task's 15 minutes: refused
    expect_rc(1, "task", "create", "--service", "svc-later", "--endpoint", "/x", "--start", ms)


def t_segments():
    out = ok("segments", TID)
    rows = out.splitlines()
    assert rows[0].split()[:2] == ["SEGMENT", "TRACE"], out
    seg_a = [r for r in rows if r.startswith("seg-A")]
    assert seg_a and "trace-1" in seg_a[0] and "/pay" in seg_a[0] and "1/1" in seg_a[0], out
    assert any(r.startswith("seg-B") for r in rows), out


TREE_ROW = re.compile(r"^\s*(-?\d+)\s+(-?\d+)\*?\s+(\d+)  ( *)(\S.*)$")


def parse_tree(out):
    rows = []
    for line in out.splitlines():
        m = TREE_ROW.match(line)
        if m:
            rows.append((m.group(5), int(m.group(1)), int(m.group(2)), int(m.group(3)), len(m.group(4)) // 2))
    return rows


def t_analyze_tree():
    # per-interval durations: each of the 5 dumps stands for 10 ms
    want = [("A", 50, 0, 5, 0), ("B", 50, 10, 5, 1), ("C", 30, 30, 3, 2), ("D", 10, 10, 1, 2)]
    out = ok("analyze", "--segment", "seg-A")
    assert out.splitlines()[0].split() == ["DURATION(ms)", "SELF(ms)", "COUNT", "STACK"], out
    assert parse_tree(out) == want, out
    assert "B\n" in out and re.search(r"^\s+30\s+30\*", out, re.M), out    # top self durations starred
    out = ok("analyze", "--segment", "seg-A", "--from", str(T0), "--to", str(T0 + 1040))
    assert parse_tree(out) == want, out
    # A window holding only the first two dumps: A, B, C with count 2.
    out = ok("analyze", "--segment", "seg-A", "--from", str(T0), "--to", str(T0 + 10))
    assert [(r[0], r[3]) for r in parse_tree(out)] == [("A", 2), ("B", 2), ("C", 2)], out
    out = ok("analyze", "--task", TID)
    names = [r[0] for r in parse_tree(out)]
    assert sorted(names) == ["A", "B", "C", "D", "X", "Y"], out
    # No data: a sentence on stderr and exit code 6 (issue 26), nothing on stdout.
    out, err = expect_rc(6, "analyze", "--segment", "no-such-segment")
    assert "no profile data for segment no-such-segment: Data not found" in err and not out, err


def t_analyze_span_window():
    # An agent that keeps sampling after the request (SkyWalking's Python agent with a
    # single-threaded server): seg-C's span covers 3 dumps, 4 more come after it ended.
    # `analyze --segment` analyses the span's window as the UI does; --whole the segment's life.
    tid = ok("task", "create", "--service", "svc-late", "--endpoint", "/late", "--duration", "5",
             "--dump-period", "10").strip()
    t1 = T0 + 10000
    snaps = [snap(tid, "seg-C", s, ["S", "T"], t1 + s * 10) for s in range(3)]
    snaps += [snap(tid, "seg-C", s, ["S", "idle"], t1 + 100 + s * 10) for s in range(3, 7)]
    S.snapshots(snaps)
    S.stream(V3 + "TraceSegmentReportService/collect", [Tracing_pb2.SegmentObject(
        traceId="trace-3", traceSegmentId="seg-C", service="svc-late", serviceInstance="inst-1",
        spans=[Tracing_pb2.SpanObject(spanId=0, parentSpanId=-1, startTime=t1, endTime=t1 + 30,
                                      operationName="/late", spanType=Tracing_pb2.Entry,
                                      spanLayer=Tracing_pb2.Http, componentId=1)])])
    rows = {r[0]: r[3] for r in parse_tree(ok("analyze", "--segment", "seg-C"))}
    assert rows == {"S": 3, "T": 3}, rows
    rows = {r[0]: r[3] for r in parse_tree(ok("analyze", "--segment", "seg-C", "--whole"))}
    assert rows == {"S": 7, "T": 3, "idle": 4}, rows
    out = ok("analyze", "--segment", "seg-C", "--format", "collapsed")
    assert out.splitlines() == ["S;T 3"], out
    out = ok("analyze", "--segment", "seg-C", "--whole", "--format", "collapsed")
    assert sorted(out.splitlines()) == ["S;T 3", "S;idle 4"], out
    # The API: whole life by default (unchanged), ?window=span on request.
    st, doc = S.json("GET", "/api/v1/profile/segments/seg-C/analyze", expect=200)
    assert root_count(doc) == 7, doc
    st, doc = S.json("GET", "/api/v1/profile/segments/seg-C/analyze?window=span", expect=200)
    assert root_count(doc) == 3, doc
    S.json("GET", "/api/v1/profile/segments/seg-C/analyze?window=nope", expect=400)
    S.json("GET", "/api/v1/profile/segments/seg-C/export?format=collapsed&window=span&start=1&end=2",
           expect=400)
    expect_rc(2, "analyze", "--segment", "seg-C", "--whole", "--from", str(t1))


def t_analyze_functions():
    # A loop whose line changes on every dump (3 dumps) under work(), then a sleep (2 dumps):
    # --functions gives one node per function, durations computed on that tree.
    tid = ok("task", "create", "--service", "svc-fn", "--endpoint", "/fn", "--duration", "5",
             "--dump-period", "10").strip()
    t1 = T0 + 20000
    stacks = [["app.py.work: 12", "app.py.loop: %d" % (20 + s)] for s in range(3)]
    stacks += [["app.py.work: 13", "app.py.nap: 30"]] * 2
    S.snapshots([snap(tid, "seg-F", s, st, t1 + s * 10) for s, st in enumerate(stacks)])
    doc = json.loads(ok("analyze", "--segment", "seg-F", "--whole", "--functions", "--format", "json"))
    got = {e["codeSignature"]: (e["count"], e["duration"], e["durationChildExcluded"])
           for t in doc["trees"] for e in t["elements"]}
    assert got == {"app.py.work": (5, 50, 0), "app.py.loop": (3, 30, 30), "app.py.nap": (2, 20, 20)}, got
    win = json.loads(ok("analyze", "--segment", "seg-F", "--from", str(t1), "--to", str(t1 + 40),
                        "--functions", "--json"))
    assert win["trees"] == doc["trees"], (win, doc)
    lines = json.loads(ok("analyze", "--segment", "seg-F", "--whole", "--format", "json"))
    # two roots (work: 12 and work: 13), 3 loop lines, nap
    assert sum(len(t["elements"]) for t in lines["trees"]) == 6, lines
    assert len(parse_tree(ok("analyze", "--task", tid, "--functions"))) == 3
    expect_rc(2, "analyze", "--segment", "seg-F", "--functions", "--format", "collapsed")


def t_analyze_json():
    doc = json.loads(ok("analyze", "--segment", "seg-A", "--format", "json"))
    st, api = S.json("GET", "/api/v1/profile/segments/seg-A/analyze", expect=200)
    assert doc == api, (doc, api)
    doc = json.loads(ok("analyze", "--task", TID, "--json"))
    assert root_count(doc) == 8, doc


def t_export_collapsed(tmp):
    path = os.path.join(tmp, "task.collapsed")
    ok("analyze", "--task", TID, "--format", "collapsed", "-o", path)
    lines = open(path).read().splitlines()
    parsed = {}
    for l in lines:
        stack, n = l.rsplit(" ", 1)
        parsed[stack] = int(n)
    assert parsed == {"A;B": 1, "A;B;C": 3, "A;B;D": 1, "X;Y": 3}, parsed
    assert sum(parsed.values()) == 8
    out = ok("analyze", "--segment", "seg-A", "--from", str(T0), "--to", str(T0 + 1040), "--format", "collapsed")
    assert sum(int(l.rsplit(" ", 1)[1]) for l in out.splitlines()) == 5, out


def decode_pprof(path):
    node = shutil.which("node")
    if not node or not os.path.isdir(os.path.join(WEB_DIR, "node_modules", "pprof-format")):
        raise AssertionError("node or web/node_modules/pprof-format missing (the web build installs it)")
    p = subprocess.run([node, os.path.join(os.path.dirname(os.path.abspath(__file__)), "pprof_decode.mjs"), path],
                       capture_output=True, env=dict(os.environ, SKP_WEB_DIR=WEB_DIR), timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)


def t_export_pprof(tmp):
    path = os.path.join(tmp, "task.pb.gz")
    ok("analyze", "--task", TID, "--format", "pprof", "-o", path)
    raw = open(path, "rb").read()
    assert raw[:2] == b"\x1f\x8b" and gzip.decompress(raw), "not gzip"
    d = decode_pprof(path)
    assert d["sampleTypes"] == [["samples", "count"], ["wall", "nanoseconds"]], d
    assert d["period"] == 10 * 1000000, d
    stacks = {tuple(s["stack"]): s["values"] for s in d["samples"]}
    # Leaf first; values = [self count, self count x 10 ms in ns].
    assert stacks == {("B", "A"): [1, 10000000], ("C", "B", "A"): [3, 30000000],
                      ("D", "B", "A"): [1, 10000000], ("Y", "X"): [3, 30000000]}, stacks
    assert sorted(f["name"] for f in d["functions"]) == ["A", "B", "C", "D", "X", "Y"], d
    for s in d["samples"]:
        assert s["labels"].get("task_id") == TID and s["labels"].get("endpoint") == "/pay", s
        # Each sample names its segment (and trace, when the segment was reported).
        if s["stack"][-1] == "A":
            assert s["labels"].get("segment_id") == "seg-A", s
            assert s["labels"].get("trace_id") == "trace-1", s
        else:
            assert s["labels"].get("segment_id") == "seg-B" and "trace_id" not in s["labels"], s
    path = os.path.join(tmp, "seg.pb.gz")
    ok("analyze", "--segment", "seg-A", "--format", "pprof", "-o", path)
    d = decode_pprof(path)
    assert sum(s["values"][0] for s in d["samples"]) == 5, d
    assert all(s["labels"].get("segment_id") == "seg-A" for s in d["samples"]), d


def t_export_speedscope(tmp):
    out = ok("analyze", "--task", TID, "--format", "speedscope")
    doc = json.loads(out)
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json", doc
    frames = doc["shared"]["frames"]
    assert all(isinstance(f["name"], str) for f in frames), frames
    assert len(doc["profiles"]) >= 1
    for p in doc["profiles"]:
        for k in ("type", "name", "unit", "startValue", "endValue", "samples", "weights"):
            assert k in p, (k, p)
        assert p["type"] == "sampled" and p["unit"] in ("milliseconds", "nanoseconds", "none"), p
        assert len(p["samples"]) == len(p["weights"]), p
        assert all(0 <= i < len(frames) for s in p["samples"] for i in s), p
        assert sum(p["weights"]) == p["endValue"] - p["startValue"], p
    assert sum(doc["profiles"][0]["weights"]) == 8 * 10, doc


def t_export_html(tmp):
    path = os.path.join(tmp, "task.html")
    ok("analyze", "--task", TID, "--format", "html", "-o", path)
    html = open(path, encoding="utf-8").read()
    assert html.startswith("<!DOCTYPE html>"), html[:100]
    for name in ("A", "B", "C", "D", "X", "Y"):
        assert '"n":"%s"' % name in html, name
    assert "http://" not in html and "https://" not in html, "external URL in the HTML export"
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", html), "external resource in the HTML export"


def t_services():
    out = ok("services")
    row = [l for l in out.splitlines() if l.startswith("svc-cli")]
    assert row and re.search(r"svc-cli\s+\S+\s+1\s+\d{4}-", row[0]), out
    out = ok("services", "svc-cli")
    row = [l for l in out.splitlines() if l.startswith("inst-1")]
    assert row and " c " in row[0] and "hostname=box-1" in row[0], out
    doc = json.loads(ok("services", "--json"))
    assert any(s["name"] == "svc-cli" for s in doc), doc
    # the text rows and --json of one listing come from one GET (cli_api_get)
    doc = json.loads(ok("--json", "endpoints", "svc-cli"))
    out = ok("endpoints", "svc-cli").splitlines()
    if doc:
        assert [l.split()[0] for l in out[1:]] == [e["name"] for e in doc], (out, doc)
    else:
        assert out == ["no endpoint seen for svc-cli (no trace segment reported yet)"], out
    assert ok("endpoints", "no-such-svc") == "no endpoint seen for no-such-svc (no trace segment reported yet)\n"
    assert json.loads(ok("--json", "ebpf", "processes")) == []
    assert ok("ebpf", "processes") == "no process registered\n"


def main():
    global S
    res = Results()
    with tempdir() as tmp:
        S = Skyprofd(tmp, "--api-token", TOKEN)
        try:
            res.run("version and help", t_version_and_help)
            res.run("usage errors exit 2", t_usage_errors)
            res.run("server down exits 3", t_server_down)
            res.run("data set up through the CLI and gRPC", setup_data)
            res.run("unknown ids exit 4", t_not_found)
            res.run("validation and auth errors exit 1 with the reason", t_validation_errors)
            res.run("task list / show / logs", t_task_list_show_logs)
            res.run("a task created for later is pending", t_future_task_is_pending)
            res.run("segments", t_segments)
            res.run("analyze: tree", t_analyze_tree)
            res.run("analyze: json", t_analyze_json)
            res.run("analyze: --functions", t_analyze_functions)
            res.run("export: collapsed totals", t_export_collapsed, tmp)
            res.run("export: pprof decoded by pprof-format", t_export_pprof, tmp)
            res.run("export: speedscope schema fields", t_export_speedscope, tmp)
            res.run("export: self-contained html", t_export_html, tmp)
            res.run("services and instances", t_services)
            res.run("analyze --segment: the span's window, --whole the segment's life",
                    t_analyze_span_window)
        finally:
            S.stop()
    res.finish()


if __name__ == "__main__":
    main()
