"""Framework instrumentation: http.server (patched at agent start), WSGI and ASGI middlewares."""
from .wsgi import SkyprofWSGIMiddleware  # noqa: F401
from .asgi import SkyprofASGIMiddleware  # noqa: F401
