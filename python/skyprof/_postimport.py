"""Runs a callback when a module is imported (now, if it already is). Used to patch http.server
only in applications that use it: importing it ourselves would pull in http.client, ssl and
libcrypto (~8 MB RSS) into every host."""
import sys
import threading

_hooks = {}
_lock = threading.Lock()
_finder = None


class _Loader:
    """Wraps the real loader (importlib.abc is not imported: it drags in typing and more)."""

    def __init__(self, loader, name):
        self._loader = loader
        self._name = name

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _fire(self._name, module)


_any = []  # callbacks run at the next import of anything (then dropped when they return True)


class _Finder:
    def find_spec(self, fullname, path=None, target=None):
        if _any:
            _run_any()
        if fullname not in _hooks:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, 'find_spec'):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, 'exec_module'):
                    spec.loader = _Loader(spec.loader, fullname)
                return spec
        return None


def _fire(name, module):
    with _lock:
        callbacks = _hooks.pop(name, [])
    for cb in callbacks:
        try:
            cb(module)
        except Exception:  # never into user code
            from ._log import logger
            logger.exception('skyprof: post-import hook for %s failed', name)


def _run_any():
    with _lock:
        pending = list(_any)
    for cb in pending:
        try:
            done = cb()
        except Exception:
            done = True
        if done:
            with _lock:
                if cb in _any:
                    _any.remove(cb)


def on_next_imports(callback):
    """Calls callback() at each import until it returns True (e.g. to wait for a module that an
    embedding program such as uWSGI puts into sys.modules without an import)."""
    global _finder
    with _lock:
        _any.append(callback)
        if _finder is None:
            _finder = _Finder()
            sys.meta_path.insert(0, _finder)


def when_imported(name, callback):
    global _finder
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    with _lock:
        _hooks.setdefault(name, []).append(callback)
        if _finder is None:
            _finder = _Finder()
            sys.meta_path.insert(0, _finder)
