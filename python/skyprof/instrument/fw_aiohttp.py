"""aiohttp server: ``RequestHandler._handle_request`` runs each request in an entry span named
``request.path``, component AioHttp (7008), peer from the transport, tags http.method / http.url /
http.status_code (SkyWalking's aiohttp plugin). Each request has a segment of its own however
requests interleave on the loop (_tracer.async_begin)."""
from .. import _tracer

_ATTR = '_skyprof_original'


def install(protocol_module):
    RequestHandler = protocol_module.RequestHandler
    if getattr(RequestHandler._handle_request, _ATTR, None) is not None:
        return
    original = RequestHandler._handle_request

    async def _handle_request(self, request, *args, **kwargs):
        if not _tracer.enabled():
            return await original(self, request, *args, **kwargs)
        try:
            pn = getattr(request, '_transport_peername', None)
            peer = '%s:%s' % (pn[0], pn[1]) if isinstance(pn, (list, tuple)) else str(pn)
            try:
                url = str(request.url)
            except Exception:
                url = '%s://%s%s' % (request.scheme, request.host, request.path)
            req = _tracer.async_begin(request.path, request.headers.get('sw8'),
                                      _tracer.COMPONENT_AIOHTTP, _tracer.LAYER_HTTP,
                                      tags=(('http.method', request.method), ('http.url', url)),
                                      peer=peer)
        except Exception as e:
            _tracer._disable('aiohttp instrumentation', e)
            return await original(self, request, *args, **kwargs)
        if req is None:
            return await original(self, request, *args, **kwargs)
        status = None
        failed = False
        try:
            result = await original(self, request, *args, **kwargs)
            resp = result[0] if isinstance(result, tuple) else result
            status = getattr(resp, 'status', None)
            return result
        except BaseException:
            failed = True
            raise
        finally:
            _tracer.async_finish(req, status, failed)

    setattr(_handle_request, _ATTR, original)
    RequestHandler._handle_request = _handle_request
    _tracer.frameworks.add('aiohttp')
