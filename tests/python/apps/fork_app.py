"""gunicorn-style fork: the agent starts in the parent, then the process forks SKP_FORKS children
(default 1) back to back, while the parent's agent threads are still starting and connecting;
parent and children each serve HTTP (http.server, instrumented) and print their port
("parent listening on ...", "child0 listening on ...", ...)."""
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
    children = []
    role = 'parent'
    for i in range(int(os.environ.get('SKP_FORKS', '1'))):
        pid = os.fork()
        if pid == 0:
            role = 'child%d' % i
            children = []
            break
        children.append(pid)
        time.sleep(0.003)  # spread the forks over the agent threads' start-up work
    srv = HTTPServer(('127.0.0.1', 0), H)
    print('%s listening on 127.0.0.1:%d' % (role, srv.server_address[1]), flush=True)
    try:
        srv.serve_forever()
    finally:
        for pid in children:
            os.kill(pid, 15)
        sys.exit(0)
