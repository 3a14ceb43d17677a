"""ASGI middleware: ``app = SkyprofASGIMiddleware(app)``. One entry span per HTTP request named
scope['path'], incoming ``sw8`` honoured, ended when the app returns.

An asyncio loop interleaves many requests on one thread: each request gets a segment of its own
(_tracer.async_begin), and while a profile task samples it, its samples follow its task: the
running stack when it runs, its await chain (marked waiting) when it is suspended."""
from .. import _tracer

_LAYER_HTTP = 3


class SkyprofASGIMiddleware:
    """``auto=True`` (set when uvicorn's app is wrapped automatically): the request is left to a
    framework plugin (Starlette/FastAPI) when one is installed."""

    def __init__(self, app, auto=False):
        self.app = app
        self.auto = auto

    async def __call__(self, scope, receive, send):
        if scope.get('type') != 'http' or (self.auto and _tracer.frameworks):
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
        url = '%s://%s%s%s' % (scope.get('scheme', 'http'), host, scope.get('root_path', ''), path)
        req = _tracer.async_begin(path, sw8, _tracer.COMPONENT_ASGI, _LAYER_HTTP, peer=peer,
                                  tags=(('http.method', scope.get('method', '')), ('http.url', url)))
        if req is None:
            return await self.app(scope, receive, send)
        status = [None]
        failed = [False]

        async def _send(message):
            if message.get('type') == 'http.response.start':
                status[0] = message.get('status')
            await send(message)

        try:
            await self.app(scope, receive, _send)
        except BaseException:
            failed[0] = True
            raise
        finally:
            _tracer.async_finish(req, status[0], failed[0])
