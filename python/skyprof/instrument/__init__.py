"""Framework instrumentation, applied automatically by ``agent.start()`` (and so by
``python -m skyprof run``) through a post-import hook: each plugin is installed when its module
is imported, before or after the agent starts. Each one can be switched off with
``SKYPROF_INSTRUMENT_<NAME>=0`` (``SKYPROF_INSTRUMENT=0``: all). See docs/python.md for the
table of what is instrumented and how endpoints are named."""
import os

from .wsgi import SkyprofWSGIMiddleware  # noqa: F401
from .asgi import SkyprofASGIMiddleware  # noqa: F401

# name (env suffix), module whose import triggers it, installer "module:function"
PLUGINS = (
    ('http_server', 'http.server', 'http_server:_install_module'),
    ('flask', 'flask', 'fw_flask:install'),
    ('django', 'django.core.handlers.base', 'fw_django:install'),
    ('starlette', 'starlette.middleware.exceptions', 'fw_starlette:install'),
    ('aiohttp', 'aiohttp.web_protocol', 'fw_aiohttp:install'),
    ('gunicorn', 'gunicorn.workers.base', 'servers:install_gunicorn'),
    ('uvicorn', 'uvicorn.config', 'servers:install_uvicorn'),
    ('werkzeug_reloader', 'werkzeug._reloader', 'servers:install_werkzeug_reloader'),
    ('django_reloader', 'django.utils.autoreload', 'servers:install_django_reloader'),
    ('threadpool_asyncio', 'asyncio.base_events', 'threadpool:install_asyncio'),
    ('threadpool_anyio', 'anyio.to_thread', 'threadpool:install_anyio'),
    ('http_client', 'http.client', 'clients:install_http_client'),
    ('urllib3', 'urllib3', 'clients:install_urllib3'),
    ('requests', 'requests', 'clients:install_requests'),
    ('aiohttp_client', 'aiohttp.client', 'clients:install_aiohttp_client'),
    ('httpx', 'httpx', 'clients:install_httpx'),
)

# Frameworks we see but do not instrument: one WARNING when the application imports them.
NOT_INSTRUMENTED = ('tornado', 'sanic', 'bottle', 'falcon', 'pyramid', 'quart', 'cherrypy')

installed = []
_state = {'hooked': False}


def enabled(name):
    def off(var):
        v = os.environ.get(var)
        return v is not None and v.strip().lower() in ('0', 'false', 'no', 'off')
    if off('SKYPROF_INSTRUMENT') or off('SKYPROF_INSTRUMENT_' + name.upper()):
        return False
    if name == 'http_server':
        from .. import config
        return bool(config.instrument_http_server)
    return True


def _installer(name, target):
    def run(module):
        from .._log import warn_once
        try:
            mod_name, fn = target.split(':')
            import importlib
            plugin = importlib.import_module('.' + mod_name, __name__)
            getattr(plugin, fn)(module)
            installed.append(name)
        except Exception as e:  # never into user code
            warn_once('instrument:' + name, 'skyprof: could not instrument %s (%r); its requests '
                      'are not traced' % (name, e))
    return run


def _not_instrumented(name):
    def run(_module):
        from .._log import warn_once
        warn_once('uninstrumented:' + name, 'skyprof: %s is imported but not instrumented: wrap '
                  'its requests with skyprof.entry(...) (see docs/python.md)' % name)
    return run


def install_all():
    """Hooks every enabled plugin (idempotent)."""
    if _state['hooked']:
        return
    _state['hooked'] = True
    from .._postimport import when_imported
    for name, module, target in PLUGINS:
        if enabled(name):
            when_imported(module, _installer(name, target))
    for name in NOT_INSTRUMENTED:
        when_imported(name, _not_instrumented(name))
