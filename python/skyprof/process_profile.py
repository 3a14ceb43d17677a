"""Python side of the process-profiling events that need the interpreter itself (PprofTask
``heap`` and ``allocs``). The agent's C thread (skp-proc) calls ``start(event)`` and, after the
task's window, ``finish(event)``, each with the GIL held; it never runs on its own.

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

_lock = threading.Lock()
_state = {'started_by_us': False}
_func_tables = {}


def start(event):
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


__all__ = ['start', 'finish', 'function_at']
del sys
