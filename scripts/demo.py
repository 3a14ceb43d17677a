"""The end-to-end demonstration behind `make demo`.

1. starts skyprofd (gRPC 11800 and HTTP 12800 when free, else any free port) on a fresh SQLite
   database under build/demo/;
2. starts the seed's example service (examples/python/seed_app.py: http.server, POST / runs
   method3 -> method2 -> method1, 20 ms each, then sleeps 500 ms) with the skyprof Python agent;
3. creates a profile task for service "provider", endpoint "/" (threshold 0, dump period 10 ms),
   waits until the agent has it, sends POST requests, waits for the profiled segments;
4. prints the stack tree (skyprof CLI) and the UI's URL, then keeps serving until Ctrl-C.
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BUILD = os.path.join(ROOT, os.environ.get("SKP_DEMO_BUILD", "build/release"))
sys.path.insert(0, os.path.join(ROOT, "tests", "harness"))
from skp_harness import Proc, port_open, wait_until  # noqa: E402

ONCE = "--once" in sys.argv


def log(msg):
    print("demo: " + msg, flush=True)


def listening(proc, what):
    """Port printed by a child as '...: <what> listening on 127.0.0.1:PORT'."""
    def find():
        for line in proc.output().splitlines():
            if (what + " listening on") in line:
                return int(line.rsplit(":", 1)[1])
        if not proc.alive():
            raise RuntimeError("%s exited:\n%s" % (proc.name, proc.output()[-3000:]))
        return None
    return wait_until(find, 30, what="%s to listen" % proc.name)


def api(port, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read() or b"null")


def python_pkg_dir():
    dirs = sorted(glob.glob(os.path.join(BUILD, "python", "cp3*")))
    for d in dirs:  # the system interpreter's build first (it is what we run)
        if os.path.basename(d).startswith("cp3112") or len(dirs) == 1:
            return d
    if not dirs:
        raise RuntimeError("the Python extension was not built under %s/python" % BUILD)
    return dirs[0]


def main():
    skyprofd = os.path.join(BUILD, "src", "server", "skyprofd")
    cli = os.path.join(BUILD, "src", "cli", "skyprof")
    data = os.path.join(ROOT, "build", "demo")
    shutil.rmtree(data, ignore_errors=True)
    os.makedirs(data)

    grpc = "127.0.0.1:%d" % (0 if port_open(11800) else 11800)
    http = "127.0.0.1:%d" % (0 if port_open(12800) else 12800)
    server = Proc([skyprofd, "--grpc-addr", grpc, "--http-addr", http,
                   "--db", os.path.join(data, "skyprof.db"), "--log-level", "info"], name="skyprofd")
    procs = [server]
    try:
        grpc_port = listening(server, "grpc")
        http_port = listening(server, "http")
        log("skyprofd up: gRPC 127.0.0.1:%d, HTTP 127.0.0.1:%d" % (grpc_port, http_port))

        env = {
            "PYTHONPATH": python_pkg_dir(),
            "SW_AGENT_COLLECTOR_BACKEND_SERVICES": "127.0.0.1:%d" % grpc_port,
            "SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL": "1",
            "SW_AGENT_COLLECTOR_HEARTBEAT_PERIOD": "5",
            "SEED_LOG_LEVEL": "INFO",
        }
        app = Proc(["/usr/bin/python3", os.path.join(ROOT, "examples", "python", "seed_app.py"), "0"],
                   env=env, name="seed_app")
        procs.append(app)
        app_port = listening(app, "")
        log("seed example service (provider) up on 127.0.0.1:%d" % app_port)

        task = api(http_port, "POST", "/api/v1/profile/tasks", {
            "service": "provider", "endpointName": "/", "duration": 5,
            "minDurationThreshold": 0, "dumpPeriod": 10, "maxSamplingCount": 5})
        task_id = task["id"]
        log("profile task %s created (endpoint '/', dump period 10 ms)" % task_id)
        wait_until(lambda: any(l["operationType"] == "NOTIFIED"
                               for l in api(http_port, "GET", "/api/v1/profile/tasks/%s/logs" % task_id)),
                   60, what="the agent to receive the task")
        log("the agent received the task; sending 5 POST / requests")
        for _ in range(5):
            req = urllib.request.Request("http://127.0.0.1:%d/" % app_port, data=b"{}", method="POST")
            with urllib.request.urlopen(req, timeout=30) as r:
                r.read()
        segs = wait_until(lambda: api(http_port, "GET", "/api/v1/profile/tasks/%s/segments" % task_id),
                          60, what="profiled segments")
        seg = segs[0]
        wait_until(lambda: api(http_port, "POST", "/api/v1/profile/analyze", [
            {"segmentId": seg["segmentId"], "timeRange": {"start": seg["start"],
                                                          "end": seg["start"] + max(seg["duration"], 1)}}])["trees"],
                   60, what="snapshots of the segment")
        log("%d profiled segment(s); the analysis of the first one:" % len(segs))
        subprocess.call([cli, "--server", "http://127.0.0.1:%d" % http_port, "analyze",
                         "--segment", seg["segmentId"], "--format", "tree"])
        print()
        log("open the UI:  http://127.0.0.1:%d/" % http_port)
        if ONCE:
            return 0
        log("serving until Ctrl-C (send more requests: curl -X POST http://127.0.0.1:%d/)" % app_port)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            log("stopping")
        return 0
    finally:
        for p in reversed(procs):
            p.stop()


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        sys.exit(main())
    except Exception as e:
        print("demo: FAILED: %s" % e, file=sys.stderr)
        sys.exit(1)
