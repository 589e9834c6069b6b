"""Serve a GGUF file with llama-cpp-python's OpenAI-compatible server, for EffiRAG's ``openai:`` backend.

llama-cpp-python (an optional install; it builds llama.cpp from source) runs ``python -m llama_cpp.server``; this
module starts it on a local port as a child process, waits until it answers ``/v1/models``, and stops it on exit.
The server names the model by its file path, so the backend spec is ``openai:URL#PATH``. It strips a matched stop
string without saying which one matched, so EffiRAG applies stop strings on the client (``server_stops=0``); and
its sampler adds a repeat penalty of 1.1 unless told otherwise, which :meth:`LlamaServer.generator` turns off so that
greedy decoding means the same as in the HF backend.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from effirag.errors import BackendError
from effirag.llm.models.registry import MissingExtraError
from effirag.llm.openai_http import OpenAIGenerator


@dataclass(frozen=True)
class LlamaServer:
    """A running server: its ``/v1`` URL and the model name requests must carry."""

    url: str
    model: str

    def spec(self, tokenizer: str | Path | None = None) -> str:
        """The ``--backend`` spec for it (``tokenizer``: the policy's HF folder, for exact token counts)."""
        return f"openai:{self.url}#{self.model}?server_stops=0" + (f"&tokenizer={tokenizer}" if tokenizer else "")

    def generator(self, tokenizer: str | Path | None = None, concurrency: int = 1) -> OpenAIGenerator:
        """EffiRAG's OpenAI backend for it: client-side stops, no repeat penalty (llama.cpp's default is 1.1)."""
        return OpenAIGenerator(
            self.url,
            self.model,
            tokenizer_path=tokenizer,
            concurrency=concurrency,
            server_stops=False,
            extra_body={"repeat_penalty": 1.0},
        )


def llamacpp_available() -> bool:
    """Whether ``llama_cpp.server`` can be imported (llama-cpp-python installed with its ``server`` extra)."""
    return importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("uvicorn") is not None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def llama_server(
    gguf: Path,
    *,
    port: int = 0,
    n_ctx: int = 4096,
    threads: int = 1,
    timeout_s: float = 180.0,
    log: Path | None = None,
    logits_all: bool = True,
) -> Iterator[LlamaServer]:
    """Run ``python -m llama_cpp.server`` on ``gguf`` at 127.0.0.1:``port`` (0: a free one) until the block ends.

    ``threads``: llama.cpp's CPU threads (1 leaves the other cores to the rest of the machine). The server's output
    goes to ``log`` (default: discarded); a server that exits or does not answer within ``timeout_s`` fails, quoting
    the tail of that log. ``logits_all`` (the server's default): logits of every prompt token, which log-probabilities
    need; without, a prompt's tokens skip the vocabulary projection (for Gemma's 262k-token vocabulary the larger part
    of the model), so long prompts are read about twice as fast."""
    if not llamacpp_available():
        raise MissingExtraError("llama-cpp-python is not installed: pip install 'llama-cpp-python[server]'")
    port = port or free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--n_ctx", str(n_ctx), "--n_threads", str(threads), "--n_threads_batch", str(threads)]
    cmd += ["--logits_all", str(logits_all)]
    out = log.open("wb") if log is not None else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_ready(proc, url, timeout_s, log)
        yield LlamaServer(url, str(gguf))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if log is not None and not isinstance(out, int):
            out.close()


def _wait_ready(proc: subprocess.Popen[bytes], url: str, timeout_s: float, log: Path | None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BackendError(f"llama.cpp server at {url} exited with code {proc.returncode}{_tail(log)}")
        try:
            if httpx.get(f"{url}/models", timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise BackendError(f"llama.cpp server at {url} did not answer within {timeout_s:.0f} s{_tail(log)}")


def _tail(log: Path | None) -> str:
    if log is None or not log.is_file():
        return ""
    return ": " + log.read_text(errors="replace")[-600:].strip()
