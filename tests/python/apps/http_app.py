"""http.server test app (ThreadingHTTPServer): GET/POST /work?x=1 sleeps in a known call chain.
Starts the agent itself unless SKP_APP_NO_START=1 (then run it with `python -m skyprof run`)."""
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def inner_work():
    time.sleep(0.3)


def outer_work():
    inner_work()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.startswith('/fast'):
            body = b'fast'
        else:
            outer_work()
            body = b'done'
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *a):
        pass


if __name__ == '__main__':
    if os.environ.get('SKP_APP_NO_START') != '1':
        from skyprof import agent
        agent.start()
    srv = ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1]) if len(sys.argv) > 1 else 0), Handler)
    print('listening on 127.0.0.1:%d' % srv.server_address[1], flush=True)
    srv.serve_forever()
