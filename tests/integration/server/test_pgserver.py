"""The tests' PostgreSQL server (tests/harness/pgserver.py): the ctest fixture's server answers on
its unix socket, runs as an unprivileged user even when the tests run as root, gives each test a
fresh database of its own, and a temporary server is stopped and removed even when its user
fails."""
import os
import subprocess
import sys

import pgserver
from skp_harness import Results


def server_processes(d):
    """(pid, user) of the server processes of directory d: the postmaster (its command line names
    d) and its children (a psql of another test names d too, but is not `postgres`)."""
    out = subprocess.run(["ps", "-eo", "pid=,ppid=,user=,comm=,args="], capture_output=True,
                         text=True).stdout
    procs = []
    for line in out.splitlines():
        f = line.split(None, 4)
        if len(f) == 5:
            procs.append((int(f[0]), int(f[1]), f[2], f[3], f[4]))
    masters = {p[0] for p in procs if p[3] == "postgres" and d in p[4]}
    return [(p[0], p[2]) for p in procs
            if p[3] == "postgres" and (p[0] in masters or p[1] in masters)]


def test_fixture_server():
    srv = pgserver.server()
    assert srv.running()
    assert srv.psql("SELECT 1+1").strip() == "2"
    if os.environ.get("SKP_PG_DIR"):  # under ctest: the fixture's, not a private one
        assert srv.dir == os.path.abspath(os.environ["SKP_PG_DIR"]), srv.dir
        assert os.environ["SKP_PG_URL"] == srv.url, (os.environ["SKP_PG_URL"], srv.url)
    procs = server_processes(srv.dir)
    assert procs, "no postgres process for %s" % srv.dir
    if os.geteuid() == 0:
        assert all(u != "root" for _, u in procs), procs
    # no TCP listener: the socket in the directory is the only way in
    assert os.path.exists(os.path.join(srv.dir, ".s.PGSQL.%d" % srv.port))
    assert srv.psql("SHOW listen_addresses").strip() == ""
    assert srv.psql("SHOW fsync").strip() == "off"


def test_fresh_database():
    url = pgserver.test_url("pgserver_fresh")
    name = pgserver.dbname_of(url)
    srv = pgserver.server()
    srv.psql("CREATE TABLE t (x int); INSERT INTO t VALUES (7)", dbname=name)
    assert srv.psql("SELECT x FROM t", dbname=name).strip() == "7"
    url2 = pgserver.test_url("pgserver_fresh")  # the same name again: empty again
    assert url2 == url
    n = srv.psql("SELECT count(*) FROM pg_tables WHERE tablename = 't'", dbname=name).strip()
    assert n == "0", n
    srv.drop_database(name)


def test_temporary_stopped_on_failure():
    seen = {}
    try:
        with pgserver.temporary() as srv:
            seen["dir"] = srv.dir
            assert srv.psql("SELECT 3").strip() == "3"
            assert server_processes(srv.dir)
            raise KeyError("the test body failed")
    except KeyError:
        pass
    assert not os.path.exists(seen["dir"]), seen
    assert not server_processes(seen["dir"]), server_processes(seen["dir"])


def test_script_start_stop():
    d = "/tmp/skp-pg-script-%d" % os.getpid()
    here = os.path.dirname(pgserver.__file__)
    try:
        out = subprocess.run([sys.executable, os.path.join(here, "pgserver.py"), "start", d],
                             capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stderr
        url = out.stdout.strip()
        assert url == "postgresql://skyprof@/skyprof?host=%s&port=5432" % d, url
        srv = pgserver.attach(d)
        assert srv and srv.psql("SELECT 'up'").strip() == "up"
        # a second start over a running server replaces it (a crashed run's leftover)
        out = subprocess.run([sys.executable, os.path.join(here, "pgserver.py"), "start", d],
                             capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stderr
        assert pgserver.attach(d).psql("SELECT 'again'").strip() == "again"
    finally:
        subprocess.run([sys.executable, os.path.join(here, "pgserver.py"), "stop", d], timeout=120)
    assert not os.path.exists(d)
    assert not server_processes(d)


if __name__ == "__main__":
    r = Results()
    r.run("fixture_server", test_fixture_server)
    r.run("fresh_database", test_fresh_database)
    r.run("temporary_stopped_on_failure", test_temporary_stopped_on_failure)
    r.run("script_start_stop", test_script_start_stop)
    r.finish()
