"""One error format for every EffiRAG server: OpenAI's ``{"error": {"message", "type", "param", "code"}}``.

Clients written for OpenAI-compatible servers (vLLM, SGLang, EffiRAG's own HTTP backend) read ``error.message``;
``param`` names the offending request field when there is one and ``code`` repeats the HTTP status. Every answer a
server gives for bad input goes through here, including FastAPI's own validation errors and Starlette's 404 / 405, so
no client ever sees a second format or a 500 for a malformed request. A body that is not JSON, or nested too deeply
to parse, is answered like any other invalid body (the server's validation status, ``param`` null: no field to name),
never with a byte offset as ``param``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BeforeValidator
from starlette.exceptions import HTTPException as StarletteHTTPException

from effirag.data.io import format_path

log = logging.getLogger(__name__)

_TYPES = {
    401: "authentication_error",
    404: "not_found_error",
    413: "request_too_large",
    503: "overloaded_error",
    504: "timeout_error",
}


def _not_bool(value: Any) -> Any:
    # pydantic's lax int takes JSON true / false as 1 / 0: a request saying `"topk": true` is a mistake, not a count
    if isinstance(value, bool):
        raise ValueError("must be an integer, not a boolean")
    return value


# An integer request field that refuses JSON booleans (and takes everything else pydantic's int does).
JSONInt = Annotated[int, BeforeValidator(_not_bool)]


class APIError(Exception):
    """An error answer: HTTP ``status``, a message, and the request field it concerns (``param``)."""

    def __init__(self, status: int, message: str, *, param: str | None = None, headers: Mapping[str, str] = {}) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.headers = status, message, param, dict(headers)


def error_type(status: int) -> str:
    """OpenAI's ``error.type`` for an HTTP status."""
    if status in _TYPES:
        return _TYPES[status]
    return "invalid_request_error" if status < 500 else "server_error"


def error_body(status: int, message: str, param: str | None = None) -> dict[str, object]:
    return {"error": {"message": message, "type": error_type(status), "param": param, "code": status}}


def error_response(
    status: int, message: str, param: str | None = None, headers: Mapping[str, str] = {}
) -> JSONResponse:
    return JSONResponse(status_code=status, content=error_body(status, message, param), headers=dict(headers))


def install_error_handlers(app: FastAPI, *, validation_status: int = 400) -> None:
    """Answer APIError, request-validation errors (with ``validation_status``), Starlette's HTTP errors and any
    unexpected exception (500, logged with its traceback) in the one error format."""

    @app.exception_handler(APIError)
    async def _api_error(_: Request, e: APIError) -> JSONResponse:
        return error_response(e.status, e.message, e.param, e.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, e: RequestValidationError) -> JSONResponse:
        message, param = validation_message(e.errors())
        return error_response(validation_status, message, param)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, e: StarletteHTTPException) -> JSONResponse:
        cause = e.__cause__
        if e.status_code == 400 and cause is not None and not isinstance(cause, StarletteHTTPException):
            # FastAPI's body parsing failed other than by a JSONDecodeError (RecursionError: nested too deeply)
            why = "JSON nested too deeply to parse" if isinstance(cause, RecursionError) else "could not be parsed"
            return error_response(validation_status, f"body: {why}")
        return error_response(e.status_code, str(e.detail), None, e.headers or {})

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, e: Exception) -> JSONResponse:
        log.error("%s %s failed", request.method, request.url.path, exc_info=e)
        return error_response(500, f"internal error: {type(e).__name__}")


def validation_message(errors: Any) -> tuple[str, str | None]:
    """``(message, param)`` for pydantic / FastAPI validation errors: every error as ``field: reason``, ``param`` the
    first one's field. A body that is not JSON names the position in the message only (it is not a field)."""
    parts: list[str] = []
    params: list[str | None] = []
    for err in errors:
        if err.get("type") == "json_invalid":
            where = [x for x in err.get("loc", ()) if isinstance(x, int)]
            at = f" at character {where[0]}" if where else ""
            reason = (err.get("ctx") or {}).get("error", err.get("msg", "invalid"))
            parts.append(f"body: invalid JSON{at}: {reason}")
            params.append(None)
            continue
        field = format_path(x for x in err.get("loc", ()) if x != "body")  # queries[1]: as the routes' own checks
        parts.append(f"{field or 'body'}: {err.get('msg', 'invalid')}")
        params.append(field or None)
    return "; ".join(parts) or "body: invalid", params[0] if params else None
