"""The slow handler's functions every framework app of the auto-instrumentation test calls: a
200 ms sleep in slow_a, then a 100 ms busy loop in slow_b (the issue's "Done when")."""
import time


def slow_a():
    time.sleep(0.2)


def slow_b():
    end = time.monotonic() + 0.1
    n = 0
    while time.monotonic() < end:
        n += 1
    return n


def slow():
    slow_a()
    slow_b()
    return 'slow done'
