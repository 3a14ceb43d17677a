"""Raw HTTP/2 (h2c prior knowledge) for tests that must behave like a hostile client: send the
preface and SETTINGS and then nothing, open a gRPC stream and leave a message half sent, and so
on. Frames are built by hand; header blocks use HPACK literals without indexing (RFC 7541 6.2.2),
which every decoder must accept, so no HPACK library is needed. Connections come from
tests/harness/rawsock.py."""
import socket
import struct
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0x0, 0x1, 0x3, 0x4, 0x6, 0x7
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream & 0x7fffffff) + payload


def _hpack_int(v, prefix_bits, first=0):
    lim = (1 << prefix_bits) - 1
    if v < lim:
        return bytes([first | v])
    out = [first | lim]
    v -= lim
    while v >= 128:
        out.append((v & 0x7f) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def header_block(pairs):
    out = b""
    for name, value in pairs:
        n, v = name.encode(), value.encode()
        out += b"\x00" + _hpack_int(len(n), 7) + n + _hpack_int(len(v), 7) + v
    return out


def grpc_headers(path, authority="skyprof"):
    return header_block([(":method", "POST"), (":scheme", "http"), (":path", path),
                         (":authority", authority), ("content-type", "application/grpc"),
                         ("te", "trailers")])


def handshake(s):
    """Client preface + empty SETTINGS, then ACKs the server's SETTINGS once they arrive."""
    s.sendall(PREFACE + frame(SETTINGS, 0, 0))
    s.sendall(frame(SETTINGS, ACK, 0))


def read_frames(s, until, deadline_s=10.0):
    """Reads frames until until(frames) is true, the peer closes or the deadline passes.
    Returns (frames, closed) with frames as (type, flags, stream, payload)."""
    buf = b""
    frames = []
    end = time.monotonic() + deadline_s
    closed = False
    while time.monotonic() < end and not until(frames):
        s.settimeout(max(0.05, end - time.monotonic()))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        except (ConnectionResetError, BrokenPipeError):
            closed = True
            break
        if not chunk:
            closed = True
            break
        buf += chunk
        while len(buf) >= 9:
            ln = struct.unpack(">I", b"\x00" + buf[:3])[0]
            if len(buf) < 9 + ln:
                break
            ftype, flags = buf[3], buf[4]
            stream = struct.unpack(">I", buf[5:9])[0] & 0x7fffffff
            frames.append((ftype, flags, stream, buf[9:9 + ln]))
            buf = buf[9 + ln:]
    return frames, closed
