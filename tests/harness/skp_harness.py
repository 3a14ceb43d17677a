"""Shared helpers for skyprof's Python-driven tests (interop, integration, UI, CLI).

Everything waits on a condition with a deadline; nothing sleeps and hopes.
Environment (set by ctest through skp_add_py_test): SKP_BUILD_DIR, SKP_SOURCE_DIR,
SKP_SANITIZE ("1" in the ASan build), PYTHONPATH with the generated gRPC stubs.
"""
import contextlib
import os
import signal
import socket
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
