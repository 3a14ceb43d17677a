#!/usr/bin/env python3
"""bench_retention.py - the largest /healthz latency while skyprofd purges old snapshots (issue
27 #3: purges in small batches that yield to the event loop between them), before and after,
side by side in one run, on SQLite and on PostgreSQL.

For each (backend, build): a fresh database gets its schema from the build's skyprofd (started
once with --retention-days 0), then N snapshot rows first seen 10 days ago (N/500 segments of
500 snapshots, 1,000 distinct 20-frame stacks) and 10,000 recent ones are written straight into
its tables (SQLite: sqlite3; PostgreSQL: psql, snapshot runs of 10 snapshots in a partition of
that day). skyprofd then starts with --retention-days 3: the start-up purge deletes the old
rows. A separate process probes /healthz every 10 ms from before skyprofd starts (a new
connection per probe, refused ones not counted) until the purge is over
(skyprof_retention_runs_total = 1); the figure is the largest probe time. The old build purges
before its event loop runs, so its probes wait for the whole purge.

Usage: bench_retention.py --before OLD_BUILD [--build build/release] [--rows 500000]
                          [--only sqlite,pg]
"""
import argparse
import http.client
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "harness"))

import pgserver  # noqa: E402

DAY = 86400000
SEG = 500

POLLER = r"""
import http.client, sys, threading, time
port, stop, worst, n = int(sys.argv[1]), [], 0.0, 0
threading.Thread(target=lambda: (sys.stdin.read(), stop.append(1)), daemon=True).start()
while not stop:
    t = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        c.request("GET", "/healthz")
        c.getresponse().read()
        worst = max(worst, (time.monotonic() - t) * 1000)
        n += 1
    except OSError:
        pass
    finally:
        c.close()
    time.sleep(0.01)
print(worst, n)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric(port, name):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        c.request("GET", "/metrics")
        body = c.getresponse().read().decode()
    finally:
        c.close()
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def start(binary, db, days, port):
    args = [os.path.join(binary, "src", "server", "skyprofd"), "--db", db,
            "--grpc-addr", "127.0.0.1:%d" % free_port(), "--http-addr", "127.0.0.1:%d" % port,
            "--retention-days", str(days), "--log-level", "info"]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_metric(port, name, value, timeout=600):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            v = metric(port, name)
            if v is not None and v >= value:
                return v
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError("%s never reached %s" % (name, value))


def stop(p):
    p.terminate()
    out, _ = p.communicate(timeout=120)
    return out


def stacks(n=1000, depth=20):
    """n distinct stacks of `depth` frame ids below 128 (one LEB128 byte each)."""
    out = []
    for i in range(n):
        ids = [1 + (i * 7 + k * 13 + (i // 97) * k) % 120 for k in range(depth)]
        ids[0], ids[1], ids[2] = 1 + i % 120, 1 + (i // 120) % 120, 121 + i % 5
        out.append(bytes(ids))
    return list(dict.fromkeys(out))


def fill_sqlite(db, rows, now):
    c = sqlite3.connect(db)
    c.executemany("INSERT INTO frames(id, sig) VALUES(?, ?)",
                  [(i, "pkg.Class.method%d(File.java:%d)" % (i, i)) for i in range(1, 128)])
    st = stacks()
    c.executemany("INSERT INTO stacks(id, hash, frames) VALUES(?, ?, ?)",
                  [(i + 1, i * 2654435761 % (1 << 62), b) for i, b in enumerate(st)])
    c.execute("INSERT INTO task_keys(id, task_id) VALUES(1, 'bench-task')")
    old = rows // SEG
    new = 10000 // SEG
    c.executemany("INSERT INTO segids(id, segment_id, first_ms) VALUES(?, ?, ?)",
                  [(g + 1, "seg-%d" % g, (now - 10 * DAY if g < old else now) + g)
                   for g in range(old + new)])
    c.executemany("INSERT INTO task_segments(task, seg) VALUES(1, ?)",
                  [(g + 1,) for g in range(old + new)])

    def snaps():
        for g in range(old + new):
            t0 = (now - 10 * DAY if g < old else now) + g
            for q in range(SEG):
                yield (g + 1, q, 1, t0 + q, 1 + (g * 31 + q) % len(st))
    c.executemany("INSERT INTO snapshots(seg, seq, task, time, stack) VALUES(?, ?, ?, ?, ?)",
                  snaps())
    c.commit()
    c.close()


def fill_pg(srv, name, rows, now):
    st = stacks()
    old, new = rows // SEG, 10000 // SEG
    oday = (now - 10 * DAY) // DAY
    sql = [
        "INSERT INTO frames(id, sig) SELECT i, 'pkg.Class.method' || i || '(File.java:' || i "
        "|| ')' FROM generate_series(1, 127) i",
        "SELECT setval('frames_id_seq', 200)",
        "INSERT INTO stacks(id, frames) VALUES %s" % ",".join(
            "(%d, '\\x%s'::bytea)" % (i + 1, b.hex()) for i, b in enumerate(st)),
        "SELECT setval('stacks_id_seq', %d)" % (len(st) + 10),
        "INSERT INTO task_keys(id, task_id) VALUES(1, 'bench-task')",
        "INSERT INTO segids(id, segment_id, first_ms) SELECT g + 1, 'seg-' || g, "
        "CASE WHEN g < %d THEN %d ELSE %d END + g FROM generate_series(0, %d) g"
        % (old, now - 10 * DAY, now, old + new - 1),
        "SELECT setval('segids_id_seq', %d)" % (old + new + 10),
        "INSERT INTO task_segments(task, seg) SELECT 1, g FROM generate_series(1, %d) g"
        % (old + new),
        "CREATE TABLE IF NOT EXISTS snapshot_runs_d%d PARTITION OF snapshot_runs "
        "FOR VALUES FROM (%d) TO (%d)" % (oday, oday * DAY, (oday + 1) * DAY),
        "CREATE TABLE IF NOT EXISTS snapshot_runs_d%d PARTITION OF snapshot_runs "
        "FOR VALUES FROM (%d) TO (%d)" % (now // DAY, now // DAY * DAY, (now // DAY + 1) * DAY),
        # runs of 10 snapshots: segment g, sequences 10r..10r+9
        "INSERT INTO snapshot_runs(seg, task, first_ms, t0, lo_seq, hi_seq, seqs, dts, stacks) "
        "SELECT s.id, 1, s.first_ms, (s.first_ms >> 30) << 30, 10 * r, 10 * r + 9, "
        "ARRAY(SELECT 10 * r + k FROM generate_series(0, 9) k), "
        "ARRAY(SELECT (s.first_ms - ((s.first_ms >> 30) << 30) + 10 * r + k)::int "
        "FROM generate_series(0, 9) k), "
        "ARRAY(SELECT 1 + ((s.id * 31 + 10 * r + k) %% %d)::int FROM generate_series(0, 9) k) "
        "FROM segids s CROSS JOIN generate_series(0, %d) r" % (len(st), SEG // 10 - 1),
        "VACUUM ANALYZE",
    ]
    for q in sql:
        srv.psql(q, dbname=name)


def run_one(binary, backend, rows, srv):
    d = tempfile.mkdtemp(prefix="skp-bench-ret-")
    try:
        if backend == "sqlite":
            db = os.path.join(d, "skyprof.db")
        else:
            name = "skp_bench_ret_%d" % (abs(hash(binary)) % 100000)
            db = srv.create_database(name)
        port = free_port()
        p = start(binary, db, 0, port)
        wait_metric(port, "skyprof_retention_runs_total", 0)
        stop(p)
        now = int(time.time() * 1000)
        t = time.monotonic()
        if backend == "sqlite":
            fill_sqlite(db, rows, now)
        else:
            fill_pg(srv, name, rows, now)
        print("  filled in %.1f s" % (time.monotonic() - t))
        poller = subprocess.Popen([sys.executable, "-c", POLLER, str(port)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        time.sleep(0.3)
        t = time.monotonic()
        p = start(binary, db, 3, port)
        wait_metric(port, "skyprof_retention_runs_total", 1)
        purge_s = time.monotonic() - t
        time.sleep(0.2)
        out, _ = poller.communicate("", timeout=600)
        worst, n = out.split()
        batches = metric(port, "skyprof_retention_batches_total")
        deleted = metric(port, "skyprof_retention_deleted_rows_total")
        errors = metric(port, "skyprof_retention_errors_total")
        log = stop(p)
        for line in log.splitlines():
            if "retention:" in line:
                print("  " + line)
        return {"worst_ms": float(worst), "probes": int(n), "purge_s": purge_s,
                "batches": batches, "deleted": deleted, "errors": errors}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--before", required=True, help="build dir of the older skyprofd")
    ap.add_argument("--rows", type=int, default=500000)
    ap.add_argument("--only", default="sqlite,pg")
    a = ap.parse_args()
    with open("/proc/loadavg") as f:
        print("load average at start: %s" % " ".join(f.read().split()[:3]))
    results = []
    private = None
    try:
        srv = None
        if "pg" in a.only:
            private = pgserver.temporary()
            srv = private.__enter__()
        for backend in a.only.split(","):
            for label, binary in (("before", a.before), ("after", a.build)):
                print("\n--- %s, %s (%s)" % (backend, label, binary))
                r = run_one(binary, backend, a.rows, srv)
                print("  %s" % r)
                results.append((backend, label, r))
    finally:
        if private:
            private.__exit__(None, None, None)
    print("\n| backend | build | old rows | largest /healthz (ms) | probes | purge (s) | "
          "batches | rows deleted | errors |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for backend, label, r in results:
        print("| %s | %s | %d | %.1f | %d | %.2f | %s | %s | %s |"
              % (backend, label, a.rows, r["worst_ms"], r["probes"], r["purge_s"],
                 "-" if r["batches"] is None else "%d" % r["batches"],
                 "%d" % r["deleted"], "%d" % r["errors"]))


if __name__ == "__main__":
    main()
