"""WSGI middleware: ``app = SkyprofWSGIMiddleware(app)``. One entry span per request named
PATH_INFO (no query string), incoming ``sw8`` honoured, ended when the response iterable is
closed (PEP 3333 servers close it on the thread that called the app)."""
from .. import _tracer

_LAYER_HTTP = 3


class _ClosingIterable:
    __slots__ = ('_it', '_span', '_status')

    def __init__(self, it, span, status):
        self._it = it
        self._span = span
        self._status = status

    def __iter__(self):
        return iter(self._it)

    def close(self):
        try:
            close = getattr(self._it, 'close', None)
            if close is not None:
                close()
        finally:
            span, self._span = self._span, None
            if span is not None:
                code = self._status[0]
                if code is not None:
                    _tracer.tag(span, 'http.status_code', code)
                    if code >= 400:
                        _tracer.error(span)
                _tracer.end(span)


class SkyprofWSGIMiddleware:
    """``auto=True`` (set when gunicorn's app is wrapped automatically): the request is left to a
    framework plugin (Flask, Django) when one is installed, so it gets the framework's name."""

    def __init__(self, app, auto=False):
        self.app = app
        self.auto = auto

    def __call__(self, environ, start_response):
        if self.auto and _tracer.frameworks:
            return self.app(environ, start_response)
        path = environ.get('PATH_INFO') or '/'
        peer = None
        if environ.get('REMOTE_ADDR'):
            peer = '%s:%s' % (environ['REMOTE_ADDR'], environ.get('REMOTE_PORT') or '80')
        span = _tracer.begin(path, environ.get('HTTP_SW8'), _tracer.COMPONENT_WSGI, _LAYER_HTTP,
                             peer=peer)
        if span is None:
            return self.app(environ, start_response)
        method = environ.get('REQUEST_METHOD', '')
        _tracer.tag(span, 'http.method', method)
        host = environ.get('HTTP_HOST') or environ.get('SERVER_NAME', '')
        _tracer.tag(span, 'http.url', '%s://%s%s%s' % (environ.get('wsgi.url_scheme', 'http'), host,
                                                       environ.get('SCRIPT_NAME', ''), path))
        status = [None]

        def _start_response(st, headers, exc_info=None):
            try:
                status[0] = int(str(st).split(' ', 1)[0])
            except Exception:
                pass
            return start_response(st, headers, exc_info) if exc_info else start_response(st, headers)

        try:
            result = self.app(environ, _start_response)
        except BaseException:
            _tracer.error(span)
            _tracer.end(span)
            raise
        return _ClosingIterable(result, span, status)
