"""The baseline server: a bare FastAPI app with one `/healthz`, on the same uvicorn installation and
with the same server options as `nachtwacht control serve` (`control_plane.server.uvicorn_options`),
so a ratio against it measures what the control plane's stack adds, not a different server.

    python bench/bare_app.py PORT [WORKERS]
"""

from __future__ import annotations

import sys

import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel

from control_plane.server import uvicorn_options


class Health(BaseModel):
    status: str


app = FastAPI()


@app.get("/healthz", response_model=Health)
async def healthz() -> Health:
    return Health(status="ok")


def main() -> None:
    port = int(sys.argv[1])
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    uvicorn.run(
        "bench.bare_app:app",
        host="127.0.0.1",
        port=port,
        workers=workers,
        **uvicorn_options("warning"),
    )


if __name__ == "__main__":
    main()
