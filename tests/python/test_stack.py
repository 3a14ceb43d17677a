"""Python stack source: dump_stack / the sampler's capture path against traceback.

Every capture must equal, frame for frame, what SkyWalking's Python agent writes for the same
thread: traceback.extract_stack formatted as "<filename>.<name>: <lineno>", root first.
"""
import asyncio
import os
import re
import sys
import threading
import time
import traceback

from skp_harness import Results, wait_until

import skyprof
from skyprof import _skyprof as native

SIG_RE = re.compile(r'^.+\.[^.]+: (\d+|None)$')
THIS = os.path.abspath(__file__)


def fmt(frames):
    return ['%s.%s: %s' % (f.filename, f.name, f.lineno) for f in frames]


def same_line_pair():
    """(dump_stack(), traceback) of the caller, taken on one line."""
    f = sys._getframe(1)
    return skyprof.dump_stack(), fmt(traceback.extract_stack(f))


def check_equal(got, want):
    if got != want:
        diff = [(i, a, b) for i, (a, b) in enumerate(zip(got, want)) if a != b][:5]
        raise AssertionError('stacks differ: len %d vs %d, first differences %r, tails %r / %r'
                             % (len(got), len(want), diff, got[-3:], want[-3:]))
    for s in got:
        assert SIG_RE.match(s), s


# --- current thread --------------------------------------------------------------------------
def nest(depth, fn):
    if depth == 0:
        return fn()
    return nest(depth - 1, fn)


def t_current_depths():
    for depth in (0, 1, 5, 20, 100):
        got, want = nest(depth, lambda: (skyprof.dump_stack(), fmt(traceback.extract_stack())))
        check_equal(got, want)
        assert len(got) >= depth + 2


def t_recursion():
    def rec(n):
        if n == 0:
            return skyprof.dump_stack(), fmt(traceback.extract_stack())
        return rec(n - 1)
    got, want = rec(30)
    check_equal(got, want)
    assert sum(1 for s in got if '.rec: ' in s) == 31


def t_generator_and_coroutine():
    def gen():
        yield skyprof.dump_stack(), fmt(traceback.extract_stack())
    check_equal(*next(gen()))

    def gen_outer():
        yield from gen()
    check_equal(*next(gen_outer()))

    async def leaf():
        return skyprof.dump_stack(), fmt(traceback.extract_stack())

    async def mid():
        return await leaf()
    coro = mid()
    try:
        coro.send(None)
    except StopIteration as stop:
        check_equal(*stop.value)
    else:
        raise AssertionError('coroutine did not finish')

    async def sleeper():
        await asyncio.sleep(0)
        return await mid()
    check_equal(*asyncio.run(sleeper()))


def t_portable_equals_direct():
    def leaf():
        return skyprof.dump_stack(), native.dump_stack(None, 500, True)
    a, b = nest(7, leaf)
    # the two calls are on the same line, so the stacks are identical
    check_equal(a, b)


# --- other threads ---------------------------------------------------------------------------
def t_other_thread_blocked():
    ev = threading.Event()
    started = threading.Event()

    def w3():
        started.set()
        ev.wait()

    def w2():
        w3()

    def w1():
        w2()

    th = threading.Thread(target=w1)
    th.start()
    try:
        started.wait(5)
        # wait until the thread is parked inside Event.wait -> Condition.wait
        wait_until(lambda: 'wait' in fmt(traceback.extract_stack(sys._current_frames()[th.ident]))[-1],
                   5, what='thread parked')
        want = fmt(traceback.extract_stack(sys._current_frames()[th.ident]))
        got = skyprof.dump_stack(th.ident)
        check_equal(got, want)
        h = None
        # the sampler's path: a handle made on the thread, captured without the GIL
        got2 = native.dump_stack(th.ident, 500, True)
        check_equal(got2, want)
    finally:
        ev.set()
        th.join()
    del h


def spin_c(stop):
    x = 0
    while not stop.is_set():
        for i in range(200):
            x += i * i
    return x


def spin_b(stop):
    return spin_c(stop)


def spin_a(stop, box):
    box.append(native._attach_current())
    return spin_b(stop)


def t_other_thread_running():
    """Samples a thread running Python code (no GIL held by the sampler) many times: every sample
    is a well-formed root-first stack ending in the spin chain with a line inside spin_c."""
    stop = threading.Event()
    box = []
    th = threading.Thread(target=spin_a, args=(stop, box), name='spinner')
    th.start()
    try:
        wait_until(lambda: box, 5, what='handle')
        import inspect
        src, first = inspect.getsourcelines(spin_c)
        spin_lines = set(range(first, first + len(src)))
        n_ok = 0
        for _ in range(300):
            s = native._capture_handle(box[0], 500, False, 1)
            assert s is not None, 'capture failed while the thread runs'
            for f in s:
                assert SIG_RE.match(f), f
            assert s[0].startswith(threading.__file__ + '._bootstrap: '), s[0]
            tail = [x.rsplit(': ', 1)[0] for x in s[-3:]]
            if tail == [THIS + '.spin_a', THIS + '.spin_b', THIS + '.spin_c']:
                assert int(s[-1].rsplit(': ', 1)[1]) in spin_lines, s[-1]
                n_ok += 1
        # most samples land inside the spin chain (the rest: the thread between those frames)
        assert n_ok >= 200, n_ok
    finally:
        stop.set()
        th.join()
        native._release_handle(box[0])


def t_threads_exit_while_sampled():
    """Threads end while being captured without the GIL: every capture either fails cleanly
    (None) or returns a well-formed stack; nothing crashes (ASan build checks the reads)."""
    n_none = n_stack = 0
    for round_ in range(60):
        box = []

        def short_life():
            box.append(native._attach_current())
            nest(10, lambda: sum(range(2000)))

        th = threading.Thread(target=short_life)
        th.start()
        wait_until(lambda: box, 5, what='handle')
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            s = native._capture_handle(box[0], 500, False, 5)
            if s is None:
                n_none += 1
                if not th.is_alive():
                    break
            else:
                n_stack += 1
                for f in s:
                    assert f is Ellipsis or SIG_RE.match(f), f
        th.join()
        # after the thread is gone for good, captures fail cleanly
        for _ in range(3):
            s = native._capture_handle(box[0], 500, False, 1)
            assert s is None, s
        native._release_handle(box[0])
    assert n_none >= 1, (n_none, n_stack)


def t_truncation_keeps_innermost():
    def rec(n):
        if n == 0:
            return native.dump_stack(None, 50), native.dump_stack(None, 2000), fmt(traceback.extract_stack())  # noqa: E501
        return rec(n - 1)
    short, full, want = rec(600)
    check_equal(full, want)
    assert len(short) == 50
    check_equal(short, want[-50:])
    # the sampler's path reports the truncation
    box = []
    ev = threading.Event()

    def deep(n):
        if n == 0:
            box.append(native._attach_current())
            ev.wait()
            return
        deep(n - 1)
    th = threading.Thread(target=deep, args=(300,))
    th.start()
    try:
        wait_until(lambda: box, 5)
        wait_until(lambda: '.wait: ' in (native._capture_handle(box[0], 500, False, 1) or [''])[-1], 5)
        s = native._capture_handle(box[0], 100, False, 1)
        assert s[-1] is Ellipsis and len(s) == 101, len(s)
        want = fmt(traceback.extract_stack(sys._current_frames()[th.ident]))
        check_equal(s[:-1], want[-100:])
    finally:
        ev.set()
        th.join()
        native._release_handle(box[0])


def t_location_table_decoder():
    """The 3.11 location-table decoder agrees with CPython's co_lines() for every instruction of
    every code object of a few big stdlib modules."""
    import argparse
    import asyncio.base_events
    import email.message
    import json.decoder
    mods = [argparse, asyncio.base_events, email.message, json.decoder, threading, traceback]
    n = 0

    def codes(co):
        yield co
        for c in co.co_consts:
            if hasattr(c, 'co_code'):
                yield from codes(c)
    for m in mods:
        with open(m.__file__) as f:
            top = compile(f.read(), m.__file__, 'exec')
        for co in codes(top):
            for start, end, line in co.co_lines():
                for addr in range(start, end, 2):
                    got = native._addr2line(co.co_linetable, co.co_firstlineno, addr)
                    want = -1 if line is None else line
                    if got != want:
                        raise AssertionError('%s:%s addr %d: got %s want %s' %
                                             (m.__file__, co.co_name, addr, got, want))
                    n += 1
    assert n > 10000, n


def t_unicode_names():
    ns = {}
    src = 'def f\u00e9\u4e2d():\n    return __import__("skyprof").dump_stack()\n'
    code = compile(src, '/tmp/\u00fcnicode-\u00e9\u4e2d.py', 'exec')
    exec(code, ns)
    got = ns['f\u00e9\u4e2d']()
    assert got[-1] == '/tmp/\u00fcnicode-\u00e9\u4e2d.py.f\u00e9\u4e2d: 2', got[-1]


def t_code_reuse_never_mislabels():
    """Code objects created and freed again and again (exec'd functions with distinct names),
    each sampled on another thread until the reader trusts it without re-reading it (watch armed
    by a pending call on this thread): a new code object that reuses a dead one's address must
    never be shown with the dead one's name or lines."""
    before = native.reader_info()['watched_hits']
    mismatches = []
    for i in range(150):
        ns = {}
        src = ('def reuse_%d(ev, started):\n'
               '    started.set()\n'
               '    ev.wait()\n' % i)
        exec(compile(src, '/tmp/reuse-%d.py' % (i % 7), 'exec'), ns)
        ev, started = threading.Event(), threading.Event()
        th = threading.Thread(target=ns['reuse_%d' % i], args=(ev, started))
        th.start()
        started.wait(5)
        wait_until(lambda: '.wait: ' in skyprof.dump_stack(th.ident)[-1], 5)
        for _ in range(3):
            got = skyprof.dump_stack(th.ident)
            want = fmt(traceback.extract_stack(sys._current_frames()[th.ident]))
            if got != want:
                mismatches.append((got[-3:], want[-3:]))
            time.sleep(0)  # lets the pending call arm watches between samples
        ev.set()
        th.join()
        del ns, th
    assert not mismatches, mismatches[:3]
    assert native.reader_info()['watched_hits'] > before, native.reader_info()


def t_reader_mode():
    info = native.reader_info()
    assert info['direct'] is True and info['layout'] == '3.11', info


def main():
    r = Results()
    for name, fn in sorted((k, v) for k, v in globals().items() if k.startswith('t_')):
        r.run(name, fn)
    r.finish()


if __name__ == '__main__':
    main()
