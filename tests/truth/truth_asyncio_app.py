"""The asyncio ground-truth workload (test_truth_asyncio.py): an aiohttp server, instrumented
automatically under `python -m skyprof run`. One round is three requests to GET /round?r=R&role=X
arriving together; every time below is measured here with perf_counter and returned as JSON:
- role `starved` (B): `await asyncio.sleep(SLEEP_S)` in starved_sleep: its timer falls due
  while the burner spins on the loop, so B is WAITING for SLEEP_S, then READY (its wakeup due,
  the loop busy) until the spin ends;
- role `burner` (C): waits until B sleeps, sleeps BURN_DELAY_S more (waiting, the loop idle;
  ready for the time it resumed late), then spins BURN_S on the loop thread in burn_cpu
  (running: neither waiting nor ready);
- role `io` (A): waits until B sleeps, then sends a line to the delayed peer (the test's TCP
  server, answering after its delay) and awaits the answer in io_wait: WAITING on real I/O, the
  answer arriving after the spin ended, when the loop is idle (ready for ~0).
Each role's function does nothing but wait or spin, so its waiting / ready / running time is the
time measured around the awaits."""
import asyncio
import json
import os
import time

from aiohttp import web

SLEEP_S = 0.30
BURN_DELAY_S = 0.10
BURN_S = 0.50

_rounds = {}


def _round(r):
    ev = _rounds.get(r)
    if ev is None:
        ev = _rounds[r] = asyncio.Event()
    return ev


async def starved_sleep(b_sleeping):
    t0 = time.perf_counter()
    b_sleeping.set()
    await asyncio.sleep(SLEEP_S)
    t1 = time.perf_counter()
    # waiting until the timer's deadline, ready from there until the loop ran the task
    return {'waiting': SLEEP_S, 'ready': max(0.0, t1 - t0 - SLEEP_S), 'running': 0.0}


def burn_cpu():
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < BURN_S:
        n += 1
    return time.perf_counter() - t0


async def burner(b_sleeping):
    t0 = time.perf_counter()
    await b_sleeping.wait()
    ts = time.perf_counter()
    await asyncio.sleep(BURN_DELAY_S)
    t1 = time.perf_counter()
    spun = burn_cpu()
    # the sleep's end is due at ts + BURN_DELAY_S: after that the task was ready (the loop busy
    # with the other requests' own code, usually for no measurable time)
    late = max(0.0, t1 - ts - BURN_DELAY_S)
    return {'waiting': t1 - t0 - late, 'ready': late, 'running': spun}


async def io_wait(b_sleeping, peer_port):
    t0 = time.perf_counter()
    await b_sleeping.wait()
    reader, writer = await asyncio.open_connection('127.0.0.1', peer_port)
    writer.write(b'ping\n')
    await writer.drain()
    await reader.readline()
    writer.close()
    t1 = time.perf_counter()
    return {'waiting': t1 - t0, 'ready': 0.0, 'running': 0.0}


async def handle(request):
    r = request.query.get('r', '0')
    role = request.query.get('role', '')
    ev = _round(r)
    if role == 'starved':
        got = await starved_sleep(ev)
    elif role == 'burner':
        got = await burner(ev)
    elif role == 'io':
        got = await io_wait(ev, int(os.environ['PEER_PORT']))
    else:
        got = {}
    got['role'] = role
    return web.Response(text=json.dumps(got), content_type='application/json')


async def main():
    app = web.Application()
    app.router.add_get('/round', handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, '127.0.0.1', 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    print('listening on 127.0.0.1:%d' % port, flush=True)
    await asyncio.Event().wait()


if __name__ == '__main__':
    asyncio.run(main())
