"""http.server instrumentation, as SkyWalking's Python plugin does it: every ``do_<METHOD>`` of a
BaseHTTPRequestHandler subclass runs inside an entry span named after the request path without
its query string (a POST to ``/?a=1`` is ``/``), with the incoming ``sw8`` header honoured and
http.method / url / status_code tags. Installed by ``agent.start()``; ``install()`` is idempotent."""
from http.server import BaseHTTPRequestHandler

from .. import _tracer

_LAYER_HTTP = 3
_ATTR = '_skyprof_wrapped'


def _wrap_do(handler, method_name):
    original = getattr(handler, method_name)

    def _skyprof_do():
        path = handler.path or '/'
        sw8 = None
        try:
            sw8 = handler.headers.get('sw8') if handler.headers is not None else None
        except Exception:
            sw8 = None
        span = _tracer.begin(path.split('?')[0], sw8, _tracer.COMPONENT_PYTHON, _LAYER_HTTP)
        if span is None:
            return original()
        try:
            host = handler.headers.get('Host') if handler.headers is not None else None
            url = 'http://%s%s' % (host, path) if host else path
            _tracer.tag(span, 'http.method', method_name[3:])
            _tracer.tag(span, 'url', url)
        except Exception:
            pass
        try:
            return original()
        except BaseException:
            _tracer.error(span)
            raise
        finally:
            status = getattr(handler, '_skyprof_status', None)
            if status is not None:
                _tracer.tag(span, 'http.status_code', status)
                if status >= 400:
                    _tracer.error(span)
            _tracer.end(span)

    _skyprof_do.__name__ = method_name
    setattr(handler, method_name, _skyprof_do)


def install():
    if getattr(BaseHTTPRequestHandler, _ATTR, False):
        return
    original_handle = BaseHTTPRequestHandler.handle
    original_send_response_only = BaseHTTPRequestHandler.send_response_only

    def handle(self):
        try:
            for name in dir(type(self)):
                if name.startswith('do_') and callable(getattr(self, name, None)):
                    _wrap_do(self, name)
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
