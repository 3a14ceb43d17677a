"""/healthz reports the store, /livez the process (issue 25 #7): on PostgreSQL, /healthz answered
200 "ok" while the database refused every connection (uploads all failing). Now, with the
database made unreachable (connections disallowed, skyprofd's sessions terminated), /healthz
answers 503 with the reason and /livez stays 200; once connections are allowed again /healthz
is 200 again (after the store's reconnect backoff, at most 5 s). SQLite: both 200.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pgserver  # noqa: E402
from skp_harness import Results, tempdir  # noqa: E402
from skyprofd_util import Skyprofd  # noqa: E402

R = Results()


def status(S, path):
    st, _, body = S.http("GET", path)
    return st, json.loads(body)


def wait_for(S, path, code, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        st, doc = status(S, path)
        if st == code:
            return doc
        if time.monotonic() > deadline:
            raise AssertionError("%s stayed %d %s, wanted %d" % (path, st, doc, code))
        time.sleep(0.1)


def t_sqlite():
    with tempdir() as d:
        S = Skyprofd(os.path.join(d, "data"), db_url=None)
        try:
            assert status(S, "/healthz") == (200, {"status": "ok"})
            assert status(S, "/livez") == (200, {"status": "ok"})
        finally:
            S.stop()


def t_postgres_unreachable():
    url = pgserver.test_url("health_down")
    srv = pgserver.server()
    db = pgserver.dbname_of(url)
    with tempdir() as d:
        S = Skyprofd(os.path.join(d, "data"), db_url=url)
        try:
            assert status(S, "/healthz") == (200, {"status": "ok"})
            srv.psql('ALTER DATABASE "%s" ALLOW_CONNECTIONS false' % db, dbname="postgres")
            srv.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '%s'"
                     % db, dbname="postgres")
            doc = wait_for(S, "/healthz", 503)
            assert doc["status"] == "database unavailable" and doc["database"], doc
            assert status(S, "/livez") == (200, {"status": "ok"})
            srv.psql('ALTER DATABASE "%s" ALLOW_CONNECTIONS true' % db, dbname="postgres")
            wait_for(S, "/healthz", 200)
            st, doc = S.create_task("svc-health", "/h")  # the store works again
            assert st == 201, doc
        finally:
            srv.psql('ALTER DATABASE "%s" ALLOW_CONNECTIONS true' % db, dbname="postgres",
                     check=False)
            S.stop()


def main():
    R.run("SQLite: /healthz and /livez", t_sqlite)
    if pgserver.available():
        R.run("PostgreSQL unreachable: /healthz 503, /livez 200", t_postgres_unreachable)
    R.finish()


if __name__ == "__main__":
    main()
