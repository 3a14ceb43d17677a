"""An unmodified Flask app (no skyprof import): run by the test under `python -m skyprof run`
with the dev server, `flask --debug run` and gunicorn."""
import os

from flask import Flask, request

import work

app = Flask(__name__)


@app.route('/slow')
def slow():
    return work.slow()


@app.route('/hello')
def hello():
    # echoes the sw8 header it got, so the test sees the caller's trace continue
    return request.headers.get('sw8', '-')


@app.route('/call')
def call():
    """Calls /hello three times: requests, urllib3, urllib.request (http.client)."""
    import urllib.request

    import requests
    import urllib3
    base = 'http://%s/hello' % request.host
    got = [requests.get(base + '?via=requests', timeout=10).text,
           urllib3.PoolManager().request('GET', base + '?via=urllib3').data.decode(),
           urllib.request.urlopen(base + '?via=urllib', timeout=10).read().decode()]
    work.slow_a()
    return '\n'.join(got)


if __name__ == '__main__':
    app.run(host='127.0.0.1', port=int(os.environ.get('APP_PORT', '5000')))
