"""An unmodified Flask app (no skyprof import): run by the test under `python -m skyprof run`
with the dev server, `flask --debug run` and gunicorn."""
import os

from flask import Flask

import work

app = Flask(__name__)


@app.route('/slow')
def slow():
    return work.slow()


@app.route('/hello')
def hello():
    return 'hello'


if __name__ == '__main__':
    app.run(host='127.0.0.1', port=int(os.environ.get('APP_PORT', '5000')))
