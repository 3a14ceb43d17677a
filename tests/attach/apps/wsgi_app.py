"""A minimal WSGI application for the gunicorn --subprocesses test."""


def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok\n"]
