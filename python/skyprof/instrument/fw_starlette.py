"""Starlette / FastAPI: ``ExceptionMiddleware.__call__`` (inside every Starlette app) runs each
HTTP request in an entry span named ``scope['path']``, component FastAPI (7014), peer
``client_host:client_port``, tags http.method / http.url (no query string) / http.status_code -
as SkyWalking's FastAPI plugin does.

An event loop interleaves requests on one thread: each request gets a segment of its own
(_tracer.async_begin), and its samples follow its task (running stack or await chain)."""
from .. import _tracer

_ATTR = '_skyprof_original'


def _url(scope):
    headers = dict(scope.get('headers') or ())
    host = headers.get(b'host', b'').decode('latin-1')
    if not host:
        server = scope.get('server')
        host = '%s:%s' % server if server else ''
    return '%s://%s%s%s' % (scope.get('scheme', 'http'), host, scope.get('root_path', ''),
                            scope.get('path', '/'))


def install(exceptions_module):
    ExceptionMiddleware = exceptions_module.ExceptionMiddleware
    if getattr(ExceptionMiddleware.__call__, _ATTR, None) is not None:
        return
    original = ExceptionMiddleware.__call__

    async def __call__(self, scope, receive, send):
        if scope.get('type') != 'http' or not _tracer.enabled():
            return await original(self, scope, receive, send)
        try:
            sw8 = None
            for k, v in scope.get('headers') or ():
                if k == b'sw8':
                    sw8 = v.decode('latin-1')
            client = scope.get('client')
            peer = '%s:%s' % (client[0], client[1]) if client else 'unknown'
            req = _tracer.async_begin(scope.get('path') or '/', sw8, _tracer.COMPONENT_FASTAPI,
                                      _tracer.LAYER_HTTP, peer=peer,
                                      tags=(('http.method', scope.get('method', '')),
                                            ('http.url', _url(scope))))
        except Exception as e:
            _tracer._disable('starlette instrumentation', e)
            return await original(self, scope, receive, send)
        if req is None:
            return await original(self, scope, receive, send)
        status = [500]

        async def _send(message):
            if message.get('type') == 'http.response.start':
                status[0] = message.get('status', 500)
            await send(message)

        try:
            await original(self, scope, receive, _send)
        finally:
            _tracer.async_finish(req, status[0])

    setattr(__call__, _ATTR, original)
    ExceptionMiddleware.__call__ = __call__
    _tracer.frameworks.add('starlette')
