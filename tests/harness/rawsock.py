"""Raw loopback sockets for the tests that must behave like a hostile client of skyprofd (HTTP/1
framing, HTTP/2 prefaces left half sent, connection caps): a TCP connection from a chosen 127/8
address, reading until the peer closes, the status of an HTTP/1 answer, a process's CPU time, and
a condition wait that fails the test at its deadline. HTTP/2 frames are built by
tests/integration/server/h2raw.py on top of these sockets."""
import os
import socket
import time


def connect(port, source="127.0.0.1", timeout=10.0):
    """A TCP connection to 127.0.0.1:port from `source` (any 127/8 address works on Linux
    loopback, so per-peer limits can be tested from one machine)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def read_all(s, deadline_s=10.0):
    """Everything the peer sends until it closes (or the deadline): (bytes, closed)."""
    data = b""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        s.settimeout(max(0.05, end - time.monotonic()))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            return data, False
        except ConnectionResetError:
            return data, True
        if not chunk:
            return data, True
        data += chunk
    return data, False


def http_status(data):
    """The status code of the HTTP/1 answer that `data` starts with, None if it is not one."""
    line = data.split(b"\r\n", 1)[0]
    return int(line.split()[1]) if line.startswith(b"HTTP/1.") else None


def cpu_seconds(pid):
    """User + system CPU time of process `pid` so far (from /proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for(cond, what, deadline_s=20.0):
    """Polls cond() every 50 ms until it returns a truthy value (returned); an exception from
    cond fails at once, and the deadline fails with AssertionError."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)
