"""skyprofd's eBPF services (issue 11, agent side), over the real wire with Debian's grpcio and
stubs generated from our proto/ebpf/profiling/{Process,Profile}.proto:
EBPFProcessService.reportProcesses (ids as OAP computes them, host processes only, labels and
properties kept, Kubernetes/incomplete entries skipped), keepAlive (refreshes, registers an unknown
process), EBPFProfilingService.queryTasks (empty answer), collectProfilingData (ON_CPU dumpCount and
OFF_CPU switchCount/duration stored per task, kernel + user stacks joined innermost first, bad
messages refused with INVALID_ARGUMENT and nothing stored), and the HTTP analysis and downloads.
"""
import base64
import hashlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402

from skp_harness import Results, tempdir  # noqa: E402
from skyprofd_util import Command_pb2, Common_pb2, Skyprofd  # noqa: E402
from ebpf.profiling import Process_pb2, Profile_pb2  # noqa: E402

S = None
R = Results()
P = "/skywalking.v3.EBPFProcessService/"
F = "/skywalking.v3.EBPFProfilingService/"


def oap_process_id(service, instance, process):
    b = lambda s: base64.b64encode(s.encode()).decode()  # noqa: E731
    return hashlib.sha256(("%s_%s.1_%s" % (process, b(service), b(instance))).encode()).hexdigest()


def entity(service, instance, process, labels=()):
    return Process_pb2.EBPFProcessEntityMetadata(layer="GENERAL", serviceName=service,
                                                 instanceName=instance, processName=process,
                                                 labels=list(labels))


def report(procs, agent="agent-1"):
    call = S.channel().unary_unary(
        P + "reportProcesses", request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=Process_pb2.EBPFReportProcessDownstream.FromString)
    return call(Process_pb2.EBPFProcessReportList(processes=procs, ebpfAgentID=agent), timeout=30)


def host(service, instance, process, pid, labels=(), props=()):
    return Process_pb2.EBPFProcessProperties(hostProcess=Process_pb2.EBPFHostProcessMetadata(
        entity=entity(service, instance, process, labels), pid=pid,
        properties=[Common_pb2.KeyStringValuePair(key=k, value=v) for k, v in props]))


def processes(service=None):
    path = "/api/v1/ebpf/processes" + ("?service=" + service if service else "")
    return S.json("GET", path, expect=200)[1]


def t_report_processes():
    down = report([host("svc-e", "inst-1", "python3", 4242, labels=["a", "b"],
                        props=[("command_line", "python3 app.py"), ("support_ebpf_profiling", "false")]),
                   host("svc-e", "inst-2", "python3", 4343),
                   Process_pb2.EBPFProcessProperties(),           # no metadata: skipped
                   host("svc-e", "", "python3", 1)])               # no instance: skipped
    assert len(down.processes) == 2, down
    want = oap_process_id("svc-e", "inst-1", "python3")
    assert down.processes[0].processId == want, (down.processes[0].processId, want)
    assert down.processes[0].hostProcess.pid == 4242
    assert down.processes[0].hostProcess.entityMetadata.instanceName == "inst-1"
    assert down.processes[1].processId == oap_process_id("svc-e", "inst-2", "python3")
    rows = processes("svc-e")
    assert [r["instanceName"] for r in rows] == ["inst-1", "inst-2"], rows
    r0 = rows[0]
    assert r0["id"] == want and r0["pid"] == 4242 and r0["labels"] == ["a", "b"], r0
    assert r0["properties"] == {"command_line": "python3 app.py", "support_ebpf_profiling": "false"}, r0
    assert r0["agentId"] == "agent-1" and r0["layer"] == "GENERAL", r0
    assert processes("nobody") == []
    # a report again keeps the first time and moves the last ping
    time.sleep(0.01)
    report([host("svc-e", "inst-1", "python3", 4242)])
    r1 = processes("svc-e")[0]
    assert r1["firstSeen"] == r0["firstSeen"] and r1["lastPing"] >= r0["lastPing"], (r0, r1)


def t_keepalive():
    before = {r["id"]: r["lastPing"] for r in processes("svc-e")}
    time.sleep(0.02)
    S.unary(P + "keepAlive", Process_pb2.EBPFProcessPingPkgList(
        processes=[Process_pb2.EBPFProcessPingPkg(entityMetadata=entity("svc-e", "inst-1", "python3")),
                   Process_pb2.EBPFProcessPingPkg(entityMetadata=entity("svc-k", "inst-9", "java"))],
        ebpfAgentID="agent-2"))
    after = {r["id"]: r["lastPing"] for r in processes()}
    pid1 = oap_process_id("svc-e", "inst-1", "python3")
    assert after[pid1] > before[pid1], (before, after)
    assert oap_process_id("svc-k", "inst-9", "java") in after, after


def t_query_tasks():
    resp = S.unary(F + "queryTasks", Profile_pb2.EBPFProfilingTaskQuery())
    assert len(resp.commands) == 0, resp


def stack(symbols, kind=Profile_pb2.PROCESS_USER_SPACE, sid=1):
    return Profile_pb2.EBPFProfilingStackMetadata(stackType=kind, stackId=sid, stackSymbols=symbols)


def on_cpu(task, proc, stacks, count, now=None):
    return Profile_pb2.EBPFProfilingData(
        task=Profile_pb2.EBPFProfilingTaskMetadata(taskId=task, processId=proc,
                                                   profilingStartTime=1000,
                                                   currentTime=now or int(time.time() * 1000)),
        onCPU=Profile_pb2.EBPFOnCPUProfiling(stacks=stacks, dumpCount=count))


def off_cpu(task, proc, stacks, switches, ns):
    return Profile_pb2.EBPFProfilingData(
        task=Profile_pb2.EBPFProfilingTaskMetadata(taskId=task, processId=proc,
                                                   currentTime=int(time.time() * 1000)),
        offCPU=Profile_pb2.EBPFOffCPUProfiling(stacks=stacks, switchCount=switches, duration=ns))


def by_sig(doc):
    out = {}
    for t in doc["trees"]:
        for e in t["elements"]:
            out.setdefault(e["codeSignature"], 0)
            out[e["codeSignature"]] += e["count"]
    return out


def paths(doc):
    """Root-to-leaf signature paths with their self values."""
    res = {}
    for t in doc["trees"]:
        els = {e["id"]: e for e in t["elements"]}
        for e in t["elements"]:
            if e["durationChildExcluded"] > 0:
                p, cur = [], e
                while cur:
                    p.append(cur["codeSignature"])
                    cur = els.get(cur["parentId"])
                res[tuple(reversed(p))] = e["durationChildExcluded"]
    return res


def t_collect_on_cpu():
    pid1 = oap_process_id("svc-e", "inst-1", "python3")
    resp = S.stream(F + "collectProfilingData", [
        on_cpu("task-on", pid1, [stack(["busy (app.py:10)", "main (app.py:20)"])], 30),
        on_cpu("task-on", pid1, [stack(["idle (app.py:5)", "main (app.py:20)"])], 2),
        # kernel frames are innermost: joined before the user stack
        on_cpu("task-on", pid1, [stack(["main (app.py:20)"]),
                                 stack(["do_syscall_64", "entry_SYSCALL_64"],
                                       kind=Profile_pb2.PROCESS_KERNEL_SPACE, sid=7)], 5),
    ])
    assert len(resp.commands) == 0
    # a second upload adds to the first
    S.stream(F + "collectProfilingData",
             [on_cpu("task-on", pid1, [stack(["busy (app.py:10)", "main (app.py:20)"])], 10)])
    doc = S.json("GET", "/api/v1/ebpf/tasks/task-on/analyze", expect=200)[1]
    assert doc["target"] == "ON_CPU" and doc["sampleType"] == "samples" and doc["unit"] == "count", doc
    assert doc["total"] == 47 and doc["stacks"] == 3, doc
    assert doc["processes"] == {pid1: {"onCpuStacks": 3, "offCpuStacks": 0}}, doc["processes"]
    p = paths(doc)
    assert p[("main (app.py:20)", "busy (app.py:10)")] == 40, p
    assert p[("main (app.py:20)", "idle (app.py:5)")] == 2, p
    assert p[("main (app.py:20)", "entry_SYSCALL_64", "do_syscall_64")] == 5, p
    assert by_sig(doc)["main (app.py:20)"] == 47
    # processId filter, time window, downloads
    assert S.json("GET", "/api/v1/ebpf/tasks/task-on/analyze?processId=nope", expect=404)
    st, _ = S.json("GET", "/api/v1/ebpf/tasks/task-on/analyze?to=1", expect=404)
    st, _, body = S.http("GET", "/api/v1/ebpf/tasks/task-on/download?format=collapsed")
    assert st == 200, st
    lines = set(body.decode().strip().splitlines())
    assert "main (app.py:20);busy (app.py:10) 40" in lines, lines
    st, _, body = S.http("GET", "/api/v1/ebpf/tasks/task-on/download?format=nope")
    assert st == 400, st


def t_collect_off_cpu():
    pid2 = oap_process_id("svc-e", "inst-2", "python3")
    S.stream(F + "collectProfilingData", [
        off_cpu("task-off", pid2, [stack(["sleep", "wait_io (app.py:3)", "main (app.py:20)"])], 4, 400_000_000),
        off_cpu("task-off", pid2, [stack(["lock", "main (app.py:20)"])], 1, 5_000_000),
    ])
    doc = S.json("GET", "/api/v1/ebpf/tasks/task-off/analyze", expect=200)[1]
    assert doc["target"] == "OFF_CPU" and doc["unit"] == "nanoseconds", doc
    assert doc["total"] == 405_000_000, doc
    p = paths(doc)
    assert p[("main (app.py:20)", "wait_io (app.py:3)", "sleep")] == 400_000_000, p


def t_collect_refused():
    for bad, text in [
        (Profile_pb2.EBPFProfilingData(onCPU=Profile_pb2.EBPFOnCPUProfiling(dumpCount=1)), "taskId"),
        (Profile_pb2.EBPFProfilingData(task=Profile_pb2.EBPFProfilingTaskMetadata(
            taskId="task-bad", processId="p")), "onCPU or offCPU"),
        (off_cpu("task-bad", "p", [stack(["a"])], -1, 0), "negative"),
    ]:
        try:
            S.stream(F + "collectProfilingData", [on_cpu("task-bad", "p", [stack(["ok"])], 1), bad])
            raise AssertionError("expected INVALID_ARGUMENT for %r" % text)
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and text in e.details(), (text, e)
    # nothing of a refused stream is stored
    S.json("GET", "/api/v1/ebpf/tasks/task-bad/analyze", expect=404)


def t_collect_budget(d):
    """Issue 25: an eBPF stream's rows were held until its end outside the server's gRPC memory
    budget (each stream alone capped at 64 MiB, any number of them at once). Now they count in
    --grpc-memory-budget: a stream that would pass it is refused with RESOURCE_EXHAUSTED, its rows
    freed at once (nothing stored), counted in /metrics, and the next stream fits again."""
    budget = 8 << 20
    B = Skyprofd(os.path.join(d, "budget"), "--grpc-memory-budget", str(budget), log_level="error")
    try:
        big = [stack(["frame_%d_%s (app.py:%d)" % (k, "x" * 1000, k) for k in range(16)])]
        msgs = [on_cpu("task-big", "p-big", big, 1) for _ in range(600)]  # ~9.7 MB of symbols
        try:
            B.stream(F + "collectProfilingData", msgs)
            raise AssertionError("a stream over the memory budget was accepted")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "budget" in e.details(), e
        B.json("GET", "/api/v1/ebpf/tasks/task-big/analyze", expect=404)
        assert B.metric("skyprof_ebpf_refused_total") == 1, B.metric("skyprof_ebpf_refused_total")
        peak = B.metric("skyprof_grpc_buffered_bytes_peak")
        # charged before the check: at most one message (~17 KB) past the budget
        assert 0 < peak <= budget + (64 << 10), "accounted %d bytes, budget %d" % (peak, budget)
        B.stream(F + "collectProfilingData", msgs[:50])  # released: a smaller stream fits
        doc = B.json("GET", "/api/v1/ebpf/tasks/task-big/analyze", expect=200)[1]
        assert doc["total"] == 50, doc["total"]
    finally:
        B.stop()


def t_collect_batched():
    """Issue 25: a stream of 200,000 stacks was stored in one transaction when it ended, holding
    the event loop for 0.9 s (bench/hostile/bench_hostile.py --cases ebpf). Now its rows are
    committed 250 per transaction, one transaction per loop turn, and the answer comes after
    the last: right after it every stack is there, and the transactions are counted."""
    b0 = S.metric("skyprof_ebpf_store_batches_total")
    pid = oap_process_id("svc-b", "inst-b", "python3")
    n = 1001
    S.stream(F + "collectProfilingData", [
        on_cpu("task-batched", pid, [stack(["leaf_%d (app.py:%d)" % (i % 7, i % 7),
                                            "main (app.py:1)"])], 1) for i in range(n)])
    doc = S.json("GET", "/api/v1/ebpf/tasks/task-batched/analyze", expect=200)[1]
    assert doc["total"] == n, doc["total"]
    assert S.sql_rows("SELECT count(*) FROM ebpf_stacks WHERE task_id = 'task-batched'")[0][0] == n
    batches = S.metric("skyprof_ebpf_store_batches_total") - b0
    assert batches == 5, "%d stacks took %d transactions, not 5 of at most 250" % (n, batches)


def t_compat_path():
    resp = S.unary("/EBPFProfilingService/queryTasks", Profile_pb2.EBPFProfilingTaskQuery())
    assert len(resp.commands) == 0


def main():
    global S
    with tempdir() as d:
        S = Skyprofd(os.path.join(d, "data"))
        try:
            R.run("reportProcesses: OAP's process ids, host processes", t_report_processes)
            R.run("keepAlive", t_keepalive)
            R.run("queryTasks", t_query_tasks)
            R.run("collectProfilingData ON_CPU + analysis + downloads", t_collect_on_cpu)
            R.run("collectProfilingData OFF_CPU", t_collect_off_cpu)
            R.run("collectProfilingData refusals", t_collect_refused)
            R.run("collectProfilingData stored in batches", t_collect_batched)
            R.run("compat path", t_compat_path)
            R.run("collectProfilingData within the gRPC memory budget", lambda: t_collect_budget(d))
        finally:
            S.stop()
    R.finish()


if __name__ == "__main__":
    main()
