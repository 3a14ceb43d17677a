"""Plain WSGI/ASGI apps under gunicorn and uvicorn: the loaded app is wrapped in our middleware
(``auto`` mode: a framework plugin, when installed, names the request instead). And the points
where a process turns into a supervisor that serves no request itself (werkzeug's and Django's
reloader parents): the agent is stopped there (see skyprof._roles)."""
from .. import _tracer
from .wsgi import SkyprofWSGIMiddleware
from .asgi import SkyprofASGIMiddleware

_ATTR = '_skyprof_original'


def install_gunicorn(base_module):
    Worker = base_module.Worker
    if getattr(Worker.load_wsgi, _ATTR, None) is not None:
        return
    original = Worker.load_wsgi

    def load_wsgi(self):
        original(self)
        try:
            if not isinstance(self.wsgi, SkyprofWSGIMiddleware):
                self.wsgi = SkyprofWSGIMiddleware(self.wsgi, auto=True)
        except Exception as e:
            _tracer._disable('gunicorn instrumentation', e)

    setattr(load_wsgi, _ATTR, original)
    Worker.load_wsgi = load_wsgi


def install_uvicorn(config_module):
    Config = config_module.Config
    if getattr(Config.load, _ATTR, None) is not None:
        return
    original = Config.load

    def load(self):
        original(self)
        try:
            if getattr(self, 'loaded_app', None) is not None and \
                    not isinstance(self.loaded_app, SkyprofASGIMiddleware):
                self.loaded_app = SkyprofASGIMiddleware(self.loaded_app, auto=True)
        except Exception as e:
            _tracer._disable('uvicorn instrumentation', e)

    setattr(load, _ATTR, original)
    Config.load = load


def _becomes_supervisor(what):
    from .. import _roles
    _roles.became_supervisor(what)


def install_werkzeug_reloader(reloader_module):
    original = getattr(reloader_module, 'run_with_reloader', None)
    if original is None or getattr(original, _ATTR, None) is not None:
        return

    def run_with_reloader(*args, **kwargs):
        import os
        if os.environ.get('WERKZEUG_RUN_MAIN') != 'true':
            _becomes_supervisor('werkzeug reloader')
        return original(*args, **kwargs)

    setattr(run_with_reloader, _ATTR, original)
    reloader_module.run_with_reloader = run_with_reloader


def install_django_reloader(autoreload_module):
    original = getattr(autoreload_module, 'restart_with_reloader', None)
    if original is None or getattr(original, _ATTR, None) is not None:
        return

    def restart_with_reloader(*args, **kwargs):
        _becomes_supervisor('django autoreloader')
        return original(*args, **kwargs)

    setattr(restart_with_reloader, _ATTR, original)
    autoreload_module.restart_with_reloader = restart_with_reloader
