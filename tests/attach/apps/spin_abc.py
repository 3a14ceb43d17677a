"""Target for the out-of-process tests: the main thread spins in a() -> b() -> c() and measures
the share of its time spent in c(); a second thread sleeps under a name of its own.

argv[1]: a 16-byte file, memory-mapped, that holds two little-endian doubles updated after every
call of b(): seconds spent in c() and seconds in the loop (cumulative). A mapping, not file
writes, so the bookkeeping costs no syscall and takes no time that the sampler could see.
The line numbers below are asserted by tests/attach/test_attach.py: keep them in sync."""
import mmap
import os
import struct
import sys
import threading
import time

N = 20000


def c():
    return sum(range(N))  # C_LINE


def b():
    sum(range(N // 8))
    t0 = time.perf_counter()
    c()  # B_LINE
    return time.perf_counter() - t0


def a(stats):
    with open(stats + ".tmp", "wb") as f:
        f.write(b"\0" * 16)
    os.replace(stats + ".tmp", stats)
    with open(stats, "r+b") as f:
        m = mmap.mmap(f.fileno(), 16)
    in_c = 0.0
    start = time.perf_counter()
    while True:
        in_c += b()  # A_LINE
        struct.pack_into("<dd", m, 0, in_c, time.perf_counter() - start)


def sleeper():
    with open("/proc/thread-self/comm", "w") as f:
        f.write("skp-sleeper")
    time.sleep(3600)  # SLEEP_LINE


threading.Thread(target=sleeper, daemon=True).start()
a(sys.argv[1])
