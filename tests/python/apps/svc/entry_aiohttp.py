"""An aiohttp app (its server instrumented automatically under `python -m skyprof run`) whose
handler ALSO opens the request's entry span by hand with `skyprof.entry` (docs/python.md,
"Manual"): the request must make one segment, the aiohttp one."""
import os

import skyprof
from aiohttp import web

import work


async def slow(request):
    with skyprof.entry(request.path, sw8=request.headers.get('sw8')):
        body = work.slow()
    return web.Response(text=body)


if __name__ == '__main__':
    app = web.Application()
    app.router.add_get('/slow', slow)
    web.run_app(app, host='127.0.0.1', port=int(os.environ['APP_PORT']), print=None)
