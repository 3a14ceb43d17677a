"""ASGI middleware: ``app = SkyprofASGIMiddleware(app)``. One entry span per HTTP request named
scope['path'], incoming ``sw8`` honoured, ended when the app returns.

libskyprof keeps segments per OS thread, and an asyncio loop interleaves many requests on one
thread. So a request gets a span only when no other request's segment is open on the loop thread
at that moment; overlapping requests run untraced (counted in ``untraced``). While a traced
request is open, profiling samples the loop thread, i.e. whatever coroutine runs at that moment."""
from .. import _tracer

_LAYER_HTTP = 3


class SkyprofASGIMiddleware:
    """``auto=True`` (set when uvicorn's app is wrapped automatically): the request is left to a
    framework plugin (Starlette/FastAPI) when one is installed."""

    def __init__(self, app, auto=False):
        self.app = app
        self.auto = auto
        self.untraced = 0

    async def __call__(self, scope, receive, send):
        if scope.get('type') != 'http' or (self.auto and _tracer.frameworks):
            return await self.app(scope, receive, send)
        if _tracer.segment_open():
            self.untraced += 1
            return await self.app(scope, receive, send)
        sw8 = None
        host = ''
        for k, v in scope.get('headers') or ():
            if k == b'sw8':
                sw8 = v.decode('latin-1')
            elif k == b'host':
                host = v.decode('latin-1')
        path = scope.get('path') or '/'
        client = scope.get('client')
        peer = '%s:%s' % (client[0], client[1]) if client else None
        span = _tracer.begin(path, sw8, _tracer.COMPONENT_ASGI, _LAYER_HTTP, peer=peer)
        if span is None:
            return await self.app(scope, receive, send)
        _tracer.tag(span, 'http.method', scope.get('method', ''))
        _tracer.tag(span, 'http.url', '%s://%s%s%s' % (scope.get('scheme', 'http'), host,
                                                       scope.get('root_path', ''), path))
        status = [None]

        async def _send(message):
            if message.get('type') == 'http.response.start':
                status[0] = message.get('status')
            await send(message)

        try:
            await self.app(scope, receive, _send)
        except BaseException:
            _tracer.error(span)
            raise
        finally:
            if status[0] is not None:
                _tracer.tag(span, 'http.status_code', status[0])
                if status[0] >= 400:
                    _tracer.error(span)
            _tracer.end(span)
