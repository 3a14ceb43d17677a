"""Workload of tests/truth/test_truth_threshold.py: an http.server app whose handler
(GET /thr?early=MS&late=MS) runs early(MS), a busy loop, then late(MS), a sleep, and answers as
JSON the wall time (ms) of each function and of the whole handler, measured inside it with
time.perf_counter. GET /stats answers the agent's counters (skyprof.agent.stats()).
Run with `python -m skyprof run truth_threshold_app.py PORT` (the agent is configured by
SW_AGENT_*)."""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

clock = time.perf_counter


def early(ms):
    t0 = clock()
    end = t0 + ms / 1000.0
    x = 0
    while clock() < end:
        x = (x * 31 + 7) % 1000003
    return (clock() - t0) * 1000.0


def late(ms):
    t0 = clock()
    time.sleep(ms / 1000.0)
    return (clock() - t0) * 1000.0


def handle(early_ms, late_ms):
    t0 = clock()
    truth = {'early': early(early_ms), 'late': late(late_ms)}
    truth['handle'] = (clock() - t0) * 1000.0
    return truth


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def do_GET(self):
        u = urlparse(self.path)
        if u.path == '/stats':
            import skyprof.agent
            body = json.dumps(skyprof.agent.stats() or {}).encode()
        else:
            q = parse_qs(u.query)
            body = json.dumps(handle(int(q.get('early', ['250'])[0]),
                                     int(q.get('late', ['250'])[0]))).encode()
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
