"""App for the lock-wait and asyncio-dump process-profiling tests (test_pprof_python_locks.py):
- hold_lock holds LOCK for 50 ms at a time, in a loop (a short gap between holds);
- wait_for_lock takes LOCK in a loop (`with LOCK:`), so it waits most of its time, and measures
  its own waiting (perf_counter around the acquisition);
- burn_cpu never waits for a lock (it only competes for the GIL);
- wait_for_event waits on a threading.Event nobody sets, a fifth of its time (a `block` wait,
  not a `mutex` one);
- an asyncio loop thread with 3 pending tasks, each awaiting in a different coroutine:
  `queue_consumer` -> `get_item` (Queue.get), `event_watcher` (Event.wait), `napper` -> `nap_deep`
  -> `nap_deeper` (asyncio.sleep).
- spawn_workers starts a short-lived thread (short_job) every 50 ms, never joined (the
  `threadcreate` test's creating function);
Commands on stdin, one per line: `w` prints `waited <seconds> <monotonic seconds>`; EOF stops.
Prints 'ready <pid> agent=<bool>' once every thread runs."""
import asyncio
import os
import sys
import threading
import time

from skyprof import agent

STOP = threading.Event()
LOCK = threading.Lock()
NEVER = threading.Event()
WAITED = [0.0]


def hold_lock():
    while not STOP.is_set():
        with LOCK:
            time.sleep(0.05)
        time.sleep(0.003)


def wait_for_lock():
    while not STOP.is_set():
        t0 = time.perf_counter()
        with LOCK:
            WAITED[0] += time.perf_counter() - t0
        time.sleep(0.001)


def burn_cpu():
    x = 0
    while not STOP.is_set():
        for i in range(20000):
            x = (x * 31 + i) % 1000003
    return x


def wait_for_event():
    while not STOP.is_set():
        NEVER.wait(0.02)    # waits for an event about a fifth of its time
        time.sleep(0.08)


def short_job():
    return sum(range(100))


def spawn_workers():
    while not STOP.is_set():
        threading.Thread(target=short_job, name='short-job', daemon=True).start()
        time.sleep(0.05)


async def get_item(q):
    return await q.get()


async def queue_consumer(q):
    return await get_item(q)


async def event_watcher(ev):
    await ev.wait()


async def nap_deeper():
    await asyncio.sleep(3600)


async def nap_deep():
    await nap_deeper()


async def napper():
    await nap_deep()


def loop_thread(started):
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    async def main():
        q = asyncio.Queue()
        ev = asyncio.Event()
        tasks = [asyncio.create_task(queue_consumer(q), name='consumer-task'),
                 asyncio.create_task(event_watcher(ev), name='watcher-task'),
                 asyncio.create_task(napper(), name='napper-task')]
        await asyncio.sleep(0)
        started.set()
        while not STOP.is_set():
            await asyncio.sleep(0.05)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    loop.run_until_complete(main())
    loop.close()


def main():
    ok = agent.start()
    started = threading.Event()
    threads = [threading.Thread(target=f, name=f.__name__ + '-thread', daemon=True)
               for f in (hold_lock, wait_for_lock, burn_cpu, wait_for_event, spawn_workers)]
    threads.append(threading.Thread(target=loop_thread, args=(started,), name='asyncio-thread',
                                    daemon=True))
    for t in threads:
        t.start()
    started.wait(30)
    print('ready %d agent=%s' % (os.getpid(), ok), flush=True)
    for line in sys.stdin:
        if line.strip() == 'w':
            print('waited %.6f %.6f' % (WAITED[0], time.monotonic()), flush=True)
    STOP.set()
    for t in threads:
        t.join(10)
    agent.stop()


if __name__ == '__main__':
    main()
