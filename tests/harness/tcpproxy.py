#!/usr/bin/env python3
"""A TCP proxy a test controls, between a client (skyprofd) and a server (PostgreSQL's unix or TCP
socket): it forwards both ways until told to black-hole, then it keeps every connection open and
accepts new ones but moves no byte either way (it stops reading, so what the client sends stays
in the kernel's buffers, as on a path that drops packets: no reset, no FIN, no answer). resume()
forwards again, what was held first. Threads only; stop() closes everything.

    p = TcpProxy(("unix", "/run/pg/.s.PGSQL.5432"))   # or ("tcp", ("127.0.0.1", 5432))
    p.port                                             # listening on 127.0.0.1:p.port
    p.blackhole(); p.resume(); p.stop()
"""
import select
import socket
import threading


class TcpProxy:
    def __init__(self, upstream):
        self.upstream = upstream
        self._flowing = threading.Event()
        self._flowing.set()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._socks = []
        self._ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._ls.bind(("127.0.0.1", 0))
        self._ls.listen(64)
        self._ls.settimeout(0.1)
        self.port = self._ls.getsockname()[1]
        self.connections = 0
        t = threading.Thread(target=self._accept_loop, daemon=True)
        t.start()
        self._threads = [t]

    def blackhole(self):
        self._flowing.clear()

    def resume(self):
        self._flowing.set()

    def stop(self):
        self._stop.set()
        self._flowing.set()
        for t in self._threads:
            t.join(5)
        with self._lock:
            for s in self._socks:
                try:
                    s.close()
                except OSError:
                    pass
        self._ls.close()

    def _keep(self, s):
        with self._lock:
            self._socks.append(s)

    def _accept_loop(self):
        while not self._stop.is_set():
            try:
                c, _ = self._ls.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.connections += 1
            self._keep(c)
            t = threading.Thread(target=self._serve, args=(c,), daemon=True)
            t.start()
            self._threads.append(t)

    def _wait_flowing(self):
        while not self._flowing.wait(0.05):
            if self._stop.is_set():
                return False
        return not self._stop.is_set()

    def _serve(self, c):
        # A black-holed connection is accepted and held: the upstream connection is made only
        # once bytes flow again.
        if not self._wait_flowing():
            return
        kind, addr = self.upstream
        u = socket.socket(socket.AF_UNIX if kind == "unix" else socket.AF_INET, socket.SOCK_STREAM)
        try:
            u.connect(addr)
        except OSError:
            c.close()
            return
        self._keep(u)
        peer = {c: u, u: c}
        try:
            while not self._stop.is_set():
                if not self._wait_flowing():
                    return
                r, _, _ = select.select([c, u], [], [], 0.05)
                if not self._flowing.is_set():
                    continue  # black-holed meanwhile: read nothing
                for s in r:
                    data = s.recv(65536)
                    if not data:
                        return
                    peer[s].sendall(data)
        except OSError:
            return
        finally:
            for s in (c, u):
                try:
                    s.close()
                except OSError:
                    pass
