"""Shared helpers for skyprof's Python-driven tests (interop, integration, UI, CLI).

Everything waits on a condition with a deadline; nothing sleeps and hopes.
Environment (set by ctest through skp_add_py_test): SKP_BUILD_DIR, SKP_SOURCE_DIR,
SKP_SANITIZE ("1" in the ASan build), PYTHONPATH with the generated gRPC stubs.
"""
import contextlib
import json as _json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import types

# Bound before class Proc, whose `signal` method shadows the module inside the class body.
_SIGTERM = signal.SIGTERM

BUILD_DIR = os.environ.get("SKP_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build", "release"))
SOURCE_DIR = os.environ.get("SKP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SANITIZE = os.environ.get("SKP_SANITIZE", "0") in ("1", "ON", "TRUE", "true")


def build_path(*parts):
    """Path of a build artefact, e.g. build_path('src', 'server', 'skyprofd')."""
    return os.path.join(BUILD_DIR, *parts)


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago (prefer letting servers bind :0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(pred, timeout=10.0, interval=0.01, what="condition"):
    """Polls pred() until it returns a truthy value, which is returned; raises on timeout."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while time.monotonic() < deadline:
        try:
            v = pred()
            if v:
                return v
        except Exception as e:  # the condition may raise until it holds
            last_exc = e
        time.sleep(interval)
    raise TimeoutError("timed out after %.1fs waiting for %s (last error: %r)" % (timeout, what, last_exc))


def port_open(port, host="127.0.0.1"):
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def wait_port(port, host="127.0.0.1", timeout=15.0):
    return wait_until(lambda: port_open(port, host), timeout, what="port %s:%d" % (host, port))


class Proc:
    """A child process with its output captured to a file (read it with .output())."""

    def __init__(self, args, env=None, cwd=None, name=None):
        self.name = name or os.path.basename(args[0])
        self.log = tempfile.NamedTemporaryFile(prefix="skp-%s-" % self.name, suffix=".log", delete=False)
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        self.p = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=full_env, cwd=cwd,
                                  start_new_session=True)

    @property
    def pid(self):
        return self.p.pid

    def output(self):
        with open(self.log.name, "r", errors="replace") as f:
            return f.read()

    def alive(self):
        return self.p.poll() is None

    def signal(self, sig):
        if self.alive():
            self.p.send_signal(sig)

    def stop(self, sig=_SIGTERM, timeout=15.0):
        """Sends sig, waits; SIGKILL after timeout. Returns the exit code."""
        if self.alive():
            self.p.send_signal(sig)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        return self.p.returncode

    def kill9(self):
        if self.alive():
            self.p.kill()
            self.p.wait()
        return self.p.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        if exc[0] is not None:
            sys.stderr.write("---- output of %s ----\n%s\n" % (self.name, self.output()))
        return False


def listening_port(proc, label="", timeout=60.0):
    """Waits until proc prints '<label> listening on <host>:<port>' (anywhere when label is
    empty) and returns the port; raises when proc exits first or on timeout.

    Every process the tests start on port 0 announces its port this way: skyprofd
    ('skyprofd: grpc', 'skyprofd: http'), demo_service ('demo_service:'), the Python test apps
    ('seed_app:', 'parent', 'child' or no label)."""
    rx = re.compile((re.escape(label) + " " if label else "") + r"listening on [0-9.]+:(\d+)")

    def find():
        out = proc.output()
        m = rx.search(out)
        if m:
            return int(m.group(1))
        if not proc.alive():
            raise RuntimeError("%s exited before listening:\n%s" % (proc.name, out[-4000:]))
        return None
    return wait_until(find, timeout, what="%s: '%s listening on'" % (proc.name, label))


SKYPROFD = build_path("src", "server", "skyprofd")


class Skyprofd:
    """A running skyprofd (start it with start_skyprofd). Holds the ports it announced, talks to
    its HTTP API and, through grpcio, to its gRPC services; stop() checks the exit code and the
    sanitizers' silence."""

    def __init__(self, db_dir, *extra, grpc_addr="127.0.0.1:0", env=None, prefix=None,
                 name="skyprofd", log_level="info", db_name="skyprof.db", timeout=60.0, db_url=None):
        self.db_dir = db_dir
        self.db = os.path.join(db_dir, db_name)
        self.name = name
        if db_url is None and using_postgres():
            db_url = pg_database_for(self.db)
        self.db_url = db_url  # None: SQLite at self.db
        args = list(prefix or []) + [SKYPROFD, "--grpc-addr", grpc_addr, "--http-addr", "127.0.0.1:0",
                                     "--db", db_url or self.db, "--log-level", log_level] + list(extra)
        full_env = {"ASAN_OPTIONS": "detect_leaks=1"}
        if env:
            full_env.update(env)
        self.proc = Proc(args, env=full_env, name=name)
        try:
            self.grpc_port = listening_port(self.proc, "skyprofd: grpc", timeout)
            self.http_port = listening_port(self.proc, "skyprofd: http", timeout)
        except Exception:
            sys.stderr.write("---- %s output ----\n%s\n" % (name, self.proc.output()))
            self.proc.kill9()
            raise
        self.grpc_target = "127.0.0.1:%d" % self.grpc_port
        self.api_base = "http://127.0.0.1:%d/api/v1" % self.http_port
        self._channel = None

    @property
    def pid(self):
        return self.proc.pid

    def output(self):
        return self.proc.output()

    def alive(self):
        return self.proc.alive()

    # ---- HTTP ----
    def http(self, method, path, body=None, headers=None, timeout=30):
        import http.client
        import json
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
        import json
        if body is not None:
            # The API's JSON calls: mutating routes need this header (raw bytes bodies too).
            headers = dict(headers or {})
            headers.setdefault("Content-Type", "application/json")
        st, hdrs, data = self.http(method, path, body, headers)
        try:
            doc = json.loads(data) if data else None
        except ValueError:
            raise AssertionError("not JSON (%d): %r" % (st, data[:300]))
        if expect is not None and st != expect:
            raise AssertionError("%s %s: expected %d, got %d: %r" % (method, path, expect, st, doc))
        return st, doc

    # ---- gRPC (grpcio and the generated stubs are imported on first use) ----
    def channel(self):
        if self._channel is None:
            import grpc
            self._channel = grpc.insecure_channel(self.grpc_target)
        return self._channel

    def close_channel(self):
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    # ---- lifecycle ----
    def sql_rows(self, sql):
        """Rows of an SQL query on this skyprofd's database, the SQLite file or the PostgreSQL
        database alike (the tables and columns the tests read are named the same on both), as
        tuples; integer values come back as ints on both."""
        if not self.db_url:
            import sqlite3
            con = sqlite3.connect("file:%s?mode=ro" % self.db, uri=True)
            try:
                return [tuple(r) for r in con.execute(sql)]
            finally:
                con.close()
        import pgserver
        p = subprocess.run([os.path.join(pgserver.pg_bindir(), "psql"), "-X", "-q", "-At", "-F",
                            "\t", "-v", "ON_ERROR_STOP=1", "-d", self.db_url, "-c", sql],
                           capture_output=True, text=True, timeout=120, env=pgserver.tool_env())
        if p.returncode != 0:
            raise RuntimeError("psql %r failed: %s" % (sql[:200], p.stderr.strip()))
        return [tuple(int(v) if re.fullmatch(r"-?\d+", v) else v for v in line.split("\t"))
                for line in p.stdout.splitlines()]

    def stop(self, expect_rc=0):
        """SIGTERM, wait, check the sanitizers; with expect_rc, the exit code too."""
        self.close_channel()
        rc = self.proc.stop()
        check_sanitizer_clean(self.proc)
        if expect_rc is not None and rc != expect_rc:
            raise AssertionError("%s exited with %r:\n%s" % (self.name, rc, self.proc.output()[-4000:]))
        return rc

    def kill9(self):
        self.close_channel()
        self.proc.kill9()
        check_sanitizer_clean(self.proc)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close_channel()
        self.proc.__exit__(*exc)
        return False


def using_postgres():
    """Whether this test run puts skyprofd's database on PostgreSQL (SKP_TEST_DB=pg): tests of
    something only an SQLite file has (its folder, a damaged file) skip themselves then."""
    return os.environ.get("SKP_TEST_DB", "sqlite") in ("pg", "postgres", "postgresql")


_pg_databases = {}


def pg_database_for(path):
    """The PostgreSQL database standing for the SQLite file `path` in this test process: created
    fresh on first use (tests/harness/pgserver.py: the ctest fixture's server, or a private one),
    the same one again when a test restarts skyprofd on the same path. Returns its URL."""
    import hashlib
    import pgserver
    key = os.path.abspath(path)
    if key not in _pg_databases:
        h = hashlib.sha1(key.encode()).hexdigest()[:12]
        _pg_databases[key] = pgserver.server().create_database("t_%d_%s" % (os.getpid(), h))
    return _pg_databases[key]


def start_skyprofd(db_dir, *extra, **kw):
    """Starts the real skyprofd on 127.0.0.1 (gRPC and HTTP on port 0 unless grpc_addr= says
    otherwise) with its database in db_dir (db_name=, default skyprof.db), extra command-line
    arguments appended, and waits for both ports. Keywords: grpc_addr, env, prefix (e.g. a
    setpriv command), name, log_level, db_name, timeout, db_url (a postgresql:// URL instead of
    the SQLite file). With SKP_TEST_DB=pg in the environment and no db_url, the database is a
    fresh PostgreSQL one per db_dir/db_name (pg_database_for). Returns a Skyprofd; the one way
    the tests start skyprofd (node tests use `skp_harness.py skyprofd`, below)."""
    return Skyprofd(db_dir, *extra, **kw)


def check_sanitizer_clean(proc):
    """Fails if a sanitizer reported anything in the process output."""
    out = proc.output()
    for marker in ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer"):
        if marker in out:
            raise AssertionError("%s reported by %s:\n%s" % (marker, proc.name, out[-6000:]))


class Results:
    """Tiny test runner: run(name, fn) for each case, then finish() prints
    'N passed, N failed' (a closing line CI recognises) and exits non-zero on failure."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def run(self, name, fn, *args):
        t0 = time.monotonic()
        try:
            fn(*args)
        except Exception:
            import traceback
            self.failed += 1
            print("FAIL %s (%.2fs)" % (name, time.monotonic() - t0))
            traceback.print_exc()
        else:
            self.passed += 1
            print("ok   %s (%.2fs)" % (name, time.monotonic() - t0))
        sys.stdout.flush()

    def finish(self):
        print("%d passed, %d failed" % (self.passed, self.failed))
        sys.exit(1 if self.failed else 0)


@contextlib.contextmanager
def tempdir(prefix="skp-test-"):
    import shutil
    d = tempfile.mkdtemp(prefix=prefix)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def bind_stub_package(name="profile"):
    """Makes `import <name>.X` find the generated stubs package <name> on sys.path.

    The stubs of proto/profile/ live in a package called `profile`, which Python's standard
    `profile` module would otherwise shadow. Idempotent."""
    mod = sys.modules.get(name)
    if mod is not None and getattr(mod, "__path__", None):
        return
    for d in sys.path:
        p = os.path.join(d, name)
        if os.path.isdir(p) and any(f.endswith("_pb2.py") for f in os.listdir(p)):
            pkg = types.ModuleType(name)
            pkg.__path__ = [p]
            sys.modules[name] = pkg
            return
    raise RuntimeError("generated stubs package %r not found on sys.path" % name)


try:  # bind at import when the stubs are on the path (ctest sets PYTHONPATH)
    bind_stub_package("profile")
except RuntimeError:
    pass


def _serve_skyprofd(argv):
    """`skp_harness.py skyprofd DB_DIR [skyprofd args...]`: for tests that are not written in
    Python (the UI tests). Starts skyprofd with start_skyprofd, prints one JSON line
    {"grpc": port, "http": port, "pid": pid} on stdout, runs until SIGTERM (or until stdin closes, when it is a pipe), then
    stops it, copies its output to stderr and exits 1 if a sanitizer reported anything."""
    import threading
    if not argv:
        sys.stderr.write("usage: skp_harness.py skyprofd DB_DIR [skyprofd args...]\n")
        return 2
    srv = start_skyprofd(argv[0], *argv[1:])
    print(_json.dumps({"grpc": srv.grpc_port, "http": srv.http_port, "pid": srv.pid}), flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: done.set())
    signal.signal(signal.SIGINT, lambda *a: done.set())
    if stat.S_ISFIFO(os.fstat(0).st_mode):  # a parent holding a pipe: its exit stops us too
        threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    while not done.wait(0.5):
        if not srv.alive():
            break
    try:
        srv.stop(expect_rc=None)
        rc = 0
    except AssertionError as e:
        sys.stderr.write("%s\n" % e)
        rc = 1
    sys.stderr.write(srv.output())
    return rc


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "skyprofd":
        sys.exit(_serve_skyprofd(sys.argv[2:]))
    sys.stderr.write("usage: skp_harness.py skyprofd DB_DIR [skyprofd args...]\n")
    sys.exit(2)
