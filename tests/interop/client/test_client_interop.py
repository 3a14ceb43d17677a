"""Interop: our C gRPC client (skpx_grpc_client, through grpc_client_driver) against a Python
grpcio server implementing skywalking.v3.ProfileTask (interop_server.py).

Covers: unary with field values, a 10,000-message client stream (count + CRC checked by the
server), non-OK status with a percent-decoded non-ASCII message, Trailers-Only (UNIMPLEMENTED),
response size limit, deadline expiry (ETIMEDOUT, server sees the RPC terminated), the
`authentication` metadata, the server being SIGKILLed mid-stream then coming back (reconnect
with backoff), and fork (child reconnects on its own connection while the parent keeps its own).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import interop_server  # noqa: E402  (binds the generated stubs first)
from skp_harness import (Proc, Results, build_path, check_sanitizer_clean, free_port,  # noqa: E402
                         wait_until)

DRIVER = build_path("tests", "interop", "client", "grpc_client_driver")
SERVER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "interop_server.py")
TOKEN = "s3cr3t-t0ken"


def parse_kv(text):
    kv = {}
    for line in text.splitlines():
        if "=" in line and " " not in line.split("=", 1)[0]:
            k, v = line.split("=", 1)
            kv[k] = v
    return kv


def run_driver(args, timeout=120.0, expect_rc=0):
    p = Proc([DRIVER] + args, name="grpc_client_driver")
    try:
        p.p.wait(timeout)
    except Exception:
        p.kill9()
        raise AssertionError("driver timed out: %s\n%s" % (args, p.output()))
    out = p.output()
    check_sanitizer_clean(p)
    if p.p.returncode != expect_rc:
        raise AssertionError("driver %s exited %s (want %s):\n%s" % (args, p.p.returncode, expect_rc, out))
    return parse_kv(out), out


class Env:
    def __init__(self):
        self.server, self.port, self.st = interop_server.start(0, TOKEN)
        self.target = "127.0.0.1:%d" % self.port

    def close(self):
        self.server.stop(0)


def t_unary(env):
    kv, out = run_driver(["unary", env.target, "--auth", TOKEN])
    assert kv["fields_ok"] == "1", out
    assert kv["status"] == "0", out
    assert kv["server_saw_auth"] == TOKEN, out


def t_unary_ipv6_localhost_name(env):
    # A host name goes through getaddrinfo; "localhost" may resolve to ::1 first, which the
    # server (bound to 127.0.0.1) refuses, so the client must try the next address.
    kv, out = run_driver(["unary", "localhost:%d" % env.port, "--auth", TOKEN])
    assert kv["fields_ok"] == "1", out


def t_auth(env):
    n0 = len(env.st.auth_seen)
    run_driver(["unary", env.target, "--auth", "wrong", "--expect", "EGRPC:16"])
    run_driver(["unary", env.target, "--expect", "EGRPC:16"])
    seen = env.st.auth_seen[n0:]
    assert seen == ["wrong", None], seen
    kv, out = run_driver(["stream", env.target, "--count", "10", "--auth", "nope"], expect_rc=1)
    assert kv["err"] == "EGRPC" and kv["status"] == "16", out


def t_stream_10k(env):
    n0 = len(env.st.snapshot_calls)
    kv, out = run_driver(["stream", env.target, "--count", "10000", "--auth", TOKEN, "--timeout", "120000"])
    assert kv["server_count"] == "10000", out
    assert kv["server_crc"] == kv["client_crc"], out
    calls = env.st.snapshot_calls[n0:]
    assert calls == [(10000, int(kv["client_crc"]))], calls
    print("    stream: %s msg/s to the Python server (Python-bound)" % kv["msg_per_s"])


def t_stream_empty(env):
    kv, out = run_driver(["stream", env.target, "--count", "0", "--auth", TOKEN])
    assert kv["server_count"] == "0", out


def t_status_non_ascii(env):
    kv, out = run_driver(["finish", env.target, "--auth", TOKEN, "--service", "abort",
                          "--expect", "EGRPC:%d" % interop_server.ABORT_CODE.value[0]])
    msg = bytes.fromhex(kv["message_hex"]).decode("utf-8")
    assert msg == interop_server.ABORT_MESSAGE, (msg, out)


def t_unimplemented_trailers_only(env):
    kv, out = run_driver(["unary", env.target, "--auth", TOKEN, "--path",
                          "/skywalking.v3.ProfileTask/noSuchMethod", "--expect", "EGRPC:12"])
    assert kv["status"] == "12", out


def t_max_msg(env):
    kv, out = run_driver(["unary", env.target, "--auth", TOKEN, "--service", "big",
                          "--max-msg", "65536", "--expect", "ETOOBIG"])
    # Without the limit the same response is accepted.
    kv, out = run_driver(["unary", env.target, "--auth", TOKEN, "--service", "big"])
    assert kv["fields_ok"] == "1", out


def t_deadline(env):
    env.st.slow_started.clear()
    env.st.slow_terminated.clear()
    kv, out = run_driver(["deadline", env.target, "--auth", TOKEN, "--timeout", "700"])
    assert kv["slow_err"] == "ETIMEDOUT", out
    # Bounded (not a timing assertion on the value): the call returned, well before the 30 s the
    # server would sleep.
    assert int(kv["slow_elapsed_ms"]) < 20000, out
    assert kv["after_fields_ok"] == "1" and kv["connects"] == "1", out
    wait_until(lambda: env.st.slow_terminated.is_set(), 15, what="server to see the RPC cancelled")
    # The grpc-timeout header reached the server.
    assert env.st.slow_time_remaining is not None and env.st.slow_time_remaining <= 0.8, \
        env.st.slow_time_remaining


def t_kill_and_reconnect():
    port = free_port()
    target = "127.0.0.1:%d" % port
    args = [sys.executable, SERVER_SCRIPT, "--port", str(port), "--token", TOKEN]
    srv = Proc(args, name="interop_server")
    srv2 = None
    drv = None
    try:
        wait_until(lambda: "listening" in srv.output(), 30, what="server start")
        drv = Proc([DRIVER, "killreconnect", target, "--auth", TOKEN, "--backoff-min", "200",
                    "--backoff-max", "800"], name="grpc_client_driver")
        wait_until(lambda: "pulled 20000" in drv.output(), 60, what="driver streaming")
        srv.kill9()
        wait_until(lambda: "stream_err=" in drv.output() or not drv.alive(), 30,
                   what="driver to notice the dead server")
        # Let a few attempts fail (backoff), then bring the server back on the same port.
        wait_until(lambda: "cannot connect" in drv.output() or not drv.alive(), 30,
                   what="a refused reconnect attempt")
        srv2 = Proc(args, name="interop_server2")
        wait_until(lambda: "listening" in srv2.output(), 30, what="server restart")
        wait_until(lambda: not drv.alive(), 90, what="driver to reconnect and exit")
        out = drv.output()
        check_sanitizer_clean(drv)
        assert drv.p.returncode == 0, out
        kv = parse_kv(out)
        assert kv["stream_err"] == "EUNAVAILABLE", out
        assert kv["reconnected"] == "1", out
        assert int(kv["connect_failures"]) >= 1, out
        # Backoff: some attempts failed without even trying to connect.
        assert int(kv["fast_fails"]) >= 1, out
        assert int(kv["connects"]) == 2, out
    finally:
        if drv:
            drv.kill9()
        srv.kill9()
        if srv2:
            srv2.stop()


def t_fork(env):
    q0 = env.st.queries
    kv, out = run_driver(["fork", env.target, "--auth", TOKEN])
    assert kv["child_ok"] == "1" and kv["child_rc"] == "0", out
    assert kv["parent_ok"] == "1" and kv["parent_after_ok"] == "1", out
    assert kv["parent_connects"] == "1", out
    assert kv["child_connects"] == "2", out  # inherited count + its own new connection
    assert env.st.queries - q0 == 1 + 5 + 5 + 2, env.st.queries - q0


def t_stream_to_our_server():
    """Our client against our own server (src/wire/grpc_server.c via the server suite's test
    binary): 100,000 snapshots in one stream, counted by the server. A regression test for a
    stall where the client waited for input after flushing a full buffer."""
    server_bin = build_path("tests", "interop", "server", "grpc_test_server")
    if not os.path.exists(server_bin):
        print("    (grpc_test_server not built; skipped)")
        return
    srv = Proc([server_bin], name="grpc_test_server")
    try:
        line = wait_until(lambda: [l for l in srv.output().splitlines() if l.startswith("PORT ")], 30,
                          what="grpc_test_server port")[0]
        target = "127.0.0.1:%s" % line.split()[1]
        kv, out = run_driver(["perf", target, "--count", "100000", "--rounds", "2", "--timeout", "120000"],
                             timeout=300)
        print("    our client -> our server: %s msg/s (%s build, indicative only)"
              % (kv["median_msg_per_s"], "ASan" if os.environ.get("SKP_SANITIZE") == "1" else "Release"))
    finally:
        srv.stop()
    check_sanitizer_clean(srv)


def t_closed_port():
    kv, out = run_driver(["unary", "127.0.0.1:%d" % free_port(), "--expect", "EUNAVAILABLE"])
    assert kv["status"] == "-1", out


def main():
    r = Results()
    env = Env()
    try:
        r.run("unary", t_unary, env)
        r.run("unary_localhost_name", t_unary_ipv6_localhost_name, env)
        r.run("auth", t_auth, env)
        r.run("stream_10k", t_stream_10k, env)
        r.run("stream_empty", t_stream_empty, env)
        r.run("status_non_ascii", t_status_non_ascii, env)
        r.run("unimplemented_trailers_only", t_unimplemented_trailers_only, env)
        r.run("max_msg", t_max_msg, env)
        r.run("deadline", t_deadline, env)
        r.run("fork", t_fork, env)
        r.run("closed_port", t_closed_port)
        r.run("stream_to_our_server", t_stream_to_our_server)
    finally:
        env.close()
    r.run("kill_and_reconnect", t_kill_and_reconnect)
    r.finish()


if __name__ == "__main__":
    main()
