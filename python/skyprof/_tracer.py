"""Entry spans from Python: the manual API (``entry`` context manager, ``entry_point``
decorator) and the helpers the framework instrumentation uses.

Spans live in libskyprof, per thread: an entry span must end on the thread that began it. Every
call here is guarded so a failure inside the agent never reaches user code: the first unexpected
exception is logged and switches the agent's tracing off for the rest of the process.
"""
import contextvars
import functools
import threading

from . import _native
from ._log import logger

# SkyWalking's component ids (its Python agent's Component enum).
COMPONENT_PYTHON = 7000       # "General": http.server, werkzeug, urllib.request, http.client
COMPONENT_WSGI = 7000
COMPONENT_ASGI = 7000
COMPONENT_FLASK = 7001
COMPONENT_REQUESTS = 7002
COMPONENT_DJANGO = 7004
COMPONENT_URLLIB3 = 7006
COMPONENT_AIOHTTP = 7008
COMPONENT_FASTAPI = 7014
COMPONENT_HTTPX = 7019

LAYER_HTTP = 3
SPAN_EXIT = 1

_state = {'disabled': False}

# Frameworks whose own instrumentation names the requests (flask, django, starlette, aiohttp):
# once one is installed, the server-level wrappers (werkzeug, gunicorn/uvicorn plain WSGI/ASGI)
# leave the request to it, so a request gets one entry span named as SkyWalking names it.
frameworks = set()

# Per thread: depth of our open exit spans (requests -> urllib3 -> http.client make one span).
_tls = threading.local()


def _disable(what, exc):
    if not _state['disabled']:
        _state['disabled'] = True
        logger.error('skyprof: %s failed (%r); tracing switched off', what, exc)


def enabled():
    return _native.HAS_AGENT and not _state['disabled']


# "No silent nothing": while a task is live, the names of the requests that do not match it; after
# WATCH_REQUESTS of them and none matching, one WARNING names the endpoints really seen.
WATCH_REQUESTS = 20
WATCH_NAMES = 8
_watch = {'task': None, 'matched': False, 'n': 0, 'others': {}}


def _watch_task(native, endpoint):
    ep = native.task_endpoint()
    if ep is None:
        return
    w = _watch
    if w['task'] != ep:
        w.update(task=ep, matched=False, n=0, others={})
    if w['matched']:
        return
    if endpoint == ep:
        w['matched'] = True
        return
    w['n'] += 1
    others = w['others']
    if endpoint in others or len(others) < WATCH_NAMES:
        others[endpoint] = others.get(endpoint, 0) + 1
    if w['n'] == WATCH_REQUESTS:
        from ._log import warn_once
        seen = ', '.join('%s (%d)' % kv for kv in sorted(others.items(), key=lambda kv: -kv[1]))
        warn_once('task-unseen:' + ep,
                  'skyprof: a profile task for endpoint %r is active but none of the last %d '
                  'requests had that name; endpoints seen: %s' % (ep, WATCH_REQUESTS, seen))


# One segment per request, whatever layers see it: a request can pass through a hand-made
# middleware (SkyprofWSGIMiddleware / SkyprofASGIMiddleware, skyprof.entry) AND a framework plugin
# installed automatically (Flask inside the WSGI middleware, Starlette inside the ASGI one). The
# first layer opens the request's entry span; every inner layer finds it and opens nothing (no
# second segment, no second entry span, no second profiling slot). An inner framework plugin only
# gives the span its component when the outer layer had the generic one (General 7000), so the
# span reads as the framework's whichever layer opened it. The endpoint name stays the outer
# layer's: the profiling slot was taken under that name.
def _adopt(span, had, component, layer):
    """Gives the open entry span `span` (component `had`) the inner layer's component. Returns
    the component the span has after."""
    if component is None or component == COMPONENT_PYTHON or had != COMPONENT_PYTHON:
        return had
    _native.native.span_set_component(span, component, layer if layer is not None else -1)
    return component


def _nested(component, layer):
    """True when the calling code runs inside a request whose entry span is open already: an
    asyncio request of this context (current_request), or the thread's open segment. Adopts the
    inner layer's component into that span where it can (see above)."""
    req = current_request.get()
    if req is not None and req.span is not None:
        if req.thread == threading.get_ident():
            native = _native.native
            prev = native.context_swap(req.ctx)
            try:
                req.component = _adopt(req.span, req.component, component, layer)
            finally:
                native.context_swap(prev)
        return True  # a worker thread of the request: its segment is the request's
    if not _native.native.segment_open():
        return False
    outer = getattr(_tls, 'outer', None)  # [span, component] of the request begin() opened
    if outer is not None:
        outer[1] = _adopt(outer[0], outer[1], component, layer)
    return True


def begin(endpoint, sw8=None, component=None, layer=None, tags=None, peer=None):
    """Opens the entry span of a request served by the calling thread (a new segment). Returns a
    handle, or None: tracing is off, or the caller runs inside a request whose entry span is open
    already (an outer middleware's or framework's: see _nested), which then stays the only one."""
    if not enabled():
        return None
    try:
        if _nested(component, layer):
            return None
        span = _begin(endpoint, sw8, component, layer, tags, peer)
        _tls.outer = [span, component if component is not None else COMPONENT_PYTHON] \
            if span is not None else None
        return span
    except Exception as e:  # never into user code
        _disable('entry_begin', e)
        return None


def _begin(endpoint, sw8=None, component=None, layer=None, tags=None, peer=None, coro=None):
    """Opens an entry span in the current context (a new segment when it has none). Returns a
    handle or None. ``coro``: the coroutine of the asyncio task the request runs in (see
    async_begin)."""
    if not enabled():
        return None
    try:
        native = _native.native
        if native.task_active():
            _watch_task(native, endpoint)
        span = native.entry_begin(endpoint, sw8, coro) if coro is not None else \
            native.entry_begin(endpoint, sw8)
        if span is not None:
            if component is not None:
                native.span_set_component(span, component, layer if layer is not None else -1)
            if peer:
                native.span_set_peer(span, peer)
            if tags:
                for k, v in tags:
                    native.span_tag(span, k, str(v))
        return span
    except Exception as e:  # never into user code
        _disable('entry_begin', e)
        return None


class _CtxExit:
    """An exit span opened in an asyncio request's own context (AsyncRequest.ctx): its calls
    swap that context in and out, like the request's entry span. ``sync``: opened by a blocking
    client (the per-thread nesting guard applies), else by an async one (aiohttp), which may
    yield to the loop while it is open, so it never touches the per-thread guard."""

    __slots__ = ('ctx', 'span', 'sync')

    def __init__(self, ctx, span, sync):
        self.ctx = ctx
        self.span = span
        self.sync = sync


def _loop_request():
    """The asyncio request (AsyncRequest) the running code belongs to, when it runs on the
    request's own loop thread (a thread-pool worker sees the ContextVar too, but must not use the
    request's context, which the loop thread uses meanwhile), else None."""
    req = current_request.get()
    if req is not None and req.thread == threading.get_ident() and req.span is not None:
        return req
    return None


def _open_exit(native, name, peer, component, method, url):
    span = native.span_begin(SPAN_EXIT, name or '/', peer or '')
    if span is None:
        return None, None
    native.span_set_component(span, component, LAYER_HTTP)
    native.span_tag(span, 'http.method', str(method).upper())
    native.span_tag(span, 'http.url', str(url))
    return span, native.sw8_inject()


def exit_begin(name, peer, component, method, url):
    """Opens an exit span (HTTP client call) in the open segment - the thread's, or inside an
    asyncio request on its loop thread that request's - and returns (span, sw8 header value), or
    (None, None) when there is no open segment, or when an exit span of ours is already open on
    this thread (the outer library's span covers the call). For blocking clients."""
    if not enabled() or getattr(_tls, 'exit_depth', 0):
        return None, None
    try:
        native = _native.native
        req = _loop_request()
        if req is not None:
            prev = native.context_swap(req.ctx)
            try:
                span, sw8 = _open_exit(native, name, peer, component, method, url)
            finally:
                native.context_swap(prev)
            if span is None:
                return None, None
            span = _CtxExit(req.ctx, span, True)
        else:
            span, sw8 = _open_exit(native, name, peer, component, method, url)
            if span is None:
                return None, None
        _tls.exit_depth = 1
        return span, sw8
    except Exception as e:
        _disable('exit span', e)
        return None, None


def async_exit_begin(name, peer, component, method, url):
    """exit_begin for a client that awaits while the call is open (aiohttp): the span lives in
    the current asyncio request's context (or, with none, the thread's open segment) and the
    per-thread nesting guard is left alone (other requests run on the thread meanwhile).
    Returns (handle for exit_end, sw8) or (None, None)."""
    if not enabled():
        return None, None
    try:
        native = _native.native
        req = _loop_request()
        ctx = req.ctx if req is not None else None
        prev = native.context_swap(ctx) if ctx is not None else None
        try:
            span, sw8 = _open_exit(native, name, peer, component, method, url)
        finally:
            if ctx is not None:
                native.context_swap(prev)
        if span is None:
            return None, None
        return _CtxExit(ctx, span, False), sw8
    except Exception as e:
        _disable('exit span', e)
        return None, None


def _close_exit(native, span, status, failed):
    if status is not None:
        native.span_tag(span, 'http.status_code', str(status))
        if status >= 400:
            failed = True
    if failed:
        native.span_set_error(span, True)
    native.span_end(span)


def exit_end(span, status=None, failed=False):
    """Ends a span from exit_begin or async_exit_begin (status >= 400 marks an error)."""
    if span is None:
        return
    try:
        native = _native.native
        if isinstance(span, _CtxExit):
            if span.sync:
                _tls.exit_depth = 0
            if span.ctx is None:
                _close_exit(native, span.span, status, failed)
                return
            prev = native.context_swap(span.ctx)
            try:
                _close_exit(native, span.span, status, failed)
            finally:
                native.context_swap(prev)
            return
        _tls.exit_depth = 0
        _close_exit(native, span, status, failed)
    except Exception as e:
        _disable('exit span end', e)


def finish(span, status=None, failed=False):
    """Ends an entry span with its HTTP status (>= 400 marks an error, as SkyWalking does)."""
    if span is None:
        return
    if status is not None:
        tag(span, 'http.status_code', status)
        if status >= 400:
            failed = True
    if failed:
        error(span)
    end(span)


def tag(span, key, value):
    if span is None:
        return
    try:
        _native.native.span_tag(span, key, str(value))
    except Exception as e:
        _disable('span_tag', e)


def error(span, is_error=True):
    if span is None:
        return
    try:
        _native.native.span_set_error(span, bool(is_error))
    except Exception as e:
        _disable('span_set_error', e)


def end(span):
    if span is None:
        return
    try:
        outer = getattr(_tls, 'outer', None)
        if outer is not None and outer[0] == span:
            _tls.outer = None  # the thread's request ends: nothing to adopt into any more
        _native.native.entry_end(span)
    except Exception as e:
        _disable('entry_end', e)


def segment_open():
    """True when the calling thread has an open segment."""
    if not enabled():
        return False
    try:
        return _native.native.current_segment_id() is not None
    except Exception as e:
        _disable('current_segment_id', e)
        return False


class entry:
    """``with skyprof.entry('/checkout', sw8=headers.get('sw8')):`` - an entry span around a
    block (the endpoint name is what profile tasks match). Also a decorator factory via
    ``entry_point``. Exceptions of the block mark the span as an error and propagate."""

    __slots__ = ('endpoint', 'sw8', 'span', 'component', 'layer')

    def __init__(self, endpoint, sw8=None, component=COMPONENT_PYTHON, layer=None):
        self.endpoint = endpoint
        self.sw8 = sw8
        self.component = component
        self.layer = layer
        self.span = None

    def __enter__(self):
        self.span = begin(self.endpoint, self.sw8, self.component, self.layer)
        return self

    def tag(self, key, value):
        tag(self.span, key, value)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            error(self.span)
        end(self.span)
        self.span = None
        return False


def entry_point(endpoint=None, sw8_arg=None):
    """Decorator: runs the function inside an entry span named `endpoint` (default: the function's
    qualified name). ``sw8_arg`` names a keyword argument carrying an incoming sw8 header."""

    def deco(fn):
        name = endpoint or getattr(fn, '__qualname__', getattr(fn, '__name__', 'entry'))

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            sw8 = kwargs.get(sw8_arg) if sw8_arg else None
            with entry(name, sw8=sw8):
                return fn(*args, **kwargs)

        return wrapper

    if callable(endpoint) and sw8_arg is None:  # used bare: @entry_point
        fn, endpoint = endpoint, None
        return deco(fn)
    return deco


def sw8_inject():
    """The sw8 header value for an outgoing call from the current span, or None."""
    if not enabled():
        return None
    try:
        return _native.native.sw8_inject()
    except Exception as e:
        _disable('sw8_inject', e)
        return None


def current_trace_id():
    if not enabled():
        return None
    try:
        return _native.native.current_trace_id()
    except Exception as e:
        _disable('current_trace_id', e)
        return None


# ---------------------------------------------------------------------------------------------
# asyncio: one segment per request, however requests interleave on the loop thread
# ---------------------------------------------------------------------------------------------
# The sampling handle of the request whose task this is (set by async_begin in the task's own
# context); work handed to a thread pool from the task is sampled as part of it (threadpool.py).
current_handle = contextvars.ContextVar('skyprof_handle', default=None)
# The AsyncRequest whose task this is (set by async_begin): outgoing calls made by the request
# open their exit spans in its context (exit_begin, async_exit_begin).
current_request = contextvars.ContextVar('skyprof_request', default=None)


class AsyncRequest:
    """An entry span in a request context of its own (libskyprof's skyprof_context): the span
    calls swap the context in and out, so requests interleaved on one loop never share a
    segment. ``handle``: the request's sampling handle while a task samples it, else None."""

    __slots__ = ('ctx', 'span', 'handle', 'token', 'thread', 'req_token', 'component')

    def __init__(self, ctx, span, handle, token, component):
        self.ctx = ctx
        self.span = span
        self.handle = handle
        self.token = token
        self.thread = threading.get_ident()
        self.req_token = None
        self.component = component


def async_begin(endpoint, sw8=None, component=None, layer=None, tags=None, peer=None):
    """Opens the entry span of a request served by the running asyncio task. Returns an
    AsyncRequest or None (also when an outer layer opened the request's span already: _nested).
    While a profile task samples it, samples follow the task: its running stack when it runs, its
    await chain (marked waiting, or ready) when suspended."""
    if not enabled():
        return None
    try:
        if _nested(component, layer):
            return None
        import asyncio  # already imported by the caller's loop
        native = _native.native
        ctx = native.context_new()
        prev = native.context_swap(ctx)
        handle = None
        try:
            coro = None
            if native.task_active():
                task = asyncio.current_task()
                coro = task.get_coro() if task is not None else None
                if coro is not None and not asyncio.iscoroutine(coro):
                    coro = None
            span = _begin(endpoint, sw8, component, layer, tags, peer, coro=coro)
            if coro is not None:
                handle = native.take_handle()
        finally:
            native.context_swap(prev)
        if span is None:
            return None
        token = current_handle.set(handle) if handle is not None else None
        req = AsyncRequest(ctx, span, handle, token,
                           component if component is not None else COMPONENT_PYTHON)
        req.req_token = current_request.set(req)
        return req
    except Exception as e:  # never into user code
        _disable('async entry_begin', e)
        return None


def async_finish(req, status=None, failed=False):
    """Ends an AsyncRequest's entry span (status >= 400 marks an error)."""
    if req is None:
        return
    try:
        native = _native.native
        prev = native.context_swap(req.ctx)
        try:
            finish(req.span, status, failed)
        finally:
            native.context_swap(prev)
        if req.token is not None:
            try:
                current_handle.reset(req.token)
            except ValueError:  # ended in another context than it began: leave it
                pass
        if req.req_token is not None:
            try:
                current_request.reset(req.req_token)
            except ValueError:
                pass
            req.req_token = None
        req.span = None  # a late exit span of a task it started opens nothing
        req.handle = None
    except Exception as e:
        _disable('async entry_end', e)
