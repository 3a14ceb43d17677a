"""An unmodified FastAPI app (no skyprof import) for the asyncio test, served by uvicorn:
/overlap awaits 200 ms in wait_a, then spins 50 ms in burn_b (on the loop thread), so
overlapping requests interleave on one loop; /pool is a `def` endpoint (run in the threadpool)
that spins 150 ms in pool_work. The spins are timed by the wall clock, so a loaded machine does
not stretch them (the profile's durations are wall time).
/callout calls another service (http://127.0.0.1:$ECHO_PORT, the test's echo server): /a with
the aiohttp client, /b with urllib.request (a blocking call inside the async endpoint), /c with
httpx.AsyncClient and /d with httpx.Client, and returns the answers (the sw8 header each call
carried)."""
import asyncio
import os
import time
import urllib.request

import aiohttp
import httpx
from fastapi import FastAPI

app = FastAPI()


def spin(seconds):
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < seconds:
        n += 1
    return n


async def wait_a():
    await asyncio.sleep(0.2)


def burn_b():
    return spin(0.05)


def pool_work():
    return spin(0.15)


@app.get('/overlap')
async def overlap():
    await wait_a()
    return {'n': burn_b()}


@app.get('/pool')
def pool():
    return {'n': pool_work()}


@app.get('/callout')
async def callout():
    base = 'http://127.0.0.1:%s' % os.environ.get('ECHO_PORT', '9')
    async with aiohttp.ClientSession() as session:
        async with session.get(base + '/a?q=1', headers={'X-Test': 'kept'}) as r:
            a = await r.text()
    with urllib.request.urlopen(base + '/b', timeout=30) as r:
        b = r.read().decode()
    async with httpx.AsyncClient() as client:
        c = (await client.get(base + '/c')).text
    with httpx.Client() as client:
        d = client.get(base + '/d').text
    return {'a': a, 'b': b, 'c': c, 'd': d}
