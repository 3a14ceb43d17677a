"""Target for the out-of-process tests: the main thread spins in a() -> b() -> c() and measures
the share of its time spent in c(); a second thread sleeps under a name of its own.

argv[1]: a file rewritten every 0.2 s with "<seconds in c> <seconds in the loop>" (cumulative).
The line numbers below are asserted by tests/attach/test_attach.py: keep them in sync."""
import os
import sys
import threading
import time

N = 20000


def c():
    return sum(range(N))  # C_LINE


def b():
    sum(range(N // 2))
    t0 = time.perf_counter()
    c()  # B_LINE
    return time.perf_counter() - t0


def a(stats):
    in_c = 0.0
    start = time.perf_counter()
    last = start
    while True:
        in_c += b()  # A_LINE
        now = time.perf_counter()
        if now - last > 0.2:
            last = now
            tmp = stats + ".tmp"
            with open(tmp, "w") as f:
                f.write("%.6f %.6f\n" % (in_c, now - start))
            os.replace(tmp, stats)


def sleeper():
    with open("/proc/thread-self/comm", "w") as f:
        f.write("skp-sleeper")
    time.sleep(3600)  # SLEEP_LINE


threading.Thread(target=sleeper, daemon=True).start()
a(sys.argv[1])
