"""Limits every EffiRAG HTTP server enforces before its own code runs (body size, admission, timeouts, drain)."""

from __future__ import annotations

from dataclasses import dataclass

from effirag.config import check, option


@dataclass(frozen=True)
class ServeLimits:
    """Transport-level limits shared by the LLM server and the retrieval server.

    A request counts against ``max_queue`` from the moment its whole body has been received until its answer is
    sent, so the number bounds the work waiting in the server; one more is answered 503 with a ``Retry-After`` header
    instead of waiting without end behind a slow request. A client still sending its body holds no admission slot
    (slow or stalled uploads cannot lock out fast clients): it is bounded by ``body_timeout_s`` and by
    ``max_uploads``, and a client that has not finished its request line and headers by ``header_timeout_s``.
    """

    max_body_bytes: int = option(4 * 1024 * 1024, help="Largest request body accepted; a larger one is answered 413.")
    max_drain_bytes: int = option(
        64 * 1024 * 1024,
        help="A too-large body up to this size is read and dropped before its 413 is sent, so the client, still "
        "sending, reads the answer instead of a reset connection; a larger one is answered at once and cut off.",
    )
    max_queue: int = option(
        64, help="Requests admitted at once (running + waiting); one more is answered 503 with Retry-After."
    )
    retry_after_s: int = option(1, help="Seconds a 503 answer asks the client to wait (Retry-After header).")
    request_timeout_s: float = option(
        300.0, help="Deadline of one request; past it the work is cancelled and the client gets 504."
    )
    header_timeout_s: float = option(
        10.0,
        help="Time a connection has to send a whole request head (request line + headers), counted from its opening "
        "or from the end of its previous answer; past it the connection is closed.",
    )
    body_timeout_s: float = option(
        30.0, help="Time a request has to send its whole body once its headers are in; past it the answer is 408."
    )
    keep_alive_s: int = option(5, help="An idle keep-alive connection is closed after this many seconds.")
    max_uploads: int = option(
        1024, help="Requests receiving their body at once; one more is answered 503 (each holds <= max_body_bytes)."
    )
    drain_s: float = option(
        3.0, help="On SIGTERM, how long running requests may finish before they are cancelled and the server exits."
    )

    def __post_init__(self) -> None:
        check(self.max_body_bytes >= 1024, self, "max_body_bytes", "must be >= 1024")
        check(self.max_drain_bytes >= 0, self, "max_drain_bytes", "must be >= 0")
        check(self.max_queue >= 1, self, "max_queue", "must be >= 1")
        check(self.retry_after_s >= 1, self, "retry_after_s", "must be >= 1")
        check(self.request_timeout_s > 0, self, "request_timeout_s", "must be > 0")
        check(self.drain_s >= 0, self, "drain_s", "must be >= 0")
        for name in ("header_timeout_s", "body_timeout_s"):
            check(getattr(self, name) > 0, self, name, "must be > 0")
        check(self.keep_alive_s >= 1, self, "keep_alive_s", "must be >= 1 (uvicorn counts whole seconds)")
        check(self.max_uploads >= 1, self, "max_uploads", "must be >= 1")
