"""skyprofd end to end, happy paths and API contract: tasks over HTTP (validation texts and
fields, overlap, status, logs), getProfileTaskCommands (nine args, serials, lastCommandTime
cursor, NOTIFIED logs per instance, compat paths, finished/pending tasks), snapshots of two
segments -> segment listing -> analysis (tree shape and durations of spec §5.6's example) ->
finish report -> logs, trace segments, management registration -> services/instances,
exports, accept-and-drop services, static UI files (types, traversal, SPA fallback, not-built
page), HTTP bad input (malformed/oversized bodies, wrong types, 404/405), API token, metrics.
"""
import gzip
import os
import re
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402

from skp_harness import Results, tempdir  # noqa: E402
from skyprofd_util import (V3, Command_pb2, Common_pb2, Management_pb2, Profile_pb2, Skyprofd,  # noqa: E402
                           Tracing_pb2, args_of, by_sig, root_count, snap)

S = None  # the shared server
R = Results()
NINE = ["SerialNumber", "TaskId", "EndpointName", "Duration", "MinDurationThreshold", "DumpPeriod",
        "MaxSamplingCount", "StartTime", "CreateTime"]


def q(s):
    return urllib.parse.quote(s, safe="")


# ------------------------------------------------------------------ tasks over HTTP

def t_task_create_and_get():
    st, doc = S.create_task("svc-create", " /orders/{id} ", duration=2, threshold=7, dump=20, count=3)
    assert st == 201, (st, doc)
    tid = doc["id"]
    assert re.match(r"^\d{13}_c3ZjLWNyZWF0ZQ==\.1$", tid), tid  # base64("svc-create")
    st, t = S.json("GET", "/api/v1/profile/tasks/" + q(tid), expect=200)
    assert t["service"] == "svc-create" and t["endpointName"] == "/orders/{id}", t  # trimmed
    assert (t["duration"], t["minDurationThreshold"], t["dumpPeriod"], t["maxSamplingCount"]) == (2, 7, 20, 3), t
    assert t["status"] == "running" and t["logs"] == [], t
    assert abs(t["startTime"] - time.time() * 1000) < 60000 and t["createTime"] == int(tid.split("_")[0]), t
    st, lst = S.json("GET", "/api/v1/profile/tasks?service=svc-create", expect=200)
    assert [x["id"] for x in lst] == [tid], lst
    assert lst[0]["status"] == "running" and "logs" in lst[0]
    st, lst = S.json("GET", "/api/v1/profile/tasks?service=svc-create&endpointName=%2Fnope", expect=200)
    assert lst == [], lst
    S.json("GET", "/api/v1/profile/tasks/nope_bm9wZQ==.1", expect=404)
    S.json("GET", "/api/v1/profile/tasks/nope/logs", expect=404)
    S.json("GET", "/api/v1/profile/tasks/nope/segments", expect=404)
    st, logs = S.json("GET", "/api/v1/profile/tasks/%s/logs" % q(tid), expect=200)
    assert logs == []
    # A task id with '/' and '+' (base64 of the service name) works percent-encoded.
    st, doc = S.create_task("???>>>", "/slash")
    assert st == 201 and doc["id"].endswith("_Pz8/Pj4+.1"), doc
    st, t = S.json("GET", "/api/v1/profile/tasks/" + q(doc["id"]), expect=200)
    assert t["service"] == "???>>>", t
    S.json("GET", "/api/v1/profile/tasks/%s/logs" % q(doc["id"]), expect=200)


def t_task_validation_texts():
    cases = [
        ({"service": ""}, "service cannot be null", "service"),
        ({"endpointName": "   "}, "endpoint name cannot be empty", "endpointName"),
        ({"duration": 0}, "monitor duration must greater than 1 minutes", "duration"),
        ({"minDurationThreshold": -1}, "min duration threshold must greater than or equals zero", "minDurationThreshold"),
        ({"maxSamplingCount": 0}, "max sampling count must greater than zero", "maxSamplingCount"),
        ({"duration": 16}, "The duration of the monitoring task cannot be greater than 15 minutes", "duration"),
        ({"dumpPeriod": 9}, "dump period must be greater than or equals 10 milliseconds", "dumpPeriod"),
        ({"maxSamplingCount": 10}, "max sampling count must less than 10", "maxSamplingCount"),
    ]
    for i, (patch, reason, field) in enumerate(cases):
        body = {"service": "svc-val-%d" % i, "endpointName": "/x", "duration": 5, "minDurationThreshold": 0,
                "dumpPeriod": 10, "maxSamplingCount": 5}
        body.update(patch)
        st, doc = S.json("POST", "/api/v1/profile/tasks", body)
        assert st == 400 and doc == {"errorReason": reason, "field": field}, (patch, st, doc)
    # Boundaries accepted: 1 and 15 minutes, 10 ms, count 1 and 9, threshold 0.
    for i, (d, c) in enumerate([(1, 1), (15, 9)]):
        st, doc = S.create_task("svc-bound-%d" % i, duration=d, count=c, dump=10, threshold=0)
        assert st == 201, doc
    # Missing service is OAP's "service cannot be null".
    st, doc = S.json("POST", "/api/v1/profile/tasks", {"endpointName": "/x", "duration": 5, "minDurationThreshold": 0,
                                                       "dumpPeriod": 10, "maxSamplingCount": 5})
    assert st == 400 and doc["errorReason"] == "service cannot be null", doc


def t_task_overlap():
    now = int(time.time() * 1000)
    st, a = S.create_task("svc-ovl", "/a", duration=5, start=now + 3600000)
    assert st == 201, a
    st, doc = S.create_task("svc-ovl", "/b", duration=5, start=now + 3600000 + 60000)
    assert st == 400 and doc["errorReason"] == "current service already has monitor task execute at this time", doc
    assert doc["field"] == "startTime"
    st, doc = S.create_task("svc-ovl", "/b", duration=1, start=now + 3600000 + 5 * 60000 + 1)
    assert st == 201, doc
    st, doc = S.create_task("svc-ovl-other", "/a", duration=5, start=now + 3600000)
    assert st == 201, doc
    st, lst = S.json("GET", "/api/v1/profile/tasks?service=svc-ovl", expect=200)
    assert [t["status"] for t in lst] == ["pending", "pending"], lst
    assert lst[0]["startTime"] > lst[1]["startTime"]  # newest start first


# ------------------------------------------------------------------ agent task polling

def t_task_commands():
    now = int(time.time() * 1000)
    svc = "svc-cmd"
    st, doc = S.create_task(svc, "/checkout", duration=3, threshold=15, dump=11, count=4)
    assert st == 201
    tid = doc["id"]
    # A finished task of another service and a pending one of a third.
    S.create_task("svc-cmd-old", "/x", duration=1, start=now - 3600000)
    st, pend = S.create_task("svc-cmd-later", "/y", duration=1, start=now + 600000)
    r = S.query(svc, "inst-1", -1)
    assert len(r.commands) == 1, r
    c = r.commands[0]
    assert c.command == "ProfileTaskQuery"
    assert [kv.key for kv in c.args] == NINE, [kv.key for kv in c.args]
    a = args_of(c)
    assert a["TaskId"] == tid and a["EndpointName"] == "/checkout", a
    assert (a["Duration"], a["MinDurationThreshold"], a["DumpPeriod"], a["MaxSamplingCount"]) == ("3", "15", "11", "4"), a
    for k in ("StartTime", "CreateTime", "Duration"):
        assert re.match(r"^\d+$", a[k]), (k, a[k])
    assert a["CreateTime"] == tid.split("_")[0]
    assert re.match(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$", a["SerialNumber"]), a
    # Same cursor again: same task, new serial.
    a2 = args_of(S.query(svc, "inst-1", -1).commands[0])
    assert a2["TaskId"] == tid and a2["SerialNumber"] != a["SerialNumber"]
    # Cursor at CreateTime: nothing; just below: the task.
    assert len(S.query(svc, "inst-1", int(a["CreateTime"])).commands) == 0
    assert len(S.query(svc, "inst-1", int(a["CreateTime"]) - 1).commands) == 1
    # Compat path (no package).
    rc = S.query(svc, "inst-2", -1, path="/ProfileTask/getProfileTaskCommands")
    assert args_of(rc.commands[0])["TaskId"] == tid
    # Finished task never delivered; pending (future) task delivered ahead of its start.
    assert len(S.query("svc-cmd-old", "i", -1).commands) == 0
    rp = S.query("svc-cmd-later", "i", -1)
    assert len(rp.commands) == 1 and args_of(rp.commands[0])["TaskId"] == pend["id"]
    # Unknown service: empty answer.
    assert len(S.query("svc-nobody", "i", -1).commands) == 0
    # NOTIFIED logs name each instance the task was handed to.
    st, logs = S.json("GET", "/api/v1/profile/tasks/%s/logs" % q(tid), expect=200)
    inst = sorted({(l["instanceName"], l["operationType"]) for l in logs})
    assert inst == [("inst-1", "NOTIFIED"), ("inst-2", "NOTIFIED")], logs
    # One NOTIFIED per instance however often it polls (issue 15: polls no longer grow the logs).
    assert len([l for l in logs if l["instanceName"] == "inst-1"]) == 1, logs
    st, t = S.json("GET", "/api/v1/profile/tasks/" + q(tid), expect=200)
    assert len(t["logs"]) == len(logs)


# ------------------------------------------------------------------ pprof, minimally decoded

def pb_fields(buf):
    """(field number, value) pairs of one protobuf message: ints for varints, bytes for
    length-delimited fields (fixed-width fields are skipped)."""
    i, out = 0, []

    def varint():
        nonlocal i
        v = shift = 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return v
    while i < len(buf):
        key = varint()
        num, wt = key >> 3, key & 7
        if wt == 0:
            out.append((num, varint()))
        elif wt == 2:
            n = varint()
            out.append((num, bytes(buf[i:i + n])))
            i += n
        elif wt in (1, 5):
            i += 8 if wt == 1 else 4
        else:
            raise ValueError("wire type %d" % wt)
    return out


def pprof_summary(gz):
    """(period, [{label key: value} per sample]) of a gzip'd profile.proto."""
    f = pb_fields(gzip.decompress(gz))
    strings = [v.decode() for n, v in f if n == 6]
    period = next((v for n, v in f if n == 12), 0)
    samples = []
    for n, v in f:
        if n == 2:
            labels = [dict(pb_fields(lb)) for k, lb in pb_fields(v) if k == 3]
            samples.append({strings[lb[1]]: strings[lb.get(2, 0)] for lb in labels})
    return period, samples


# ------------------------------------------------------------------ snapshots -> analysis

EXAMPLE = [  # spec §5.6 worked example: (seq, time, stack)
    (0, 1000, ["A", "B", "C"]), (1, 1010, ["A", "B", "C"]), (2, 1020, ["A", "B", "D"]),
    (3, 1030, ["A", "B"]), (4, 1040, ["A", "B", "C"]),
]


def check_example_tree(an):
    assert len(an["trees"]) == 1, an
    els = an["trees"][0]["elements"]
    e = by_sig(an["trees"][0])
    assert [x["id"] for x in els] == sorted(x["id"] for x in els)
    A, B, C, D = e["A"], e["B"], e["C"], e["D"]
    assert int(A["parentId"]) == 0 and int(B["parentId"]) == int(A["id"]), els
    assert int(C["parentId"]) == int(B["id"]) and int(D["parentId"]) == int(B["id"]), els
    got = {k: (int(v["count"]), int(v["duration"]), int(v["durationChildExcluded"])) for k, v in e.items()}
    assert got == {"A": (5, 50, 0), "B": (5, 50, 10), "C": (3, 30, 30), "D": (1, 10, 10)}, got


def t_snapshots_segments_analyze_finish():
    st, doc = S.create_task("svc-snap", "/pay", duration=5)
    tid = doc["id"]
    t0 = 1700000000000
    snaps = [snap(tid, "seg-A", s, st_, t0 + t) for s, t, st_ in EXAMPLE]
    snaps += [snap(tid, "seg-B", s, ["X", "Y"], t0 + 5000 + s * 10) for s in range(3)]
    resp = S.snapshots(snaps)
    assert isinstance(resp, Command_pb2.Commands) and len(resp.commands) == 0
    # A trace segment for seg-A (entry span with the endpoint name).
    seg = Tracing_pb2.SegmentObject(
        traceId="trace-1", traceSegmentId="seg-A", service="svc-snap", serviceInstance="inst-s",
        spans=[Tracing_pb2.SpanObject(spanId=0, parentSpanId=-1, startTime=t0, endTime=t0 + 60,
                                      operationName="/pay", spanType=Tracing_pb2.Entry, spanLayer=Tracing_pb2.Http,
                                      componentId=1)])
    S.stream(V3 + "TraceSegmentReportService/collect", [seg])
    seg_b = Tracing_pb2.SegmentObject(
        traceId="trace-2", traceSegmentId="seg-B", service="svc-snap", serviceInstance="inst-s",
        spans=[Tracing_pb2.SpanObject(spanId=0, parentSpanId=-1, startTime=t0 + 4990, endTime=t0 + 5100,
                                      operationName="/pay", spanType=Tracing_pb2.Entry, componentId=1)])
    S.unary("/TraceSegmentReportService/collectInSync", Tracing_pb2.SegmentCollection(segments=[seg_b]))
    st, segs = S.json("GET", "/api/v1/profile/tasks/%s/segments" % q(tid), expect=200)
    ids = sorted(s["segmentId"] for s in segs)
    assert ids == ["seg-A", "seg-B"], segs
    a = [s for s in segs if s["segmentId"] == "seg-A"][0]
    assert a["traceId"] == "trace-1" and a["spans"] and a["spans"][0]["endpointName"] == "/pay", a
    b = [s for s in segs if s["segmentId"] == "seg-B"][0]
    assert b["traceId"] == "trace-2" and len(b["spans"]) == 1 and b["spans"][0]["profiled"], b
    # Analyze seg-A over its window (POST, the UI's call).
    st, an = S.json("POST", "/api/v1/profile/analyze",
                    [{"segmentId": "seg-A", "timeRange": {"start": t0, "end": t0 + 1040}}], expect=200)
    check_example_tree(an)
    st, an = S.json("GET", "/api/v1/profile/segments/seg-A/analyze", expect=200)
    check_example_tree(an)
    # Whole task: both segments, 8 snapshots, two roots (A and X).
    st, an = S.json("GET", "/api/v1/profile/tasks/%s/analyze" % q(tid), expect=200)
    assert root_count(an) == 8, an
    roots = sorted(e["codeSignature"] for t in an["trees"] for e in t["elements"] if int(e["parentId"]) == 0)
    assert roots == ["A", "X"], roots
    S.json("GET", "/api/v1/profile/tasks/nope/analyze", expect=404)
    # Function granularity: single-letter signatures have no line, so the tree is the same; the
    # value is validated on every analysis route.
    for path in ("/api/v1/profile/segments/seg-A/analyze?granularity=functions",
                 "/api/v1/profile/segments/seg-A/analyze?granularity=lines"):
        st, an = S.json("GET", path, expect=200)
        check_example_tree(an)
    st, an = S.json("POST", "/api/v1/profile/analyze?granularity=functions",
                    [{"segmentId": "seg-A", "timeRange": {"start": t0, "end": t0 + 1040}}], expect=200)
    check_example_tree(an)
    for method, path, body in (("GET", "/api/v1/profile/segments/seg-A/analyze?granularity=x", None),
                               ("GET", "/api/v1/profile/tasks/%s/analyze?granularity=Functions" % q(tid), None),
                               ("POST", "/api/v1/profile/analyze?granularity=line",
                                [{"segmentId": "seg-A", "timeRange": {"start": t0, "end": t0 + 1}}])):
        st, err = S.json(method, path, body, expect=400)
        assert err.get("field") == "granularity", err
    # Finish report -> EXECUTION_FINISHED log.
    S.unary(V3 + "ProfileTask/reportTaskFinish",
            Profile_pb2.ProfileTaskFinishReport(service="svc-snap", serviceInstance="inst-s", taskId=tid))
    S.unary("/ProfileTask/reportTaskFinish",  # compat path; unknown task: accepted, no log
            Profile_pb2.ProfileTaskFinishReport(service="svc-snap", serviceInstance="inst-s", taskId="unknown"))
    st, logs = S.json("GET", "/api/v1/profile/tasks/%s/logs" % q(tid), expect=200)
    assert [(l["instanceName"], l["operationType"]) for l in logs] == [("inst-s", "EXECUTION_FINISHED")], logs
    # Exports.
    st, h, body = S.http("GET", "/api/v1/profile/tasks/%s/export?format=collapsed" % q(tid))
    if st != 501:  # exporters built in
        assert st == 200, (st, body[:200])
        assert h["content-disposition"].startswith("attachment; filename=\"skyprof-task-"), h
        assert b"A;B;C" in body, body
        st, h, body = S.http("GET", "/api/v1/profile/segments/seg-A/export?format=speedscope&start=%d&end=%d"
                             % (t0, t0 + 1040))
        assert st == 200 and b"speedscope" in body, (st, body[:200])
        st, h, body = S.http("GET", "/api/v1/profile/segments/seg-A/export?format=pprof")
        assert st == 200 and body[:2] == b"\x1f\x8b", (st, body[:20])  # gzip
        # A segment's pprof carries its trace id and endpoint and is weighted by its task's
        # dump period.
        period, samples = pprof_summary(body)
        st, task = S.json("GET", "/api/v1/profile/tasks/" + q(tid), expect=200)
        assert period == task["dumpPeriod"] * 1000000, (period, task)
        assert samples and all(sm.get("trace_id") == "trace-1" and sm.get("endpoint") == "/pay"
                               and sm.get("segment_id") == "seg-A" for sm in samples), samples
        st, doc = S.json("GET", "/api/v1/profile/tasks/%s/export?format=bogus" % q(tid))
        assert st == 400 and doc["field"] == "format", doc
        st, doc = S.json("GET", "/api/v1/profile/segments/seg-A/export?format=json&start=5")
        assert st == 400, doc


def t_management_services():
    md = Management_pb2
    S.unary(V3 + "ManagementService/reportInstanceProperties", md.InstanceProperties(
        service="svc mgmt/1", serviceInstance="inst@host", layer="GENERAL",
        properties=[Common_pb2.KeyStringValuePair(key="language", value="python"),
                    Common_pb2.KeyStringValuePair(key="Process No.", value="42")]))
    S.unary("/ManagementService/keepAlive", md.InstancePingPkg(service="svc mgmt/1", serviceInstance="inst@host"))
    S.unary(V3 + "ManagementService/keepAlive", md.InstancePingPkg(service="svc mgmt/1", serviceInstance="inst-2"))
    st, svcs = S.json("GET", "/api/v1/services", expect=200)
    s = [x for x in svcs if x["name"] == "svc mgmt/1"]
    assert len(s) == 1 and s[0]["instances"] == 2, svcs
    st, insts = S.json("GET", "/api/v1/services/%s/instances" % q("svc mgmt/1"), expect=200)
    by = {i["name"]: i for i in insts}
    assert set(by) == {"inst@host", "inst-2"}, insts
    assert by["inst@host"]["language"] == "python" and by["inst@host"]["properties"]["Process No."] == "42", by
    S.json("GET", "/api/v1/services/unknown-service/instances", expect=404)
    # Empty names are refused with INVALID_ARGUMENT.
    try:
        S.unary(V3 + "ManagementService/keepAlive", md.InstancePingPkg(service="", serviceInstance="x"))
        raise AssertionError("empty service accepted")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e


def t_dropped_services():
    empty = b""
    for path, streaming in [("LogReportService/collect", True), ("MeterReportService/collect", True),
                            ("MeterReportService/collectBatch", True), ("EventService/collect", True),
                            ("JVMMetricReportService/collect", False), ("CLRMetricReportService/collect", False),
                            ("ConfigurationDiscoveryService/fetchConfigurations", False)]:
        # (goProfileReport is not dropped: it needs a stored trace task, test_server_hostile.py)
        if streaming:
            r = S.stream(V3 + path, [b"\x0a\x03abc", empty], raw=True)
        else:
            r = S.unary(V3 + path, b"\x0a\x03abc", raw=True)
        assert len(r.commands) == 0, path
    r = S.unary("/JVMMetricReportService/collect", b"", raw=True)  # compat path
    assert len(r.commands) == 0
    # A service we do not know at all is UNIMPLEMENTED.
    try:
        S.unary(V3 + "Nope/nope", b"", raw=True)
        raise AssertionError("unknown service answered")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.UNIMPLEMENTED, e


# ------------------------------------------------------------------ HTTP contract

def t_http_bad_input():
    P = "/api/v1/profile/tasks"
    st, doc = S.json("POST", P, b"{not json")
    assert st == 400 and "malformed JSON" in doc["error"], doc
    st, doc = S.json("POST", P, b"[1,2]")
    assert st == 400 and "error" in doc, doc
    st, doc = S.json("POST", P, b"")
    assert st == 400 and "error" in doc, doc
    base = {"service": "svc-bad", "endpointName": "/x", "duration": 5, "minDurationThreshold": 0,
            "dumpPeriod": 10, "maxSamplingCount": 5}
    for field, val in [("duration", "5"), ("duration", 5.5), ("dumpPeriod", None), ("service", 7),
                       ("endpointName", ["x"]), ("startTime", "now"), ("maxSamplingCount", True)]:
        body = dict(base)
        if val is None:
            del body[field]
        else:
            body[field] = val
        st, doc = S.json("POST", P, body)
        assert st == 400 and doc.get("field") == field and "error" in doc, (field, val, st, doc)
    st, doc = S.json("POST", P, b'{"service":"a","service":"b"}')  # duplicate keys
    assert st == 400, doc
    st, doc = S.json("POST", P, b'{"service":"a","endpointName":"/x","duration":99999999999999999999999}')
    assert st == 400, doc  # out of int64
    st, doc = S.json("POST", P, dict(base, minDurationThreshold=2 ** 40))
    assert st == 400 and doc["field"] == "minDurationThreshold", doc
    st, doc = S.json("POST", P, dict(base, unknownField={"x": 1}))  # unknown fields are ignored
    assert st == 201, doc
    st, doc = S.json("POST", P, b"x" * (1024 * 1024 + 10))
    assert st == 413 and "error" in doc, (st, doc)
    # Far over the limit: refused from the Content-Length header, before the body is read.
    import socket
    with socket.create_connection(("127.0.0.1", S.http_port), timeout=10) as sk:
        sk.sendall(b"POST /api/v1/profile/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\n")
        resp = sk.recv(4096)
    assert resp.startswith(b"HTTP/1.1 413"), resp
    # Analyze bodies.
    A = "/api/v1/profile/analyze"
    for body in [b"{}", b"[]", b'[{"segmentId": 5}]', b'[{"segmentId":"s"}]',
                 b'[{"segmentId":"s","timeRange":{"start":"a","end":2}}]',
                 b'[{"segmentId":"s","timeRange":{"start":3,"end":2}}]']:
        st, doc = S.json("POST", A, body)
        assert st == 400 and "error" in doc, (body, st, doc)
    # Unknown segment: an empty analysis, not an error.
    st, an = S.json("POST", A, [{"segmentId": "no-such", "timeRange": {"start": 0, "end": 1}}], expect=200)
    assert an["trees"] == [], an
    # Routing.
    for path in ["/api/v1/nope", "/api/v2/profile/tasks", "/api/v1/profile/tasks/a/b/c", "/api"]:
        st, doc = S.json("GET", path)
        assert st == 404 and "error" in doc, (path, st, doc)
    for m, path in [("DELETE", P), ("PUT", "/healthz"), ("GET", A), ("POST", "/api/v1/services"),
                    ("POST", "/api/v1/profile/tasks/x/logs"), ("POST", "/metrics")]:
        st, h, body = S.http(m, path, body=b"{}" if m in ("POST", "PUT") else None)
        assert st == 405, (m, path, st, body)
    st, h, body = S.http("GET", "/api/v1/profile/tasks/%00bad")
    assert st == 400, (st, body)
    st, doc = S.json("GET", "/healthz", expect=200)
    assert doc == {"status": "ok"}


def t_metrics():
    st, h, body = S.http("GET", "/metrics")
    assert st == 200 and h["content-type"].startswith("text/plain"), h
    text = body.decode()
    for name in ["skyprof_snapshots_received_total", "skyprof_snapshots_stored_total",
                 "skyprof_snapshots_duplicate_total", "skyprof_snapshots_rejected_total",
                 "skyprof_snapshot_streams_total", "skyprof_segments_stored_total", "skyprof_tasks_created_total",
                 "skyprof_task_commands_sent_total", "skyprof_grpc_calls_started_total",
                 "skyprof_store_commit_seconds_total", "skyprof_process_resident_memory_bytes",
                 'skyprof_http_requests_total{code="2xx"}', 'skyprof_http_requests_total{code="4xx"}']:
        assert re.search(r"^%s \d" % re.escape(name), text, re.M), name
    assert S.metric("skyprof_snapshots_stored_total") >= 8
    assert S.metric("skyprof_tasks_created_total") >= 5
    assert S.metric("skyprof_task_commands_sent_total") >= 5


# ------------------------------------------------------------------ static files and tokens

def t_static_files():
    with tempdir() as d:
        root = os.path.join(d, "dist")
        os.makedirs(os.path.join(root, "assets"))
        with open(os.path.join(root, "index.html"), "w") as f:
            f.write("<html>skyprof-ui-index</html>")
        with open(os.path.join(root, "assets", "app-1234.js"), "w") as f:
            f.write("console.log('ui')")
        with open(os.path.join(root, "assets", "style.css"), "w") as f:
            f.write("body{}")
        with open(os.path.join(d, "secret.txt"), "w") as f:
            f.write("TOP-SECRET")
        os.symlink(os.path.join(d, "secret.txt"), os.path.join(root, "assets", "link.txt"))
        srv = Skyprofd(os.path.join(d, "db"), "--web-root", root, name="skyprofd-static")
        try:
            st, h, body = srv.http("GET", "/")
            assert st == 200 and b"skyprof-ui-index" in body and h["content-type"].startswith("text/html"), (st, h)
            st, h, body = srv.http("GET", "/assets/app-1234.js")
            assert st == 200 and body == b"console.log('ui')" and "javascript" in h["content-type"], h
            assert "immutable" in h.get("cache-control", ""), h
            st, h, body = srv.http("GET", "/assets/style.css")
            assert st == 200 and h["content-type"].startswith("text/css")
            st, h, body = srv.http("HEAD", "/assets/style.css")
            assert st == 200 and body == b""
            for path in ["/../secret.txt", "/assets/../../secret.txt", "/%2e%2e/secret.txt",
                         "/assets/%2e%2e/%2e%2e/secret.txt", "/assets/..%2f..%2fsecret.txt",
                         "/assets/link.txt", "/.hidden", "//etc/passwd", "/assets/%2fetc%2fpasswd"]:
                st, h, body = srv.http("GET", path)
                assert b"TOP-SECRET" not in body and b"root:" not in body, (path, st, body)
                # Either refused, or (extension-less paths) the SPA's index.html.
                assert st in (400, 404) or body == b"<html>skyprof-ui-index</html>", (path, st, body)
            # SPA fallback for client routes; a missing asset is a 404.
            st, h, body = srv.http("GET", "/tasks/123")
            assert st == 200 and b"skyprof-ui-index" in body
            st, h, body = srv.http("GET", "/assets/missing.js")
            assert st == 404
            st, h, body = srv.http("POST", "/", body=b"x")
            assert st == 405
        finally:
            srv.stop()
    # No web root: a page saying the UI was not built.
    with tempdir() as d:
        srv = Skyprofd(os.path.join(d, "db"), "--web-root", os.path.join(d, "missing"), name="skyprofd-noui")
        try:
            st, h, body = srv.http("GET", "/")
            assert st == 200 and b"not built" in body and h["content-type"].startswith("text/html"), body
            st, h, body = srv.http("GET", "/assets/x.js")
            assert st == 404
        finally:
            srv.stop()


def t_api_token():
    with tempdir() as d:
        srv = Skyprofd(os.path.join(d, "db"), "--api-token", "s3cret", name="skyprofd-token")
        try:
            st, doc = srv.create_task("svc-tok")
            assert st == 401 and "error" in doc, (st, doc)
            st, doc = srv.create_task("svc-tok", headers={"Authorization": "Bearer wrong"})
            assert st == 401, doc
            st, doc = srv.create_task("svc-tok", headers={"Authorization": "s3cret"})
            assert st == 401, doc
            st, doc = srv.create_task("svc-tok", headers={"Authorization": "Bearer s3cret"})
            assert st == 201, doc
            st, lst = srv.json("GET", "/api/v1/profile/tasks", expect=200)  # reads need no token
            assert len(lst) == 1
            st, doc = srv.json("POST", "/api/v1/profile/analyze", [{"segmentId": "x", "timeRange": {"start": 0, "end": 1}}])
            assert st == 401
            # Agents are unaffected by the API token.
            assert len(srv.query("svc-tok", "i").commands) == 1
        finally:
            srv.stop()


def t_max_analyze_snapshots():
    with tempdir() as d:
        srv = Skyprofd(os.path.join(d, "db"), "--max-analyze-snapshots", "3", name="skyprofd-cap")
        try:
            srv.snapshots([snap("t-cap", "seg-cap", i, ["a", "b"]) for i in range(5)])
            st, an = srv.json("GET", "/api/v1/profile/segments/seg-cap/analyze", expect=200)
            assert root_count(an) == 3, an
            assert an["tip"] and "5" in an["tip"] and "3" in an["tip"], an["tip"]
        finally:
            srv.stop()


def t_command_line():
    import subprocess
    from skyprofd_util import SKYPROFD
    r = subprocess.run([SKYPROFD, "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "--grpc-addr" in r.stdout and "SKYPROF_DB" in r.stdout, r
    r = subprocess.run([SKYPROFD, "--version"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and re.match(r"^skyprofd \d+\.\d+\.\d+$", r.stdout.strip()), r
    for args, env, msg in [(["--bogus"], {}, "unknown option '--bogus'"),
                           (["--retention-days", "x"], {}, "--retention-days"),
                           ([], {"SKYPROF_LOG_LEVEL": "loud"}, "SKYPROF_LOG_LEVEL"),
                           (["--grpc-addr", "nope"], {}, "invalid address")]:
        r = subprocess.run([SKYPROFD] + args, capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, **env))
        assert r.returncode == 2 and msg in r.stderr, (args, r.returncode, r.stderr)
    # A port already taken: start-up fails with exit code 1 and a logged reason.
    with tempdir() as d:
        import socket
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            r = subprocess.run([SKYPROFD, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:%d" % port,
                                "--db", os.path.join(d, "x.db")], capture_output=True, text=True, timeout=60)
            assert r.returncode == 1 and "cannot listen for HTTP" in r.stderr, (r.returncode, r.stderr)


def main():
    global S
    with tempdir() as d:
        S = Skyprofd(os.path.join(d, "data", "nested"))
        try:
            assert S.db_url or os.path.exists(S.db), "database folder not created"
            for name, fn in [("task create/get/list", t_task_create_and_get),
                             ("task validation texts", t_task_validation_texts),
                             ("task overlap", t_task_overlap),
                             ("task commands + cursor + NOTIFIED", t_task_commands),
                             ("snapshots -> segments -> analyze -> finish -> exports",
                              t_snapshots_segments_analyze_finish),
                             ("management -> services/instances", t_management_services),
                             ("accept-and-drop services", t_dropped_services),
                             ("HTTP bad input / routing", t_http_bad_input),
                             ("metrics", t_metrics)]:
                R.run(name, fn)
        finally:
            S.stop()
    R.run("command line", t_command_line)
    R.run("--max-analyze-snapshots", t_max_analyze_snapshots)
    R.run("static files", t_static_files)
    R.run("api token", t_api_token)
    R.finish()


if __name__ == "__main__":
    main()
