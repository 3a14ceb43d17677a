"""Issue 15, findings 8 and 9, end to end: an agent that reports escape sequences, carriage
returns and C1 controls in its service, instance, properties, endpoint and code signatures
cannot reach the terminal of someone running the `skyprof` CLI, nor forge lines in skyprofd's
log. Every text command's output is checked for raw control bytes; the strings still show up,
escaped (\\x1b, \\r, \\u009b), so the user sees what the agent sent."""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("SKP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                                "tests", "integration", "server"))
from skp_harness import Results, build_path, tempdir  # noqa: E402
from skyprofd_util import V3, Common_pb2, Management_pb2, Skyprofd, Tracing_pb2, snap  # noqa: E402

CLI = os.environ.get("SKP_CLI") or build_path("src", "cli", "skyprof")
S = None
ESC = "\x1b]0;pwned\x07\x1b[2J"
SVC = "svc" + ESC + "\r\nFAKE"
INST = "inst\x1b[31m"
ENDPOINT = "/pay\x1b[1A\u009b2K"
FRAMES = ["main\x1b[8m", "handler\r\n  999  999  hidden", "leaf\u0085"]
TID = None
# Bytes that must never reach the terminal: C0 except \n, DEL, and C1 in UTF-8 (C2 80..9F).
BAD = re.compile(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")


def run(*args):
    p = subprocess.run([CLI, "--server", "http://127.0.0.1:%d" % S.http_port] + list(args),
                       capture_output=True, timeout=60, env=dict(os.environ, COLUMNS="200"))
    assert "AddressSanitizer" not in p.stderr.decode(errors="replace"), p.stderr
    return p.returncode, p.stdout, p.stderr


def clean(*args, rc=0):
    code, out, err = run(*args)
    assert code == rc, (args, code, out, err)
    for name, data in (("stdout", out), ("stderr", err)):
        m = BAD.search(data)
        assert not m, "skyprof %s: raw control byte %r in %s:\n%r" % (args, m.group(0), name, data)
    return out.decode()


def setup():
    global TID
    S.unary(V3 + "ManagementService/reportInstanceProperties", Management_pb2.InstanceProperties(
        service=SVC, serviceInstance=INST, layer="GENERAL",
        properties=[Common_pb2.KeyStringValuePair(key="language", value="py\x1b[0m"),
                    Common_pb2.KeyStringValuePair(key="host\x1b[5m", value="box\r")]))
    st, doc = S.create_task(SVC, ENDPOINT, dump=10)
    assert st == 201, doc
    TID = doc["id"]
    S.snapshots([snap(TID, "seg\x1b[1m", i, FRAMES) for i in range(3)])
    S.stream(V3 + "TraceSegmentReportService/collect", [Tracing_pb2.SegmentObject(
        traceId="trace\x1b[7m", traceSegmentId="seg\x1b[1m", service=SVC, serviceInstance=INST,
        spans=[Tracing_pb2.SpanObject(spanId=0, parentSpanId=-1, startTime=1, endTime=30,
                                      operationName=ENDPOINT, spanType=Tracing_pb2.Entry)])])


def t_services():
    out = clean("services")
    assert "svc\\x1b]0;pwned\\x07\\x1b[2J\\r\\nFAKE" in out, out
    out = clean("services", SVC)
    assert "inst\\x1b[31m" in out and "host\\x1b[5m=box\\r" in out, out


def t_tasks():
    out = clean("task", "list")
    assert "/pay\\x1b[1A\\u009b2K" in out, out
    clean("task", "show", TID)
    S.query(SVC, INST)
    out = clean("task", "logs", TID)
    assert "inst\\x1b[31m" in out, out


def t_segments_and_analysis():
    out = clean("segments", TID)
    assert "seg\\x1b[1m" in out and "trace\\x1b[7m" in out, out
    out = clean("analyze", "--task", TID)
    assert "main\\x1b[8m" in out and "handler\\r\\n  999  999  hidden" in out and "leaf\\u0085" in out, out
    out = clean("analyze", "--segment", "seg\x1b[1m", "--whole")  # its span (1..30 ms) holds no dump
    assert "leaf\\u0085" in out, out


def t_errors_from_the_server():
    # A 404 names the id the user typed back; the server's message is escaped too.
    out = clean("task", "show", "nope\x1b[2J", rc=4)


def t_json_output_keeps_the_data():
    code, out, err = run("--json", "task", "show", TID)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["endpointName"] == ENDPOINT, doc    # machine output is faithful (JSON-escaped)
    assert b"\x1b" not in out


def t_log_lines_not_forged():
    log = S.output()
    lines = [l for l in log.splitlines() if "FAKE" in l]
    assert lines, log[-3000:]
    for l in lines:
        assert re.match(r"^\d{4}-\d\d-\d\dT", l), "a forged log line: %r" % l
        assert "\x1b" not in l and "\r" not in l, repr(l)


def main():
    global S
    res = Results()
    with tempdir() as tmp:
        S = Skyprofd(tmp)
        try:
            res.run("hostile agent data set up", setup)
            res.run("services and instances escaped", t_services)
            res.run("task list/show/logs escaped", t_tasks)
            res.run("segments and analysis escaped", t_segments_and_analysis)
            res.run("server error messages escaped", t_errors_from_the_server)
            res.run("--json keeps the data", t_json_output_keeps_the_data)
            res.run("skyprofd's log: no forged line", t_log_lines_not_forged)
        finally:
            S.stop()
    res.finish()


if __name__ == "__main__":
    main()
