"""The SkyWalking Python agent's profiling example (GSoC 2021 report), running on skyprof.

Same handler and call chain as the original; only the import changed (skywalking -> skyprof),
and the port comes from argv[1] or $SEED_PORT (default 9090). The backend address comes from
SW_AGENT_COLLECTOR_BACKEND_SERVICES (default 127.0.0.1:11800).

    SW_AGENT_COLLECTOR_BACKEND_SERVICES=127.0.0.1:11800 python3 seed_app.py 9090
    # create a task for service "provider", endpoint "/", then: curl -X POST localhost:9090/
"""
import os
import sys
import time

from skyprof import agent, config


def method1():
    time.sleep(0.02)
    return '1'


def method2():
    time.sleep(0.02)
    return method1()


def method3():
    time.sleep(0.02)
    return method2()


if __name__ == '__main__':
    config.service_name = 'provider'
    config.logging_level = os.environ.get('SEED_LOG_LEVEL', 'DEBUG')
    agent.start()

    import socketserver
    from http.server import BaseHTTPRequestHandler

    class SimpleHTTPRequestHandler(BaseHTTPRequestHandler):

        def do_POST(self):
            method3()
            time.sleep(0.5)
            self.send_response(200)
            self.send_header('Content-Type', 'application/json')
            self.end_headers()
            self.wfile.write('{"song": "Despacito", "artist": "Luis Fonsi"}'.encode('ascii'))

        def log_message(self, format, *args):  # keep the test logs readable
            if os.environ.get('SEED_ACCESS_LOG'):
                super().log_message(format, *args)

    PORT = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get('SEED_PORT', '9090'))
    Handler = SimpleHTTPRequestHandler

    socketserver.TCPServer.allow_reuse_address = True
    with socketserver.TCPServer(("127.0.0.1", PORT), Handler) as httpd:
        print('seed_app: listening on 127.0.0.1:%d' % httpd.server_address[1], flush=True)
        httpd.serve_forever()
