"""aiohttp server: ``RequestHandler._handle_request`` runs each request in an entry span named
``request.path``, component AioHttp (7008), peer from the transport, tags http.method / http.url /
http.status_code (SkyWalking's aiohttp plugin). Same one-segment-per-loop-thread rule as
Starlette: an overlapping request runs untraced."""
from .. import _tracer

_ATTR = '_skyprof_original'


def install(protocol_module):
    RequestHandler = protocol_module.RequestHandler
    if getattr(RequestHandler._handle_request, _ATTR, None) is not None:
        return
    original = RequestHandler._handle_request

    async def _handle_request(self, request, *args, **kwargs):
        if not _tracer.enabled() or _tracer.segment_open():
            return await original(self, request, *args, **kwargs)
        try:
            pn = getattr(request, '_transport_peername', None)
            peer = '%s:%s' % (pn[0], pn[1]) if isinstance(pn, (list, tuple)) else str(pn)
            span = _tracer.begin(request.path, request.headers.get('sw8'),
                                 _tracer.COMPONENT_AIOHTTP, _tracer.LAYER_HTTP, peer=peer)
            if span is not None:
                _tracer.tag(span, 'http.method', request.method)
                try:
                    url = str(request.url)
                except Exception:
                    url = '%s://%s%s' % (request.scheme, request.host, request.path)
                _tracer.tag(span, 'http.url', url)
        except Exception as e:
            _tracer._disable('aiohttp instrumentation', e)
            return await original(self, request, *args, **kwargs)
        if span is None:
            return await original(self, request, *args, **kwargs)
        status = None
        try:
            result = await original(self, request, *args, **kwargs)
            resp = result[0] if isinstance(result, tuple) else result
            status = getattr(resp, 'status', None)
            return result
        except BaseException:
            _tracer.error(span)
            raise
        finally:
            _tracer.finish(span, status)

    setattr(_handle_request, _ATTR, original)
    RequestHandler._handle_request = _handle_request
    _tracer.frameworks.add('aiohttp')
