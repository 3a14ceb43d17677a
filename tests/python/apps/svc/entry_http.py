"""An http.server app (instrumented automatically under `python -m skyprof run`) whose handler
ALSO opens the request's entry span by hand with `skyprof.entry` (docs/python.md, "Manual"):
the request must make one segment, not a second one inside the first."""
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import skyprof

import work


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        with skyprof.entry(self.path.split('?')[0], sw8=self.headers.get('sw8')):
            body = work.slow().encode()
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


if __name__ == '__main__':
    ThreadingHTTPServer(('127.0.0.1', int(os.environ['APP_PORT'])), Handler).serve_forever()
