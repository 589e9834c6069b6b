"""Connection-level timeouts of every EffiRAG server: uvicorn's h11 protocol with a deadline on the request head.

uvicorn times out an idle keep-alive connection (``timeout_keep_alive``) but cancels that timer on the first byte
that arrives, and it has no deadline at all for a connection that opens and never sends a request, or trickles its
request line and headers a byte at a time: each such connection is held forever and never reaches the ASGI app, so
no middleware can see it. :func:`uvicorn_options` therefore serves with a subclass of uvicorn's h11 protocol that
gives every connection ``header_timeout_s`` to deliver a whole request head, counted from the moment it opens or
its previous answer was sent (data arriving does not extend it), and closes it otherwise. The body is the guard's
business (:mod:`effirag.serve.guard`: ``body_timeout_s``, 408), as is everything after it. h11 is chosen explicitly
(not ``auto``, which would take httptools when installed) so the same code, and the same timeouts, serve every
deployment.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from effirag.serve.limits import ServeLimits


class HeadTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request head is not complete within ``head_timeout_s``."""

    head_timeout_s = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # a whole request head has arrived
            self._cancel_head_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:  # waiting for the next request
            self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            # No request was read, so HTTP leaves nothing to answer: the connection is simply closed.
            self.conn.send(h11.ConnectionClosed())
            self.transport.close()


def uvicorn_options(limits: ServeLimits) -> dict[str, Any]:
    """Keyword arguments for ``uvicorn.Config`` that apply ``limits``' connection timeouts."""
    protocol = type("HeadTimeoutProtocol", (HeadTimeoutProtocol,), {"head_timeout_s": limits.header_timeout_s})
    return {"http": protocol, "timeout_keep_alive": limits.keep_alive_s}
