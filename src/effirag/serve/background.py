"""Run an ASGI app with uvicorn on a thread, on a free port of 127.0.0.1 (tests, notebooks, benchmarks)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from effirag.serve.limits import ServeLimits
from effirag.serve.transport import uvicorn_options


class BackgroundServer:
    """``with BackgroundServer(app) as srv: srv.url  # http://127.0.0.1:PORT``

    On exit, running requests get ``drain_s`` seconds before uvicorn cancels them (which fires their cancel tokens).
    Connection timeouts are ``limits``' (:func:`~effirag.serve.transport.uvicorn_options`; default: ServeLimits()),
    as under ``effirag serve``.
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", drain_s: int = 2, limits: ServeLimits | None = None) -> None:
        import uvicorn

        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))
        self.port = int(self._sock.getsockname()[1])
        self.url = f"http://{host}:{self.port}"
        config = uvicorn.Config(
            app,
            log_level="warning",
            lifespan="off",
            timeout_graceful_shutdown=drain_s,
            **uvicorn_options(limits or ServeLimits()),
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    def __enter__(self) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start on {self.url}")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()
