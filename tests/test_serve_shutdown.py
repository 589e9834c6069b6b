"""SIGTERM with a request in flight, on both real servers run as their own processes (``effirag serve`` and
``effirag serve retrieval`` on 127.0.0.1): once the drain time has passed, the request still running is answered
503 with an OpenAI-shaped JSON error (not uvicorn's plain-text 500), and the process exits. A request that gives up
while its retrieval batch runs (shutdown, deadline) leaves the batch's worker thread alive."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

from effirag.retrieval.index import IndexConfig, build_index
from effirag.types import Passage
from tiny_models import make_tiny_model

SRC = Path(__file__).resolve().parents[1] / "src"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(args: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    """``effirag ARGS --port P`` as a process, once its /health answers (at most 240 s: a loaded CI machine)."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    cmd = [sys.executable, "-c", "from effirag.cli.main import app; app()", *args, "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 240
    while True:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline, f"{args[:2]} did not start"
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.2)


def _send(url: str, path: str, body: dict[str, object]) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)))
    data = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    s.sendall(head.encode() + data)
    return s


def _response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """(status, lower-cased headers, body) of one HTTP/1.1 answer on ``sock``, read until the server closes it."""
    sock.settimeout(15)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict((k.strip().lower(), v.strip()) for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln))
    return int(lines[0].split()[1]), headers, body


def _sigterm_in_flight(proc: subprocess.Popen[bytes], sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    time.sleep(1.0)  # the request is admitted and working (or waiting for its batch)
    assert proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    try:
        answer = _response(sock)
        proc.wait(timeout=10)
    finally:
        sock.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return answer


def _assert_503_json(answer: tuple[int, dict[str, str], bytes]) -> None:
    status, headers, body = answer
    assert status == 503, (status, headers, body)
    assert headers["content-type"] == "application/json", headers
    err = json.loads(body)["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["code"] == 503, err
    assert err["type"] == "overloaded_error" and "shutting down" in err["message"], err


@pytest.mark.slow
def test_sigterm_answers_the_running_generation_503_json(tmp_path: Path) -> None:
    model = make_tiny_model(tmp_path / "model", arch="qwen2", seed=4, max_positions=16384)
    proc, url = _start(
        ["serve", "--model", str(model), "--model-name", "tiny", "--device", "cpu", "--set", "http.drain_s=0.5"]
    )
    # greedy: this random model's greedy path never reaches its end-of-text token, so the request is still generating
    # when the signal comes (sampled, it drew end-of-text after about 400 tokens, which the KV cache makes quick)
    body = {"model": "tiny", "prompt": "The river", "max_tokens": 16000, "temperature": 0.0}
    sock = _send(url, "/v1/completions", body)
    _assert_503_json(_sigterm_in_flight(proc, sock))
    assert proc.returncode in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it handled once it is done


@pytest.mark.slow
def test_sigterm_answers_the_waiting_retrieval_503_json(tmp_path: Path) -> None:
    passages = [Passage(f"p{i}", f"Title {i}", f"Passage {i} about the river and the city.") for i in range(20)]
    index = tmp_path / "index"
    build_index(passages, index, config=IndexConfig(dense=False), corpus_path="mem")
    # The batcher waits up to a minute for company before searching: the request is in flight, costing no CPU.
    settings = ["--set", "max_wait_ms=60000", "--set", "workers=1", "--set", "http.drain_s=0.5"]
    proc, url = _start(["serve", "retrieval", "--index", str(index), *settings])
    sock = _send(url, "/retrieve", {"queries": ["river city"], "topk": 2})
    _assert_503_json(_sigterm_in_flight(proc, sock))
    assert proc.returncode in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it handled once it is done


def test_a_request_giving_up_mid_batch_leaves_the_retrieval_worker_alive() -> None:
    """Shutdown and deadlines cancel the request's future while its batch runs; the worker must survive that."""
    import threading

    from effirag.retrieval.base import RetrievalResult
    from effirag.serve.guard import CancelToken
    from effirag.serve.retrieval_batch import QueryBatcher

    started, gate = threading.Event(), threading.Event()

    def search(queries: Sequence[str], mode: str, k: int, offset: int, entities: object) -> list[RetrievalResult]:
        started.set()
        gate.wait(10)
        return [RetrievalResult(items=[]) for _ in queries]

    batcher = QueryBatcher(search, max_wait_ms=0.0, workers=1)
    first = batcher.submit(["a"], "sparse", 1, 0, None, CancelToken())
    assert started.wait(10)
    first.cancel()  # what asyncio.wrap_future does when the request's task is cancelled
    gate.set()
    second = batcher.submit(["b"], "sparse", 1, 0, None, CancelToken())
    assert len(second.result(timeout=10)) == 1  # the one worker is still there
