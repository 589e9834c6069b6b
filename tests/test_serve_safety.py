"""The shared safety layer on the real LLM server (uvicorn on 127.0.0.1, tiny random-init models): every bad request
gets its 4xx in OpenAI's error shape within a second, a 5 MB prompt is refused after tokenising no more than the
context can hold, admission is bounded (503 + Retry-After, /health overloaded), a disconnected or late request stops
generating, and the bearer token guards everything but /health."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from effirag.errors import ConfigError
from effirag.llm.base import Completion, GenerationConfig
from effirag.llm.hf import GenerationCancelled, HFGenerator
from effirag.llm.openai_http import OpenAIGenerator
from effirag.serve.background import BackgroundServer
from effirag.serve.limits import ServeLimits
from effirag.serve.llm import create_app
from effirag.serve.llm_budget import longest_token_chars
from effirag.serve.llm_schema import LLMServeLimits
from effirag.serve.safety import check_bind, is_loopback
from tiny_models import make_tiny_model

CONTEXT = 2048  # make_tiny_model's max_positions
LONG = {"model": "tiny", "prompt": "The river", "max_tokens": 16000, "temperature": 0}  # ≈ 30 s+ unless cancelled


class CountingTokenizer:
    """The real tokenizer, recording the length of every text it is asked to encode."""

    def __init__(self, tok: Any) -> None:
        self._tok = tok
        self.encoded: list[int] = []

    def encode(self, text: str, *args: Any, **kw: Any) -> Any:
        self.encoded.append(len(text))
        return self._tok.encode(text, *args, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tok, name)


class RecordingGenerator(HFGenerator):
    """A real HFGenerator that counts the generate calls that ended cancelled."""

    cancelled = 0

    def generate(self, prompts: Sequence[str], config: GenerationConfig, **kw: Any) -> list[list[Completion]]:
        try:
            return super().generate(prompts, config, **kw)
        except GenerationCancelled:
            type(self).cancelled += 1
            raise


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("safe"), arch="qwen2", seed=3, max_positions=CONTEXT)


@pytest.fixture(scope="module")
def long_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("safe-long"), arch="qwen2", seed=4, max_positions=16384)


@pytest.fixture(scope="module")
def counting(model_dir: Path) -> tuple[HFGenerator, CountingTokenizer]:
    base = HFGenerator(model_dir, device="cpu").load()
    tok = CountingTokenizer(base.tokenizer)
    return HFGenerator.from_loaded(base.model, tok), tok


@pytest.fixture(scope="module")
def client(counting: tuple[HFGenerator, CountingTokenizer]) -> Iterator[httpx.Client]:
    limits = LLMServeLimits(http=ServeLimits(max_body_bytes=8 * 1024 * 1024), max_n=4, max_prompts=8, max_rows=8)
    app = create_app(counting[0], "tiny", default_max_tokens=4, limits=limits)
    with BackgroundServer(app) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        yield c


def _post_raw(client: httpx.Client, path: str, raw: bytes) -> httpx.Response:
    return client.post(path, content=raw, headers={"content-type": "application/json"})


def _assert_openai_error(r: httpx.Response, status: int, needle: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["code"] == status
    assert needle in err["message"], err
    return dict(err)


BAD_JSON = [
    ({"prompt": ""}, "prompt: must not be empty"),
    ({"prompt": ["ok", ""]}, "prompt[1]: must not be empty"),
    ({"seed": 2**70}, "seed"),
    ({"seed": -1}, "seed"),
    ({"logprobs": -1}, "logprobs"),
    ({"logprobs": 21}, "logprobs=21 exceeds the server's limit of 20"),
    ({"stop": [""]}, "stop[0]: an empty stop string"),
    ({"stop": ["x"] * 17}, "stop strings=17 exceeds"),
    ({"max_tokens": 10**9}, f"max_tokens=1000000000 leaves no room for the prompt in the model's context of {CONTEXT}"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"n": 100000}, "n=100000 exceeds the server's limit of 4"),
    ({"n": 3, "prompt": ["a", "b", "c"]}, "prompts × n=9 exceeds"),
    ({"prompt": ["a"] * 9}, "prompts per request=9 exceeds the server's limit of 8"),
    ({"top_p": 0}, "top_p"),
    ({"temperature": 2.5}, "temperature"),
    ({"frequency_penalty": 3}, "frequency_penalty"),
    ({"presence_penalty": -2.5}, "presence_penalty"),
    ({"prompt": 5}, "prompt"),
    ({"max_tokens": True}, "max_tokens: Value error, must be an integer, not a boolean"),
    ({"n": False}, "n: Value error, must be an integer, not a boolean"),
    ({"logprobs": True}, "logprobs: Value error, must be an integer, not a boolean"),
]


@pytest.mark.parametrize(("extra", "needle"), BAD_JSON)
def test_bad_completion_requests_get_400_within_a_second(
    client: httpx.Client, extra: dict[str, Any], needle: str
) -> None:
    t0 = time.perf_counter()
    r = client.post("/v1/completions", json={"model": "tiny", "prompt": "x", **extra})
    assert time.perf_counter() - t0 < 1.0
    _assert_openai_error(r, 400, needle)


@pytest.mark.parametrize(
    ("path", "raw", "needle", "param"),
    [
        ("/v1/completions", b'{"model": "tiny", "prompt": "\\ud800"}', "prompt: lone UTF-16 surrogate", "prompt"),
        ("/v1/completions", b'{"model": "tiny", "prompt": ["ok", "a\\udc00"]}', "prompt[1]: lone", "prompt[1]"),
        ("/tokenize", b'{"prompt": "x\\ud800"}', "prompt: lone UTF-16 surrogate", "prompt"),
        (
            "/v1/chat/completions",
            b'{"model": "tiny", "messages": [{"role": "user", "content": "\\udfff"}]}',
            "messages[0].content: lone",
            "messages[0].content",
        ),
        ("/v1/completions", b'{"model": "tiny", "prompt": "caf\xe9"}', "request body: invalid UTF-8", None),
        ("/v1/completions", b'{"model": "tiny", "prompt": "x", "temperature": Infinity}', "temperature", "temperature"),
        ("/v1/completions", b'{"model": "tiny", "prompt": "x", "top_p": NaN}', "top_p", "top_p"),
        ("/v1/completions", b'{"model": "tiny", "prompt": "x"', "body: invalid JSON at character 31", None),
        ("/v1/completions", b"[" * 100_000 + b"]" * 100_000, "body: JSON nested too deeply", None),
    ],
)
def test_bad_text_and_numbers_get_400_in_the_same_format(
    client: httpx.Client, path: str, raw: bytes, needle: str, param: str | None
) -> None:
    t0 = time.perf_counter()
    r = _post_raw(client, path, raw)
    assert time.perf_counter() - t0 < 1.0
    err = _assert_openai_error(r, 400, needle)
    assert err["param"] == param  # never a byte offset for a body that is not JSON


def test_valid_surrogate_pairs_pass(client: httpx.Client) -> None:
    r = _post_raw(client, "/tokenize", b'{"prompt": "smile \\ud83d\\ude00"}')
    assert r.status_code == 200 and r.json()["count"] > 1


def test_other_4xx_share_the_format(client: httpx.Client) -> None:
    _assert_openai_error(client.get("/v1/nothing"), 404, "Not Found")
    _assert_openai_error(client.post("/v1/chat/completions", json={"model": "tiny", "messages": []}), 400, "messages")
    big = b'{"model": "tiny", "prompt": "' + b"a" * (9 * 1024 * 1024) + b'"}'
    _assert_openai_error(_post_raw(client, "/v1/completions", big), 413, "exceeds max_body_bytes=8388608")


def test_a_too_large_body_still_sending_reads_its_413_not_a_reset(client: httpx.Client) -> None:
    """The client sends all of an over-limit body before it reads (as httpx and most clients do): the server reads
    and drops it (up to max_drain_bytes) before answering, so the 413 arrives instead of a reset connection, with a
    declared length and chunked alike."""
    big = b"a" * (24 * 1024 * 1024)  # far beyond the socket buffers: closing on unread data resets the sender
    host, port = str(client.base_url).removeprefix("http://").rstrip("/").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        head = f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(big)}\r\n\r\n"
        s.sendall(head.encode() + big)  # a reset connection raises here (or in recv) instead
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413 ") and b"exceeds max_body_bytes=8388608" in answer, answer[:300]
    _assert_openai_error(_post_raw(client, "/v1/completions", big), 413, "exceeds max_body_bytes=8388608")
    chunks = (big[i : i + 65536] for i in range(0, len(big), 65536))
    r = client.post("/v1/completions", content=chunks, headers={"content-type": "application/json"})
    _assert_openai_error(r, 413, "request body exceeds max_body_bytes=8388608")


def test_the_drain_reads_at_most_max_drain_bytes() -> None:
    """Past ``drain`` bytes the rest of a body is left unread (the connection is then closed): a declared length over
    the drain is answered at once (no read); otherwise a 1 MiB drain of a body sent in 64 KiB messages stops after
    17 of them (16 * 64 KiB = 1 MiB is still within it, 17 * 64 KiB is past it), declared length or chunked."""
    import asyncio

    from effirag.serve.guard import _read_body

    async def run(headers: list[tuple[bytes, bytes]]) -> tuple[object, int]:
        calls = 0

        async def receive() -> dict[str, Any]:
            nonlocal calls
            calls += 1
            return {"type": "http.request", "body": b"x" * 65536, "more_body": True}

        limits = ServeLimits(max_body_bytes=1024, max_drain_bytes=1024 * 1024)
        got = await _read_body({"headers": headers}, receive, limits)
        return got, calls

    got, calls = asyncio.run(run([(b"content-length", str(10**9).encode())]))
    assert got == (413, "request body of 1000000000 bytes exceeds max_body_bytes=1024", None) and calls == 0
    got, calls = asyncio.run(run([(b"content-length", str(1024 * 1024).encode())]))
    assert got == (413, "request body of 1048576 bytes exceeds max_body_bytes=1024", None) and calls == 17
    got, calls = asyncio.run(run([]))
    assert got == (413, "request body exceeds max_body_bytes=1024", None) and calls == 17


def test_prompt_plus_max_tokens_over_the_context_names_both_numbers(
    client: httpx.Client, counting: tuple[HFGenerator, CountingTokenizer]
) -> None:
    tok = counting[1]
    unit = "The river flows through the city. "
    prompt = unit * ((CONTEXT - 50) // len(tok.encode(unit * 10)) * 10)
    n = len(tok.encode(prompt))
    assert n < CONTEXT < n + 100  # fits alone, not with 100 new tokens
    r = client.post("/v1/completions", json={"model": "tiny", "prompt": prompt, "max_tokens": CONTEXT - n + 1})
    _assert_openai_error(
        r,
        400,
        f"prompt of {n} tokens + max_tokens={CONTEXT - n + 1} = {CONTEXT + 1} exceeds the "
        f"model's context of {CONTEXT} tokens",
    )
    ok = client.post("/v1/completions", json={"model": "tiny", "prompt": prompt, "max_tokens": 2})
    assert ok.status_code == 200 and ok.json()["usage"]["prompt_tokens"] == n


def test_a_5mb_prompt_is_refused_before_tokenising_more_than_the_context(
    client: httpx.Client, counting: tuple[HFGenerator, CountingTokenizer]
) -> None:
    tok = counting[1]
    prompt = "The river flows through the city of Lyon. " * 120_000  # 5.0 MB
    tokens_in_sample = len(tok.encode(prompt[:42_000])) / 42_000
    assert len(prompt) * tokens_in_sample > 1_000_000  # it really is a >1M-token prompt
    tok.encoded.clear()
    t0 = time.perf_counter()
    r = client.post("/v1/completions", json={"model": "tiny", "prompt": prompt, "max_tokens": 16})
    took = time.perf_counter() - t0
    _assert_openai_error(
        r,
        400,
        f"has more than {CONTEXT - 16} tokens; with max_tokens=16 it exceeds the model's context of {CONTEXT} tokens",
    )
    bound = (CONTEXT - 16 + 1) * longest_token_chars(tok)
    assert tok.encoded and max(tok.encoded) <= bound < len(prompt) / 100
    assert took < 5.0  # sending 5 MB over loopback included; the old server ran for a minute and 9 GB


def test_token_guards_everything_but_health(model_dir: Path) -> None:
    gen = HFGenerator(model_dir, device="cpu").load()
    with BackgroundServer(create_app(gen, "tiny", token="s3cret")) as srv, httpx.Client(base_url=srv.url) as c:
        assert c.get("/health").json() == {"status": "ok"}
        for path in ("/v1/models", "/docs", "/openapi.json"):
            r = c.get(path)
            _assert_openai_error(r, 401, "bearer token")
            assert r.headers["www-authenticate"] == "Bearer"
        body = {"model": "tiny", "prompt": "x", "max_tokens": 2}
        _assert_openai_error(c.post("/v1/completions", json=body), 401, "bearer token")
        wrong = c.post("/v1/completions", json=body, headers={"authorization": "Bearer nope"})
        _assert_openai_error(wrong, 401, "bearer token")
        auth = {"authorization": "Bearer s3cret"}
        assert c.post("/v1/completions", json=body, headers=auth).status_code == 200
        assert c.get("/v1/models", headers=auth).status_code == 200
        assert c.get("/docs", headers=auth).status_code == 404  # interactive docs are off behind a token
        cfg = GenerationConfig(max_new_tokens=3)
        with OpenAIGenerator(srv.url + "/v1", "tiny", api_key="s3cret") as remote:  # EffiRAG's own client
            assert remote.generate(["The river"], cfg) == gen.generate(["The river"], cfg)


def test_non_loopback_bind_needs_a_token_or_insecure() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5") and not is_loopback("example.org")
    with pytest.raises(ConfigError, match="not a loopback address and no token"):
        check_bind("0.0.0.0", None, False)
    check_bind("0.0.0.0", "t", False)
    check_bind("0.0.0.0", None, True)
    check_bind("127.0.0.1", None, False)


def _open_request(url: str, path: str, body: dict[str, Any]) -> socket.socket:
    """Send a request on a raw socket and leave it waiting (closing the socket is a client disconnect)."""
    host, port = url.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)))
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    )
    s.sendall(head.encode() + data)
    return s


def _wait(cond: Callable[[], bool], timeout: float) -> float:
    t0 = time.perf_counter()
    while not cond():
        assert time.perf_counter() - t0 < timeout, "condition not reached in time"
        time.sleep(0.02)
    return time.perf_counter() - t0


def test_full_queue_answers_503_and_a_disconnect_cancels_the_work(long_model_dir: Path) -> None:
    gen = RecordingGenerator(long_model_dir, device="cpu").load()
    limits = LLMServeLimits(http=ServeLimits(max_queue=1))
    with BackgroundServer(create_app(gen, "tiny", limits=limits)) as srv, httpx.Client(base_url=srv.url) as c:
        before = RecordingGenerator.cancelled
        sock = _open_request(srv.url, "/v1/completions", LONG)
        _wait(lambda: c.get("/health").status_code == 503, 5)
        health = c.get("/health")
        assert health.json() == {"status": "overloaded", "in_flight": 1, "max_queue": 1}
        busy = c.post("/v1/completions", json={"model": "tiny", "prompt": "x", "max_tokens": 2})
        _assert_openai_error(busy, 503, "max_queue=1")
        assert busy.headers["retry-after"] == "1"
        sock.close()  # the client goes away mid-generation
        freed = _wait(lambda: c.get("/health").status_code == 200, 3)
        t0 = time.perf_counter()
        nxt = c.post("/v1/completions", json={"model": "tiny", "prompt": "x", "max_tokens": 2})
        assert nxt.status_code == 200 and time.perf_counter() - t0 < 1.0
        assert RecordingGenerator.cancelled == before + 1 and freed < 3


def _read_response(sock: socket.socket) -> str:
    """One whole HTTP/1.1 response from a raw socket: headers, then as many body bytes as Content-Length says (the
    headers and the body can arrive in separate reads)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            return data.decode()
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = sock.recv(4096)
        if not chunk:
            break
        body += chunk
    return (head + b"\r\n\r\n" + body).decode()


def test_deadline_answers_504_and_stops_the_work(long_model_dir: Path) -> None:
    gen = RecordingGenerator(long_model_dir, device="cpu").load()
    limits = LLMServeLimits(http=ServeLimits(request_timeout_s=0.5, body_timeout_s=0.5))
    with BackgroundServer(create_app(gen, "tiny", limits=limits)) as srv, httpx.Client(base_url=srv.url) as c:
        before = RecordingGenerator.cancelled
        t0 = time.perf_counter()
        r = c.post("/v1/completions", json=LONG, timeout=30)
        _assert_openai_error(r, 504, "deadline of 0.5 s")
        assert time.perf_counter() - t0 < 2.0
        _wait(lambda: RecordingGenerator.cancelled == before + 1, 3)
        ok = c.post("/v1/completions", json={"model": "tiny", "prompt": "x", "max_tokens": 2})
        assert ok.status_code == 200
        host, port = srv.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as slow:  # announces 100 bytes, sends 10, then stalls
            head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            slow.sendall(f"{head}Content-Length: 100\r\n\r\n".encode() + b'{"model": ')
            slow.settimeout(5)
            answer = _read_response(slow)
        assert answer.startswith("HTTP/1.1 408") and "request body not received within the deadline" in answer


def test_should_stop_ends_generation_between_tokens(model_dir: Path) -> None:
    gen = HFGenerator(model_dir, device="cpu").load()
    calls = 0

    def stop_after_five() -> bool:
        nonlocal calls
        calls += 1
        return calls > 5

    with pytest.raises(GenerationCancelled):
        gen.generate(["The river"], GenerationConfig(max_new_tokens=2000), should_stop=stop_after_five)
    assert calls <= 8  # polled per token (plus before and after the batch), not after 2,000 tokens
    done = gen.generate(["The river"], GenerationConfig(max_new_tokens=3), should_stop=lambda: False)
    assert done == gen.generate(["The river"], GenerationConfig(max_new_tokens=3))


def test_cli_refuses_a_non_loopback_host_without_a_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from effirag.cli.main import app

    monkeypatch.delenv("EFFIRAG_TOKEN", raising=False)
    r = CliRunner().invoke(app, ["serve", "--model", str(tmp_path), "--host", "0.0.0.0"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "0.0.0.0" in r.output and "--token" in r.output and "--insecure" in r.output


@pytest.mark.slow
def test_sigterm_exits_within_5_s_while_a_request_is_generating(long_model_dir: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    src = Path(__file__).resolve().parents[1] / "src"
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    cmd = [
        sys.executable,
        "-c",
        "from effirag.cli.main import app; app()",
        "serve",
        "--model",
        str(long_model_dir),
        "--model-name",
        "tiny",
        "--port",
        str(port),
        "--device",
        "cpu",
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:

        def up() -> bool:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                return httpx.get(url + "/health", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        _wait(up, 120)
        sock = _open_request(url, "/v1/completions", LONG)
        time.sleep(1.0)  # well into its 16,000 tokens
        assert proc.poll() is None
        t0 = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=5)
        assert time.perf_counter() - t0 < 5.0
        sock.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
