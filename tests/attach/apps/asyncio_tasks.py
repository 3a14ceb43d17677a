"""Target for `skyprof dump`'s asyncio tasks (tests/attach/test_attach.py): four tasks suspended
in different coroutines, and the main task running (spinning in spin(), so the loop never runs
the others again and their await chains stay put).

argv[1]: a file written once every task has reached its await. The line numbers of the lines
marked below are asserted by the test: keep the markers."""
import asyncio
import sys


async def leaf_sleep():
    await asyncio.sleep(3600)  # LEAF_LINE


async def fetch():
    await leaf_sleep()  # FETCH_LINE


async def consumer(q):
    await q.get()  # CONSUMER_LINE


async def waiter(ev):
    await ev.wait()  # WAITER_LINE


async def joiner(other):
    await other  # JOINER_LINE


def spin():
    x = 0
    while True:
        x = (x + 1) % 1000003  # SPIN_LINE


async def main(ready):
    q = asyncio.Queue()
    ev = asyncio.Event()
    t1 = asyncio.create_task(fetch(), name="fetcher")
    asyncio.create_task(consumer(q), name="consumer")
    asyncio.create_task(waiter(ev), name="waiter")
    asyncio.create_task(joiner(t1), name="joiner")
    for _ in range(5):
        await asyncio.sleep(0)
    with open(ready, "w") as f:
        f.write("ready")
    spin()  # MAIN_LINE


asyncio.run(main(sys.argv[1]))
