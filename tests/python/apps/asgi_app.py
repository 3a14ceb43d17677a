"""ASGI test app served by a tiny hand-written HTTP/1.1 server on asyncio (no PyPI), wrapped in
SkyprofASGIMiddleware."""
import asyncio
import sys
import time

from skyprof import agent
from skyprof.instrument import SkyprofASGIMiddleware


def asgi_blocking_part():
    time.sleep(0.3)  # blocks the loop thread: what the sampler sees


async def app(scope, receive, send):
    assert scope['type'] == 'http'
    while True:
        msg = await receive()
        if not msg.get('more_body'):
            break
    await asyncio.sleep(0.01)
    asgi_blocking_part()
    await send({'type': 'http.response.start', 'status': 200,
                'headers': [(b'content-type', b'text/plain')]})
    await send({'type': 'http.response.body', 'body': b'asgi ok'})


async def handle(reader, writer, asgi):
    try:
        head = await reader.readuntil(b'\r\n\r\n')
        lines = head.decode('latin-1').split('\r\n')
        method, target, _ = lines[0].split(' ', 2)
        headers = []
        length = 0
        for line in lines[1:]:
            if ':' in line:
                k, v = line.split(':', 1)
                headers.append((k.strip().lower().encode('latin-1'), v.strip().encode('latin-1')))
                if k.strip().lower() == 'content-length':
                    length = int(v.strip())
        body = await reader.readexactly(length) if length else b''
        path, _, query = target.partition('?')
        scope = {'type': 'http', 'asgi': {'version': '3.0'}, 'http_version': '1.1',
                 'method': method, 'scheme': 'http', 'path': path,
                 'raw_path': path.encode(), 'query_string': query.encode(), 'headers': headers,
                 'client': writer.get_extra_info('peername'), 'server': None}
        sent = {'body': False}

        async def receive():
            if sent['body']:
                await asyncio.sleep(3600)
            sent['body'] = True
            return {'type': 'http.request', 'body': body, 'more_body': False}

        out = []

        async def send(message):
            out.append(message)

        await asgi(scope, receive, send)
        status = next(m['status'] for m in out if m['type'] == 'http.response.start')
        payload = b''.join(m.get('body', b'') for m in out if m['type'] == 'http.response.body')
        writer.write(b'HTTP/1.1 %d OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n'
                     % (status, len(payload)) + payload)
        await writer.drain()
    finally:
        writer.close()


async def main(port):
    asgi = SkyprofASGIMiddleware(app)
    server = await asyncio.start_server(lambda r, w: handle(r, w, asgi), '127.0.0.1', port)
    print('listening on 127.0.0.1:%d' % server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == '__main__':
    agent.start()
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 0))
