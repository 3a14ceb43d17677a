"""Django: ``BaseHandler.get_response`` (WSGI: runserver, gunicorn, uWSGI) runs in an entry span
named ``request.path`` - SCRIPT_NAME included, as SkyWalking's Django plugin names it (under
SCRIPT_NAME=/api a request to /slow is ``/api/slow``) - component Django (7004), peer
``REMOTE_ADDR:REMOTE_PORT`` (port 80 when unknown), tags http.method / http.url / status."""
from .. import _tracer

_ATTR = '_skyprof_original'


def _url(request):
    """``request.build_absolute_uri()`` without its query string, from META (no host
    validation: a DisallowedHost must not come from us)."""
    meta = request.META
    host = meta.get('HTTP_HOST')
    if not host:
        host = '%s:%s' % (meta.get('SERVER_NAME', ''), meta.get('SERVER_PORT', ''))
    return '%s://%s%s' % (meta.get('wsgi.url_scheme', 'http'), host, request.path)


def install(base_module):
    BaseHandler = base_module.BaseHandler
    if getattr(BaseHandler.get_response, _ATTR, None) is not None:
        return
    original = BaseHandler.get_response

    def get_response(self, request):
        if request is None or not _tracer.enabled():
            return original(self, request)
        try:
            meta = request.META
            peer = '%s:%s' % (meta.get('REMOTE_ADDR'), meta.get('REMOTE_PORT') or '80')
            span = _tracer.begin(request.path, meta.get('HTTP_SW8'), _tracer.COMPONENT_DJANGO,
                                 _tracer.LAYER_HTTP, peer=peer)
            if span is not None:
                _tracer.tag(span, 'http.method', request.method)
                _tracer.tag(span, 'http.url', _url(request))
        except Exception as e:
            _tracer._disable('django instrumentation', e)
            return original(self, request)
        if span is None:
            return original(self, request)
        status = None
        try:
            resp = original(self, request)
            status = getattr(resp, 'status_code', None)
            return resp
        except BaseException:
            _tracer.error(span)
            raise
        finally:
            _tracer.finish(span, status)

    setattr(get_response, _ATTR, original)
    get_response.__name__ = 'get_response'
    BaseHandler.get_response = get_response
    _tracer.frameworks.add('django')
