"""Seeds skyprofd with an agent-started ON_CPU profile for the eBPF UI test, over the real wire
(the messages an agent sends, built with tests/integration/server/test_server_ebpf.py's helpers):
registers the host process (EBPFProcessService.reportProcesses), reports the threshold-triggered
task (ContinuousProfilingService.reportProfilingTask, ON_CPU, cause PROCESS_CPU 87.5 >= 50) and
uploads its stacks (EBPFProfilingService.collectProfilingData), whose dump counts are known:
  ui_main -> ui_burn          40 + 20 = 60
  ui_main -> ui_wait          15
  ui_main -> entry_SYSCALL_64 -> do_syscall_64   5   (kernel frames, innermost)
Prints one JSON line {"taskId": ..., "processId": ...}.
Usage: ebpf_feed.py GRPC_ADDR SERVICE INSTANCE"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration", "server"))

import grpc  # noqa: E402

from common import Command_pb2  # noqa: E402
from ebpf.profiling import ContinuousProfiling_pb2 as CP  # noqa: E402
from ebpf.profiling import Process_pb2  # noqa: E402
from ebpf.profiling import Profile_pb2  # noqa: E402
from test_server_ebpf import host, oap_process_id, on_cpu, stack  # noqa: E402

V3 = "/skywalking.v3."


def main():
    addr, service, instance = sys.argv[1], sys.argv[2], sys.argv[3]
    ch = grpc.insecure_channel(addr)
    ser = lambda m: m.SerializeToString()  # noqa: E731
    report = ch.unary_unary(V3 + "EBPFProcessService/reportProcesses", request_serializer=ser,
                            response_deserializer=Process_pb2.EBPFReportProcessDownstream.FromString)
    down = report(Process_pb2.EBPFProcessReportList(
        processes=[host(service, instance, "python3", 4242, props=[("command_line", "python3 app.py")])],
        ebpfAgentID="ui-agent"), timeout=30)
    pid = oap_process_id(service, instance, "python3")
    assert down.processes[0].processId == pid, down
    trigger = ch.unary_unary(V3 + "ContinuousProfilingService/reportProfilingTask", request_serializer=ser,
                             response_deserializer=Command_pb2.Commands.FromString)
    resp = trigger(CP.ContinuousProfilingReport(
        layer="GENERAL", serviceName=service, instanceName=instance, processName="python3",
        duration=30, onCPU=CP.ContinuousOnCPUProfilingTask(),
        causes=[CP.ContinuousProfilingCause(type=CP.ProcessCPU, singleValue=CP.ContinuousProfilingSingleValueCause(
            threshold=50, current=87.5))]), timeout=30)
    tid = [a.value for a in resp.commands[0].args if a.key == "TaskId"][0]
    collect = ch.stream_unary(V3 + "EBPFProfilingService/collectProfilingData", request_serializer=ser,
                              response_deserializer=Command_pb2.Commands.FromString)
    main_f, burn, wait = "ui_main (bpf_app.py:20)", "ui_burn (bpf_app.py:10)", "ui_wait (bpf_app.py:5)"
    collect(iter([
        on_cpu(tid, pid, [stack([burn, main_f])], 40),
        on_cpu(tid, pid, [stack([wait, main_f])], 15),
        on_cpu(tid, pid, [stack([main_f]), stack(["do_syscall_64", "entry_SYSCALL_64"],
                                                 kind=Profile_pb2.PROCESS_KERNEL_SPACE, sid=7)], 5),
    ]), timeout=30)
    collect(iter([on_cpu(tid, pid, [stack([burn, main_f])], 20)]), timeout=30)
    print(json.dumps({"taskId": tid, "processId": pid}), flush=True)


if __name__ == "__main__":
    main()
