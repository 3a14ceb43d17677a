"""App for process-profiling tests: named threads that burn CPU (burn_cpu), sleep (sleepy),
allocate and keep memory (allocate_blocks), wait on a lock (lock_waiter) and sleep in a method
(Napper.nap), plus the agent.
Prints 'ready <pid>' once every thread runs; runs until stdin closes or SIGTERM."""
import os
import sys
import threading
import time

import skyprof
from skyprof import agent

KEEP = []
STOP = threading.Event()
LOCK = threading.Lock()


def burn_cpu():
    x = 0
    while not STOP.is_set():
        for i in range(20000):
            x = (x * 31 + i) % 1000003
    return x


def sleepy():
    while not STOP.is_set():
        time.sleep(0.05)


def allocate_blocks():
    while not STOP.is_set():
        KEEP.append(bytearray(64 * 1024))   # kept: live at the end of a heap task
        if len(KEEP) > 400:
            del KEEP[:200]
        time.sleep(0.005)


def lock_waiter():
    while not STOP.is_set():
        with LOCK:
            pass
        time.sleep(0.01)


class Napper:
    """A method (its pprof function is the qualified name, Napper.nap)."""

    def nap(self):
        while not STOP.is_set():
            time.sleep(0.05)


def main():
    ok = agent.start()
    threads = [threading.Thread(target=f, name=f.__name__ + '-thread', daemon=True)
               for f in (burn_cpu, sleepy, allocate_blocks, lock_waiter)]
    threads.append(threading.Thread(target=Napper().nap, name='napper-thread', daemon=True))
    for t in threads:
        t.start()
    print('ready %d agent=%s' % (os.getpid(), ok), flush=True)
    try:
        while sys.stdin.read(1):
            pass
    except KeyboardInterrupt:
        pass
    STOP.set()
    agent.stop()


if __name__ == '__main__':
    main()
