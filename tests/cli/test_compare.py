"""Compare and timeline against a real skyprofd fed over gRPC: two segments shaped like the seed
scenario (do_POST -> method3 -> method2 -> method1, 10 ms dumps), a fast run (method3 sleeping
20 ms) and a slow one (200 ms) with a frame and a root only the slow run has.
  * POST /api/v1/profile/compare: totals per side, shares normalised by each total (not by raw
    counts), nodes present in one side only, method3 first among the changes, a task cut to a
    time range, the same profile at two lengths comparing equal, 400/404 answers;
  * GET /api/v1/profile/segments/{id}/timeline: every dump with its leaf frame;
  * `skyprof compare`: the table (method3 first, grown), --json, usage and not-found exit codes."""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("SKP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                                "tests", "integration", "server"))
from skp_harness import Results, build_path, tempdir  # noqa: E402
from skyprofd_util import Skyprofd, snap  # noqa: E402
from pprof_util import Profile  # noqa: E402
from profile import Pprof_pb2  # noqa: E402

CLI = os.environ.get("SKP_CLI") or build_path("src", "cli", "skyprof")
T0 = 1700000000000
F = "/srv/app/seed_app.py."
POST, M3, M2, M1 = F + "do_POST: 44", F + "method3: 28", F + "method2: 24", F + "method1: 20"
GC, IDLE = "<gc>", "idle_thread"

S = None
TID = None


def run_stacks(method3_self_dumps, extra):
    """Stacks (root first) of one request: method3's own sleep, then method2 (2 dumps of its
    own) and method1 (2 dumps), then the handler's 500 ms sleep (50 dumps) minus `extra`
    replacing some of it."""
    stacks = [[POST, M3]] * method3_self_dumps + [[POST, M3, M2]] * 2 + [[POST, M3, M2, M1]] * 2
    stacks += [[POST]] * (50 - len(extra)) + extra
    return stacks


FAST = run_stacks(2, [])                        # 56 dumps
SLOW = run_stacks(20, [[POST, GC]] * 2) + [[IDLE]] * 2   # 74 dumps under do_POST + 2 idle


def setup():
    global TID
    st, doc = S.json("POST", "/api/v1/profile/tasks", {
        "service": "svc-cmp", "endpointName": "/", "duration": 5, "minDurationThreshold": 0,
        "dumpPeriod": 10, "maxSamplingCount": 5}, expect=201)
    TID = doc["id"]
    snaps = [snap(TID, "seg-fast", i, s, T0 + 10 * i) for i, s in enumerate(FAST)]
    snaps += [snap(TID, "seg-slow", i, s, T0 + 100000 + 10 * i) for i, s in enumerate(SLOW)]
    S.snapshots(snaps)


def compare(base, target, expect=200, **extra):
    body = {"base": base, "target": target}
    body.update(extra)
    return S.json("POST", "/api/v1/profile/compare", body, expect=expect)[1]


def seg(sid, **kw):
    d = {"kind": "segment", "segmentId": sid}
    d.update(kw)
    return d


def node(doc, *path):
    parent = 0
    hit = None
    for sig in path:
        hit = next((n for n in doc["nodes"] if n["parentId"] == parent and n["codeSignature"] == sig), None)
        if hit is None:
            return None
        parent = hit["id"]
    return hit


def t_normalised():
    doc = compare(seg("seg-fast"), seg("seg-slow"))
    assert doc["base"]["total"] == len(FAST) == 56, doc["base"]
    assert doc["target"]["total"] == len(SLOW) == 76, doc["target"]
    assert doc["base"]["unit"] == "dumps"
    m3 = node(doc, POST, M3)
    assert (m3["base"], m3["target"]) == (6, 24), m3
    assert (m3["baseSelf"], m3["targetSelf"]) == (2, 20), m3
    assert abs(m3["baseShare"] - 6 / 56) < 1e-6 and abs(m3["targetShare"] - 24 / 76) < 1e-6, m3
    assert abs(m3["delta"] - (24 / 76 - 6 / 56)) < 1e-6, m3
    # method2 took 4 dumps in both runs: its share fell because the slow run is longer.
    m2 = node(doc, POST, M3, M2)
    assert m2["base"] == m2["target"] == 4 and m2["delta"] < 0, m2
    first = doc["changes"][0]
    assert first["codeSignature"] == M3 and first["delta"] > 0.2, doc["changes"][:3]
    deltas = [abs(c["delta"]) for c in doc["changes"]]
    assert deltas == sorted(deltas, reverse=True), deltas
    assert doc["changesTotal"] == 6, doc["changesTotal"]


def t_one_side_nodes():
    doc = compare(seg("seg-fast"), seg("seg-slow"))
    gc = node(doc, POST, GC)
    assert gc and gc["base"] == 0 and gc["target"] == 2 and gc["baseShare"] == 0, gc
    idle = node(doc, IDLE)
    assert idle and idle["parentId"] == 0 and idle["base"] == 0 and idle["target"] == 2, idle
    rev = compare(seg("seg-slow"), seg("seg-fast"))
    gc = node(rev, POST, GC)
    assert gc["base"] == 2 and gc["target"] == 0 and gc["delta"] < 0, gc


def t_ranges_and_lengths():
    # The fast run's first 10 dumps (handler -> method3 ...) against all of it.
    part = compare(seg("seg-fast", timeRange={"start": T0, "end": T0 + 90}), seg("seg-fast"))
    assert part["base"]["total"] == 10 and part["base"]["timeRange"] == {"start": T0, "end": T0 + 90}, part["base"]
    assert node(part, POST, M3)["base"] == 6
    # A task cut to the slow run's time equals the slow segment.
    cut = compare({"kind": "task", "taskId": TID, "timeRange": {"start": T0 + 100000, "end": T0 + 200000}},
                  seg("seg-slow"))
    assert cut["base"]["total"] == cut["target"]["total"] == 76, (cut["base"], cut["target"])
    assert all(abs(c["delta"]) < 1e-9 for c in cut["changes"]), cut["changes"][:3]
    # The whole task against one of its segments: totals add up.
    whole = compare({"kind": "task", "taskId": TID}, seg("seg-fast"))
    assert whole["base"]["total"] == 56 + 76, whole["base"]
    # A range with no dump: an empty side, every target node one-sided.
    empty = compare({"kind": "task", "taskId": TID, "timeRange": {"start": 1, "end": 2}}, seg("seg-fast"))
    assert empty["base"]["total"] == 0 and all(n["base"] == 0 for n in empty["nodes"])


def t_errors():
    for body, field in [({"base": seg("seg-fast")}, "target"),
                        ({"base": {"kind": "flame", "segmentId": "x"}, "target": seg("seg-fast")}, "base.kind"),
                        ({"base": {"kind": "segment"}, "target": seg("seg-fast")}, "base.segmentId"),
                        ({"base": seg("seg-fast"), "target": seg("seg-slow", timeRange={"start": 5, "end": 1})},
                         "target.timeRange"),
                        ({"base": seg("seg-fast"), "target": seg("seg-slow"), "limit": 0}, "limit"),
                        ({"base": seg("seg-fast"), "target": {"kind": "jfr", "taskId": "t", "eventType": "nope"}},
                         "target.eventType")]:
        st, doc = S.json("POST", "/api/v1/profile/compare", body)
        assert st == 400 and doc.get("field") == field, (body, st, doc)
    st, doc = S.json("POST", "/api/v1/profile/compare", [1, 2])
    assert st == 400, doc
    st, doc = S.json("POST", "/api/v1/profile/compare", {"base": seg("seg-fast"), "target": seg("no-such")})
    assert st == 404 and "target segment" in doc["error"], (st, doc)
    st, doc = S.json("POST", "/api/v1/profile/compare",
                     {"base": {"kind": "pprof", "taskId": "no-such"}, "target": seg("seg-fast")})
    assert st == 404 and "base pprof" in doc["error"], (st, doc)
    st, doc = S.json("GET", "/api/v1/profile/compare")
    assert st == 405, (st, doc)


def t_timeline():
    st, doc = S.json("GET", "/api/v1/profile/segments/seg-slow/timeline", expect=200)
    snaps = doc["snapshots"]
    assert len(snaps) == len(SLOW) and doc["truncated"] is False, len(snaps)
    assert [s["sequence"] for s in snaps] == list(range(len(SLOW)))
    assert [s["time"] for s in snaps] == [T0 + 100000 + 10 * i for i in range(len(SLOW))]
    leaves = [doc["frames"][s["leaf"]] for s in snaps]
    assert leaves == [s[-1] for s in SLOW], leaves[:5]
    assert [s["depth"] for s in snaps] == [len(s) for s in SLOW]
    stacks = [[doc["frames"][i] for i in doc["stacks"][s["stack"]]] for s in snaps]
    assert stacks == SLOW, stacks[:3]
    assert len(doc["stacks"]) == len(set(tuple(s) for s in SLOW)), doc["stacks"]
    assert len(doc["frames"]) == len(set(f for s in SLOW for f in s)), doc["frames"]
    st, doc = S.json("GET", "/api/v1/profile/segments/no-such/timeline")
    assert st == 404, (st, doc)


def pprof_profile(hot_ns, cold_ns):
    """main -> handler -> {hot, cold}, cpu/nanoseconds (pprof_util's writer)."""
    p = Profile([("samples", "count"), ("cpu", "nanoseconds")], ("cpu", "nanoseconds"), 10000000)
    fmain, fhandler = p.function(1, "main", "app.go", 1), p.function(2, "handler", "app.go", 10)
    fhot, fcold = p.function(3, "hot", "hot.go", 20), p.function(4, "cold", "cold.go", 40)
    lmain, lhandler = p.location(10, [(fmain, 5)]), p.location(20, [(fhandler, 12)])
    lhot, lcold = p.location(30, [(fhot, 22)]), p.location(40, [(fcold, 44)])
    p.sample([lhot, lhandler, lmain], [hot_ns // 10000000, hot_ns])
    p.sample([lcold, lhandler, lmain], [cold_ns // 10000000, cold_ns])
    return p.gz()


def upload_pprof(task, instance, data):
    """What an agent's collect stream sends: metadata, then (after SUCCESS) the content."""
    V10 = "/skywalking.v10.PprofTask/"
    meta = Pprof_pb2.PprofData(metadata=Pprof_pb2.PprofMetaData(
        service="svc-pp", serviceInstance=instance, taskId=task,
        type=Pprof_pb2.PPROF_PROFILING_SUCCESS, contentSize=len(data)))
    call = S.channel().stream_stream(V10 + "collect", request_serializer=lambda m: m.SerializeToString(),
                                     response_deserializer=Pprof_pb2.PprofCollectionResponse.FromString)
    answers = list(call(iter([meta, Pprof_pb2.PprofData(content=data)]), timeout=60))
    assert answers and answers[0].status == Pprof_pb2.PPROF_PROFILING_SUCCESS, answers


def t_pprof():
    st, doc = S.json("POST", "/api/v1/pprof/tasks", {"service": "svc-pp", "events": "cpu", "duration": 1,
                                                      "serviceInstanceIds": ["inst-a", "inst-b"]})
    assert st == 201, doc
    tid = doc["id"]
    upload_pprof(tid, "inst-a", pprof_profile(30000000, 10000000))   # hot 75 %, 40 ms
    upload_pprof(tid, "inst-b", pprof_profile(20000000, 60000000))   # hot 25 %, 80 ms
    wait = {"kind": "pprof", "taskId": tid, "sampleType": "cpu"}
    doc = compare(dict(wait, instances=["inst-a"]), dict(wait, instances="inst-b"))
    assert doc["base"]["total"] == 40000000 and doc["target"]["total"] == 80000000, (doc["base"], doc["target"])
    assert doc["base"]["unit"] == doc["target"]["unit"] == "nanoseconds", doc["base"]
    by_sig = {c["codeSignature"]: c for c in doc["changes"]}
    hot, cold = by_sig["hot (hot.go:22)"], by_sig["cold (cold.go:44)"]
    assert abs(hot["delta"] + 0.5) < 1e-9 and abs(cold["delta"] - 0.5) < 1e-9, (hot, cold)
    assert (hot["base"], hot["target"]) == (30000000, 20000000), hot
    # by function, and the same task against itself: nothing changed
    doc = compare(wait, wait, granularity="functions")
    assert {c["codeSignature"] for c in doc["changes"]} >= {"hot (hot.go)", "main (app.go)"}, doc["changes"]
    assert all(abs(c["delta"]) < 1e-12 for c in doc["changes"]), doc["changes"]
    rc, out, err = cli("compare", "pprof:%s#cpu" % tid, "pprof:%s#samples" % tid)
    assert rc == 0 and "nanoseconds" in out and "count" in out, (rc, out, err)


def cli(*args):
    p = subprocess.run([CLI, "--server", "http://127.0.0.1:%d" % S.http_port] + list(args),
                       capture_output=True, timeout=60, env=dict(os.environ, COLUMNS="120"))
    out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    assert "AddressSanitizer" not in err and "runtime error" not in err, err
    return p.returncode, out, err


def t_cli():
    rc, out, err = cli("compare", "segment:seg-fast", "seg-slow")
    assert rc == 0, (rc, out, err)
    lines = out.splitlines()
    assert lines[0].startswith("base:") and "seg-fast: 56 dumps" in lines[0], out
    assert "seg-slow: 76 dumps" in lines[1], out
    assert lines[2].split()[:2] == ["CHANGE", "BASE"], out
    m = re.match(r"^\s*\+(\d+\.\d)%\s+(\d+\.\d)%\s+(\d+\.\d)%\s+\+(\d+\.\d)%\s+(.+)$", lines[3])
    assert m and m.group(5) == M3, lines[3]
    assert m.group(2) == "10.7" and m.group(3) == "31.6" and m.group(1) == "20.9", lines[3]
    rc, out, err = cli("compare", "--limit", "2", "seg-fast", "seg-slow")
    assert rc == 0 and len([l for l in out.splitlines() if "%" in l]) == 2 and "(2 of 6 frames" in out, out
    rc, out, err = cli("--json", "compare", "seg-fast", "task:%s@%d..%d" % (TID, T0 + 100000, T0 + 200000))
    assert rc == 0 and json.loads(out)["changes"][0]["codeSignature"] == M3, out[:300]
    for args in (["compare", "seg-fast"], ["compare", "flame:x", "seg-fast"],
                 ["compare", "seg-fast", "segment:x@5..1"], ["compare", "pprof:x@1..2", "seg-fast"],
                 ["compare", "--limit", "0", "a", "b"]):
        rc, out, err = cli(*args)
        assert rc == 2 and err.startswith("skyprof: "), (args, rc, out, err)
    rc, out, err = cli("compare", "seg-fast", "no-such")
    assert rc == 4 and "not found" in err, (rc, out, err)


def main():
    global S
    res = Results()
    with tempdir() as tmp:
        S = Skyprofd(tmp)
        try:
            res.run("data over gRPC", setup)
            res.run("compare: shares normalised by each side's total", t_normalised)
            res.run("compare: nodes present on one side only", t_one_side_nodes)
            res.run("compare: time ranges, tasks, different lengths", t_ranges_and_lengths)
            res.run("compare: bad selectors and unknown ids", t_errors)
            res.run("timeline: every dump with its leaf", t_timeline)
            res.run("skyprof compare", t_cli)
            res.run("compare: two pprof profiles (instances, sample types, by function)", t_pprof)
        finally:
            S.stop()
    res.finish()


if __name__ == "__main__":
    main()
