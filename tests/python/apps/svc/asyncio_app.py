"""An unmodified FastAPI app (no skyprof import) for the asyncio test, served by uvicorn:
/overlap awaits 200 ms in wait_a, then spins 50 ms in burn_b (on the loop thread), so
overlapping requests interleave on one loop; /pool is a `def` endpoint (run in the threadpool)
that spins 150 ms in pool_work. The spins are timed by the wall clock, so a loaded machine does
not stretch them (the profile's durations are wall time)."""
import asyncio
import time

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
