"""Wiring of the shared safety layer into a FastAPI app, the bind-address rule, and running under uvicorn.

Every EffiRAG server is built the same way::

    app = FastAPI(...)                       # routes read request.state.cancel via cancel_token(request)
    admission = install_safety(app, limits, token=token)
    check_bind(host, token, insecure)        # before loading anything heavy
    run_server(app, host, port, limits)      # SIGTERM: stop accepting, drain for limits.drain_s, cancel, exit
"""

from __future__ import annotations

import ipaddress
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from effirag.errors import ConfigError
from effirag.serve.errors import install_error_handlers
from effirag.serve.guard import Admission, Guard
from effirag.serve.limits import ServeLimits
from effirag.serve.transport import uvicorn_options

TOKEN_ENV = "EFFIRAG_TOKEN"


def new_app(title: str, token: str | None) -> FastAPI:
    """A FastAPI app whose interactive docs are off when a token guards it (a browser cannot send the token)."""
    if token:
        return FastAPI(title=title, docs_url=None, redoc_url=None, openapi_url=None)
    return FastAPI(title=title)


def install_safety(
    app: FastAPI, limits: ServeLimits, *, token: str | None = None, validation_status: int = 400
) -> Admission:
    """Put the :class:`~effirag.serve.guard.Guard` in front of ``app`` and route every error through the one
    format; returns the admission counter for ``/health``."""
    admission = Admission(limits.max_queue, limits.retry_after_s)
    app.add_middleware(Guard, limits=limits, admission=admission, token=token or None)
    install_error_handlers(app, validation_status=validation_status)
    return admission


def health_response(admission: Admission, **extra: Any) -> JSONResponse:
    """``{"status": "ok"}`` (plus ``extra``), or 503 ``overloaded`` with the load while the queue is full."""
    if admission.full:
        body = {"status": "overloaded", "in_flight": admission.in_flight, "max_queue": admission.limit}
        return JSONResponse(status_code=503, content=body, headers={"retry-after": str(admission.retry_after_s)})
    return JSONResponse(content={"status": "ok", **extra})


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None, insecure: bool) -> None:
    """Refuse to expose a server without a token on a non-loopback address unless ``insecure`` says so on purpose."""
    if is_loopback(host) or token or insecure:
        return
    raise ConfigError(
        "serve",
        "host",
        host,
        f"is not a loopback address and no token is set: anyone who reaches it could use the server. Give --token "
        f"TOKEN (or set {TOKEN_ENV}), bind 127.0.0.1, or pass --insecure to serve without auth on purpose",
    )


def run_server(app: Any, host: str, port: int, limits: ServeLimits, *, log_level: str = "warning") -> None:
    """Serve ``app`` with uvicorn until SIGINT / SIGTERM; running requests get ``limits.drain_s`` to finish, then
    are cancelled (their workers stop at the next unit of work) and the process exits."""
    import uvicorn

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        timeout_graceful_shutdown=max(1, round(limits.drain_s)) if limits.drain_s > 0 else 0,
        **uvicorn_options(limits),  # header / keep-alive timeouts (effirag.serve.transport)
    )
    uvicorn.Server(config).run()
