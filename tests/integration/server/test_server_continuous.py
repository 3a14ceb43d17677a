"""skyprofd's continuous profiling (issue 11, server side), end to end against the real daemon
with Debian's grpcio and stubs generated from our proto/ebpf/profiling/ContinuousProfiling.proto:
policies over HTTP (every OAP validation text, decimals, our targets/items/durations, the input
shape round-tripping with a stable SHA-512 uuid), queryPolicies (SkyWalking's key names, the uuid
cursor, a removed policy as an empty UUID), reportProfilingTask (causes stored, TaskId answered,
listed as a trigger), and the evaluator from real trace segments under time compression
(--continuous-slot-ms): an ENDPOINT_AVG_RESPONSE_TIME policy on /slow fires within its window
with its causes, a TRACE target creates the trace task (endpoint, min-duration threshold) whose
detail says what triggered it, no trigger during the silence, a new one after it, and the hourly
cap holds back a third."""
import hashlib
import json
import os
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402

from skp_harness import Results, tempdir, wait_until  # noqa: E402
from skyprofd_util import V3, Skyprofd, Tracing_pb2, args_of  # noqa: E402
from ebpf.profiling import ContinuousProfiling_pb2 as CP  # noqa: E402

S = None
R = Results()
COLLECT = V3 + "TraceSegmentReportService/collect"
QUERY = V3 + "ContinuousProfilingService/queryPolicies"
REPORT = V3 + "ContinuousProfilingService/reportProfilingTask"
SLOT_MS = 100


def q(s):
    return urllib.parse.quote(s, safe="")


def item(type_, threshold="50", period=10, count=3, **kw):
    d = {"type": type_, "threshold": threshold, "period": period, "count": count}
    d.update(kw)
    return d


def policy(*targets, **extra):
    d = {"targets": [{"targetType": t, "checkItems": items} for t, items in targets]}
    d.update(extra)
    return d


def put(service, body, expect=200):
    st, doc = S.json("PUT", "/api/v1/continuous/policies/" + q(service), body)
    assert st == expect, (st, doc, body)
    return doc


def t_validation():
    cases = [
        (policy(("ON_CPU", [item("PROCESS_CPU")]), ("ON_CPU", [item("SYSTEM_LOAD")])),
         "contains multiple same target type: ON_CPU"),
        (policy(("OFF_CPU", [item("PROCESS_CPU"), item("PROCESS_CPU")])),
         "contains multiple same monitor type PROCESS_CPU in OFF_CPU"),
        (policy(("ON_CPU", [item("PROCESS_CPU", period=0)])),
         "check PROCESS_CPU in ON_CPU error: period must be bigger than zero"),
        (policy(("ON_CPU", [item("PROCESS_CPU", count=0)])),
         "check PROCESS_CPU in ON_CPU error: count must bigger than zero"),
        (policy(("ON_CPU", [item("PROCESS_CPU", period=3, count=4)])),
         "check PROCESS_CPU in ON_CPU error: count must be equal to or smaller than period"),
        (policy(("ON_CPU", [item("PROCESS_CPU", threshold="abc")])),
         "check PROCESS_CPU in ON_CPU error: parsing threshold error"),
        (policy(("ON_CPU", [item("PROCESS_CPU", threshold="")])),
         "check PROCESS_CPU in ON_CPU error: parsing threshold error"),
        (policy(("ON_CPU", [item("PROCESS_CPU", threshold="100.5")])),
         "check PROCESS_CPU in ON_CPU error: the process CPU percent should in [0-100]"),
        (policy(("ON_CPU", [item("PROCESS_THREAD_COUNT", threshold="-1")])),
         "check PROCESS_THREAD_COUNT in ON_CPU error: the process thread count must bigger than zero"),
        (policy(("NETWORK", [item("SYSTEM_LOAD", threshold="-0.5")])),
         "check SYSTEM_LOAD in NETWORK error: the system load must bigger than zero"),
        (policy(("ON_CPU", [item("HTTP_ERROR_RATE", threshold="101")])),
         "check HTTP_ERROR_RATE in ON_CPU error: the HTTP error rate should in [0-100]"),
        (policy(("ON_CPU", [item("HTTP_AVG_RESPONSE_TIME", threshold="-3")])),
         "check HTTP_AVG_RESPONSE_TIME in ON_CPU error: the HTTP average response time must bigger than zero"),
        # ours
        (policy(("TRACE", [item("ENDPOINT_ERROR_RATE", threshold="100.01")])),
         "check ENDPOINT_ERROR_RATE in TRACE error: the endpoint error rate should in [0-100]"),
        (policy(("TRACE", [item("ENDPOINT_P99_RESPONSE_TIME", threshold="-1")])),
         "check ENDPOINT_P99_RESPONSE_TIME in TRACE error: the endpoint response time must bigger than zero"),
        (policy(("TRACE", [item("ENDPOINT_AVG_RESPONSE_TIME", uriList=["/a"], uriRegex="/b.*")])),
         "check ENDPOINT_AVG_RESPONSE_TIME in TRACE error: uriList and uriRegex cannot be set at the same time"),
        (policy(("TRACE", [item("ENDPOINT_AVG_RESPONSE_TIME", uriRegex="(")])),
         "check ENDPOINT_AVG_RESPONSE_TIME in TRACE error: parsing uriRegex error: unclosed group"),
        (policy(("TRACE", [item("ENDPOINT_AVG_RESPONSE_TIME", uriRegex="/a(?=b)")])),
         "check ENDPOINT_AVG_RESPONSE_TIME in TRACE error: parsing uriRegex error: "
         "lookaround groups are not supported"),
        (policy(("ON_CPU", [item("PROCESS_CPU", uriList=["/a"])])),
         "check PROCESS_CPU in ON_CPU error: uriList and uriRegex apply to HTTP and ENDPOINT items only"),
        (policy(("TRACE", [item("ENDPOINT_AVG_RESPONSE_TIME", period=601, count=1)])),
         "check ENDPOINT_AVG_RESPONSE_TIME in TRACE error: period must be at most 600 seconds"),
        (policy(("BOGUS", [])), "unknown target type: BOGUS"),
        (policy(("TRACE", [item("CPU")])), "unknown monitor type: CPU"),
        (policy(("TRACE", [item("ENDPOINT_ERROR_RATE")]), executeDuration=0),
         "executeDuration must be in [1-900] seconds"),
        (policy(("TRACE", [item("ENDPOINT_ERROR_RATE")]), silenceDuration=-1),
         "silenceDuration must be in [0-86400] seconds"),
        (policy(("TRACE", [item("ENDPOINT_ERROR_RATE")]), maxTriggersPerHour=0),
         "maxTriggersPerHour must be in [1-3600]"),
    ]
    for body, reason in cases:
        doc = put("val-svc", body, expect=400)
        assert doc == {"errorReason": reason}, (doc, reason)
    # nothing was stored by the refusals
    st, doc = S.json("GET", "/api/v1/continuous/policies/val-svc")
    assert st == 404, doc
    # decimals everywhere OAP takes integers; an integer threshold too
    doc = put("val-svc", policy(("ON_CPU", [item("PROCESS_CPU", threshold="75.5"),
                                            item("SYSTEM_LOAD", threshold="2.25")]),
                                ("TRACE", [item("ENDPOINT_P90_RESPONSE_TIME", threshold="199.9",
                                                uriRegex="^/api/.*")])))
    thr = {i["type"]: i["threshold"] for t in doc["targets"] for i in t["checkItems"]}
    assert thr == {"PROCESS_CPU": "75.5", "SYSTEM_LOAD": "2.25", "ENDPOINT_P90_RESPONSE_TIME": "199.9"}, doc
    # malformed JSON body (declared JSON: a PUT passes the same guard as a POST, issue 25)
    st, _, data = S.http("PUT", "/api/v1/continuous/policies/val-svc", body="{not json",
                         headers={"Content-Type": "application/json"})
    assert st == 400, data
    st, _, data = S.http("PUT", "/api/v1/continuous/policies/val-svc", body="{not json")
    assert st == 415, data
    S.json("DELETE", "/api/v1/continuous/policies/val-svc", expect=200)


def t_round_trip():
    body = policy(("ON_CPU", [item("PROCESS_CPU", threshold="80", period=10, count=3),
                              item("HTTP_AVG_RESPONSE_TIME", threshold="300", period=5, count=2,
                                   uriList=["/a", "/b"])]),
                  ("TRACE", [item("ENDPOINT_P99_RESPONSE_TIME", threshold="500", period=10, count=4,
                                  uriList=["/checkout"])]),
                  executeDuration=120, silenceDuration=300, maxTriggersPerHour=3)
    doc = put("rt-svc", body)
    uuid = doc["uuid"]
    assert len(uuid) == 128 and all(c in "0123456789abcdef" for c in uuid), uuid
    # the same policy again: the same uuid; the GET output PUT back: the same uuid
    assert put("rt-svc", body)["uuid"] == uuid
    st, got = S.json("GET", "/api/v1/continuous/policies/rt-svc", expect=200)
    assert got["uuid"] == uuid and got["executeDuration"] == 120 and got["silenceDuration"] == 300
    assert got["maxTriggersPerHour"] == 3
    back = {k: got[k] for k in ("targets", "executeDuration", "silenceDuration", "maxTriggersPerHour")}
    assert put("rt-svc", back)["uuid"] == uuid
    # the uuid is the SHA-512 hex of the stored JSON: OAP's configuration JSON key names
    if S.db_url:  # SKP_TEST_DB=pg: the row in PostgreSQL
        import pgserver
        out = pgserver.server().psql("SELECT json || chr(1) || uuid FROM continuous_policies "
                                     "WHERE service='rt-svc'", dbname=pgserver.dbname_of(S.db_url))
        stored, su = out.rstrip("\n").split("\x01")
    else:
        import sqlite3
        con = sqlite3.connect("file:%s?mode=ro" % S.db, uri=True)
        try:
            (stored, su), = con.execute("SELECT json, uuid FROM continuous_policies WHERE service='rt-svc'")
        finally:
            con.close()
    assert su == uuid and hashlib.sha512(stored.encode()).hexdigest() == uuid
    sj = json.loads(stored)
    assert sj["targetCheckers"]["ON_CPU"]["HTTP_AVG_RESPONSE_TIME"] == {
        "threshold": "300", "period": 5, "count": 2, "uriList": ["/a", "/b"]}, sj
    # a changed threshold: a new uuid
    body["targets"][0]["checkItems"][0]["threshold"] = "81"
    assert put("rt-svc", body)["uuid"] != uuid
    st, lst = S.json("GET", "/api/v1/continuous/policies", expect=200)
    assert "rt-svc" in [p["service"] for p in lst["policies"]], lst


def agent_query(*pairs):
    resp = S.unary(QUERY, CP.ContinuousProfilingPolicyQuery(policies=[
        CP.ContinuousProfilingServicePolicyQuery(serviceName=s, uuid=u) for s, u in pairs]))
    return resp


def t_query_policies():
    body = policy(("ON_CPU", [item("PROCESS_CPU", threshold="50", period=10, count=3)]),
                  ("NETWORK", [item("HTTP_ERROR_RATE", threshold="10.5", period=6, count=2,
                                    uriRegex="^/api/.*")]),
                  ("TRACE", [item("ENDPOINT_AVG_RESPONSE_TIME", threshold="200", uriList=["/x"])]))
    uuid = put("q-svc", body)["uuid"]
    resp = agent_query(("q-svc", ""), ("no-policy", ""))
    assert len(resp.commands) == 1, resp
    cmd = resp.commands[0]
    assert cmd.command == "ContinuousProfilingPolicyQuery", cmd
    lst = json.loads(args_of(cmd)["ServiceWithPolicyJSON"])
    assert lst == [{"ServiceName": "q-svc", "UUID": uuid, "Profiling": {
        "ON_CPU": {"PROCESS_CPU": {"Threshold": "50", "Period": 10, "Count": 3}},
        "NETWORK": {"HTTP_ERROR_RATE": {"Threshold": "10.5", "Period": 6, "Count": 2,
                                        "URIRegex": "^/api/.*"}}},
        "ExecuteDuration": 600, "SilenceDuration": 1200}], lst
    # the cursor: same uuid -> nothing
    resp = agent_query(("q-svc", uuid))
    assert len(resp.commands) == 0, resp
    # an old uuid -> the policy again
    resp = agent_query(("q-svc", "old"))
    assert json.loads(args_of(resp.commands[0])["ServiceWithPolicyJSON"])[0]["UUID"] == uuid
    # removed -> empty UUID (only for an agent that held one)
    S.json("DELETE", "/api/v1/continuous/policies/q-svc", expect=200)
    resp = agent_query(("q-svc", uuid))
    assert json.loads(args_of(resp.commands[0])["ServiceWithPolicyJSON"]) == [
        {"ServiceName": "q-svc", "UUID": ""}], resp
    assert len(agent_query(("q-svc", "")).commands) == 0
    # the package-less path works too
    call = S.channel().unary_unary("/ContinuousProfilingService/queryPolicies",
                                   request_serializer=CP.ContinuousProfilingPolicyQuery.SerializeToString,
                                   response_deserializer=lambda b: b)
    call(CP.ContinuousProfilingPolicyQuery(), timeout=30)


def t_report_task():
    rep = CP.ContinuousProfilingReport(
        layer="GENERAL", serviceName="rep-svc", instanceName="inst-7", processName="python3",
        duration=30, onCPU=CP.ContinuousOnCPUProfilingTask(),
        causes=[CP.ContinuousProfilingCause(type=CP.ProcessCPU, singleValue=CP.ContinuousProfilingSingleValueCause(
                    threshold=50, current=87.5)),
                CP.ContinuousProfilingCause(type=CP.HTTPAvgResponseTime, uri=CP.ContinuousProfilingURICause(
                    path="/slow", threshold=100, current=312.25))])
    resp = S.unary(REPORT, rep)
    assert len(resp.commands) == 1 and resp.commands[0].command == "ContinuousProfilingReportTask", resp
    tid = args_of(resp.commands[0])["TaskId"]
    assert tid.startswith("ct-"), tid
    st, doc = S.json("GET", "/api/v1/profile/triggers?service=rep-svc", expect=200)
    assert len(doc["triggers"]) == 1, doc
    t = doc["triggers"][0]
    assert t["taskId"] == tid and t["taskKind"] == "ebpf" and t["source"] == "agent", t
    assert t["target"] == "ON_CPU" and t["instance"] == "inst-7" and t["process"] == "python3", t
    c = t["causes"]
    assert c[0]["type"] == "PROCESS_CPU" and c[0]["current"] == 87.5 and c[0]["threshold"] == 50, c
    assert "uri" not in c[0] or c[0]["uri"] is None, c
    assert c[1]["type"] == "HTTP_AVG_RESPONSE_TIME" and c[1]["uri"] == "/slow", c
    assert c[1]["current"] == 312.25 and not c[1]["uriIsRegex"], c
    assert c[1]["text"] == "HTTP_AVG_RESPONSE_TIME of /slow: 312 ms \u2265 100 ms", c
    st, doc = S.json("GET", "/api/v1/profile/triggers?task=" + q(tid), expect=200)
    assert [x["id"] for x in doc["triggers"]] == [t["id"]]
    # no target -> INVALID_ARGUMENT; no service -> INVALID_ARGUMENT
    for bad in (CP.ContinuousProfilingReport(serviceName="rep-svc"),
                CP.ContinuousProfilingReport(offCPU=CP.ContinuousOffCPUProfilingTask())):
        try:
            S.unary(REPORT, bad)
            raise AssertionError("expected INVALID_ARGUMENT")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e


def segment(seg_id, endpoint, t0, dur, service, error=False, instance="inst-1"):
    return Tracing_pb2.SegmentObject(
        traceId="tr-" + seg_id, traceSegmentId=seg_id, service=service, serviceInstance=instance,
        spans=[Tracing_pb2.SpanObject(spanId=0, parentSpanId=-1, startTime=t0, endTime=t0 + dur,
                                      operationName=endpoint, spanType=Tracing_pb2.Entry,
                                      isError=error)])


class Load:
    """Sends one segment of `endpoint` (dur ms) every few ms until stopped."""

    def __init__(self, service, endpoint, dur):
        self.service, self.endpoint, self.dur = service, endpoint, dur
        self.stop_ev = threading.Event()
        self.n = 0
        self.th = threading.Thread(target=self.run, daemon=True)
        self.th.start()

    def run(self):
        while not self.stop_ev.is_set():
            now = int(time.time() * 1000)
            segs = [segment("%s-%d-%d" % (self.service, self.n, i), self.endpoint, now - self.dur,
                            self.dur, self.service) for i in range(3)]
            segs.append(segment("%s-%d-f" % (self.service, self.n), "/fast", now - 5, 5, self.service))
            self.n += 1
            try:
                S.stream(COLLECT, segs)
            except grpc.RpcError:
                pass
            time.sleep(SLOT_MS / 4000.0)

    def stop(self):
        self.stop_ev.set()
        self.th.join(30)


def triggers(service):
    st, doc = S.json("GET", "/api/v1/profile/triggers?service=" + q(service), expect=200)
    return doc["triggers"]


def t_trace_target():
    # period/count/durations count slots of SLOT_MS
    put("ev-svc", policy(("TRACE", [item("ENDPOINT_AVG_RESPONSE_TIME", threshold="100", period=10,
                                          count=3, uriList=["/slow"])]),
                         executeDuration=5, silenceDuration=5))
    load = Load("ev-svc", "/slow", 300)
    try:
        wait_until(lambda: triggers("ev-svc"), timeout=60, what="a trigger for /slow")
    finally:
        load.stop()
    t = triggers("ev-svc")
    assert len(t) == 1, t
    t = t[0]
    assert t["target"] == "TRACE" and t["source"] == "server" and t["taskKind"] == "trace", t
    c = t["causes"][0]
    assert c["type"] == "ENDPOINT_AVG_RESPONSE_TIME" and c["uri"] == "/slow", c
    assert c["threshold"] == 100 and abs(c["current"] - 300) < 1, c
    assert c["hits"] >= 3 and c["windowSeconds"] == 1, c  # 10 slots of 100 ms
    assert len(t["causes"]) == 1, t  # /fast never crossed
    assert t["text"].startswith("triggered by ENDPOINT_AVG_RESPONSE_TIME of /slow: 300 ms \u2265 100 ms ("), t
    st, task = S.json("GET", "/api/v1/profile/tasks/" + q(t["taskId"]), expect=200)
    assert task["endpointName"] == "/slow" and task["minDurationThreshold"] == 100, task
    assert task["duration"] == 1 and task["triggeredBy"] == t["text"], task
    assert task["trigger"]["id"] == t["id"], task
    # the live values route shows the series with values over the threshold
    st, vals = S.json("GET", "/api/v1/continuous/policies/ev-svc/values", expect=200)
    ser = [s for s in vals["series"] if s["uri"] == "/slow"]
    assert len(ser) == 1 and ser[0]["type"] == "ENDPOINT_AVG_RESPONSE_TIME" and ser[0]["slotMs"] == SLOT_MS, vals
    assert len(ser[0]["values"]) == 10, ser
    assert not [s for s in vals["series"] if s["uri"] == "/fast"], vals  # not named: not tracked


def t_pprof_target():
    # PPROF_WALL: a pprof "wall" task on the instance that served the endpoint
    put("pp-svc", policy(("PPROF_WALL", [item("ENDPOINT_P99_RESPONSE_TIME", threshold="250",
                                               period=10, count=3, uriList=["/slow"])]),
                         executeDuration=5, silenceDuration=5))
    load = Load("pp-svc", "/slow", 300)
    try:
        wait_until(lambda: triggers("pp-svc"), timeout=60, what="a PPROF_WALL trigger")
    finally:
        load.stop()
    t = triggers("pp-svc")[0]
    assert t["taskKind"] == "pprof" and t["instance"] == "inst-1", t
    st, task = S.json("GET", "/api/v1/pprof/tasks/" + q(t["taskId"]), expect=200)
    assert task["events"] == "wall" and task["triggeredBy"] == t["text"], task
    assert t["text"].startswith("triggered by ENDPOINT_P99_RESPONSE_TIME of /slow: 30"), t


def t_silence_and_cap():
    # a NETWORK target creates no task of ours, so the quiet time is execute + silence exactly;
    # 2 per hour at most
    put("sil-svc", policy(("NETWORK", [item("ENDPOINT_P90_RESPONSE_TIME", threshold="150.5",
                                            period=5, count=2, uriRegex="^/sl")]),
                          executeDuration=10, silenceDuration=20, maxTriggersPerHour=2))
    load = Load("sil-svc", "/slow", 200)
    try:
        wait_until(lambda: len(triggers("sil-svc")) >= 1, timeout=60, what="first trigger")
        t1 = triggers("sil-svc")[0]
        assert t1["taskId"] is None and "eBPF" in t1["note"], t1
        st, vals = S.json("GET", "/api/v1/continuous/policies/sil-svc/values", expect=200)
        assert vals["quietUntil"] >= t1["time"] + 30 * SLOT_MS - 5, (vals, t1)
        # quiet for 30 slots (3 s) after the first, under steady load
        wait_until(lambda: len(triggers("sil-svc")) >= 2, timeout=60, what="second trigger")
        t2 = triggers("sil-svc")[0]
        gap = t2["time"] - t1["time"]
        assert gap >= 30 * SLOT_MS, (gap, t1, t2)
        # the cap: no third within the hour although the load goes on past another quiet time
        time.sleep(5 * 30 * SLOT_MS / 1000.0)
        assert len(triggers("sil-svc")) == 2, triggers("sil-svc")
    finally:
        load.stop()
    c = t2["causes"][0]
    assert c["type"] == "ENDPOINT_P90_RESPONSE_TIME" and c["uri"] == "/slow" and c["current"] >= 150.5, c


def cli(*args, expect=0):
    import subprocess
    from skp_harness import build_path
    r = subprocess.run([build_path("src", "cli", "skyprof"), "--server", "http://127.0.0.1:%d" % S.http_port]
                       + list(args), capture_output=True, text=True, timeout=60)
    assert r.returncode == expect, (args, r.returncode, r.stdout, r.stderr)
    return r.stdout, r.stderr


def t_cli():
    out, _ = cli("policy", "set", "cli-svc", "TRACE:ENDPOINT_P99_RESPONSE_TIME:500.5:10:4:/checkout",
                 "PPROF_CPU:ENDPOINT_ERROR_RATE:5:6:2:~^/api/", "ON_CPU:PROCESS_CPU:80:10:3",
                 "--execute", "120", "--silence", "30", "--max-per-hour", "3")
    assert "execute 120s, silence 30s, at most 3/hour" in out, out
    st, got = S.json("GET", "/api/v1/continuous/policies/cli-svc", expect=200)
    items = {(t["targetType"], i["type"]): i for t in got["targets"] for i in t["checkItems"]}
    assert items[("TRACE", "ENDPOINT_P99_RESPONSE_TIME")]["uriList"] == ["/checkout"], got
    assert items[("PPROF_CPU", "ENDPOINT_ERROR_RATE")]["uriRegex"] == "^/api/", got
    assert items[("ON_CPU", "PROCESS_CPU")]["threshold"] == "80", got
    out, _ = cli("policy", "get", "cli-svc")
    assert "ENDPOINT_P99_RESPONSE_TIME" in out and ">= 500.5" in out and "uri /checkout" in out, out
    out, _ = cli("policy", "list")
    assert "policy of cli-svc" in out, out
    _, err = cli("policy", "set", "cli-svc", "TRACE:ENDPOINT_AVG_RESPONSE_TIME:1:3:4", expect=1)
    assert "check ENDPOINT_AVG_RESPONSE_TIME in TRACE error: count must be equal to or smaller than period" in err, err
    _, err = cli("policy", "set", "cli-svc", "TRACE:oops", expect=2)
    out, _ = cli("triggers", "--service", "ev-svc")
    assert "TRACE" in out and "triggered by ENDPOINT_AVG_RESPONSE_TIME of /slow" in out and "task " in out, out
    out, _ = cli("--json", "triggers", "--service", "rep-svc")
    assert json.loads(out)["triggers"][0]["source"] == "agent", out
    out, _ = cli("policy", "delete", "cli-svc")
    assert "deleted" in out, out
    cli("policy", "get", "cli-svc", expect=4)


def t_flags():
    # the test settings are flags of the daemon (and appear in --help)
    import subprocess
    from skyprofd_util import SKYPROFD
    out = subprocess.run([SKYPROFD, "--help"], capture_output=True, text=True, timeout=30).stdout
    assert "--continuous-slot-ms" in out and "--continuous-check-interval-ms" in out, out


def t_restart(d):
    # policies survive a restart and are evaluated again (the query answers from the store)
    global S
    put("keep-svc", policy(("TRACE", [item("ENDPOINT_ERROR_RATE", threshold="50", period=4, count=2,
                                            uriList=["/err"])])))
    S.stop()
    S = Skyprofd(d, "--continuous-slot-ms", str(SLOT_MS))
    st, got = S.json("GET", "/api/v1/continuous/policies/keep-svc", expect=200)
    stop = threading.Event()

    def errs():
        n = 0
        while not stop.is_set():
            now = int(time.time() * 1000)
            try:
                S.stream(COLLECT, [segment("e%d-%d" % (n, i), "/err", now - 3, 3, "keep-svc", error=True)
                                   for i in range(3)])
            except grpc.RpcError:
                pass
            n += 1
            time.sleep(0.02)
    th = threading.Thread(target=errs, daemon=True)
    th.start()
    try:
        wait_until(lambda: triggers("keep-svc"), timeout=60, what="error-rate trigger after restart")
    finally:
        stop.set()
        th.join(30)
    t = triggers("keep-svc")[0]
    assert t["causes"][0]["type"] == "ENDPOINT_ERROR_RATE" and t["causes"][0]["current"] == 100, t
    st, task = S.json("GET", "/api/v1/profile/tasks/" + q(t["taskId"]), expect=200)
    assert task["minDurationThreshold"] == 0 and task["endpointName"] == "/err", task


def main():
    global S
    with tempdir() as d:
        data = os.path.join(d, "data")
        S = Skyprofd(data, "--continuous-slot-ms", str(SLOT_MS))
        try:
            R.run("validation texts", t_validation)
            R.run("policy JSON round trip + uuid", t_round_trip)
            R.run("queryPolicies: key names, cursor, removed", t_query_policies)
            R.run("reportProfilingTask -> trigger + TaskId", t_report_task)
            R.run("evaluator: TRACE target from segments", t_trace_target)
            R.run("evaluator: PPROF_WALL target", t_pprof_target)
            R.run("evaluator: silence + hourly cap", t_silence_and_cap)
            R.run("skyprof policy / triggers", t_cli)
            R.run("policies survive a restart", t_restart, data)
        finally:
            S.stop()
    R.run("flags", t_flags)
    R.finish()


if __name__ == "__main__":
    main()
