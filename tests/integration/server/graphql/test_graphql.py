"""POST /graphql (issue 24): SkyWalking's query protocol against a real, seeded skyprofd.
Debian's python3-graphql-core validates our schema text (src/server/graphql/schema.graphqls),
the queries SkyWalking's UI sends (ui_queries.py, written from the protocol and the spec) against
it, and skyprofd's answers against it (graphql-core re-executes each query over our answer and
must find the same data with no type error). Also: ids as OAP makes them, the analysis equal to
the HTTP API's, errors in GraphQL's shape with locations, the limits and their counters,
introspection rebuilding the same schema, the spec's field list against the schema."""
import base64
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import graphql  # noqa: E402  (Debian python3-graphql-core)
from graphql.utils.introspection_query import introspection_query  # noqa: E402

import ui_queries as UI  # noqa: E402
from skp_harness import Results, tempdir  # noqa: E402
from skyprofd_util import V3, Skyprofd, Common_pb2, Management_pb2, Tracing_pb2, snap  # noqa: E402

R = Results()
SRC = os.environ.get("SKP_SOURCE_DIR", os.path.join(HERE, "..", "..", "..", ".."))
SCHEMA_TEXT = open(os.path.join(SRC, "src/server/graphql/schema.graphqls")).read()
SCHEMA = graphql.build_ast_schema(graphql.parse(SCHEMA_TEXT))
# graphql-core 2 leaves a custom scalar of SDL without coercion: Long is a 64-bit integer
# (OAP's), which also accepts its decimal text as input.
_LONG = SCHEMA.get_type("Long")
_LONG.serialize = lambda v: v if isinstance(v, int) and not isinstance(v, bool) else None
_LONG.parse_value = lambda v: int(v)
_LONG.parse_literal = lambda ast: int(ast.value) if hasattr(ast, "value") else None
# The spec beside the checkout (shared/spec), when present.
SPEC = os.path.join(SRC, "..", "shared", "spec", "skywalking-query-protocol.md")
SERVICE = "shop-api"
SID = base64.b64encode(SERVICE.encode()).decode() + ".1"


def b64(s):
    return base64.b64encode(s.encode()).decode()


def post(S, query, variables=None, op=None, headers=None):
    body = {"query": query, "variables": variables or {}}
    if op:
        body["operationName"] = op
    st, doc = S.json("POST", "/graphql", body, headers)
    assert st == 200, (st, doc)
    return doc


def alias_resolver(next_, root, info, **args):
    """graphql-core resolves every field from our answer by its response key."""
    return root.get(info.path[-1]) if isinstance(root, dict) else None


def check(S, name, q, variables, allow_errors=False):
    """Validates the query against the schema, runs it on skyprofd, and checks the answer
    against the schema by re-executing the query over it. Returns the data."""
    doc = graphql.parse(q)
    errs = graphql.validate(SCHEMA, doc)
    assert not errs, (name, [e.message for e in errs])
    ans = post(S, q, variables)
    if not allow_errors:
        assert "errors" not in ans, (name, ans)
    data = ans["data"]
    assert data is not None, (name, ans)
    res = graphql.graphql(SCHEMA, q, root=data, variables=variables, middleware=[alias_resolver])
    assert not res.errors, (name, [str(e) for e in res.errors], data)
    assert json.loads(json.dumps(res.data)) == data, (name, res.data, data)
    return data


def seed(S, now):
    """A service with an instance, a task created through GraphQL, two profiled segments with
    their snapshots and SegmentObjects, a NOTIFIED log."""
    S.unary(V3 + "ManagementService/reportInstanceProperties", Management_pb2.InstanceProperties(
        service=SERVICE, serviceInstance="inst-1",
        properties=[Common_pb2.KeyStringValuePair(key="language", value="python"),
                    Common_pb2.KeyStringValuePair(key="hostname", value="box")]))
    data = check(S, "createProfileTask", *UI.create_task({
        "serviceId": SID, "endpointName": "/pay", "duration": 5, "minDurationThreshold": 0,
        "dumpPeriod": 10, "maxSamplingCount": 5}))
    tid = data["task"]["id"]
    assert data["task"]["errorReason"] is None and tid.endswith("_" + SID), data
    S.query(SERVICE, "inst-1")  # the agent polls: NOTIFIED
    segs = []
    for k, (sid, dur) in enumerate([("seg-a", 40), ("seg-b", 25)]):
        t0 = now + k * 100
        frames = [["main", "handle", "pay"], ["main", "handle", "db"], ["main", "handle", "pay"],
                  ["main", "handle"]]
        S.snapshots([snap(tid, sid, i, f, t0 + i * 10) for i, f in enumerate(frames)])
        S.stream(V3 + "TraceSegmentReportService/collect", [Tracing_pb2.SegmentObject(
            traceId="trace-" + sid, traceSegmentId=sid, service=SERVICE, serviceInstance="inst-1",
            spans=[Tracing_pb2.SpanObject(spanId=0, parentSpanId=-1, startTime=t0,
                                          endTime=t0 + dur, operationName="/pay",
                                          spanType=Tracing_pb2.Entry, isError=(sid == "seg-b"),
                                          componentId=7002)])])
        segs.append((sid, t0, t0 + dur))
    return tid, segs


def t_schema_text(d):
    """The schema text is valid SDL (graphql-core builds it) and holds the trace-profiling
    fields with the protocol's types."""
    q = SCHEMA.get_query_type().fields
    assert str(q["getSegmentsProfileAnalyze"].type) == "ProfileAnalyzation!"
    assert str(q["getProfileTaskSegments"].args["taskID"].type) == "ID!"
    assert str(q["listServices"].type) == "[Service!]!"
    m = SCHEMA.get_mutation_type().fields
    assert str(m["createProfileTask"].args["creationRequest"].type) == "ProfileTaskCreationRequest"


# Fields of the spec's lists that skyprofd does not serve: they must be absent from the schema
# (a client gets a validation error, never made-up data). None left.
NOT_SERVED = set()


def t_spec_fields(d):
    """Every top-level field the spec lists (page load, dashboards, each profiling view) is a
    field of our schema's Query or Mutation, or one of NOT_SERVED, which the schema lacks."""
    if not os.path.exists(SPEC):
        print("  (skipped: %s not found)" % SPEC)
        return
    text = open(SPEC).read()
    start = text.index("## Sent on every page load")
    end = text.index("## Shapes that matter")
    names = set(re.findall(r"`([a-z][A-Za-z0-9]+)`", text[start:end]))
    names -= {"configuration"}  # a member of the templates' shape, not a field of Query
    ours = set(SCHEMA.get_query_type().fields) | set(SCHEMA.get_mutation_type().fields)
    unknown = sorted(n for n in names if n not in ours and n not in NOT_SERVED)
    assert not unknown, unknown
    assert not (NOT_SERVED & ours), NOT_SERVED & ours
    assert names - NOT_SERVED == names & ours and len(names & ours) >= 12, sorted(names & ours)


def t_ui_flow(d):
    now = int(time.time() * 1000)
    with Skyprofd(d, "--log-level", "warn") as S:
        tid, segs = seed(S, now)
        for name, (q, v) in UI.PAGE_LOAD.items():
            data = check(S, name, q, v)
        data = check(S, "templates", *UI.PAGE_LOAD["templates"])
        confs = [json.loads(t["configuration"]) for t in data["getAllTemplates"]]
        general = [c for c in confs if c["layer"] == "GENERAL" and not c["isRoot"]]
        assert len(general) == 1 and general[0]["entity"] == "Service", confs
        tabs = general[0]["children"][0]["children"]
        assert sorted(t["children"][0]["type"] for t in tabs) == sorted(
            ["Profile", "Ebpf", "ContinuousProfiling", "AsyncProfiling", "Pprof"]), tabs
        assert check(S, "layers", *UI.PAGE_LOAD["layers"])["layers"] == ["GENERAL"]
        data = check(S, "services", *UI.services("GENERAL"))
        assert data["services"] == [{"id": SID, "value": SERVICE, "label": SERVICE, "group": "",
                                     "layers": ["GENERAL"], "normal": True,
                                     "shortName": SERVICE}], data
        assert check(S, "services-other-layer", *UI.services("MESH"))["services"] == []
        assert check(S, "service", *UI.service(SID))["service"]["value"] == SERVICE
        assert check(S, "unknown service", *UI.service(b64("nobody") + ".1"))["service"] is None
        dur = {"start": "2026-01-01 0000", "end": "2026-01-01 0015", "step": "MINUTE"}
        pods = check(S, "instances", *UI.instances(SID, dur))["pods"]
        inst_id = SID + "_" + b64("inst-1")
        assert [(p["id"], p["value"], p["language"]) for p in pods] == [
            (inst_id, "inst-1", "PYTHON")], pods
        assert {"name": "hostname", "value": "box"} in pods[0]["attributes"], pods
        eps = check(S, "endpoints", *UI.endpoints(SID, "", dur))["pods"]
        ep_id = SID + "_" + b64("/pay")
        assert {"id": ep_id, "value": "/pay", "label": "/pay"} in eps, eps
        assert check(S, "endpoints-keyword", *UI.endpoints(SID, "zzz", dur))["pods"] == []
        info = check(S, "endpoint", *UI.endpoint_info(ep_id))["endpoint"]
        assert info == {"id": ep_id, "value": "/pay", "label": "/pay", "serviceId": SID,
                        "serviceName": SERVICE}, info
        # the trace-profiling view: first with serviceId "", then the service's
        for sid in ("", SID):
            tl = check(S, "taskList", *UI.task_list(sid, ""))["taskList"]
            assert [t["id"] for t in tl] == [tid], tl
            assert tl[0]["serviceId"] == SID and tl[0]["endpointName"] == "/pay", tl
            assert [(lg["instanceId"], lg["operationType"]) for lg in tl[0]["logs"]] == [
                (inst_id, "NOTIFIED")], tl
        assert check(S, "taskList-other", *UI.task_list(b64("x") + ".1", ""))["taskList"] == []
        sl = check(S, "segments", *UI.task_segments(tid))["segmentList"]
        assert [s["spans"][0]["segmentId"] for s in sl] == ["seg-a", "seg-b"], sl
        for s, (sid, t0, t1) in zip(sl, segs):
            assert s["traceId"] == "trace-" + sid and s["instanceId"] == inst_id, s
            assert s["start"] == str(t0) and s["duration"] == t1 - t0, s
            assert s["endpointNames"] == ["/pay"] and s["spans"][0]["profiled"] is True, s
            assert s["spans"][0]["type"] == "Entry" and s["spans"][0]["component"] == "7002", s
        queries = [{"segmentId": sid, "timeRange": {"start": t0, "end": t1}}
                   for sid, t0, t1 in segs]
        an = check(S, "analyze", *UI.analyze(queries))["analyze"]
        st, http_an = S.json("POST", "/api/v1/profile/analyze", queries, expect=200)
        # the same analysis through both doors: ids as strings, root parentId "0"
        assert len(an["trees"]) == len(http_an["trees"]) == 1, (an, http_an)
        for el, hel in zip(an["trees"][0]["elements"], http_an["trees"][0]["elements"]):
            assert el["id"] == str(hel["id"]) and el["parentId"] == str(hel["parentId"]), el
            for k in ("codeSignature", "duration", "durationChildExcluded", "count"):
                assert el[k] == hel[k], (k, el, hel)
        assert an["trees"][0]["elements"][0]["parentId"] == "0"
        assert an["trees"][0]["elements"][0]["codeSignature"] == "main"
        logs = check(S, "logs", *UI.task_logs(tid))["taskLogs"]
        assert [lg["instanceName"] for lg in logs] == ["inst-1"], logs
        assert check(S, "logs-unknown", *UI.task_logs("nope"))["taskLogs"] == []
        cond = {"serviceId": SID, "traceState": "ALL", "queryOrder": "BY_DURATION",
                "paging": {"pageNum": 1, "pageSize": 20}}
        tr = check(S, "traces", *UI.basic_traces(cond))["data"]["traces"]
        assert [(t["key"], t["duration"], t["isError"]) for t in tr] == [
            ("seg-a", 40, False), ("seg-b", 25, True)], tr
        cond["traceState"] = "ERROR"
        tr = check(S, "traces-error", *UI.basic_traces(cond))["data"]["traces"]
        assert [t["traceIds"] for t in tr] == [["trace-seg-b"]], tr
        spans = check(S, "trace", *UI.trace("trace-seg-a"))["trace"]["spans"]
        assert [(s["segmentId"], s["traceId"]) for s in spans] == [("seg-a", "trace-seg-a")]
        assert check(S, "trace-unknown", *UI.trace("none"))["trace"]["spans"] == []
        # a rejected task: OAP's reason, no id
        bad = check(S, "createProfileTask-bad", *UI.create_task({
            "serviceId": SID, "endpointName": "/pay", "duration": 99, "minDurationThreshold": 0,
            "dumpPeriod": 10, "maxSamplingCount": 5}))["task"]
        assert bad["id"] is None and bad["errorReason"], bad


def t_errors_and_limits(d):
    with Skyprofd(d, "--log-level", "warn") as S:
        ans = post(S, "query {\n  getTimeInfo { timezone }\n  nope\n}")
        assert "data" not in ans, ans
        assert ans["errors"] == [{"message": 'Cannot query field "nope" on type "Query".',
                                  "locations": [{"line": 3, "column": 3}]}], ans
        ans = post(S, "{ getTimeInfo { ")
        assert ans["errors"][0]["locations"] == [{"line": 1, "column": 17}], ans
        ans = post(S, "query q($id: String!) { getService(serviceId: $id) { id } }")
        assert "was not provided" in ans["errors"][0]["message"], ans
        ans = post(S, "query { listServices(layer: 5) { id } }")
        assert "invalid value" in ans["errors"][0]["message"], ans
        # fragments, inline fragments, directives, __typename
        q = ("query Q($skip: Boolean = true) { ...F ... on Query { v2: version } "
             "t: getTimeInfo @skip(if: $skip) { timezone } __typename }\n"
             "fragment F on Query { version l: listLayers @include(if: false) }")
        ans = post(S, q)
        assert ans == {"data": {"version": ans["data"]["version"], "v2": ans["data"]["version"],
                                "__typename": "Query"}}, ans
        # several operations: the name picks one
        ans = post(S, "query A { version } query B { listLayers }", op="B")
        assert ans == {"data": {"listLayers": []}}, ans
        ans = post(S, "query A { version } query B { listLayers }")
        assert "operation name" in ans["errors"][0]["message"], ans
        # limits, counted in /metrics
        before = S.metric('skyprof_graphql_refused_total{limit="depth"}')
        deep = "{ getTimeInfo " + "{ timezone " * 40 + "}" * 41
        ans = post(S, deep)
        assert "deeper than" in ans["errors"][0]["message"], ans
        assert S.metric('skyprof_graphql_refused_total{limit="depth"}') == before + 1
        ans = post(S, "{ version }" + " " * 70000)
        assert "longer than" in ans["errors"][0]["message"], ans
        assert S.metric('skyprof_graphql_refused_total{limit="query_bytes"}') == 1
        bomb = ("query { ...F0 }\n" + "".join(
            "fragment F%d on Query { version ...F%d ...F%d }\n" % (i, i + 1, i + 1)
            for i in range(20)) + "fragment F20 on Query { version }")
        ans = post(S, bomb)
        assert "more than" in ans["errors"][0]["message"], ans
        assert S.metric('skyprof_graphql_refused_total{limit="fields"}') == 1
        # the HTTP API's guards: a mutation needs JSON
        st, _, _ = S.http("POST", "/graphql", "query=x", {"Content-Type": "text/plain"})
        assert st == 415, st
        st, doc = S.json("POST", "/graphql", {"nope": 1})
        assert st == 400, doc


def t_introspection(d):
    """graphql-core's own introspection query against skyprofd rebuilds our schema."""
    with Skyprofd(d, "--log-level", "warn") as S:
        ans = post(S, introspection_query)
        assert "errors" not in ans, ans["errors"][:3]
        client = graphql.build_client_schema(ans["data"])
        assert graphql.print_schema(client) == graphql.print_schema(SCHEMA)
        ans = post(S, '{ __type(name: "ProfileTask") { name kind fields { name } } }')
        t = ans["data"]["__type"]
        assert t["kind"] == "OBJECT" and "logs" in [f["name"] for f in t["fields"]], t


def t_templates(d):
    """Dashboards saved from the UI are stored (and outlive a restart); a default one can be
    changed and disabled; bad configurations and unknown ids get status false."""
    conf = json.dumps({"layer": "GENERAL", "entity": "Service", "name": "mine", "isRoot": False,
                       "children": []})
    with Skyprofd(d, "--log-level", "warn") as S:
        added = check(S, "add", *UI.template_change("add", {"configuration": conf}))["addTemplate"]
        assert added["status"] is True and re.match(r"^[0-9a-f-]{36}$", added["id"]), added
        bad = check(S, "add-bad", *UI.template_change("add", {"configuration": "[1]"}))
        assert bad["addTemplate"]["status"] is False, bad
        conf2 = conf.replace("mine", "mine2")
        ch = check(S, "change", *UI.template_change("change", {"id": added["id"],
                                                               "configuration": conf2}))
        assert ch["changeTemplate"] == {"id": added["id"], "status": True, "message": None}, ch
        nope = check(S, "change-unknown", *UI.template_change("change", {
            "id": "nope", "configuration": conf2}))["changeTemplate"]
        assert nope["status"] is False and nope["message"] == "no such dashboard", nope
        off = check(S, "disable-default", *UI.template_disable("skyprof-default-GENERAL"))
        assert off["disableTemplate"]["status"] is True, off
    with Skyprofd(d, "--log-level", "warn") as S:
        all_ = check(S, "templates", *UI.PAGE_LOAD["templates"])["getAllTemplates"]
        assert [(t["id"], json.loads(t["configuration"])["name"]) for t in all_] == [
            (added["id"], "mine2"), ("skyprof-root-GENERAL", "skyprof-services")], all_
        q = 'query($id: String!) { getTemplate(id: $id) { id configuration } }'
        assert check(S, "get", q, {"id": added["id"]})["getTemplate"]["id"] == added["id"]
        assert check(S, "get-disabled", q, {"id": "skyprof-default-GENERAL"})["getTemplate"] is None


def t_ui_root(d):
    """--ui-root serves a built SkyWalking UI beside /graphql: its files, and index.html for the
    UI's deep links (history routing)."""
    ui = os.path.join(d, "dist")
    os.makedirs(os.path.join(ui, "static", "js"))
    with open(os.path.join(ui, "index.html"), "w") as f:
        f.write("<!doctype html><title>SkyWalking</title>")
    with open(os.path.join(ui, "static", "js", "app-1a2b.js"), "w") as f:
        f.write("console.log(1)")
    with Skyprofd(d, "--log-level", "warn", "--ui-root", ui,
                  "--graphql-max-answer-bytes", "200") as S:
        for path in ("/", "/dashboard/GENERAL/Service/%s/skyprof-profiling" % SID):
            st, hdrs, body = S.http("GET", path)
            assert st == 200 and b"SkyWalking" in body, (path, st, body[:100])
        st, hdrs, body = S.http("GET", "/static/js/app-1a2b.js")
        assert st == 200 and body == b"console.log(1)", (st, body)
        assert post(S, "{ version }")["data"]["version"].startswith("skyprofd")
        # --graphql-max-answer-bytes: the introspection of every type is far larger
        ans = post(S, "{ __schema { types { name fields { name } } } }")
        assert ans["data"] is None and "larger than 200 bytes" in ans["errors"][0]["message"], ans
        assert S.metric('skyprof_graphql_refused_total{limit="answer_bytes"}') == 1


def t_pprof(d):
    """The Pprof widget's calls: a task created through GraphQL for a named instance, the
    agent's poll (NOTIFIED) and upload (gRPC PprofTask), then list, progress and the analysis,
    which equals the HTTP API's tree (total = inclusive, self = self value, roots "-1")."""
    from profile import Pprof_pb2
    from pprof_util import sample_profile
    svc = "go-svc"
    sid = b64(svc) + ".1"
    iid = sid + "_" + b64("inst-p")
    with Skyprofd(d, "--log-level", "warn") as S:
        S.unary(V3 + "ManagementService/reportInstanceProperties",
                Management_pb2.InstanceProperties(service=svc, serviceInstance="inst-p"))
        task = check(S, "pprof-create", *UI.pprof_create({
            "serviceId": sid, "serviceInstanceIds": [iid], "duration": 1, "events": "CPU"}))["task"]
        assert task["code"] == "SUCCESS" and task["errorReason"] is None, task
        tid = task["id"]
        bad = check(S, "pprof-create-bad", *UI.pprof_create({
            "serviceId": sid, "serviceInstanceIds": [iid], "duration": 99, "events": "CPU"}))
        assert bad["task"]["code"] == "ARGUMENT_ERROR" and bad["task"]["errorReason"], bad
        V10 = "/skywalking.v10.PprofTask/"
        S.unary(V10 + "getPprofTaskCommands", Pprof_pb2.PprofTaskCommandQuery(
            service=svc, serviceInstance="inst-p", lastCommandTime=-1))
        data = sample_profile().gz()

        def msgs():
            yield Pprof_pb2.PprofData(metadata=Pprof_pb2.PprofMetaData(
                service=svc, serviceInstance="inst-p", taskId=tid,
                type=Pprof_pb2.PPROF_PROFILING_SUCCESS, contentSize=len(data)))
            yield Pprof_pb2.PprofData(content=data)
        call = S.channel().stream_stream(
            V10 + "collect", request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=Pprof_pb2.PprofCollectionResponse.FromString)
        list(call(msgs(), timeout=60))
        tasks = check(S, "pprof-list", *UI.pprof_list({"serviceId": sid, "limit": 10}))
        tasks = tasks["taskListResult"]["tasks"]
        assert [(t["id"], t["events"], t["serviceInstanceIds"], t["duration"]) for t in tasks] == [
            (tid, "CPU", [iid], 1)], tasks
        prog = check(S, "pprof-progress", *UI.pprof_progress(tid))["taskLogs"]
        assert prog["successInstanceIds"] == [iid] and prog["errorInstanceIds"] == [], prog
        assert [lg["operationType"] for lg in prog["logs"]] == ["NOTIFIED", "EXECUTION_FINISHED"]
        an = check(S, "pprof-analyze", *UI.pprof_analyze({"taskId": tid, "instanceIds": [iid]}))
        els = an["analysisResult"]["tree"]["elements"]
        st, http_an = S.json("GET", "/api/v1/pprof/tasks/%s/analyze" % tid, expect=200)
        want = {e["codeSignature"]: (int(e["duration"]), int(e["durationChildExcluded"]))
                for t in http_an["trees"] for e in t["elements"]}
        got = {e["symbol"]: (e["dumpCount"], e["self"]) for e in els}
        assert got == want and got["main (app.go:5)"] == (40000000, 0), (got, want)
        assert [e["parentId"] for e in els if e["symbol"] == "main (app.go:5)"] == ["-1"], els
        none = check(S, "pprof-analyze-other", *UI.pprof_analyze({
            "taskId": tid, "instanceIds": [sid + "_" + b64("other")]}))
        assert none["analysisResult"]["tree"]["elements"] == [], none


def t_async_profiler(d):
    """The Async Profiling widget's calls: a task through GraphQL, a real JDK 17 recording
    uploaded as SkyWalking's Java agent does, then list, progress and the execution-sample tree,
    equal to the HTTP API's."""
    from profile import AsyncProfiler_pb2 as AP
    svc = "java-svc"
    sid = b64(svc) + ".1"
    iid = sid + "_" + b64("jvm-1")
    jfr = open(os.path.join(SRC, "tests/fuzz/jfr/corpus/jdk17-min-all.jfr"), "rb").read()
    with Skyprofd(d, "--log-level", "warn") as S:
        S.unary(V3 + "ManagementService/reportInstanceProperties",
                Management_pb2.InstanceProperties(service=svc, serviceInstance="jvm-1"))
        task = check(S, "async-create", *UI.async_create({
            "serviceId": sid, "serviceInstanceIds": [iid], "duration": 30,
            "events": ["CPU", "ALLOC"], "execArgs": "interval=10ms"}))["task"]
        assert task["code"] == "SUCCESS", task
        tid = task["id"]
        bad = check(S, "async-create-bad", *UI.async_create({
            "serviceId": sid, "serviceInstanceIds": [iid], "duration": 30, "events": []}))
        assert bad["task"]["code"] == "ARGUMENT_ERROR" and bad["task"]["errorReason"], bad
        V10 = "/skywalking.v10.AsyncProfilerTask/"
        S.unary(V10 + "getAsyncProfilerTaskCommands", AP.AsyncProfilerTaskCommandQuery(
            service=svc, serviceInstance="jvm-1", lastCommandTime=-1))

        def msgs():
            yield AP.AsyncProfilerData(metaData=AP.AsyncProfilerMetaData(
                service=svc, serviceInstance="jvm-1", taskId=tid, type=AP.PROFILING_SUCCESS,
                contentSize=len(jfr)))
            yield AP.AsyncProfilerData(content=jfr)
        call = S.channel().stream_stream(
            V10 + "collect", request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=AP.AsyncProfilerCollectionResponse.FromString)
        list(call(msgs(), timeout=60))
        tasks = check(S, "async-list", *UI.async_list({"serviceId": sid}))["asyncTaskList"]
        assert [(t["id"], t["events"], t["duration"], t["execArgs"]) for t in tasks["tasks"]] == [
            (tid, ["CPU", "ALLOC"], 30, "interval=10ms")], tasks
        prog = check(S, "async-progress", *UI.async_progress(tid))["taskProgress"]
        assert prog["successInstanceIds"] == [iid], prog
        # SkyWalking's UI 10.2 sends the variable as taskID where its query declares $taskId
        q, v = UI.async_progress(tid)
        assert post(S, q, {"taskID": tid}) == {"data": {"taskProgress": prog}}
        an = check(S, "async-analyze", *UI.async_analyze({
            "taskId": tid, "instanceIds": [iid], "eventType": "EXECUTION_SAMPLE"}))
        tree = an["analysisResult"]["tree"]
        assert tree["type"] == "EXECUTION_SAMPLE" and tree["elements"], tree
        st, http_an = S.json("GET", "/api/v1/async-profiler/tasks/%s/analyze?eventType="
                             "EXECUTION_SAMPLE" % tid, expect=200)
        want = sorted((e["codeSignature"], int(e["count"]), int(e["durationChildExcluded"]))
                      for t in http_an["trees"] for e in t["elements"])
        got = sorted((e["symbol"], e["dumpCount"], e["self"]) for e in tree["elements"])
        assert got == want, (got[:5], want[:5])
        assert sum(1 for e in tree["elements"] if e["parentId"] == "-1") == len(http_an["trees"])


def t_continuous(d):
    """The Continuous Profiling widget's policy editor: a policy set through GraphQL is the
    HTTP API's policy (one store, one evaluator); OAP's validation texts refuse a bad one; the
    targets only skyprofd has (TRACE) are left out of the protocol's answer."""
    svc = "cont-svc"
    sid = b64(svc) + ".1"
    with Skyprofd(d, "--log-level", "warn") as S:
        item = {"type": "PROCESS_CPU", "threshold": "80", "period": 10, "count": 3}
        res = check(S, "set-policy", *UI.edit_strategy({"serviceId": sid, "targets": [
            {"targetType": "ON_CPU", "checkItems": [item]}]}))["strategy"]
        assert res == {"status": True, "errorReason": None}, res
        st, pol = S.json("GET", "/api/v1/continuous/policies/" + svc, expect=200)
        assert [t["targetType"] for t in pol["targets"]] == ["ON_CPU"], pol
        got = check(S, "targets", *UI.strategy_list(sid))["strategyList"]
        assert got == [{"type": "ON_CPU", "checkItems": [dict(item, uriList=None,
                                                               uriRegex=None)]}], got
        bad = check(S, "set-policy-bad", *UI.edit_strategy({"serviceId": sid, "targets": [
            {"targetType": "ON_CPU", "checkItems": [dict(item, count=30)]}]}))["strategy"]
        assert bad["status"] is False and "count must be" in bad["errorReason"], bad
        # a policy with a target of ours: the protocol's answer holds the others only
        S.json("PUT", "/api/v1/continuous/policies/" + svc, {"targets": [
            {"targetType": "TRACE", "checkItems": [{"type": "ENDPOINT_AVG_RESPONSE_TIME",
                                                     "threshold": "200", "period": 10,
                                                     "count": 3}]},
            {"targetType": "OFF_CPU", "checkItems": [item]}]}, expect=200)
        got = check(S, "targets-mixed", *UI.strategy_list(sid))["strategyList"]
        assert [t["type"] for t in got] == ["OFF_CPU"], got
        assert check(S, "targets-none", *UI.strategy_list(b64("x") + ".1"))["strategyList"] == []
        # the monitored instances: the registry's instance and its eBPF (host) process
        from ebpf.profiling import Process_pb2
        S.unary(V3 + "ManagementService/reportInstanceProperties",
                Management_pb2.InstanceProperties(service=svc, serviceInstance="vm-1"))
        S.channel().unary_unary(
            V3 + "EBPFProcessService/reportProcesses",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=lambda b: b)(Process_pb2.EBPFProcessReportList(
                ebpfAgentID="rover-1", processes=[Process_pb2.EBPFProcessProperties(
                    hostProcess=Process_pb2.EBPFHostProcessMetadata(
                        pid=42, entity=Process_pb2.EBPFProcessEntityMetadata(
                            layer="GENERAL", serviceName=svc, instanceName="vm-1",
                            processName="python3", labels=["web", "api"])))]), timeout=30)
        mon = check(S, "monitoring", *UI.monitoring_instances(sid, "ON_CPU"))["instances"]
        assert [(i["name"], i["triggeredCount"]) for i in mon] == [("vm-1", 0)], mon
        st, procs = S.json("GET", "/api/v1/ebpf/processes?service=" + svc, expect=200)
        pr = mon[0]["processes"]
        assert [(p["id"], p["name"], p["detectType"], p["labels"]) for p in pr] == [
            (procs[0]["id"], "python3", "VM", ["web", "api"])], (pr, procs)


def seed_ebpf(S, svc, inst):
    """What an eBPF agent sends over the real gRPC services: its host process, two triggered
    tasks (ContinuousProfilingService.reportProfilingTask: ON_CPU, cause PROCESS_CPU 87.5 >= 50;
    OFF_CPU, cause HTTP_AVG_RESPONSE_TIME of /pay) and their stacks (collectProfilingData) with
    known weights. Returns (process id, ON_CPU task id, OFF_CPU task id)."""
    from ebpf.profiling import ContinuousProfiling_pb2 as CP
    from ebpf.profiling import Process_pb2, Profile_pb2
    from test_server_ebpf import host, oap_process_id, off_cpu, on_cpu, stack
    from skyprofd_util import Command_pb2
    ch = S.channel()
    ser = lambda m: m.SerializeToString()  # noqa: E731
    ch.unary_unary(V3 + "EBPFProcessService/reportProcesses", request_serializer=ser,
                   response_deserializer=Process_pb2.EBPFReportProcessDownstream.FromString)(
        Process_pb2.EBPFProcessReportList(ebpfAgentID="rover-1", processes=[
            host(svc, inst, "python3", 4242, labels=["web", "api"],
                 props=[("command_line", "python3 app.py")])]), timeout=30)
    pid = oap_process_id(svc, inst, "python3")
    report = ch.unary_unary(V3 + "ContinuousProfilingService/reportProfilingTask",
                            request_serializer=ser, response_deserializer=Command_pb2.Commands.FromString)

    def trigger(cause, **target):
        resp = report(CP.ContinuousProfilingReport(
            layer="GENERAL", serviceName=svc, instanceName=inst, processName="python3",
            duration=30, causes=[cause], **target), timeout=30)
        return [a.value for a in resp.commands[0].args if a.key == "TaskId"][0]
    t_on = trigger(CP.ContinuousProfilingCause(
        type=CP.ProcessCPU, singleValue=CP.ContinuousProfilingSingleValueCause(
            threshold=50, current=87.5)), onCPU=CP.ContinuousOnCPUProfilingTask())
    t_off = trigger(CP.ContinuousProfilingCause(
        type=CP.HTTPAvgResponseTime, uri=CP.ContinuousProfilingURICause(
            path="/pay", threshold=200, current=251)), offCPU=CP.ContinuousOffCPUProfilingTask())
    collect = ch.stream_unary(V3 + "EBPFProfilingService/collectProfilingData",
                              request_serializer=ser,
                              response_deserializer=Command_pb2.Commands.FromString)
    main_f, burn, wait = "bpf_main (app.py:20)", "bpf_burn (app.py:10)", "bpf_wait (app.py:5)"
    collect(iter([
        on_cpu(t_on, pid, [stack([burn, main_f])], 40),
        on_cpu(t_on, pid, [stack([wait, main_f])], 15),
        on_cpu(t_on, pid, [stack([main_f]), stack(["do_syscall_64", "entry_SYSCALL_64"],
                                                  kind=Profile_pb2.PROCESS_KERNEL_SPACE, sid=7)], 5),
        off_cpu(t_off, pid, [stack([wait, main_f])], 3, 9000000),
        off_cpu(t_off, pid, [stack([burn, main_f])], 7, 1000000),
    ]), timeout=30)
    collect(iter([on_cpu(t_on, pid, [stack([burn, main_f])], 20)]), timeout=30)
    return pid, t_on, t_off


def t_ebpf(d):
    """The eBPF widget's calls and the continuous-profiling timeline's against profiles fed
    through the real gRPC services: triggered tasks with their causes (x 100), a schedule per
    process with OAP's Process, the analysis equal to the HTTP API's (roots "0", dumpCount the
    inclusive dumps; OFF_CPU by switches or by duration), and the fixed-time creation refused
    with its reason (skyprofd hands no eBPF task to agents), visible nowhere."""
    svc, inst = "ebpf-svc", "vm-1"
    sid = b64(svc) + ".1"
    iid = sid + "_" + b64(inst)
    with Skyprofd(d, "--log-level", "warn") as S:
        pid, t_on, t_off = seed_ebpf(S, svc, inst)
        prep = check(S, "ebpf-prepare", *UI.ebpf_prepare(sid))["createTaskData"]
        assert prep == {"couldProfiling": False, "processLabels": ["web", "api"]}, prep
        # the eBPF widget asks FIXED_TIME tasks: skyprofd runs none
        fixed = {"serviceId": sid, "targets": ["ON_CPU", "OFF_CPU"], "triggerType": "FIXED_TIME"}
        assert check(S, "ebpf-tasks-fixed", *UI.ebpf_tasks(fixed))["queryEBPFTasks"] == []
        cont = dict(fixed, triggerType="CONTINUOUS_PROFILING")
        tasks = check(S, "ebpf-tasks", *UI.ebpf_tasks(cont))["queryEBPFTasks"]
        assert sorted((t["taskId"], t["targetType"]) for t in tasks) == sorted(
            [(t_on, "ON_CPU"), (t_off, "OFF_CPU")]), tasks
        on = [t for t in tasks if t["taskId"] == t_on][0]
        assert (on["serviceId"], on["serviceName"], on["serviceInstanceId"],
                on["serviceInstanceName"], on["processId"], on["processName"],
                on["triggerType"]) == (sid, svc, iid, inst, pid, "python3",
                                       "CONTINUOUS_PROFILING"), on
        assert on["taskStartTime"] == on["createTime"] > 0, on
        cause = on["continuousProfilingCauses"]
        assert [(k["type"], k["singleValue"], k["uri"]) for k in cause] == [
            ("PROCESS_CPU", {"threshold": 5000, "current": 8750}, None)], cause
        off = [t for t in tasks if t["taskId"] == t_off][0]["continuousProfilingCauses"]
        assert [(k["type"], k["uri"]) for k in off] == [("HTTP_AVG_RESPONSE_TIME", {
            "uriRegex": None, "uriPath": "/pay", "threshold": 20000, "current": 25100})], off
        only_off = dict(cont, targets=["OFF_CPU"], serviceInstanceId=iid)
        got = check(S, "ebpf-tasks-off", *UI.ebpf_tasks(only_off))["queryEBPFTasks"]
        assert [t["taskId"] for t in got] == [t_off], got
        other = dict(cont, serviceInstanceId=sid + "_" + b64("vm-2"))
        assert check(S, "ebpf-tasks-other", *UI.ebpf_tasks(other))["queryEBPFTasks"] == []
        # one schedule: the process that uploaded, as OAP's Process
        sch = check(S, "ebpf-schedules", *UI.ebpf_schedules(t_on))["eBPFSchedules"]
        assert len(sch) == 1 and sch[0]["scheduleId"] == t_on + "_" + pid, sch
        assert sch[0]["process"] == {
            "id": pid, "name": "python3", "serviceId": sid, "serviceName": svc, "instanceId": iid,
            "instanceName": inst, "agentId": "rover-1", "detectType": "VM",
            "attributes": [{"name": "command_line", "value": "python3 app.py"}],
            "labels": ["web", "api"]}, sch
        assert sch[0]["startTime"] <= sch[0]["endTime"], sch
        assert check(S, "ebpf-schedules-none", *UI.ebpf_schedules("nope"))["eBPFSchedules"] == []
        rng = [{"start": sch[0]["startTime"], "end": sch[0]["endTime"]}]
        an = check(S, "ebpf-analyze", *UI.ebpf_analyze([sch[0]["scheduleId"]], rng, "COUNT"))
        an = an["analysisEBPFResult"]
        assert an["tip"] is None and len(an["trees"]) == 1, an
        els = an["trees"][0]["elements"]
        by_id = {e["id"]: e for e in els}

        def path(e):
            return path(by_id[e["parentId"]]) + [e["symbol"]] if e["parentId"] != "0" else [
                e["symbol"]]
        got = sorted((tuple(path(e)), e["dumpCount"]) for e in els)
        m, b_, w_ = "bpf_main (app.py:20)", "bpf_burn (app.py:10)", "bpf_wait (app.py:5)"
        assert got == sorted([((m,), 80), ((m, b_), 60), ((m, w_), 15),
                              ((m, "entry_SYSCALL_64"), 5),
                              ((m, "entry_SYSCALL_64", "do_syscall_64"), 5)]), got
        assert {e["stackType"] for e in els} == {"USER_SPACE"}, els
        st, http_an = S.json("GET", "/api/v1/ebpf/tasks/%s/analyze" % t_on, expect=200)
        want = sorted((e["codeSignature"], int(e["count"])) for t in http_an["trees"]
                      for e in t["elements"])
        assert sorted((e["symbol"], e["dumpCount"]) for e in els) == want, (els, want)
        # OFF_CPU: COUNT weighs switches, DURATION nanoseconds
        sch = check(S, "ebpf-schedules-off", *UI.ebpf_schedules(t_off))["eBPFSchedules"]
        rng = [{"start": sch[0]["startTime"], "end": sch[0]["endTime"]}]
        for agg, want in (("COUNT", {m: 10, b_: 7, w_: 3}),
                          ("DURATION", {m: 10000000, b_: 1000000, w_: 9000000})):
            an = check(S, "ebpf-analyze-" + agg, *UI.ebpf_analyze(
                [sch[0]["scheduleId"]], rng, agg))["analysisEBPFResult"]
            got = {e["symbol"]: e["dumpCount"] for t in an["trees"] for e in t["elements"]}
            assert got == want, (agg, got)
        # a range before the uploads, an unknown schedule: no trees, a tip
        an = check(S, "ebpf-analyze-empty", *UI.ebpf_analyze(
            [t_on + "_" + pid], [{"start": 1, "end": 2}], "COUNT"))["analysisEBPFResult"]
        assert an["trees"] == [] and "no profile data" in an["tip"], an
        an = check(S, "ebpf-analyze-unknown", *UI.ebpf_analyze(
            ["nope"], rng, None))["analysisEBPFResult"]
        assert an["trees"] == [] and an["tip"], an
        # the fixed-time creation: refused with its reason, no task anywhere
        res = check(S, "ebpf-create", *UI.ebpf_create({
            "serviceId": sid, "processLabels": ["web"], "startTime": -1, "duration": 60,
            "targetType": "ON_CPU"}))["createTaskData"]
        assert res["status"] is False and res["id"] is None, res
        assert "no fixed-time eBPF tasks" in res["errorReason"], res
        assert check(S, "ebpf-tasks-fixed-after", *UI.ebpf_tasks(fixed))["queryEBPFTasks"] == []
        st, trig = S.json("GET", "/api/v1/profile/triggers?service=" + svc, expect=200)
        assert sorted(t["taskId"] for t in trig["triggers"]) == sorted([t_on, t_off]), trig
        net = check(S, "ebpf-network", *UI.ebpf_network_create({"instanceId": iid}))
        assert net["createEBPFNetworkProfiling"]["status"] is False, net
        keep = check(S, "ebpf-network-keep", *UI.ebpf_network_keep("nope"))
        assert keep["keepEBPFNetworkProfiling"]["status"] is False, keep


def t_menu(d):
    """getMenuItems: the General Service group; its Services item leads to layer GENERAL, and a
    layer an agent names is an item of its own; each layer has the root dashboard the UI opens
    for its item."""
    with Skyprofd(d, "--log-level", "warn") as S:
        menu = check(S, "menu", *UI.PAGE_LOAD["menuItems"])["getMenuItems"]
        assert [(m["title"], m["layer"], m["activate"]) for m in menu] == [
            ("General Service", "", True)], menu
        assert [(s["title"], s["layer"], s["activate"], s["i18nKey"])
                for s in menu[0]["subItems"]] == [
            ("Services", "GENERAL", True, "general_service_services")], menu
        S.unary(V3 + "ManagementService/reportInstanceProperties",
                Management_pb2.InstanceProperties(service="mesh-svc", serviceInstance="i",
                                                  layer="MESH"))
        menu = check(S, "menu-layers", *UI.PAGE_LOAD["menuItems"])["getMenuItems"]
        assert [(s["title"], s["layer"]) for s in menu[0]["subItems"]] == [
            ("Services", "GENERAL"), ("MESH", "MESH")], menu
        # each item's layer has a root dashboard (what the UI opens for it): its service list,
        # leading to the layer's profiling dashboard
        confs = [json.loads(t["configuration"]) for t in check(
            S, "templates", *UI.PAGE_LOAD["templates"])["getAllTemplates"]]
        for layer in ("GENERAL", "MESH"):
            roots = [c for c in confs if c["layer"] == layer and c["isRoot"]]
            assert len(roots) == 1 and roots[0]["entity"] == "All", confs
            graph = roots[0]["children"][0]["graph"]
            assert graph["type"] == "ServiceList", roots
            assert [c["name"] for c in confs if c["layer"] == layer and
                    c["entity"] == "Service"] == [graph["dashboardName"]], confs
        # the profiling dashboard's continuous tab: the policy editor and the task timeline (the
        # triggered tasks, eBPF ones with their flame graphs)
        prof = [c for c in confs if c["layer"] == "GENERAL" and c["entity"] == "Service"][0]
        tab = [t for t in prof["children"][0]["children"] if t["name"] == "Continuous Profiling"]
        assert [w["type"] for w in tab[0]["children"]] == ["ContinuousProfiling",
                                                          "TaskTimeline"], tab


def t_token(d):
    """With --api-token, /graphql needs the token like every POST of the HTTP API."""
    with Skyprofd(d, "--log-level", "warn", "--api-token", "s3cret") as S:
        st, _, _ = S.http("POST", "/graphql", json.dumps({"query": "{ version }"}),
                          {"Content-Type": "application/json"})
        assert st == 401, st
        ans = post(S, "{ version }", headers={"Authorization": "Bearer s3cret"})
        assert ans["data"]["version"].startswith("skyprofd"), ans


for name, fn in [("schema_text", t_schema_text), ("spec_fields", t_spec_fields),
                 ("ui_flow", t_ui_flow), ("errors_and_limits", t_errors_and_limits),
                 ("introspection", t_introspection), ("templates", t_templates),
                 ("ui_root", t_ui_root), ("pprof", t_pprof),
                 ("async_profiler", t_async_profiler), ("continuous", t_continuous),
                 ("ebpf", t_ebpf), ("menu", t_menu),
                 ("token", t_token)]:
    with tempdir() as d:
        R.run(name, fn, d)
R.finish()
