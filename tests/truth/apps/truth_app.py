"""Ground-truth workloads for tests/truth/test_truth_trace.py: an http.server app whose handler
runs one workload per request (GET /truth?w=NAME&ms=N) and answers, as JSON, the wall time each
named function spent (inclusive, ms), measured inside the workload with time.perf_counter.
Run with `python -m skyprof run truth_app.py PORT` (the agent is configured by SW_AGENT_*).

Workloads (functions named as the test reads them, file truth_app.py):
  loop    work() -> cpu_loop(ms) (a while loop whose body spans several lines), then sleeper(ms/2)
  alt     f() alternates g() and h(), each a busy spin of 1 ms on average, for ms; each spin
          lasts 0.5-1.5 ms (random): a strictly periodic 2 ms cycle divides the 10 ms dump period
          and aliases with the agent's fixed-period sampler (docs/accuracy.md, "Aliasing"); the
          `altfixed` workload is that strict case
  io      io_work() -> napper(ms/2) (time.sleep), then reader() (socket recv from a peer that
          answers after ms/2)
  thread  spawner() starts a thread running thread_work(ms) (busy) and joins it
Functions that only call others (work, f, io_work, spawner) do nothing of their own."""
import json
import random
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

clock = time.perf_counter


class Truth:
    """Inclusive wall time per function name (ms)."""

    def __init__(self):
        self.ms = {}

    def add(self, name, t0):
        self.ms[name] = self.ms.get(name, 0.0) + (clock() - t0) * 1000.0


def cpu_loop(truth, ms):
    t0 = clock()
    end = t0 + ms / 1000.0
    x = 0
    while clock() < end:
        x += 1
        x = x * 3 % 1000003
        x = x ^ (x >> 3)
        x = x + 7
    truth.add('cpu_loop', t0)
    return x


def sleeper(truth, ms):
    t0 = clock()
    time.sleep(ms / 1000.0)
    truth.add('sleeper', t0)


def work(truth, ms):
    t0 = clock()
    cpu_loop(truth, ms)
    sleeper(truth, ms // 2)
    truth.add('work', t0)


def spin(end):
    while clock() < end:
        pass


def g(truth, s):
    t0 = clock()
    spin(t0 + s)
    truth.add('g', t0)


def h(truth, s):
    t0 = clock()
    spin(t0 + s)
    truth.add('h', t0)


def f(truth, ms, fixed=False):
    t0 = clock()
    end = t0 + ms / 1000.0
    rnd = random.Random(ms)
    while clock() < end:
        g(truth, 0.001 if fixed else rnd.uniform(0.0005, 0.0015))
        h(truth, 0.001 if fixed else rnd.uniform(0.0005, 0.0015))
    truth.add('f', t0)


def f_fixed(truth, ms):
    f(truth, ms, fixed=True)


def napper(truth, ms):
    t0 = clock()
    time.sleep(ms / 1000.0)
    truth.add('napper', t0)


def delayed_peer(delay_ms):
    """A listening socket whose one connection is answered after delay_ms; returns its port."""
    ls = socket.socket()
    ls.bind(('127.0.0.1', 0))
    ls.listen(1)

    def serve():
        c, _ = ls.accept()
        time.sleep(delay_ms / 1000.0)
        c.sendall(b'x' * 64)
        c.close()
        ls.close()
    threading.Thread(target=serve, daemon=True).start()
    return ls.getsockname()[1]


def reader(truth, port):
    t0 = clock()
    with socket.create_connection(('127.0.0.1', port)) as s:
        data = s.recv(64)
    truth.add('reader', t0)
    return data


def io_work(truth, ms):
    t0 = clock()
    port = delayed_peer(ms // 2)  # set up before napping: the peer waits ms/2 from accept on
    napper(truth, ms // 2)
    reader(truth, port)
    truth.add('io_work', t0)


def thread_work(truth, ms):
    t0 = clock()
    spin(t0 + ms / 1000.0)
    truth.add('thread_work', t0)


def spawner(truth, ms):
    t0 = clock()
    t = threading.Thread(target=thread_work, args=(truth, ms))
    t.start()
    t.join()
    truth.add('spawner', t0)


WORKLOADS = {'loop': work, 'alt': f, 'altfixed': f_fixed, 'io': io_work, 'thread': spawner}


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def do_GET(self):
        q = parse_qs(urlparse(self.path).query)
        name = q.get('w', ['loop'])[0]
        ms = int(q.get('ms', ['300'])[0])
        truth = Truth()
        WORKLOADS[name](truth, ms)
        body = json.dumps(truth.ms).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


if __name__ == '__main__':
    srv = ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1]) if len(sys.argv) > 1 else 0),
                              Handler)
    print('listening on 127.0.0.1:%d' % srv.server_address[1], flush=True)
    srv.serve_forever()
