"""Helpers for skyprofd's integration tests: start the real daemon on port 0 with a temporary
database (parsing its 'listening' lines), call its HTTP API and its gRPC services (generic
paths, so compat paths and raw bytes work too), build snapshots."""
import http.client
import json
import os
import re
import shutil
import sys
import time

import grpc

from skp_harness import Proc, build_path, check_sanitizer_clean, wait_until


from common import Command_pb2, Common_pb2  # noqa: E402,F401
from language_agent import Tracing_pb2  # noqa: E402,F401
from management import Management_pb2  # noqa: E402,F401
from profile import Profile_pb2  # noqa: E402,F401

SKYPROFD = build_path("src", "server", "skyprofd")
V3 = "/skywalking.v3."

# When running as root, file modes do not stop writes; run the daemon as nobody where a test
# needs a read-only database.
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


class Skyprofd:
    """A running skyprofd. `db_dir` holds skyprof.db; extra args are appended."""

    def __init__(self, db_dir, *extra, env=None, prefix=None, name="skyprofd", log_level="info"):
        self.db_dir = db_dir
        self.db = os.path.join(db_dir, "skyprof.db")
        args = list(prefix or []) + [SKYPROFD, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
                                     "--db", self.db, "--log-level", log_level] + list(extra)
        full_env = {"ASAN_OPTIONS": "detect_leaks=1"}
        if env:
            full_env.update(env)
        self.proc = Proc(args, env=full_env, name=name)
        try:
            out = wait_until(lambda: self._ports(), 60, what="skyprofd listening lines")
        except Exception:
            sys.stderr.write("---- skyprofd output ----\n%s\n" % self.proc.output())
            raise
        self.grpc_port, self.http_port = out
        self.grpc_target = "127.0.0.1:%d" % self.grpc_port
        self._channel = None

    def _ports(self):
        out = self.proc.output()
        g = re.search(r"^skyprofd: grpc listening on 127\.0\.0\.1:(\d+)$", out, re.M)
        h = re.search(r"^skyprofd: http listening on 127\.0\.0\.1:(\d+)$", out, re.M)
        if not self.proc.alive() and not (g and h):
            raise RuntimeError("skyprofd exited early:\n" + out)
        return (int(g.group(1)), int(h.group(1))) if g and h else None

    # ---- HTTP ----
    def http(self, method, path, body=None, headers=None, timeout=30):
        c = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=timeout)
        try:
            h = dict(headers or {})
            if body is not None and not isinstance(body, (bytes, str)):
                body = json.dumps(body)
                h.setdefault("Content-Type", "application/json")
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            c.close()

    def json(self, method, path, body=None, headers=None, expect=None):
        st, hdrs, data = self.http(method, path, body, headers)
        try:
            doc = json.loads(data) if data else None
        except ValueError:
            raise AssertionError("not JSON (%d): %r" % (st, data[:300]))
        if expect is not None and st != expect:
            raise AssertionError("%s %s: expected %d, got %d: %r" % (method, path, expect, st, doc))
        return st, doc

    def create_task(self, service, endpoint="/orders", duration=5, start=None, threshold=0, dump=10,
                    count=5, headers=None):
        body = {"service": service, "endpointName": endpoint, "duration": duration,
                "minDurationThreshold": threshold, "dumpPeriod": dump, "maxSamplingCount": count}
        if start is not None:
            body["startTime"] = start
        return self.json("POST", "/api/v1/profile/tasks", body, headers)

    # ---- gRPC ----
    def channel(self):
        if self._channel is None:
            self._channel = grpc.insecure_channel(self.grpc_target)
        return self._channel

    def unary(self, path, req, metadata=None, timeout=30, raw=False):
        call = self.channel().unary_unary(
            path, request_serializer=(lambda b: b) if raw else type(req).SerializeToString,
            response_deserializer=Command_pb2.Commands.FromString)
        return call(req, metadata=metadata, timeout=timeout)

    def stream(self, path, reqs, metadata=None, timeout=60, raw=False):
        call = self.channel().stream_unary(
            path, request_serializer=(lambda b: b) if raw else (lambda m: m.SerializeToString()),
            response_deserializer=Command_pb2.Commands.FromString)
        return call(iter(reqs), metadata=metadata, timeout=timeout)

    def query(self, service, instance, last=-1, path=V3 + "ProfileTask/getProfileTaskCommands", metadata=None):
        return self.unary(path, Profile_pb2.ProfileTaskCommandQuery(
            service=service, serviceInstance=instance, lastCommandTime=last), metadata=metadata)

    def snapshots(self, snaps, path=V3 + "ProfileTask/collectSnapshot", metadata=None, timeout=60):
        return self.stream(path, snaps, metadata=metadata, timeout=timeout)

    def metric(self, name):
        st, _, data = self.http("GET", "/metrics")
        assert st == 200
        m = re.search(r"^%s (\S+)$" % re.escape(name), data.decode(), re.M)
        return float(m.group(1)) if m else None

    # ---- lifecycle ----
    def close_channel(self):
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def stop(self, expect_rc=0):
        self.close_channel()
        rc = self.proc.stop()
        check_sanitizer_clean(self.proc)
        if expect_rc is not None and rc != expect_rc:
            raise AssertionError("skyprofd exited with %r:\n%s" % (rc, self.proc.output()[-4000:]))
        return rc

    def kill9(self):
        self.close_channel()
        self.proc.kill9()
        check_sanitizer_clean(self.proc)


_T0 = int(time.time() * 1000)


def snap(task, segment, seq, frames, time_ms=None):
    """A ThreadSnapshot; the default time is recent so retention at a restart keeps it."""
    return Profile_pb2.ThreadSnapshot(
        taskId=task, traceSegmentId=segment, time=time_ms if time_ms is not None else _T0 + seq * 10,
        sequence=seq, stack=Profile_pb2.ThreadStack(codeSignatures=list(frames)))


def args_of(cmd):
    return {kv.key: kv.value for kv in cmd.args}


def root_count(analysis):
    """Number of snapshots an analysis used (sum over trees of the root counts)."""
    total = 0
    for t in analysis["trees"]:
        roots = [e for e in t["elements"] if e["parentId"] in (0, "0")]
        total += sum(int(e["count"]) for e in roots)
    return total


def by_sig(tree):
    return {e["codeSignature"]: e for e in tree["elements"]}


def can_drop_privileges():
    return os.geteuid() != 0 or shutil.which("setpriv") is not None
