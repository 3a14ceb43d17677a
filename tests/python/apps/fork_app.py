"""gunicorn-style fork: the agent starts in the parent, then the process forks; parent and child
each serve HTTP (http.server, instrumented) and print their port."""
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

from skyprof import agent, _skyprof


def forked_work():
    time.sleep(0.15)


class H(BaseHTTPRequestHandler):
    def do_GET(self):
        forked_work()
        body = ('%d %s' % (os.getpid(), _skyprof.instance())).encode()
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


if __name__ == '__main__':
    agent.start()
    pid = os.fork()
    role = 'child' if pid == 0 else 'parent'
    srv = HTTPServer(('127.0.0.1', 0), H)
    print('%s listening on 127.0.0.1:%d' % (role, srv.server_address[1]), flush=True)
    try:
        srv.serve_forever()
    finally:
        if pid:
            os.kill(pid, 15)
        sys.exit(0)
