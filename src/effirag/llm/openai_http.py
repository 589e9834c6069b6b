"""OpenAI-compatible HTTP backend (vLLM, SGLang, llama.cpp server, Ollama, OpenAI, ``effirag serve``).

Requests run concurrently (at most ``concurrency`` in flight) through one pooled ``httpx.Client``. Failures are
retried with exponential backoff only when retrying can help — HTTP 429, HTTP 5xx and transport errors (refused
connection, timeout, dropped connection); any other 4xx is raised at once. Every error is a
:class:`~effirag.errors.BackendError` that names the server URL and quotes what it answered.

Stop strings: the OpenAI API drops the stop string from the returned text. EffiRAG keeps it (parsers need to see
``</search>``), so it is restored from the server's report of which stop matched — vLLM's ``stop_reason`` or SGLang's
``matched_stop`` (``effirag serve`` sends both conventions' ``stop_reason``). Servers that do not say which stop
matched (OpenAI itself) make a stop-string finish indistinguishable from end-of-sequence; the text is then returned
as the server gave it, with ``stop_string=None``. For such servers ``server_stops=False`` sends no stop strings and
cuts the text on the client instead: exact, at the price of generating up to ``max_tokens`` every time (llama-cpp-
python's server strips the stop string and does not say which one matched).

Token ids, in order of preference: the ids the server returns per choice (``token_ids``: ``effirag serve``; vLLM with
``extra_body={"return_token_ids": True}``) — these are the sampled tokens and align with logprobs; else the policy's
tokenizer (``tokenizer_path``) applied to the text; else the server's ``/tokenize`` endpoint (vLLM, ``effirag
serve``). ``count_tokens`` uses ``tokenizer_path`` when given, else ``/tokenize``; with neither it raises.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import httpx

from effirag.errors import BackendError
from effirag.llm.base import Completion, GenerationConfig, special_strings
from effirag.llm.stops import truncate_at_stop

log = logging.getLogger(__name__)

ENDPOINTS = ("completions", "chat")


class OpenAIGenerator:
    """A :class:`~effirag.llm.base.Generator` talking to an OpenAI-compatible server at ``base_url`` (…/v1).

    ``endpoint="chat"`` sends each prompt as one user message to ``/chat/completions``; agent loops that continue a
    partial assistant turn should use ``"completions"``. ``prompts_per_request`` > 1 packs several prompts into one
    ``/completions`` request (the API's list-prompt form). ``extra_body`` is merged into every request (server-specific
    parameters, e.g. vLLM's ``{"return_token_ids": True}``).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        endpoint: str = "completions",
        timeout: float = 300.0,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        concurrency: int = 8,
        prompts_per_request: int = 1,
        tokenizer_path: str | Path | None = None,
        extra_body: Mapping[str, Any] | None = None,
        server_stops: bool = True,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        if endpoint not in ENDPOINTS:
            raise BackendError(f"{self.name}: endpoint={endpoint!r} is not one of {ENDPOINTS}")
        for field, value, low in (
            ("timeout", timeout, 0.0),
            ("max_retries", max_retries, 0),
            ("backoff_s", backoff_s, 0.0),
            ("concurrency", concurrency, 1),
            ("prompts_per_request", prompts_per_request, 1),
        ):
            if value < low or (field == "timeout" and value == 0):
                raise BackendError(f"{self.name}: {field}={value!r} is out of range")
        self.endpoint = endpoint
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.concurrency = concurrency
        self.prompts_per_request = 1 if endpoint == "chat" else prompts_per_request
        self.tokenizer_path = Path(tokenizer_path) if tokenizer_path is not None else None
        self.extra_body = dict(extra_body or {})
        self.server_stops = server_stops
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            headers=headers,
            timeout=timeout,
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        )
        self._tok: Any = None
        self._count_cache: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"openai:{self.base_url}#{self.model}"

    @property
    def tokenizer(self) -> Any:
        """The policy tokenizer from ``tokenizer_path`` (``None`` when not given)."""
        if self._tok is None and self.tokenizer_path is not None:
            from transformers import AutoTokenizer

            try:
                self._tok = AutoTokenizer.from_pretrained(str(self.tokenizer_path))
            except (OSError, ValueError) as e:
                raise BackendError(f"{self.name}: cannot load tokenizer {self.tokenizer_path}: {e}") from e
        return self._tok

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAIGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ Generator

    @property
    def control_strings(self) -> tuple[str, ...]:
        """The local tokenizer's special tokens, defused in retrieved text by the engine (none without a local
        tokenizer: then only the common chat markers of ``effirag.agent.escaping`` are defused)."""
        return () if self.tokenizer is None else special_strings(self.tokenizer)

    def count_tokens(self, text: str) -> int:
        tok = self.tokenizer
        if tok is not None:
            return len(tok.encode(text, add_special_tokens=False))
        with self._lock:
            cached = self._count_cache.get(text)
        if cached is None:
            cached = len(self._server_tokenize(text))
            with self._lock:
                if len(self._count_cache) > 100_000:
                    self._count_cache.clear()
                self._count_cache[text] = cached
        return cached

    def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[list[Completion]]:
        if isinstance(prompts, str):
            raise BackendError(f"{self.name}: generate() takes a sequence of prompts, got one string")
        if not prompts:
            return []
        step = self.prompts_per_request
        chunks = [list(prompts[i : i + step]) for i in range(0, len(prompts), step)]
        results: list[list[list[Completion]] | None] = [None] * len(chunks)
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(chunks)), thread_name_prefix="effirag-http")
        try:
            futures: dict[Future[list[list[Completion]]], int] = {
                pool.submit(self._request, chunk, config): i for i, chunk in enumerate(chunks)
            }
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for f in done:
                if f.exception() is not None:
                    raise f.exception()  # type: ignore[misc]
            for f, i in futures.items():
                results[i] = f.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return [per_prompt for chunk_result in results if chunk_result is not None for per_prompt in chunk_result]

    # ------------------------------------------------------------------ one request

    def _request(self, chunk: list[str], config: GenerationConfig) -> list[list[Completion]]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": config.max_new_tokens,
            "temperature": config.temperature,
            "top_p": config.top_p,
            "n": config.n,
        }
        if config.stop and self.server_stops:
            body["stop"] = list(config.stop)
        if config.seed is not None:
            body["seed"] = config.seed
        if config.frequency_penalty:
            body["frequency_penalty"] = config.frequency_penalty
        if config.presence_penalty:
            body["presence_penalty"] = config.presence_penalty
        if self.endpoint == "chat":
            path = "/chat/completions"
            body["messages"] = [{"role": "user", "content": chunk[0]}]
            if config.logprobs:
                body["logprobs"] = True
        else:
            path = "/completions"
            body["prompt"] = chunk[0] if len(chunk) == 1 else chunk
            if config.logprobs:
                body["logprobs"] = 0  # the sampled token's logprob only, no alternatives
        body.update(self.extra_body)
        data = self._post(self.base_url + path, body)
        choices = data.get("choices")
        if not isinstance(choices, list) or len(choices) != len(chunk) * config.n:
            got = len(choices) if isinstance(choices, list) else choices
            raise BackendError(
                f"{self.name}: POST {path} returned {got} choices for {len(chunk)} prompt(s) × n={config.n}"
            )
        choices = sorted(choices, key=lambda c: int(c.get("index", 0)))
        out = [self._completion(c, config) for c in choices]
        return [out[j * config.n : (j + 1) * config.n] for j in range(len(chunk))]

    def _completion(self, choice: Mapping[str, Any], config: GenerationConfig) -> Completion:
        if self.endpoint == "chat":
            text = (choice.get("message") or {}).get("content") or ""
        else:
            text = choice.get("text") or ""
        finish = str(choice.get("finish_reason") or "stop")
        stop_string = None
        if config.stop:
            text, stop_string = truncate_at_stop(text, config.stop)  # servers that keep or ignore stops
            reported = choice.get("stop_reason", choice.get("matched_stop"))
            if stop_string is None and finish == "stop" and isinstance(reported, str) and reported in config.stop:
                text, stop_string = text + reported, reported
            if stop_string is not None:
                finish = "stop"
        ids = choice.get("token_ids")
        token_ids = tuple(int(t) for t in ids) if isinstance(ids, list) else self._ids_of(text)
        logprobs: tuple[float, ...] | None = None
        if config.logprobs:
            logprobs = self._logprobs(choice)
        return Completion(
            text=text, token_ids=token_ids, finish_reason=finish, logprobs=logprobs, stop_string=stop_string
        )

    def _logprobs(self, choice: Mapping[str, Any]) -> tuple[float, ...]:
        lp = choice.get("logprobs")
        values: Any = None
        if isinstance(lp, Mapping):
            if self.endpoint == "chat" and isinstance(lp.get("content"), list):
                values = [c.get("logprob") for c in lp["content"]]
            else:
                values = lp.get("token_logprobs")
        if not isinstance(values, list) or any(not isinstance(v, int | float) for v in values):
            raise BackendError(f"{self.name}: logprobs were requested but the server returned {_excerpt(lp)}")
        return tuple(float(v) for v in values)

    def _ids_of(self, text: str) -> tuple[int, ...]:
        tok = self.tokenizer
        if tok is not None:
            return tuple(tok.encode(text, add_special_tokens=False))
        return tuple(self._server_tokenize(text))

    def _server_tokenize(self, text: str) -> list[int]:
        root = self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url
        try:
            data = self._post(root + "/tokenize", {"model": self.model, "prompt": text, "add_special_tokens": False})
        except BackendError as e:
            raise BackendError(
                f"{e}. Token counts need the policy's tokenizer: pass tokenizer_path (spec option "
                "'?tokenizer=DIR') or use a server with a /tokenize endpoint (vLLM, effirag serve)"
            ) from e
        tokens = data.get("tokens")
        if not isinstance(tokens, list):
            raise BackendError(f"{self.name}: POST {root}/tokenize answered without 'tokens': {_excerpt(data)}")
        return [int(t) for t in tokens]

    # ------------------------------------------------------------------ HTTP with retries

    def _post(self, url: str, body: Mapping[str, Any]) -> dict[str, Any]:
        attempts = self.max_retries + 1
        last = ""
        for attempt in range(attempts):
            delay = self.backoff_s * (2**attempt)
            try:
                r = self._client.post(url, json=body)
            except httpx.TransportError as e:
                last = f"cannot reach the server ({type(e).__name__}: {e})"
            else:
                if r.status_code == 429 or r.status_code >= 500:
                    last = f"HTTP {r.status_code}: {_excerpt(r.text)}"
                    delay = max(delay, _retry_after(r))
                elif r.status_code >= 400:
                    raise BackendError(f"{self.name}: POST {url} answered HTTP {r.status_code}: {_excerpt(r.text)}")
                else:
                    try:
                        data = r.json()
                    except ValueError as e:
                        raise BackendError(f"{self.name}: POST {url} answered non-JSON: {_excerpt(r.text)}") from e
                    if not isinstance(data, dict):
                        raise BackendError(f"{self.name}: POST {url} answered {_excerpt(data)}")
                    return data
            if attempt + 1 < attempts:
                log.warning(
                    "%s: POST %s: %s; retry %d/%d in %.1fs", self.name, url, last, attempt + 1, attempts - 1, delay
                )
                time.sleep(delay)
        raise BackendError(f"{self.name}: POST {url} failed after {attempts} attempt(s): {last}")


def _retry_after(r: httpx.Response) -> float:
    """Seconds from a ``Retry-After`` header (capped at 60), 0 if absent or not a number."""
    try:
        return min(60.0, max(0.0, float(r.headers.get("retry-after", 0))))
    except ValueError:
        return 0.0


def _excerpt(value: Any, limit: int = 300) -> str:
    s = value if isinstance(value, str) else repr(value)
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 3] + "..."
