"""kill -9 during ingestion loses no acknowledged snapshot: several clients stream batches of
snapshots (each stream its own segment, crossing a store batch boundary), we record which
streams the server acknowledged, SIGKILL the server while streams are in flight, restart it on
the same database and check that every acknowledged stream is there in full."""
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402

from skp_harness import Results, tempdir, wait_until  # noqa: E402
from skyprofd_util import Skyprofd, root_count, snap  # noqa: E402

R = Results()
PER_STREAM = 1500       # > COLLECTOR_SNAPSHOT_BATCH: one mid-stream commit, one at the end
THREADS = 3
FRAMES = ["app.main", "app.handler", "app.service.run", "db.query", "socket.recv"]


def t_kill9():
    with tempdir() as d:
        data = os.path.join(d, "db")
        srv = Skyprofd(data, name="skyprofd-k9")
        st, doc = srv.create_task("svc-k9", "/ingest")
        tid = doc["id"]
        acked, lock, stop = [], threading.Lock(), threading.Event()
        in_flight = [0]

        def worker(w):
            ch = grpc.insecure_channel(srv.grpc_target)
            call = ch.stream_unary("/skywalking.v3.ProfileTask/collectSnapshot",
                                   request_serializer=lambda m: m.SerializeToString(),
                                   response_deserializer=lambda b: b)
            k = 0
            try:
                while not stop.is_set():
                    seg = "seg-k9-%d-%d" % (w, k)
                    msgs = [snap(tid, seg, i, FRAMES[: 2 + i % 4]) for i in range(PER_STREAM)]
                    with lock:
                        in_flight[0] += 1
                    try:
                        call(iter(msgs), timeout=60)
                    except grpc.RpcError:
                        return
                    finally:
                        with lock:
                            in_flight[0] -= 1
                    with lock:
                        acked.append(seg)
                    k += 1
            finally:
                ch.close()

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(THREADS)]
        for t in threads:
            t.start()
        try:
            wait_until(lambda: len(acked) >= 8, 180, what="8 acknowledged streams")
            with lock:
                flying = in_flight[0]
                done = list(acked)
            srv.kill9()
        finally:
            stop.set()
            for t in threads:
                t.join(60)
        with lock:
            done = list(acked)  # a stream acknowledged just before the kill counts too
        print("acknowledged streams: %d, in flight at kill: %d" % (len(done), flying))
        srv = Skyprofd(data, name="skyprofd-k9-restart")
        try:
            for seg in done:
                st, an = srv.json("GET", "/api/v1/profile/segments/%s/analyze" % seg, expect=200)
                n = root_count(an)
                assert n == PER_STREAM, "acknowledged stream %s has %d of %d snapshots" % (seg, n, PER_STREAM)
            st, segs = srv.json("GET", "/api/v1/profile/tasks/%s/segments" % tid, expect=200)
            listed = {s["segmentId"] for s in segs}
            assert set(done) <= listed, set(done) - listed
        finally:
            srv.stop()


R.run("kill -9 during ingestion keeps every acknowledged snapshot", t_kill9)
R.finish()
