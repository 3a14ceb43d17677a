#!/usr/bin/python3
"""bench_store_ab.py - two builds of skyprofd side by side on the store's workloads: bench_store
on SQLite and on PostgreSQL (a fresh database of the tests' server, tests/harness/pgserver.py)
and bench_ingest (gRPC clients -> skyprofd -> SQLite), alternating old/new for --rounds rounds,
then each figure per build with its runs. For refactors that must leave the results unchanged.

    /usr/bin/python3 bench/server/bench_store_ab.py --old OLD_BUILD --new NEW_BUILD [--rounds 3]
        [--snapshots 300000] [--pg-snapshots 100000]

OLD_BUILD/NEW_BUILD: Release build directories holding bench/server/bench_store,
bench/ingest/bench_ingest and src/server/skyprofd (e.g. one of a `git worktree` at the older
commit). Prints figures; asserts nothing."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "harness"))
import pgserver  # noqa: E402


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True).stdout


def store_figures(out):
    def g(rx):
        m = re.search(rx, out)
        return m.group(1) if m else "?"
    return {"ingest/s": g(r"throughput\s+(\d+)"), "bytes/snapshot": g(r"bytes per snapshot\s+([\d.]+)"),
            "analyze_task ms": g(r"analyze_task\s+([\d.]+)"),
            "rows": g(r"rows\s+(snapshots=\S+ stacks=\S+ frames=\S+ segments=\S+)")}


def ingest_figures(out):
    m = re.search(r"RESULT acked=(\d+) secs=([\d.]+) rate=(\d+) cpu=([\d.]+) stored=(\d+) dup=(\d+)", out)
    if not m:
        return {"error": out[-300:]}
    return {"acked/s": m.group(3), "skyprofd cpu s": m.group(4), "stored": m.group(5), "dup": m.group(6)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--snapshots", type=int, default=300000)
    ap.add_argument("--pg-snapshots", type=int, default=100000)
    a = ap.parse_args()
    builds = {"old": a.old, "new": a.new}
    res = {}
    pgdir = tempfile.mkdtemp(prefix="skp-ab-pg", dir="/tmp")
    srv = pgserver.start(pgdir)
    try:
        for i in range(a.rounds):
            for v, b in builds.items():
                d = tempfile.mkdtemp(prefix="skp-ab-")
                res.setdefault(("SQLite bench_store", v), []).append(
                    store_figures(run([b + "/bench/server/bench_store", d, str(a.snapshots)])))
                shutil.rmtree(d, ignore_errors=True)
                url = srv.create_database("ab_%s_%d" % (v, i))
                res.setdefault(("PostgreSQL bench_store", v), []).append(
                    store_figures(run([b + "/bench/server/bench_store", url, str(a.pg_snapshots)])))
                res.setdefault(("bench_ingest", v), []).append(ingest_figures(run(
                    [b + "/bench/ingest/bench_ingest", "--snapshots", str(a.snapshots), "--clients", "2",
                     "--skyprofd", b + "/src/server/skyprofd"])))
                print("round %d %s done" % (i + 1, v), flush=True)
    finally:
        srv.stop()
    for (what, v), runs in sorted(res.items()):
        print("%s, %s (%s):" % (what, v, builds[v]))
        for r in runs:
            print("   ", r)


if __name__ == "__main__":
    main()
