"""Slow and stalled clients on both real servers (uvicorn on 127.0.0.1, with the connection timeouts of
``effirag serve``): half-sent bodies hold no admission slot, so ``/health`` and a normal request still answer at once
while 256 (retrieval) or 64 (LLM) of them are open, and each gets 408 at ``body_timeout_s``; a connection that
trickles its request head, or opens and sends nothing, is closed at ``header_timeout_s``; an idle keep-alive
connection at ``keep_alive_s``. Every loop is bounded and every socket closed: the test stops by itself."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from effirag.llm.hf import HFGenerator
from effirag.retrieval.facade import load_retriever
from effirag.retrieval.index import IndexConfig, build_index
from effirag.serve import llm, retrieval
from effirag.serve.background import BackgroundServer
from effirag.serve.limits import ServeLimits
from effirag.serve.llm_schema import LLMServeLimits
from effirag.serve.retrieval_schema import RetrievalServeLimits
from effirag.types import Passage
from tiny_models import make_tiny_model

BODY_TIMEOUT_S = 4.0
HEADER_TIMEOUT_S = 2.5


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)), timeout=10)
    return s


def _half_sent(url: str, path: str) -> socket.socket:
    """A POST announcing 100 body bytes that sends 10 of them, then stalls."""
    s = _connect(url)
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    s.sendall(head.encode() + b'{"queries"')
    return s


def _read_until_closed(s: socket.socket, timeout: float) -> bytes:
    """Everything the server sends until it closes the connection (a TimeoutError if it does not in ``timeout``)."""
    s.settimeout(timeout)
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    return data


def _timed(call: httpx.Client, method: str, path: str, **kw: object) -> tuple[httpx.Response, float]:
    t0 = time.perf_counter()
    r = call.request(method, path, **kw)  # type: ignore[arg-type]
    return r, time.perf_counter() - t0


def _stalled_uploads_do_not_block(url: str, path: str, n: int, normal: dict[str, object]) -> None:
    with ExitStack() as stack:
        socks = [stack.enter_context(_half_sent(url, path)) for _ in range(n)]
        time.sleep(0.5)  # every head is in and every body stalled
        t_sent = time.monotonic()
        with httpx.Client(base_url=url, timeout=10) as c:
            health, t_health = _timed(c, "GET", "/health")
            done, t_done = _timed(c, "POST", path, json=normal)
        assert health.status_code == 200 and health.json()["status"] == "ok", health.text
        assert done.status_code == 200, done.text
        assert t_health < 1.0 and t_done < 1.0, (t_health, t_done)
        answers = [_read_until_closed(s, BODY_TIMEOUT_S + 5) for s in socks]  # bounded: the server closes each
        assert time.monotonic() - t_sent < BODY_TIMEOUT_S + 5
    assert all(a.startswith(b"HTTP/1.1 408") and b"body_timeout_s=4" in a for a in answers), answers[0]
    assert all(b"connection: close" in a.lower() for a in answers)


def _heads_and_idle_connections_time_out(url: str) -> None:
    with _connect(url) as idle, _connect(url) as trickle, _connect(url) as kept:
        t0 = time.monotonic()
        trickle.sendall(b"POST /health HTTP/1.1\r\nHost: x\r\n")  # the head never ends
        kept.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        answered = _read_until_closed(kept, 6)  # then idle: closed at keep_alive_s=1
        t_kept = time.monotonic() - t0
        for s in (idle, trickle):
            assert _read_until_closed(s, HEADER_TIMEOUT_S + 4) == b""
        t_head = time.monotonic() - t0
    assert answered.startswith(b"HTTP/1.1 200") and b'{"status":"ok"' in answered, answered
    assert 0.8 < t_kept < HEADER_TIMEOUT_S - 0.3, t_kept
    assert HEADER_TIMEOUT_S - 0.2 < t_head < HEADER_TIMEOUT_S + 4, t_head


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    passages = [Passage(f"p{i}", f"Title {i}", f"Passage {i} about the river and the city.") for i in range(50)]
    folder = tmp_path_factory.mktemp("slow-index")
    build_index(passages, folder, config=IndexConfig(dense=False), corpus_path="mem")
    return folder


def _http(default: ServeLimits) -> ServeLimits:
    """The server's default transport limits (admission queue included), with short timeouts for the test."""
    return ServeLimits(
        max_body_bytes=default.max_body_bytes,
        max_queue=default.max_queue,
        request_timeout_s=default.request_timeout_s,
        header_timeout_s=HEADER_TIMEOUT_S,
        body_timeout_s=BODY_TIMEOUT_S,
        keep_alive_s=1,
    )


@pytest.fixture(scope="module")
def retrieval_url(index_dir: Path) -> Iterator[str]:
    limits = RetrievalServeLimits()
    limits = RetrievalServeLimits(http=_http(limits.http))
    assert limits.http.max_queue == 256  # the default: 256 stalled uploads filled it before uploads held no slot
    app = retrieval.create_app(load_retriever(index_dir), limits=limits)
    with BackgroundServer(app, limits=limits.http) as srv:
        yield srv.url


@pytest.fixture(scope="module")
def llm_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    model = make_tiny_model(tmp_path_factory.mktemp("slow-llm"), arch="qwen2", seed=5)
    limits = LLMServeLimits(http=_http(LLMServeLimits().http))
    assert limits.http.max_queue == 64
    app = llm.create_app(HFGenerator(model, device="cpu").load(), "tiny", limits=limits)
    with BackgroundServer(app, limits=limits.http) as srv:
        yield srv.url


def test_256_stalled_uploads_leave_the_retrieval_server_answering(retrieval_url: str) -> None:
    _stalled_uploads_do_not_block(retrieval_url, "/retrieve", 256, {"queries": ["river city"], "topk": 2})


def test_64_stalled_uploads_leave_the_llm_server_answering(llm_url: str) -> None:
    normal = {"model": "tiny", "prompt": "The river", "max_tokens": 2, "temperature": 0}
    _stalled_uploads_do_not_block(llm_url, "/v1/completions", 64, normal)


@pytest.mark.parametrize("server", ["retrieval_url", "llm_url"])
def test_trickled_heads_and_idle_connections_are_closed(server: str, request: pytest.FixtureRequest) -> None:
    _heads_and_idle_connections_time_out(request.getfixturevalue(server))
