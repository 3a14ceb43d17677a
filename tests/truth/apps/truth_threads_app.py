"""Thread-per-request workload for tests/truth/test_truth_process.py: an
http.server.ThreadingHTTPServer (a new thread per connection; clients open one connection per
request) whose GET /work?ms=N handler burns N ms of CPU in burn(), measured by the thread's own
CPU clock (time.thread_time_ns), so the CPU burn() used is known by construction; GET /stats
answers {"burn_ns": total CPU in burn() so far, "requests": n}, and with --stats FILE every
request also writes "<burn ns> <requests>" to FILE (fixed width, one pwrite), which the test reads
without making requests (threads) of its own. With --agent the skyprof agent
runs in the process (SW_AGENT_* environment). Prints 'truth_threads_app: listening on
127.0.0.1:PORT' once it accepts; runs until SIGTERM."""
import http.server
import json
import os
import sys
import threading
import time
import urllib.parse

LOCK = threading.Lock()
STATS = {'burn_ns': 0, 'requests': 0}
STATS_FD = None


def burn(ms):
    """Spins until this thread's CPU clock advanced by ms; returns the CPU it used (ns)."""
    t0 = time.thread_time_ns()
    end = t0 + ms * 1000000
    x = 0
    while time.thread_time_ns() < end:
        for i in range(200):
            x = (x * 31 + i) % 1000003
    return time.thread_time_ns() - t0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.0'  # one request per connection: one thread per request

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        if url.path == '/work':
            ms = int(urllib.parse.parse_qs(url.query).get('ms', ['10'])[0])
            used = burn(ms)
            with LOCK:
                STATS['burn_ns'] += used
                STATS['requests'] += 1
                if STATS_FD is not None:  # fixed width: one pwrite replaces the line
                    os.pwrite(STATS_FD, b'%020d %020d\n' % (STATS['burn_ns'],
                                                           STATS['requests']), 0)
            body = b'ok'
        else:
            with LOCK:
                body = json.dumps(STATS).encode()
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    global STATS_FD
    if '--stats' in sys.argv:
        path = sys.argv[sys.argv.index('--stats') + 1]
        STATS_FD = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.pwrite(STATS_FD, b'%020d %020d\n' % (0, 0), 0)
    if '--agent' in sys.argv:
        from skyprof import agent
        print('agent=%s' % agent.start(), flush=True)
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    srv.daemon_threads = True
    print('truth_threads_app: listening on 127.0.0.1:%d' % srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == '__main__':
    main()
