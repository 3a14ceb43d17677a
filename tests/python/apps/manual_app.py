"""Manual API test app: a plain TCP line server (not HTTP, not instrumented). Each line is an
optional sw8 value; the job runs under @skyprof.entry_point('manual-job') or, for lines starting
with 'with ', under `with skyprof.entry('manual-block')`."""
import socketserver
import sys
import time

import skyprof
from skyprof import agent


def manual_inner():
    time.sleep(0.3)


@skyprof.entry_point('manual-job', sw8_arg='sw8')
def job(sw8=None):
    manual_inner()
    return skyprof.current_trace_id() or '-'


class H(socketserver.StreamRequestHandler):
    def handle(self):
        line = self.rfile.readline().decode().strip()
        if line.startswith('with '):
            sw8 = line[5:] or None
            with skyprof.entry('manual-block', sw8=sw8):
                manual_inner()
                tid = skyprof.current_trace_id() or '-'
        else:
            tid = job(sw8=line or None)
        self.wfile.write((tid + '\n').encode())


if __name__ == '__main__':
    agent.start()
    socketserver.ThreadingTCPServer.allow_reuse_address = True
    srv = socketserver.ThreadingTCPServer(('127.0.0.1', 0), H)
    print('listening on 127.0.0.1:%d' % srv.server_address[1], flush=True)
    srv.serve_forever()
