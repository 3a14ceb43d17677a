"""Edge cases for our C gRPC client against a scripted HTTP/2 peer (python3-h2): behaviours a
well-behaved grpcio server never shows. Each case runs grpc_client_driver once and checks the
error class it reports:

GOAWAY before processing, RST_STREAM (REFUSED_STREAM / INTERNAL_ERROR), HTTP 503, a wrong
content-type, two response messages to a unary call, a message cut short, no grpc-status, a
non-HTTP/2 peer, and a server that closes the connection after each answer (the next call must
reconnect transparently).
"""
import os
import select
import socket
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import interop_server  # noqa: E402,F401  (binds the generated stubs first)
import h2.config  # noqa: E402
import h2.connection  # noqa: E402
import h2.errors  # noqa: E402
import h2.events  # noqa: E402
from common import Command_pb2, Common_pb2  # noqa: E402
from profile import Profile_pb2  # noqa: E402
from skp_harness import Results, wait_until  # noqa: E402
from test_client_interop import run_driver  # noqa: E402


def grpc_frame(payload):
    return b"\0" + len(payload).to_bytes(4, "big") + payload


def echo_payload(body):
    q = Profile_pb2.ProfileTaskCommandQuery.FromString(body[5:])
    cmd = Command_pb2.Command(command="QueryEcho")
    for k, v in (("service", q.service), ("serviceInstance", q.serviceInstance),
                 ("lastCommandTime", str(q.lastCommandTime)), ("authentication", "")):
        cmd.args.append(Common_pb2.KeyStringValuePair(key=k, value=v))
    return Command_pb2.Commands(commands=[cmd]).SerializeToString()


GRPC_HEADERS = [(":status", "200"), ("content-type", "application/grpc")]


class FakeH2Server:
    """Accepts connections on 127.0.0.1:0 and answers each request as `mode` says."""

    def __init__(self, mode):
        self.mode = mode
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.port = self.lsock.getsockname()[1]
        self.target = "127.0.0.1:%d" % self.port
        self.accepted = 0
        self.errors = []
        self.resets = []          # (stream_id, error_code) of RST_STREAM frames received
        self.request_headers = []  # header lists of the requests received
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def close(self):
        self.stopping.set()
        self.thread.join(10)
        self.lsock.close()

    def _serve(self):
        while not self.stopping.is_set():
            r, _, _ = select.select([self.lsock], [], [], 0.05)
            if not r:
                continue
            s, _ = self.lsock.accept()
            self.accepted += 1
            threading.Thread(target=self._handle, args=(s,), daemon=True).start()

    def _handle(self, s):
        try:
            self._handle_inner(s)
        except Exception as e:  # the client may reset or close at any point
            self.errors.append(repr(e))
        finally:
            s.close()

    def _handle_inner(self, s):
        s.settimeout(15)
        if self.mode == "garbage":
            s.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            return
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
        conn.initiate_connection()
        s.sendall(conn.data_to_send())
        bodies = {}
        while True:
            data = s.recv(65536)
            if not data:
                return
            close_after = False
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    bodies[ev.stream_id] = b""
                    self.request_headers.append([(bytes(k).decode() if isinstance(k, bytes) else k,
                                                  bytes(v).decode() if isinstance(v, bytes) else v)
                                                 for k, v in ev.headers])
                    if self.mode == "hang":
                        conn.send_headers(ev.stream_id, GRPC_HEADERS)
                elif isinstance(ev, h2.events.StreamReset):
                    self.resets.append((ev.stream_id, ev.error_code))
                elif isinstance(ev, h2.events.DataReceived):
                    bodies[ev.stream_id] = bodies.get(ev.stream_id, b"") + ev.data
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    close_after |= self._respond(conn, ev.stream_id, bodies.pop(ev.stream_id, b""))
            out = conn.data_to_send()
            if out:
                s.sendall(out)
            if close_after:
                return

    def _respond(self, conn, sid, body):
        """Sends the scripted answer; returns True to close the connection afterwards."""
        m = self.mode
        msg = grpc_frame(echo_payload(body))
        if m == "goaway":
            conn.close_connection(error_code=0, last_stream_id=0)
        elif m == "rst_refused":
            conn.reset_stream(sid, error_code=h2.errors.ErrorCodes.REFUSED_STREAM)
        elif m == "rst_internal":
            conn.reset_stream(sid, error_code=h2.errors.ErrorCodes.INTERNAL_ERROR)
        elif m == "http503":
            conn.send_headers(sid, [(":status", "503"), ("content-type", "text/plain")],
                              end_stream=True)
        elif m == "bad_ctype":
            conn.send_headers(sid, [(":status", "200"), ("content-type", "text/html")])
            conn.send_data(sid, msg)
            conn.send_headers(sid, [("grpc-status", "0")], end_stream=True)
        elif m == "two_msgs":
            conn.send_headers(sid, GRPC_HEADERS)
            conn.send_data(sid, msg + msg)
            conn.send_headers(sid, [("grpc-status", "0")], end_stream=True)
        elif m == "truncated":
            conn.send_headers(sid, GRPC_HEADERS)
            conn.send_data(sid, msg[:len(msg) // 2])
            conn.send_headers(sid, [("grpc-status", "0")], end_stream=True)
        elif m == "no_status":
            conn.send_headers(sid, GRPC_HEADERS)
            conn.send_data(sid, msg, end_stream=True)
        elif m == "bad_status":
            conn.send_headers(sid, GRPC_HEADERS)
            conn.send_headers(sid, [("grpc-status", "x1")], end_stream=True)
        elif m == "trailers_only_status":
            conn.send_headers(sid, GRPC_HEADERS + [("grpc-status", "7"),
                                                   ("grpc-message", "no%20way %E2%9C%93")],
                              end_stream=True)
        elif m == "hang":
            pass  # headers were sent on arrival; never answer
        elif m in ("ok", "ok_then_close"):
            conn.send_headers(sid, GRPC_HEADERS)
            conn.send_data(sid, msg)
            conn.send_headers(sid, [("grpc-status", "0")], end_stream=True)
            return m == "ok_then_close"
        else:
            raise ValueError(m)
        return False


CASES = [
    # mode, expected driver "err", extra check on the message
    ("goaway", "EUNAVAILABLE", "GOAWAY"),
    ("rst_refused", "EUNAVAILABLE", "REFUSED_STREAM"),
    ("rst_internal", "EPROTO", "INTERNAL_ERROR"),
    ("http503", "EUNAVAILABLE", "503"),
    ("bad_ctype", "EPROTO", "content-type"),
    ("two_msgs", "EPROTO", "more than one"),
    ("truncated", "EPROTO", "inside a message"),
    ("no_status", "EPROTO", "without grpc-status"),
    ("bad_status", "EPROTO", "grpc-status"),
    ("garbage", "EUNAVAILABLE", None),
]


def check_case(mode, want_err, want_text):
    srv = FakeH2Server(mode)
    try:
        kv, out = run_driver(["unary", srv.target, "--expect", want_err, "--timeout", "5000"])
        msg = bytes.fromhex(kv["message_hex"]).decode("utf-8", "replace")
        if want_text:
            assert want_text in msg, (msg, out)
    finally:
        srv.close()


def t_trailers_only_status():
    srv = FakeH2Server("trailers_only_status")
    try:
        kv, out = run_driver(["unary", srv.target, "--expect", "EGRPC:7"])
        assert bytes.fromhex(kv["message_hex"]).decode() == "no way \u2713", out
    finally:
        srv.close()


def t_reconnect_after_server_close():
    srv = FakeH2Server("ok_then_close")
    try:
        kv, out = run_driver(["unary", srv.target, "--repeat", "3", "--pause-ms", "100"])
        assert kv["fields_ok"] == "1", out
        assert kv["connects"] == "3" and kv["connect_failures"] == "0", out
        assert srv.accepted == 3, srv.accepted
    finally:
        srv.close()


def t_deadline_sends_cancel():
    """The client's deadline expires on a server that never answers: the stream is reset with
    CANCEL (seen by the server), the grpc-timeout header carried the deadline, and the
    connection stays usable (the peer speaks HTTP/2)."""
    srv = FakeH2Server("hang")
    try:
        kv, out = run_driver(["unary", srv.target, "--timeout", "400", "--expect", "ETIMEDOUT"])
        wait_until(lambda: srv.resets, 10, what="RST_STREAM at the server")
        assert srv.resets[0][1] == h2.errors.ErrorCodes.CANCEL, srv.resets
        hdrs = dict(srv.request_headers[0])
        tmo = hdrs["grpc-timeout"]
        assert tmo.endswith("m") and 0 < int(tmo[:-1]) <= 400, tmo
        for k, v in ((":method", "POST"), (":scheme", "http"), ("content-type", "application/grpc"),
                     ("te", "trailers"), (":authority", srv.target),
                     (":path", "/skywalking.v3.ProfileTask/getProfileTaskCommands")):
            assert hdrs.get(k) == v, (k, hdrs)
        assert hdrs["user-agent"] == "skyprof-interop-driver", hdrs
        assert "authentication" not in hdrs, hdrs
        assert kv["connects"] == "1", out
    finally:
        srv.close()


def t_keepalive_reuse():
    srv = FakeH2Server("ok")
    try:
        kv, out = run_driver(["unary", srv.target, "--repeat", "5"])
        assert kv["connects"] == "1", out
        assert srv.accepted == 1, srv.accepted
    finally:
        srv.close()


def main():
    r = Results()
    for mode, err, text in CASES:
        r.run("edge_" + mode, check_case, mode, err, text)
    r.run("trailers_only_status", t_trailers_only_status)
    r.run("reconnect_after_server_close", t_reconnect_after_server_close)
    r.run("keepalive_reuse", t_keepalive_reuse)
    r.run("deadline_sends_cancel", t_deadline_sends_cancel)
    r.finish()


if __name__ == "__main__":
    main()
