"""Apps wrapped BY HAND in skyprof's middlewares (docs/python.md, "By hand"), run by the
one-segment test under `python -m skyprof run`, which also instruments their framework
automatically: each request must still make exactly one segment.
- `asgi_fastapi`: the FastAPI app of fastapi_app.py in SkyprofASGIMiddleware (uvicorn; the
  Starlette plugin patches the app's ExceptionMiddleware);
- `wsgi_flask`: the Flask app of flask_app.py with its wsgi_app in SkyprofWSGIMiddleware
  (Flask's own recommended way to wrap; the Flask plugin patches full_dispatch_request), on
  Flask's dev server when run as a script with WRAPPED=flask;
- `wsgi_django`: Django's WSGI application in SkyprofWSGIMiddleware (gunicorn);
- `plain_wsgi`: a plain WSGI app in SkyprofWSGIMiddleware, served by werkzeug's dev server
  (whose run_wsgi is instrumented automatically) when run as a script."""
import os

from skyprof.instrument import SkyprofASGIMiddleware, SkyprofWSGIMiddleware

import work

which = os.environ.get('WRAPPED', '')

if which == 'fastapi':
    import fastapi_app as _fastapi_mod
    asgi_fastapi = SkyprofASGIMiddleware(_fastapi_mod.app)

if which == 'flask':
    import flask_app as _flask_mod
    wsgi_flask = _flask_mod.app
    wsgi_flask.wsgi_app = SkyprofWSGIMiddleware(wsgi_flask.wsgi_app)

if which == 'django':
    os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'djproj.settings')
    from django.core.wsgi import get_wsgi_application
    wsgi_django = SkyprofWSGIMiddleware(get_wsgi_application())


def _plain(environ, start_response):
    body = work.slow().encode()
    start_response('200 OK', [('Content-Type', 'text/plain'),
                              ('Content-Length', str(len(body)))])
    return [body]


plain_wsgi = SkyprofWSGIMiddleware(_plain)

if __name__ == '__main__':
    if which == 'flask':
        wsgi_flask.run(host='127.0.0.1', port=int(os.environ['APP_PORT']))
    else:
        from werkzeug.serving import run_simple
        run_simple('127.0.0.1', int(os.environ['APP_PORT']), plain_wsgi)
