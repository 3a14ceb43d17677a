"""http.server instrumentation, as SkyWalking's Python plugin does it: every ``do_<METHOD>`` of a
BaseHTTPRequestHandler subclass runs inside an entry span named after the request path without
its query string (a POST to ``/?a=1`` is ``/``), with the incoming ``sw8`` header honoured, peer
``client_ip:port`` and http.method / http.url / http.status_code tags, component General (7000).
werkzeug's dev server handler (``WSGIRequestHandler.run_wsgi``) gets the same span - unless a
framework plugin (Flask, Django) names the request itself. Installed by ``agent.start()`` when
http.server is imported; ``install()`` is idempotent."""
from http.server import BaseHTTPRequestHandler

from .. import _tracer

_ATTR = '_skyprof_wrapped'


def _open(handler, method):
    path = handler.path or '/'
    headers = handler.headers
    sw8 = headers.get('sw8') if headers is not None else None
    host = headers.get('Host') if headers is not None else None
    try:
        ca = handler.client_address
        peer = '%s:%s' % (ca[0], ca[1])
    except Exception:
        peer = None
    span = _tracer.begin(path.split('?')[0], sw8, _tracer.COMPONENT_PYTHON, _tracer.LAYER_HTTP,
                         peer=peer)
    if span is not None:
        _tracer.tag(span, 'http.method', method)
        _tracer.tag(span, 'http.url', 'http://%s%s' % (host, path) if host else path)
    return span


def _close(handler, span):
    status = getattr(handler, '_skyprof_status', None)
    _tracer.finish(span, status)


def _wrap_call(handler, method_name, method):
    original = getattr(handler, method_name)

    def _skyprof_do():
        try:
            span = _open(handler, method if method else handler.command)
        except Exception as e:  # never into user code
            _tracer._disable('http.server instrumentation', e)
            span = None
        if span is None:
            return original()
        try:
            return original()
        except BaseException:
            _tracer.error(span)
            raise
        finally:
            _close(handler, span)

    _skyprof_do.__name__ = method_name
    setattr(handler, method_name, _skyprof_do)


def _is_werkzeug(handler):
    cls = type(handler)
    for klass in cls.__mro__:
        if klass.__name__ == 'WSGIRequestHandler' and klass.__module__ == 'werkzeug.serving':
            return True
    return False


def install():
    if getattr(BaseHTTPRequestHandler, _ATTR, False):
        return
    original_handle = BaseHTTPRequestHandler.handle
    original_send_response_only = BaseHTTPRequestHandler.send_response_only

    def handle(self):
        try:
            if _is_werkzeug(self):
                if not _tracer.frameworks:
                    _wrap_call(self, 'run_wsgi', None)
            else:
                for name in dir(type(self)):
                    if name.startswith('do_') and callable(getattr(self, name, None)):
                        _wrap_call(self, name, name[3:])
        except Exception as e:  # never into user code
            _tracer._disable('http.server instrumentation', e)
        return original_handle(self)

    def send_response_only(self, code, *args, **kwargs):
        try:
            self._skyprof_status = int(code)
        except Exception:
            pass
        return original_send_response_only(self, code, *args, **kwargs)

    BaseHTTPRequestHandler.handle = handle
    BaseHTTPRequestHandler.send_response_only = send_response_only
    setattr(BaseHTTPRequestHandler, _ATTR, (original_handle, original_send_response_only))


def uninstall():
    saved = getattr(BaseHTTPRequestHandler, _ATTR, False)
    if not saved:
        return
    BaseHTTPRequestHandler.handle, BaseHTTPRequestHandler.send_response_only = saved
    setattr(BaseHTTPRequestHandler, _ATTR, False)


def _install_module(_module):
    install()
