"""Helpers for skyprofd's integration tests: the harness's skyprofd (tests/harness/skp_harness.py,
start_skyprofd) with the calls these tests make to its HTTP API and its gRPC services (generic
paths, so compat paths and raw bytes work too), and snapshot builders."""
import os
import re
import shutil
import time

import grpc  # noqa: F401 (the tests' channel is grpcio's)

import skp_harness as harness
from skp_harness import SKYPROFD  # noqa: F401 (tests start it by hand with wrong arguments)

from common import Command_pb2, Common_pb2  # noqa: E402,F401
from language_agent import Tracing_pb2  # noqa: E402,F401
from management import Management_pb2  # noqa: E402,F401
from profile import Profile_pb2  # noqa: E402,F401

V3 = "/skywalking.v3."

# When running as root, file modes do not stop writes; run the daemon as nobody where a test
# needs a read-only database.
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


class Skyprofd(harness.Skyprofd):
    """A running skyprofd (started by the harness's one launcher, with `db_dir` holding
    skyprof.db and extra args appended) plus the gRPC and API calls of these tests."""

    def create_task(self, service, endpoint="/orders", duration=5, start=None, threshold=0, dump=10,
                    count=5, headers=None):
        body = {"service": service, "endpointName": endpoint, "duration": duration,
                "minDurationThreshold": threshold, "dumpPeriod": dump, "maxSamplingCount": count}
        if start is not None:
            body["startTime"] = start
        return self.json("POST", "/api/v1/profile/tasks", body, headers)

    # ---- gRPC ----
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
