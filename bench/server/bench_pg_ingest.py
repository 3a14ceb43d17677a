#!/usr/bin/env python3
"""bench_pg_ingest.py - acknowledged snapshots/s into PostgreSQL with 1 and with 2 collectors,
bytes per snapshot on disk, and the analysis of the whole task, side by side with SQLite in the
same run.

Each configuration is one run of bench/ingest/bench_ingest (C gRPC clients -> real skyprofd ->
acknowledged after the commit) with the same workload (N snapshots of 20-frame stacks, 500 per
segment, C client threads):
  sqlite      1 skyprofd, its SQLite file
  pg x1       1 skyprofd on a fresh PostgreSQL database
  pg x2       2 skyprofd on one fresh PostgreSQL database, the clients spread over both
  old pg x1/x2  the same with the skyprofd of --before BUILD (an older build, e.g. the commit
              before snapshots were stored as runs, built in its own directory), side by side
The PostgreSQL server is a real one started for the run (tests/harness/pgserver.py: initdb in
/tmp, unix socket, fsync off as in the tests). Bytes on disk for
PostgreSQL: pg_total_relation_size of every table (heap + indexes + TOAST) after VACUUM, divided
by the acknowledged snapshots; for SQLite the file + WAL. The analysis (--analyze of
bench_ingest) is the whole task's tree over HTTP, on the last collector, best of 3.

Usage: bench_pg_ingest.py [--build build/release] [--snapshots 1000000] [--clients 4]
                          [--only sqlite,pg1,pg2,old1,old2] [--before OLD_BUILD]
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "harness"))

import pgserver  # noqa: E402


def run_ingest(build, snapshots, clients, db=None, daemons=1, daemon_build=None):
    exe = os.path.join(build, "bench", "ingest", "bench_ingest")
    args = [exe, "--snapshots", str(snapshots), "--clients", str(clients), "--analyze",
            "--skyprofd", os.path.join(daemon_build or build, "src", "server", "skyprofd")]
    if db:
        args += ["--db", db, "--daemons", str(daemons)]
    p = subprocess.run(args, capture_output=True, text=True, timeout=3600)
    sys.stdout.write(p.stdout)
    if p.returncode != 0:
        sys.stdout.write(p.stderr)
    m = re.search(r"^RESULT (.*)$", p.stdout, re.M)
    if not m:
        raise RuntimeError("bench_ingest gave no RESULT line (exit %d)" % p.returncode)
    res = dict(kv.split("=", 1) for kv in m.group(1).split())
    res["ok"] = p.returncode == 0
    return res


def server_cpu(srv):
    """CPU seconds of the PostgreSQL server so far: the postmaster's own and that of its exited
    children (the backends of closed connections), plus its live children."""
    tck = os.sysconf("SC_CLK_TCK")
    with open(os.path.join(srv.data, "postmaster.pid")) as f:
        pm = int(f.readline())

    def stat(pid):
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()

    total = 0.0
    st = stat(pm)
    total += sum(int(x) for x in st[11:15]) / tck  # utime stime cutime cstime
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            c = stat(int(pid))
        except OSError:
            continue
        if int(c[1]) == pm:  # ppid
            total += (int(c[11]) + int(c[12])) / tck
    return total


def pg_bytes(srv, dbname):
    srv.psql("VACUUM", dbname=dbname)
    out = srv.psql("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                   "JOIN pg_namespace n ON n.oid = c.relnamespace "
                   "WHERE c.relkind IN ('r', 'p') AND n.nspname = 'public'", dbname=dbname)
    per = srv.psql("SELECT relname || ' ' || pg_total_relation_size(c.oid) FROM pg_class c "
                   "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND "
                   "n.nspname = 'public' ORDER BY pg_total_relation_size(c.oid) DESC LIMIT 5",
                   dbname=dbname)
    return int(out.strip() or 0), per.strip().replace("\n", ", ")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--snapshots", type=int, default=1000000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--only", default=None)
    ap.add_argument("--before", default=None,
                    help="build dir of an older skyprofd: rows 'old pg x1/x2' with it")
    a = ap.parse_args()
    only = (a.only or ("sqlite,old1,old2,pg1,pg2" if a.before else "sqlite,pg1,pg2")).split(",")
    with open("/proc/loadavg") as f:
        print("load average at start: %s" % " ".join(f.read().split()[:3]))
    rows = []
    srv, private = None, None
    try:
        if any(o.startswith("pg") or o.startswith("old") for o in only):
            private = pgserver.temporary()
            srv = private.__enter__()
        if "sqlite" in only:
            print("\n--- SQLite, 1 skyprofd")
            r = run_ingest(a.build, a.snapshots, a.clients)
            r["pg_cpu"] = 0.0
            rows.append(("SQLite, 1 skyprofd", r, int(r["file_bytes"]), "file + WAL"))
        for old, k in ((True, 1), (True, 2), (False, 1), (False, 2)):
            key = ("old%d" if old else "pg%d") % k
            if key not in only or (old and not a.before):
                continue
            name = "skp_bench_%s" % key
            url = srv.create_database(name)
            label = "PostgreSQL%s, %d skyprofd" % (" old" if old else "", k)
            print("\n--- %s (%s)" % (label, url))
            c0 = server_cpu(srv)
            r = run_ingest(a.build, a.snapshots, a.clients, db=url, daemons=k,
                           daemon_build=a.before if old else None)
            r["pg_cpu"] = server_cpu(srv) - c0
            b, detail = pg_bytes(srv, name)
            rows.append((label, r, b, detail))
    finally:
        if private:
            private.__exit__(None, None, None)
    with open("/proc/loadavg") as f:
        print("\nload average at end: %s" % " ".join(f.read().split()[:3]))
    print("\n%-28s %10s %11s %11s %11s %10s %10s %s" % (
        "configuration", "acked/s", "skyprofd", "PostgreSQL", "per CPU-s", "B/snapshot",
        "analysis", "check"))
    print("%-28s %10s %11s %11s %11s %10s %10s" % ("", "(wall)", "CPU-s", "CPU-s", "(both)", "",
                                                   "(best of 3)"))
    for name, r, b, detail in rows:
        acked = int(r["acked"])
        cpu = float(r["cpu"])
        both = cpu + r["pg_cpu"]
        an = min(float(x) for x in r["analyze_ms"].split(","))
        ok = r["ok"] and int(r["stored"]) + int(r["dup"]) == acked
        print("%-28s %10.0f %11.2f %11.2f %11.0f %10.1f %7.0f ms %s" % (
            name, float(r["rate"]), cpu, r["pg_cpu"], acked / both if both > 0 else 0,
            b / acked if acked else 0, an, "ok" if ok else "MISMATCH"))
    for name, r, b, detail in rows:
        print("  %s: %d bytes on disk (%s)" % (name, b, detail))
    print("targets: >= 150,000 acked snapshots/s combined with 2 collectors and <= 48 B per "
          "snapshot on PostgreSQL (issue 27); analysis of 1 M snapshots <= 2,000 ms")
    print("per CPU-s (both) = acknowledged snapshots per CPU second of skyprofd and the database "
          "server together: what %d cores could ingest with nothing else running"
          % os.cpu_count())
    return 0 if all(r["ok"] for _, r, _, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
