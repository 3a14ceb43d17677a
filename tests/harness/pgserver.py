#!/usr/bin/env python3
"""A real PostgreSQL server for the tests: initdb in a directory, a unix socket in it, stopped at
the end (even when the test fails).

PostgreSQL refuses to run as root, and CI runs as root: then the server runs as an unprivileged
user (`postgres`, which Debian's package creates, else `nobody`) through `runuser`, and the
directory is made its own. The server listens on no TCP port unless asked: its unix socket
`DIR/.s.PGSQL.PORT` is the only way in, so no port is ever taken from another test. fsync is off
(test data need not survive a power cut). The superuser is `skyprof`, trusted on the socket.

As a module:
    srv = pgserver.start(dir)        # Server; srv.url is postgresql://skyprof@/skyprof?host=..
    url = srv.create_database("t1")  # a fresh, empty database of its own for one test
    srv.stop()
    with pgserver.temporary() as srv: ...   # started in a temp dir, stopped and removed at exit
    pgserver.test_url("name")        # what a test calls: a fresh database on the ctest fixture's
                                     # server (SKP_PG_DIR) or, without it, on a private server
As a script (ctest's FIXTURES_SETUP / FIXTURES_CLEANUP, and by hand):
    pgserver.py start DIR [--port N] [--tcp]   prints the URL; waits until it accepts connections
    pgserver.py stop DIR                        stops the server and removes DIR
    pgserver.py url DIR                         prints the URL of the server in DIR
"""
import atexit
import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

DEFAULT_PORT = 5432  # with no TCP listener the port only names the socket file
SUPERUSER = "skyprof"
DATABASE = "skyprof"


def pg_bindir():
    """The newest /usr/lib/postgresql/*/bin holding pg_ctl (Debian's layout)."""
    cands = []
    for d in glob.glob("/usr/lib/postgresql/*/bin"):
        m = re.search(r"/postgresql/(\d+)/bin$", d)
        if m and os.path.exists(os.path.join(d, "pg_ctl")):
            cands.append((int(m.group(1)), d))
    if not cands:
        raise RuntimeError("no PostgreSQL server found under /usr/lib/postgresql/*/bin "
                           "(scripts/bootstrap installs the postgresql package)")
    return max(cands)[1]


def available():
    try:
        pg_bindir()
        return True
    except RuntimeError:
        return False


def _run_user():
    """None when we are not root; else the unprivileged user the server runs as."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            pass
    raise RuntimeError("running as root and neither 'postgres' nor 'nobody' exists")


def tool_env():
    """The environment for PostgreSQL's programs: this one without LD_PRELOAD (the ASan build's
    Python tests preload libasan, which PostgreSQL's binaries must not inherit: psql hung)."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    return env


def _run(argv, **kw):
    return subprocess.run(argv, env=tool_env(), **kw)


def _cmd(user, argv):
    return (["runuser", "-u", user, "--"] + argv) if user else argv


def _chown_tree(path, user):
    pw = pwd.getpwnam(user)
    os.chown(path, pw.pw_uid, pw.pw_gid)
    for root, dirs, files in os.walk(path):
        for n in dirs + files:
            try:
                os.lchown(os.path.join(root, n), pw.pw_uid, pw.pw_gid)
            except FileNotFoundError:
                pass


def dbname_of(url):
    """The database name in one of our URLs (postgresql://user@host/NAME?...)."""
    m = re.match(r"postgres(?:ql)?://[^/]*/([^?]+)", url)
    if not m:
        raise ValueError("no database name in %r" % url)
    return m.group(1)


def _url(sock_dir, port, dbname=DATABASE):
    return "postgresql://%s@/%s?host=%s&port=%d" % (SUPERUSER, dbname, sock_dir, port)


class Server:
    """A started server: .dir (its directory), .port, .url (the `skyprof` database)."""

    def __init__(self, d, port, tcp=False):
        self.dir = os.path.abspath(d)
        self.port = port
        self.tcp = tcp
        self.data = os.path.join(self.dir, "data")
        self.url = _url(self.dir, port)

    def url_for(self, dbname):
        return _url(self.dir, self.port, dbname)

    def tcp_url(self, dbname=DATABASE):
        if not self.tcp:
            raise RuntimeError("server started without --tcp")
        return "postgresql://%s@127.0.0.1:%d/%s" % (SUPERUSER, self.port, dbname)

    def psql(self, sql, dbname=DATABASE, check=True):
        """Runs sql with psql -At on dbname; returns its stdout."""
        p = _run([os.path.join(pg_bindir(), "psql"), "-X", "-q", "-At", "-v",
                  "ON_ERROR_STOP=1", "-d", self.url_for(dbname), "-c", sql],
                 capture_output=True, text=True, timeout=120)
        if check and p.returncode != 0:
            raise RuntimeError("psql %r failed: %s" % (sql[:200], p.stderr.strip()))
        return p.stdout

    def create_database(self, name):
        """A new empty database `name` (dropped first if it exists); returns its URL."""
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
            raise ValueError("bad database name %r" % name)
        self.psql('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % name)
        self.psql('CREATE DATABASE "%s"' % name)
        return self.url_for(name)

    def drop_database(self, name):
        self.psql('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % name, check=False)

    def running(self):
        return _status(self.data) == 0

    def stop(self, remove=True):
        stop(self.dir, remove=remove)


def _status(data):
    if not os.path.exists(os.path.join(data, "PG_VERSION")):
        return 4
    user = _run_user()
    p = _run(_cmd(user, [os.path.join(pg_bindir(), "pg_ctl"), "-D", data, "status"]),
             capture_output=True, text=True)
    return p.returncode


def _port_file(d):
    return os.path.join(d, "port")


def start(d, port=None, tcp=False, timeout=120.0):
    """Starts a fresh server in directory d (created; a leftover server there is stopped and its
    data wiped first). port None = 5432 for a socket-only server, a free port with tcp=True.
    Returns a Server once `skyprof` accepts connections. Raises RuntimeError with the server's
    log when it does not come up (and leaves nothing running)."""
    d = os.path.abspath(d)
    if len(os.path.join(d, ".s.PGSQL.%d" % 65535)) > 107:
        raise RuntimeError("socket path under %s exceeds the 107-byte unix socket limit" % d)
    if os.path.exists(os.path.join(d, "data")):
        stop(d, remove=False)
        shutil.rmtree(os.path.join(d, "data"), ignore_errors=True)
    os.makedirs(d, exist_ok=True)
    if port is None:
        port = _free_port() if tcp else DEFAULT_PORT
    user = _run_user()
    if user:
        _chown_tree(d, user)
        # the server's user must be able to reach d: every parent directory needs o+x
        p = os.path.dirname(d)
        while p and p != "/":
            st = os.stat(p)
            if not st.st_mode & 0o001:
                raise RuntimeError("%s is not searchable by %s: choose a directory under /tmp" % (p, user))
            p = os.path.dirname(p)
    bindir = pg_bindir()
    data = os.path.join(d, "data")
    log = os.path.join(d, "server.log")
    r = _run(_cmd(user, [os.path.join(bindir, "initdb"), "-D", data, "-U", SUPERUSER,
                         "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"]),
             capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError("initdb failed (%d):\n%s%s" % (r.returncode, r.stdout, r.stderr))
    opts = ("-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c unix_socket_directories='%s' -c listen_addresses='%s' -p %d "
            "-c max_connections=200 -c shared_buffers=64MB -c log_min_messages=warning"
            % (d, "127.0.0.1" if tcp else "", port))
    with open(_port_file(d), "w") as f:
        f.write("%d %d\n" % (port, 1 if tcp else 0))
    if user:
        _chown_tree(d, user)
    r = _run(_cmd(user, [os.path.join(bindir, "pg_ctl"), "-D", data, "-l", log, "-o",
                         opts, "-w", "-t", str(int(timeout)), "start"]),
             capture_output=True, text=True, timeout=timeout + 10)
    srv = Server(d, port, tcp)
    if r.returncode != 0:
        text = r.stdout + r.stderr + _read(log)
        stop(d, remove=False)
        raise RuntimeError("pg_ctl start failed (%d):\n%s" % (r.returncode, text))
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:  # the role's default database
        try:
            srv.psql("CREATE DATABASE %s" % DATABASE, dbname="postgres")
            return srv
        except RuntimeError as e:
            last = str(e)
            if "already exists" in last:
                return srv
        time.sleep(0.1)
    stop(d, remove=False)
    raise RuntimeError("server in %s did not accept connections: %s\n%s" % (d, last, _read(log)))


def _read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-6000:]
    except OSError:
        return ""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def attach(d):
    """The Server already running in d, or None."""
    d = os.path.abspath(d)
    try:
        with open(_port_file(d)) as f:
            port, tcp = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        return None
    srv = Server(d, port, bool(tcp))
    return srv if srv.running() else None


def stop(d, remove=True):
    """Stops the server in d (fast shutdown, then immediate, then SIGKILL of the postmaster) and,
    with remove, deletes d. Safe to call when nothing runs there."""
    d = os.path.abspath(d)
    data = os.path.join(d, "data")
    if os.path.exists(os.path.join(data, "PG_VERSION")):
        user = _run_user()
        pg_ctl = os.path.join(pg_bindir(), "pg_ctl")
        for mode in ("fast", "immediate"):
            r = _run(_cmd(user, [pg_ctl, "-D", data, "-m", mode, "-w", "-t", "30", "stop"]),
                     capture_output=True, text=True)
            if r.returncode == 0 or _status(data) == 3:  # 3 = not running
                break
        else:
            pidfile = os.path.join(data, "postmaster.pid")
            try:
                with open(pidfile) as f:
                    os.kill(int(f.readline()), signal.SIGKILL)
            except (OSError, ValueError):
                pass
    if remove:
        shutil.rmtree(d, ignore_errors=True)


_private = None


def _private_server():
    global _private
    if _private is None:
        d = tempfile.mkdtemp(prefix="skp-pg-", dir="/tmp")
        _private = start(d)
        atexit.register(_private.stop)
    return _private


def server():
    """The tests' server: the ctest fixture's (SKP_PG_DIR, started by `pgserver.py start`) when
    it runs, else a private one started now and stopped at exit."""
    d = os.environ.get("SKP_PG_DIR")
    if d:
        srv = attach(d)
        if srv:
            return srv
        sys.stderr.write("pgserver: no server running in SKP_PG_DIR=%s; starting a private one\n" % d)
    return _private_server()


def test_url(name):
    """A fresh database for one test (named after the test and this process, so parallel tests
    and the release/ASan builds never share one); returns its URL."""
    base = re.sub(r"[^a-z0-9_]", "_", name.lower())[:40]
    return server().create_database("%s_%d" % (base, os.getpid()))


@__import__("contextlib").contextmanager
def temporary(tcp=False):
    d = tempfile.mkdtemp(prefix="skp-pg-", dir="/tmp")
    srv = None
    try:
        srv = start(d, tcp=tcp)
        yield srv
    finally:
        stop(d, remove=True)


def main(argv):
    if len(argv) < 2 or argv[0] not in ("start", "stop", "url"):
        sys.stderr.write(__doc__.split("As a script")[1])
        return 2
    cmd, d = argv[0], argv[1]
    if cmd == "start":
        port = None
        if "--port" in argv:
            port = int(argv[argv.index("--port") + 1])
        srv = start(d, port=port, tcp="--tcp" in argv)
        print(srv.url, flush=True)
        return 0
    if cmd == "url":
        srv = attach(d)
        if not srv:
            sys.stderr.write("no server running in %s\n" % d)
            return 1
        print(srv.url)
        return 0
    stop(d, remove=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
