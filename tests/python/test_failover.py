"""Agents spread over collectors: SW_AGENT_COLLECTOR_BACKEND_SERVICES as a comma list.

Two real skyprofd (A and B) on fixed ports; the demo service (C agent) and a Python service
(the Python agent, same core) are given "A,B". Each connects to A only (B sees no instance and no
segment). A is killed with -9: the agents' segments (counted from B's endpoint statistics, which
every reported segment feeds) and their registration arrive at B. A comes back and B is killed:
they return to A. Waits are on conditions with deadlines; the agents' backoff caps at 30 s.
"""
import http.client
import os
import sys
import threading

from skp_harness import (Proc, Results, build_path, free_port, listening_port, start_skyprofd,
                         tempdir, wait_until, SOURCE_DIR)

DEMO = os.environ.get("SKP_DEMO_SERVICE") or build_path("examples", "demo_service")


def request(port, path):
    """GET path, or POST for "POST /path"."""
    method, path = path.split(" ", 1) if " " in path else ("GET", path)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request(method, path, body=b"{}" if method == "POST" else None)
        r = c.getresponse()
        r.read()
        return r.status
    finally:
        c.close()


class Load:
    """Requests to the service's `path` in a loop until stop()."""

    def __init__(self, port, path):
        self.port, self.path = port, path
        self.n = 0
        self.done = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.done.is_set():
            try:
                request(self.port, self.path)
                self.n += 1
            except OSError:
                pass
            self.done.wait(0.02)

    def stop(self):
        self.done.set()
        self.t.join(10)


def count(srv, service, endpoint):
    """Requests of service/endpoint that srv's endpoint statistics counted (every segment)."""
    _, doc = srv.json("GET", "/api/v1/services/%s/endpoints/stats?window=900" % service)
    return sum(e["count"] for e in doc["endpoints"] if e["endpoint"].endswith(endpoint))


def instances(srv, service):
    st, doc = srv.json("GET", "/api/v1/services/%s/instances" % service)
    return doc if st == 200 else []


APPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'apps')


def start_services(tmp, backends):
    common = {
        "SW_AGENT_COLLECTOR_BACKEND_SERVICES": backends,
        "SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL": "1",
        "SW_AGENT_COLLECTOR_HEARTBEAT_PERIOD": "1",
        "SKYPROF_LOG_LEVEL": "info",
        "SW_AGENT_LOGGING_LEVEL": "INFO",
    }
    demo = Proc([DEMO, "--port", "0", "--step-ms", "1", "--other-ms", "0"],
                env=dict(common, SW_AGENT_NAME="failover-c"), name="demo")
    py = Proc([sys.executable, "-m", "skyprof", "run", os.path.join(APPS, "http_app.py")],
              env=dict(common, SW_AGENT_NAME="failover-py", SKP_APP_NO_START="1",
                       PYTHONUNBUFFERED="1"), name="pyapp", cwd=tmp)
    return demo, py


def test_failover():
    with tempdir() as tmp:
        pa, pb = free_port(), free_port()
        a = start_skyprofd(tmp, grpc_addr="127.0.0.1:%d" % pa, name="skyprofd-a", db_name="a.db")
        b = start_skyprofd(tmp, grpc_addr="127.0.0.1:%d" % pb, name="skyprofd-b", db_name="b.db")
        demo, py = start_services(tmp, "127.0.0.1:%d, 127.0.0.1:%d" % (pa, pb))
        loads = []
        try:
            dport = listening_port(demo, "demo_service:", 60)
            pport = listening_port(py, "", 60)
            loads = [Load(dport, "POST /cpu"), Load(pport, "/fast")]
            svcs = [("failover-c", "/cpu"), ("failover-py", "/fast")]
            for svc, ep in svcs:  # both on A, the first of the list
                wait_until(lambda: instances(a, svc), 60, 0.2, "%s registered on A" % svc)
                wait_until(lambda: count(a, svc, ep) >= 20, 60, 0.2, "%s segments on A" % svc)
            for svc, ep in svcs:  # connected to one collector only
                assert not instances(b, svc), instances(b, svc)
                assert count(b, svc, ep) == 0

            a.kill9()  # A gone: the agents fail over to B
            for svc, ep in svcs:
                wait_until(lambda: count(b, svc, ep) >= 20, 90, 0.2,
                           "%s segments at B after A was killed" % svc)
                wait_until(lambda: instances(b, svc), 60, 0.2, "%s registered on B" % svc)

            # A back on its port, B killed: back to A (its backoff has to run out first)
            a = start_skyprofd(tmp, grpc_addr="127.0.0.1:%d" % pa, name="skyprofd-a2",
                               db_name="a.db")
            before = {svc: count(a, svc, ep) for svc, ep in svcs}
            b.kill9()
            for svc, ep in svcs:
                wait_until(lambda: count(a, svc, ep) >= before[svc] + 20, 90, 0.2,
                           "%s segments back at A after B was killed" % svc)
            for name, p in (("demo", demo), ("pyapp", py)):
                out = p.output()
                assert "next calls go to 127.0.0.1:%d" % pb in out, (name, out[-3000:])
                assert "next calls go to 127.0.0.1:%d" % pa in out, (name, out[-3000:])
        finally:
            for l in loads:
                l.stop()
            for p in (demo, py):
                p.stop()
            for s in (a, b):
                if s.alive():
                    s.stop()


if __name__ == "__main__":
    r = Results()
    r.run("failover", test_failover)
    r.finish()
