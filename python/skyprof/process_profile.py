"""Python side of the process-profiling events that need the interpreter itself (PprofTask
``heap`` and ``allocs``, and the asyncio tasks of a ``goroutine`` dump). The agent's C thread
(skp-proc) calls ``start(event)`` and, after the task's window, ``finish(event)``, or once
``asyncio_tasks(event)``, each with the GIL held; it never runs on its own.

``asyncio_tasks`` lists every unfinished task of every event loop (asyncio's own registry of
tasks, read under the GIL it already holds: the dump is one short look, like the thread list) with
its await chain: for a suspended task the coroutine it runs, the one that awaits, ... down to the
innermost suspended coroutine, under a ``(waiting)`` leaf, or ``(ready, loop busy)`` when it could
run and only its loop, running other code, has not resumed it (the marks the per-request sampler
uses);
for the task its loop is running right now, its thread's frames from the innermost one up to the
task's coroutine.

``threadcreate`` records, for the task's window only, the stack that started each thread
(``threading.Thread.start``, wrapped at ``start`` and put back at ``finish`` unless someone else
replaced it meanwhile): CPython keeps no creation stack, so threads started before the window, or
with ``_thread.start_new_thread`` directly, are not seen.

``heap``/``allocs`` use :mod:`tracemalloc`, started for the task only and stopped after (unless
the application was already tracing, which is then left untouched). tracemalloc sees the blocks
allocated while it runs and still alive at the end: ``heap`` reports them as ``inuse_objects`` /
``inuse_space``; ``allocs`` reports the same blocks as ``alloc_objects`` / ``alloc_space`` (CPython
has no record of blocks already freed). tracemalloc frames carry file and line only: the function
(qualified name) is found from the file's syntax tree, cached per file.
"""
import ast
import linecache
import sys
import threading

# Frames kept per allocation traceback (tracemalloc's cost grows with it).
TRACE_FRAMES = 32
# Stacks returned at most (largest first): bounds the profile whatever the program allocates.
MAX_STACKS = 4000
# Files whose function tables are cached at most.
MAX_FILES = 512
# Frames per asyncio task's await chain at most.
MAX_AWAIT_FRAMES = 64
# asyncio tasks a dump lists at most (the GIL is held meanwhile: about 30 us a task at load 23).
MAX_TASKS = 1000
# The leaf of a suspended task's chain (pystack.h's SKP_PY_WAITING_MARK), and of one that is
# ready to run while its loop runs other code (pyasync.h's SKP_PY_READY_MARK).
WAITING_MARK = '(waiting)'
READY_MARK = '(ready, loop busy)'

_lock = threading.Lock()
_state = {'started_by_us': False}
_func_tables = {}


# threadcreate: creation stacks seen during the window (innermost frame first) -> count.
_creations = {}
# Frames kept per creation stack.
CREATE_FRAMES = 64


def _start_wrapper(original):
    def start(self, *args, **kwargs):
        try:
            f = sys._getframe(1)
            frames = []
            while f is not None and len(frames) < CREATE_FRAMES:
                frames.append(_frame_entry(f))
                f = f.f_back
            key = tuple(frames)
            with _lock:
                if key in _creations or len(_creations) < MAX_STACKS:
                    _creations[key] = _creations.get(key, 0) + 1
        except Exception:  # never in the host's way
            pass
        return original(self, *args, **kwargs)
    start._skyprof_original = original
    start.__wrapped__ = original
    return start


def _start_threadcreate():
    with _lock:
        _creations.clear()
        current = threading.Thread.start
        if getattr(current, '_skyprof_original', None) is None:
            threading.Thread.start = _start_wrapper(current)
    return True


def _finish_threadcreate():
    with _lock:
        current = threading.Thread.start
        original = getattr(current, '_skyprof_original', None)
        if original is not None:
            threading.Thread.start = original
        seen = sorted(_creations.items(), key=lambda kv: -kv[1])
        _creations.clear()
    return [(list(frames), count, 0) for frames, count in seen]


def start(event):
    if event == 'threadcreate':
        return _start_threadcreate()
    import tracemalloc
    with _lock:
        if tracemalloc.is_tracing():
            _state['started_by_us'] = False
        else:
            tracemalloc.start(TRACE_FRAMES)
            _state['started_by_us'] = True
    return True


def _table(filename):
    """Sorted [(first line, last line, qualified name)] of the file's functions and classes."""
    t = _func_tables.get(filename)
    if t is not None:
        return t
    t = []
    try:
        src = ''.join(linecache.getlines(filename))
        tree = ast.parse(src, filename) if src else None
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        tree = None
    if tree is not None:
        def walk(node, prefix):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    q = prefix + child.name
                    end = getattr(child, 'end_lineno', None) or child.lineno
                    if not isinstance(child, ast.ClassDef):
                        t.append((child.lineno, end, q))
                    inner = q + ('.<locals>.' if not isinstance(child, ast.ClassDef) else '.')
                    walk(child, inner)
                else:
                    walk(child, prefix)
        walk(tree, '')
    if len(_func_tables) >= MAX_FILES:
        _func_tables.clear()
    _func_tables[filename] = t
    return t


def function_at(filename, lineno):
    """The innermost function (qualified name) of filename containing lineno, or '<module>'."""
    best = None
    for first, last, q in _table(filename):
        if first <= lineno <= last and (best is None or first >= best[0]):
            best = (first, q)
    return best[1] if best else '<module>'


def finish(event):
    """[(frames innermost first as [(qualname, filename, line)], count, bytes)], largest first."""
    if event == 'threadcreate':
        return _finish_threadcreate()
    import tracemalloc
    with _lock:
        if not tracemalloc.is_tracing():
            return []
        try:
            snap = tracemalloc.take_snapshot()
        finally:
            if _state['started_by_us']:
                tracemalloc.stop()
                _state['started_by_us'] = False
    me = __file__.rstrip('c')
    snap = snap.filter_traces((tracemalloc.Filter(False, tracemalloc.__file__),
                               tracemalloc.Filter(False, me)))
    out = []
    for st in snap.statistics('traceback')[:MAX_STACKS]:
        frames = []
        for fr in reversed(list(st.traceback)):  # tracemalloc: oldest first since 3.7
            frames.append((function_at(fr.filename, fr.lineno), fr.filename, fr.lineno))
        out.append((frames, st.count, st.size))
    _func_tables.clear()
    return out


def _frame_entry(f):
    co = f.f_code
    return (getattr(co, 'co_qualname', co.co_name), co.co_filename, f.f_lineno or 0)


def _await_chain(coro):
    """Frames of a suspended coroutine's await chain, outermost first, and whether it started."""
    frames = []
    started = True
    while coro is not None and len(frames) < MAX_AWAIT_FRAMES:
        f = getattr(coro, 'cr_frame', None) or getattr(coro, 'gi_frame', None)
        if f is None:
            break
        if not frames and f.f_lasti < 0:
            started = False  # created, never run
        frames.append(f)
        nxt = getattr(coro, 'cr_await', None) if hasattr(coro, 'cr_await') else \
            getattr(coro, 'gi_yieldfrom', None)
        if nxt is coro:
            break
        coro = nxt
    return frames, started


def _task_ready(task, chain):
    """The rule of src/python/pyasync.h, read with the GIL, for a suspended task that started:
    no future to wait for (a bare yield queued its step), a done one (its callbacks queued the
    wakeup), or the timer of the asyncio.sleep it is in past its deadline (the loop has not got
    to it: it runs other code)."""
    try:
        waiter = task._fut_waiter
    except AttributeError:  # not asyncio's Task: no rule
        return False
    try:
        if waiter is None or waiter.done():
            return True
        tasks_mod = sys.modules.get('asyncio.tasks')
        sleep = getattr(getattr(tasks_mod, 'sleep', None), '__code__', None)
        inner = chain[-1]
        if sleep is None or inner.f_code is not sleep:
            return False
        when = getattr(inner.f_locals.get('h'), 'when', None)
        return when is not None and task.get_loop().time() >= when()
    except Exception:
        return False


def asyncio_tasks(event=None):
    """[(frames innermost first as [(qualname, filename, line)], task name, state, thread name,
    thread native id)] for every unfinished asyncio task, state 'running', 'waiting', 'ready' (not
    running, ready to run: the loop runs other code) or 'created'. At most MAX_TASKS tasks."""
    tasks_mod = sys.modules.get('asyncio.tasks')
    if tasks_mod is None:
        return []
    try:
        tasks = list(tasks_mod._all_tasks)
    except (AttributeError, RuntimeError, TypeError):
        return []
    current = getattr(tasks_mod, '_current_tasks', None) or {}
    try:
        current = dict(current)
    except (RuntimeError, TypeError):
        current = {}
    thread_frames = None
    out = []
    for task in tasks:
        if len(out) >= MAX_TASKS:
            break
        try:
            if task.done():
                continue
            loop = task.get_loop()
            coro = task.get_coro()
            name = str(task.get_name())
        except Exception:
            continue
        ident = getattr(loop, '_thread_id', None)
        th = threading._active.get(ident) if ident is not None else None
        thread_name = th.name if th is not None else '?'
        native = (getattr(th, 'native_id', None) or 0) if th is not None else 0
        chain, started = _await_chain(coro)
        if not chain:
            continue
        if current.get(loop) is task:
            state = 'running'
            if thread_frames is None:
                thread_frames = sys._current_frames()
            frames = []
            f = thread_frames.get(ident)
            outer = chain[0]
            while f is not None and len(frames) < MAX_AWAIT_FRAMES:
                frames.append(_frame_entry(f))
                if f is outer:
                    break
                f = f.f_back
            if f is None:  # the coroutine is not on its thread's stack: its own frame only
                frames = [_frame_entry(outer)]
        else:
            ready = started and _task_ready(task, chain)
            state = 'created' if not started else 'ready' if ready else 'waiting'
            frames = [_frame_entry(f) for f in reversed(chain)]
            frames.insert(0, (READY_MARK if ready else WAITING_MARK, '', 0))
        out.append((frames, name[:200], state, str(thread_name)[:47], int(native)))
    return out


__all__ = ['start', 'finish', 'function_at', 'asyncio_tasks']

