"""A service whose /slow turns slow (continuous-profiling test, issue 11): http.server
(ThreadingHTTPServer) with the agent started; GET /slow answers in ~5 ms until GET /mode?slow=MS
makes it spend MS ms in checkout_query (under place_order), GET /fast always answers at once."""
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = {'slow_ms': 0}
LOCK = threading.Lock()


def checkout_query(ms):
    deadline = time.monotonic() + ms / 1000.0
    while time.monotonic() < deadline:
        time.sleep(0.005)


def place_order():
    with LOCK:
        ms = MODE['slow_ms']
    checkout_query(ms if ms else 5)


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.startswith('/mode'):
            ms = int(self.path.split('slow=', 1)[1]) if 'slow=' in self.path else 0
            with LOCK:
                MODE['slow_ms'] = ms
            body = b'mode %d' % ms
        elif self.path.startswith('/slow'):
            place_order()
            body = b'ordered'
        else:
            body = b'fast'
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


if __name__ == '__main__':
    from skyprof import agent
    agent.start()
    srv = ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1]) if len(sys.argv) > 1 else 0), Handler)
    srv.daemon_threads = True
    print('listening on 127.0.0.1:%d' % srv.server_address[1], flush=True)
    srv.serve_forever()
