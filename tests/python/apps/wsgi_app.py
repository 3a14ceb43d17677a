"""WSGI test app on wsgiref with SkyprofWSGIMiddleware."""
import sys
import time
from wsgiref.simple_server import WSGIRequestHandler, make_server

from skyprof import agent
from skyprof.instrument import SkyprofWSGIMiddleware


def wsgi_slow_part():
    time.sleep(0.3)


def app(environ, start_response):
    wsgi_slow_part()
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return [b'wsgi ok']


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *a):
        pass


if __name__ == '__main__':
    agent.start()
    srv = make_server('127.0.0.1', int(sys.argv[1]) if len(sys.argv) > 1 else 0,
                      SkyprofWSGIMiddleware(app), handler_class=QuietHandler)
    print('listening on 127.0.0.1:%d' % srv.server_port, flush=True)
    srv.serve_forever()
