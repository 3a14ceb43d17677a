"""Outgoing HTTP: an exit span and an ``sw8`` header for every call made inside a traced request,
so the trace continues in the called service. As SkyWalking's plugins: ``requests``
(Session.request, component Requests 7002) and ``urllib3`` (RequestMethods.request, Urllib3
7006) name the span after the URL path with peer ``host:port``; plain ``http.client``
(HTTPConnection.request .. getresponse; also what urllib.request uses) gets a General (7000) span;
the ``aiohttp`` client (ClientSession._request, AioHttp 7008) the same span as SkyWalking's aiohttp
plugin (named after the URL path, peer ``host:port``, tags http.method / http.url /
http.status_code), in the context of the asyncio request that makes the call, however requests
interleave on the loop; ``httpx`` (Client.send and AsyncClient.send, HTTPX 7019) likewise. Inside an asyncio request the blocking clients' spans go to that request's
segment too. One span per call: an inner library called by an outer one (requests -> urllib3 ->
http.client) adds none. Outside a traced request nothing is done beyond one check."""
from urllib.parse import urlsplit

from .. import _tracer

_ATTR = '_skyprof_original'


def _split(url):
    try:
        parts = urlsplit(url)
        return parts.path or '/', parts.netloc, parts._replace(query='', fragment='').geturl()
    except Exception:
        return '/', '', str(url)


def install_requests(requests_module):
    Session = requests_module.Session
    if getattr(Session.request, _ATTR, None) is not None:
        return
    original = Session.request

    def request(self, method, url, *args, **kwargs):
        path, netloc, clean = _split(url)
        span, sw8 = _tracer.exit_begin(path, netloc, _tracer.COMPONENT_REQUESTS, method, clean)
        if span is None:
            return original(self, method, url, *args, **kwargs)
        status = None
        try:
            if sw8:
                headers = kwargs.get('headers')
                headers = dict(headers) if headers else {}
                headers['sw8'] = sw8
                kwargs['headers'] = headers
            res = original(self, method, url, *args, **kwargs)
            status = getattr(res, 'status_code', None)
            return res
        except BaseException:
            _tracer.exit_end(span, status, failed=True)
            span = None
            raise
        finally:
            _tracer.exit_end(span, status)

    setattr(request, _ATTR, original)
    Session.request = request


def install_urllib3(urllib3_module):
    from urllib3.request import RequestMethods
    if getattr(RequestMethods.request, _ATTR, None) is not None:
        return
    original = RequestMethods.request

    def request(self, method, url, fields=None, headers=None, **urlopen_kw):
        path, netloc, clean = _split(url)
        if not netloc:  # a pool's relative URL
            host = getattr(self, 'host', None)
            if host:
                port = getattr(self, 'port', None)
                netloc = '%s:%s' % (host, port) if port else host
        span, sw8 = _tracer.exit_begin(path, netloc, _tracer.COMPONENT_URLLIB3, method, clean)
        if span is None:
            return original(self, method, url, fields=fields, headers=headers, **urlopen_kw)
        status = None
        try:
            if sw8:
                headers = dict(headers) if headers else {}
                headers['sw8'] = sw8
            res = original(self, method, url, fields=fields, headers=headers, **urlopen_kw)
            status = getattr(res, 'status', None)
            return res
        except BaseException:
            _tracer.exit_end(span, status, failed=True)
            span = None
            raise
        finally:
            _tracer.exit_end(span, status)

    setattr(request, _ATTR, original)
    RequestMethods.request = request


def install_http_client(client_module):
    HTTPConnection = client_module.HTTPConnection
    if getattr(HTTPConnection.request, _ATTR, None) is not None:
        return
    original_request = HTTPConnection.request
    original_getresponse = HTTPConnection.getresponse

    def request(self, method, url, body=None, headers={}, **kwargs):
        prev = getattr(self, '_skyprof_span', None)
        if prev is not None:  # previous call never read its response
            self._skyprof_span = None
            _tracer.exit_end(prev)
        path = str(url).split('?')[0] or '/'
        netloc = '%s:%s' % (self.host, self.port)
        scheme = 'https' if getattr(self, 'default_port', 80) == 443 else 'http'
        full = '%s://%s%s' % (scheme, netloc, path) if path.startswith('/') else str(url)
        span, sw8 = _tracer.exit_begin(path, netloc, _tracer.COMPONENT_PYTHON, method, full)
        if span is None:
            return original_request(self, method, url, body, headers, **kwargs)
        try:
            if sw8:
                headers = dict(headers) if headers else {}
                headers['sw8'] = sw8
            result = original_request(self, method, url, body, headers, **kwargs)
        except BaseException:
            _tracer.exit_end(span, failed=True)
            raise
        self._skyprof_span = span
        return result

    def getresponse(self):
        span = getattr(self, '_skyprof_span', None)
        if span is None:
            return original_getresponse(self)
        self._skyprof_span = None
        status = None
        try:
            resp = original_getresponse(self)
            status = getattr(resp, 'status', None)
            return resp
        except BaseException:
            _tracer.exit_end(span, failed=True)
            span = None
            raise
        finally:
            _tracer.exit_end(span, status)

    setattr(request, _ATTR, original_request)
    HTTPConnection.request = request
    HTTPConnection.getresponse = getresponse


def install_aiohttp_client(client_module):
    ClientSession = client_module.ClientSession
    if getattr(ClientSession._request, _ATTR, None) is not None:
        return
    original = ClientSession._request
    URL = client_module.URL  # yarl.URL, as aiohttp imports it
    from multidict import CIMultiDict  # an aiohttp dependency

    async def _request(self, method, str_or_url, *args, **kwargs):
        if not _tracer.enabled():
            return await original(self, method, str_or_url, *args, **kwargs)
        span = None
        try:
            url = URL(str_or_url)
            base = getattr(self, '_base_url', None)
            if base is not None and not url.is_absolute():
                url = base.join(url)
            url = url.with_user(None).with_password(None)
            port = url.port
            peer = '%s:%s' % (url.host or '', port) if port else (url.host or '')
            span, sw8 = _tracer.async_exit_begin(url.path or '/', peer,
                                                 _tracer.COMPONENT_AIOHTTP, method,
                                                 str(url.with_query(None).with_fragment(None)))
            if span is not None and sw8:
                # a copy: the caller's mapping is never changed (any form aiohttp accepts)
                headers = CIMultiDict(kwargs.get('headers') or ())
                headers['sw8'] = sw8
                kwargs['headers'] = headers
        except Exception as e:  # never into user code
            _tracer.exit_end(span)
            _tracer._disable('aiohttp client', e)
            return await original(self, method, str_or_url, *args, **kwargs)
        if span is None:
            return await original(self, method, str_or_url, *args, **kwargs)
        status = None
        try:
            res = await original(self, method, str_or_url, *args, **kwargs)
            status = getattr(res, 'status', None)
            return res
        except BaseException:
            _tracer.exit_end(span, status, failed=True)
            span = None
            raise
        finally:
            _tracer.exit_end(span, status)

    setattr(_request, _ATTR, original)
    ClientSession._request = _request


def _httpx_span(request, begin):
    """(span, sw8) for an httpx Request, the sw8 header set on it; (None, None) outside a
    traced request."""
    url = request.url
    port = url.port or {'http': 80, 'https': 443}.get(url.scheme)
    peer = '%s:%s' % (url.host, port) if port else url.host
    clean = url.copy_with(username=None, password=None, query=None, fragment=None)
    span, sw8 = begin(url.path or '/', peer, _tracer.COMPONENT_HTTPX, request.method, str(clean))
    if span is not None and sw8:
        request.headers['sw8'] = sw8
    return span, sw8


def install_httpx(httpx_module):
    from httpx import _client
    Client, AsyncClient = _client.Client, _client.AsyncClient
    if getattr(Client.send, _ATTR, None) is not None:
        return
    original_send = Client.send
    original_async_send = AsyncClient.send

    def send(self, request, *args, **kwargs):
        if not _tracer.enabled():
            return original_send(self, request, *args, **kwargs)
        try:
            span, _ = _httpx_span(request, _tracer.exit_begin)
        except Exception as e:  # never into user code
            _tracer._disable('httpx client', e)
            return original_send(self, request, *args, **kwargs)
        if span is None:
            return original_send(self, request, *args, **kwargs)
        status = None
        try:
            res = original_send(self, request, *args, **kwargs)
            status = getattr(res, 'status_code', None)
            return res
        except BaseException:
            _tracer.exit_end(span, status, failed=True)
            span = None
            raise
        finally:
            _tracer.exit_end(span, status)

    async def async_send(self, request, *args, **kwargs):
        if not _tracer.enabled():
            return await original_async_send(self, request, *args, **kwargs)
        try:
            span, _ = _httpx_span(request, _tracer.async_exit_begin)
        except Exception as e:  # never into user code
            _tracer._disable('httpx client', e)
            return await original_async_send(self, request, *args, **kwargs)
        if span is None:
            return await original_async_send(self, request, *args, **kwargs)
        status = None
        try:
            res = await original_async_send(self, request, *args, **kwargs)
            status = getattr(res, 'status_code', None)
            return res
        except BaseException:
            _tracer.exit_end(span, status, failed=True)
            span = None
            raise
        finally:
            _tracer.exit_end(span, status)

    setattr(send, _ATTR, original_send)
    setattr(async_send, _ATTR, original_async_send)
    Client.send = send
    AsyncClient.send = async_send
