"""An unmodified FastAPI app (no skyprof import), served by uvicorn --workers 2 in the test."""
from fastapi import FastAPI

import work

app = FastAPI()


@app.get('/slow')
async def slow():
    return {'result': work.slow()}
