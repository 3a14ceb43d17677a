"""Flask: every request dispatched by ``Flask.full_dispatch_request`` runs in an entry span named
``request.path`` (without SCRIPT_NAME, as SkyWalking's Flask plugin names it), component Flask
(7001), peer ``REMOTE_ADDR:REMOTE_PORT``, tags http.method / http.url (no query string) /
http.status_code. Covers the dev server (werkzeug), gunicorn, uWSGI and any WSGI server."""
from .. import _tracer

_ATTR = '_skyprof_original'


def _url(environ):
    """``request.url`` without its query string, from the WSGI environ (werkzeug's own property
    costs tens of microseconds: IRI quoting and IDNA per request)."""
    host = environ.get('HTTP_HOST')
    if not host:
        host = '%s:%s' % (environ.get('SERVER_NAME', ''), environ.get('SERVER_PORT', ''))
    return '%s://%s%s%s' % (environ.get('wsgi.url_scheme', 'http'), host,
                            environ.get('SCRIPT_NAME', ''), environ.get('PATH_INFO', '/'))


def install(flask_module):
    Flask = flask_module.Flask
    if getattr(Flask.full_dispatch_request, _ATTR, None) is not None:
        return
    original = Flask.full_dispatch_request
    request_proxy = flask_module.request

    def full_dispatch_request(self):
        if not _tracer.enabled():
            return original(self)
        try:
            req = request_proxy._get_current_object()
            environ = req.environ
            peer = None
            if 'REMOTE_ADDR' in environ and 'REMOTE_PORT' in environ:
                peer = '%s:%s' % (environ['REMOTE_ADDR'], environ['REMOTE_PORT'])
            elif environ.get('REMOTE_ADDR'):  # uWSGI's http-socket passes no REMOTE_PORT
                peer = environ['REMOTE_ADDR']
            span = _tracer.begin(req.path, environ.get('HTTP_SW8'), _tracer.COMPONENT_FLASK,
                                 _tracer.LAYER_HTTP, peer=peer)
            if span is not None:
                _tracer.tag(span, 'http.method', req.method)
                _tracer.tag(span, 'http.url', _url(environ))
        except Exception as e:  # never into user code
            _tracer._disable('flask instrumentation', e)
            return original(self)
        if span is None:
            return original(self)
        status = None
        try:
            resp = original(self)
            status = getattr(resp, 'status_code', None)
            return resp
        except BaseException:
            _tracer.error(span)
            raise
        finally:
            _tracer.finish(span, status)

    setattr(full_dispatch_request, _ATTR, original)
    full_dispatch_request.__name__ = 'full_dispatch_request'
    Flask.full_dispatch_request = full_dispatch_request
    _tracer.frameworks.add('flask')
