"""Work an asyncio request hands to a thread pool is sampled as part of that request:
``loop.run_in_executor(executor, fn, ...)`` (asyncio's base event loop) and
``anyio.to_thread.run_sync(fn, ...)`` (Starlette's ``run_in_threadpool``, FastAPI's ``def``
endpoints and dependencies). When the submitting task's request is being sampled
(``_tracer.current_handle`` is set), ``fn`` is wrapped so that, while it runs on the worker
thread, the request's samples show the worker's stack on top of the request's await chain.
Outside a sampled request nothing is wrapped (one ContextVar lookup per submission)."""
import functools

from .. import _native, _tracer

_ATTR = '_skyprof_original'


def _delegating(fn):
    handle = _tracer.current_handle.get()
    if handle is None:
        return fn

    @functools.wraps(fn)
    def run_for_request(*args, **kwargs):
        native = _native.native
        try:
            native.delegate_begin(handle)
        except Exception:  # never into user code
            return fn(*args, **kwargs)
        try:
            return fn(*args, **kwargs)
        finally:
            try:
                native.delegate_end(handle)
            except Exception:
                pass

    return run_for_request


def install_asyncio(base_events):
    BaseEventLoop = base_events.BaseEventLoop
    if getattr(BaseEventLoop.run_in_executor, _ATTR, None) is not None:
        return
    original = BaseEventLoop.run_in_executor

    def run_in_executor(self, executor, func, *args):
        return original(self, executor, _delegating(func), *args)

    setattr(run_in_executor, _ATTR, original)
    BaseEventLoop.run_in_executor = run_in_executor


def install_anyio(to_thread):
    if getattr(to_thread.run_sync, _ATTR, None) is not None:
        return
    original = to_thread.run_sync

    async def run_sync(func, *args, **kwargs):
        return await original(_delegating(func), *args, **kwargs)

    setattr(run_sync, _ATTR, original)
    to_thread.run_sync = run_sync
