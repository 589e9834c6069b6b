"""The ASGI guard in front of every EffiRAG server: auth, body cap, text checks, admission, deadline, cancellation.

Order for one request: a bearer token (when the server has one; ``/health`` stays open for probes), then, for work
routes (every method but GET / HEAD / OPTIONS), the body, read up to ``max_body_bytes`` (413 beyond) within
``body_timeout_s`` (408 past it) while holding one of ``max_uploads`` upload places, checked to be UTF-8 without
lone-surrogate escapes (400 naming the field); only then admission against ``max_queue`` (503 + ``Retry-After`` when
full), so a slow or stalled upload never holds a slot that a complete request could use; then the route under a
deadline (504). Each admitted request gets a :class:`CancelToken` in ``request.state.cancel``: it fires when the
client disconnects, the deadline passes or the server shuts down, and the route's worker checks it between units of
work (tokens, batches) so no work outlives its requester. A request still running when the server's drain time ends
is answered 503 (OpenAI-shaped JSON, ``Connection: close``) by the guard itself.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from starlette.requests import Request

from effirag.data.io import decode_utf8, format_path, has_surrogate_escape, lone_surrogate
from effirag.errors import DataError
from effirag.serve.errors import error_body
from effirag.serve.limits import ServeLimits

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_READS = frozenset({"GET", "HEAD", "OPTIONS"})


class CancelToken:
    """Set once, from any thread, with the reason; workers poll :attr:`cancelled` between units of work."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""

    def cancel(self, reason: str) -> None:
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        return self._event.wait(timeout)


class Admission:
    """How many work requests are admitted now, against the bound; read by ``/health``."""

    def __init__(self, limit: int, retry_after_s: int = 1) -> None:
        self.limit, self.retry_after_s = limit, retry_after_s
        self.in_flight = 0
        self.refused = 0

    @property
    def full(self) -> bool:
        return self.in_flight >= self.limit


def cancel_token(request: Request) -> CancelToken:
    """The request's cancel token (a fresh, never-fired one when the route is not behind the guard)."""
    token = getattr(request.state, "cancel", None)
    return token if isinstance(token, CancelToken) else CancelToken()


class Guard:
    """Pure ASGI middleware: ``app.add_middleware(Guard, limits=..., token=..., admission=...)``."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        limits: ServeLimits,
        admission: Admission,
        token: str | None = None,
        open_paths: frozenset[str] = frozenset({"/health"}),
    ) -> None:
        self.app, self.limits, self.admission, self.open_paths = app, limits, admission, open_paths
        self.uploads = 0  # requests whose body is being received now
        self._token = token.encode("utf-8") if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._token is not None and scope["path"] not in self.open_paths and not self._authorised(scope):
            await _send_error(
                send,
                401,
                "missing or wrong bearer token (Authorization: Bearer TOKEN)",
                None,
                {"www-authenticate": "Bearer"},
            )
            return
        if scope["method"] in _READS:
            await self.app(scope, receive, send)
            return
        body = await self._receive_body(scope, receive, send)
        if body is None:  # answered already, or the client went away while sending
            return
        if self.admission.full:
            self.admission.refused += 1
            msg = f"server busy: {self.admission.in_flight} requests admitted (max_queue={self.admission.limit})"
            await _send_error(send, 503, msg, None, {"retry-after": str(self.admission.retry_after_s)})
            return
        self.admission.in_flight += 1
        try:
            await self._admitted(scope, body, receive, send)
        finally:
            self.admission.in_flight -= 1

    def _authorised(self, scope: Scope) -> bool:
        assert self._token is not None
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, got = bytes(value).partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(got.strip(), self._token)
        return False

    async def _receive_body(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """The request body, read within ``body_timeout_s`` (408 past it), or None once an answer has been sent.
        Uploads hold no admission slot, only one of ``max_uploads`` (each buffers at most ``max_body_bytes``)."""
        limit = self.limits.max_uploads
        if self.uploads >= limit:
            msg = f"server busy: {self.uploads} requests are sending their body (max_uploads={limit})"
            await _send_error(send, 503, msg, None, {"retry-after": str(self.admission.retry_after_s)})
            return None
        self.uploads += 1
        try:
            body = await asyncio.wait_for(
                _read_body(scope, receive, self.limits),
                self.limits.body_timeout_s,
            )
        except TimeoutError:
            late = f"request body not received within the deadline of body_timeout_s={self.limits.body_timeout_s:g} s"
            body = 408, late, None
        except asyncio.CancelledError:  # server shutdown while the body was arriving
            _uncancel()
            body = 503, "server shutting down", None
        finally:
            self.uploads -= 1
        if isinstance(body, tuple):  # the rest of the body stays unread: the connection cannot carry another request
            await _send_error(send, *body, {"connection": "close"})
            return None
        return body

    async def _admitted(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
        token = CancelToken()
        scope.setdefault("state", {})["cancel"] = token
        gone = asyncio.Event()
        held: bytes | None = body
        answered = False  # the guard has answered for the route (504, 503): whatever the route still says is dropped

        async def replay() -> Message:  # the route reads the body we already hold, then waits for a disconnect
            nonlocal held
            if held is not None:
                chunk, held = held, None
                return {"type": "http.request", "body": chunk, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        started = False

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if answered:
                return
            started = True
            await send(message)

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            token.cancel("client disconnected")
            gone.set()

        watcher = asyncio.ensure_future(watch())
        task = asyncio.ensure_future(self.app(scope, replay, guarded_send))
        try:
            done, _ = await asyncio.wait({task}, timeout=self.limits.request_timeout_s)
            if not done:
                token.cancel("deadline")
                if not started:
                    answered = True
                    msg = f"request cancelled at its deadline of {self.limits.request_timeout_s:g} s"
                    await _send_error(send, 504, msg, None, {})
            await task  # the slot stays taken until the route's work has really stopped
        except asyncio.CancelledError:
            # Server shutdown past its drain time (uvicorn cancels the request): stop the work and, unless the route
            # has begun its answer, answer 503 in the one error format instead of uvicorn's plain-text 500.
            _uncancel()
            token.cancel("server shutting down")
            task.cancel()
            if not started:
                answered = True
                msg = "server shutting down: the request was cancelled before it finished"
                await _send_error(send, 503, msg, None, {"connection": "close"})
        finally:
            watcher.cancel()


def _uncancel() -> None:
    """Withdraw the cancellation just caught: the request task ends normally after its answer is sent."""
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


async def _read_body(scope: Scope, receive: Receive, limits: ServeLimits) -> bytes | tuple[int, str, str | None] | None:
    """The whole body, or ``(status, message, param)`` for an answer to send, or None if the client left.

    A body over ``limits.max_body_bytes`` is answered 413; up to ``limits.max_drain_bytes`` of it are first read and
    dropped, because a client that is still sending (most send the whole body before they read) gets a reset
    connection, not the answer, when the server closes on unread data."""
    cap, drain = limits.max_body_bytes, limits.max_drain_bytes
    for name, value in scope.get("headers", ()):
        if name == b"content-length" and value.isdigit() and int(value) > cap:
            if int(value) <= drain:
                await _discard(receive, 0, drain)
            return 413, f"request body of {int(value)} bytes exceeds max_body_bytes={cap}", None
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            if message.get("more_body", False):
                await _discard(receive, size, drain)
            return 413, f"request body exceeds max_body_bytes={cap}", None
        parts.append(chunk)
        if not message.get("more_body", False):
            break
    body = b"".join(parts)
    problem = _text_problem(body)
    return problem if problem is not None else body


async def _discard(receive: Receive, size: int, drain: int) -> None:
    """Read and drop the rest of a body until it ends, the client leaves, or ``drain`` bytes have been seen."""
    while size <= drain:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


def _text_problem(body: bytes) -> tuple[int, str, str | None] | None:
    """400 for a body that is not UTF-8 or whose JSON holds a lone surrogate (never valid text for any route)."""
    try:
        text = decode_utf8(body, path=Path("request body"))
    except DataError as e:
        return 400, f"request body: {e.why}", None
    if not has_surrogate_escape(text):
        return None
    try:
        hit = lone_surrogate(json.loads(text))
    except (json.JSONDecodeError, RecursionError):
        return None  # the route's own JSON parsing answers this (bad or too deeply nested JSON), in the same format
    if hit is None:
        return None
    field = format_path(hit[0]) or "body"
    return 400, f"{field}: lone UTF-16 surrogate in {_short(hit[1])} (not valid Unicode text)", field


def _short(text: str, limit: int = 40) -> str:
    r = ascii(text)
    return r if len(r) <= limit else r[: limit - 3] + "..."


async def _send_error(send: Send, status: int, message: str, param: str | None, headers: dict[str, str]) -> None:
    payload = json.dumps(error_body(status, message, param)).encode("utf-8")
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})
