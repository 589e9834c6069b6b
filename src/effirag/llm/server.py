"""A small OpenAI-compatible server over any local HF model: ``effirag serve``, and the HTTP backend's test server.

Routes: ``POST /v1/completions``, ``POST /v1/chat/completions`` (OpenAI schema subset: model, prompt (str or list),
messages, max_tokens, temperature, top_p, n, stop, seed, logprobs, frequency_penalty, presence_penalty),
``GET /v1/models``, ``GET /health`` and vLLM's ``POST /tokenize``. Like vLLM, choices carry ``stop_reason`` (the
matched stop string) and ``token_ids`` (the sampled tokens); the stop string is left out of ``text`` unless
``include_stop_str_in_output`` is true (OpenAI convention).

Concurrent requests with the same sampling settings and no seed are merged into one batched ``generate`` call
(micro-batching, up to ``max_wait_ms``); seeded requests run alone so that their samples are reproducible.
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from effirag.errors import ConfigError
from effirag.llm.base import Completion, GenerationConfig
from effirag.llm.hf import HFGenerator
from effirag.llm.stops import strip_stop

log = logging.getLogger(__name__)


class _Req(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str
    max_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    n: int = 1
    stop: str | list[str] | None = None
    seed: int | None = None
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    stream: bool = False
    include_stop_str_in_output: bool = False


class CompletionRequest(_Req):
    prompt: str | list[str]
    logprobs: int | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: str
    content: str


class ChatRequest(_Req):
    messages: list[ChatMessage]
    logprobs: bool = False


class TokenizeRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str | None = None
    prompt: str
    add_special_tokens: bool = True


class _HTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass
class _Job:
    prompts: list[str]
    config: GenerationConfig
    done: threading.Event = field(default_factory=threading.Event)
    result: list[list[Completion]] | None = None
    error: BaseException | None = None


class MicroBatcher:
    """Runs ``generate`` on one worker thread, merging queued jobs that share a seedless config."""

    def __init__(self, generator: HFGenerator, max_wait_ms: float = 5.0, max_prompts: int = 64) -> None:
        self.generator = generator
        self.max_wait_s = max_wait_ms / 1000.0
        self.max_prompts = max_prompts
        self._queue: queue.Queue[_Job] = queue.Queue()
        self._held: deque[_Job] = deque()
        self._thread = threading.Thread(target=self._loop, name="effirag-batcher", daemon=True)
        self._thread.start()

    def submit(self, prompts: list[str], config: GenerationConfig) -> list[list[Completion]]:
        job = _Job(prompts, config)
        self._queue.put(job)
        job.done.wait()
        if job.error is not None:
            raise job.error
        assert job.result is not None
        return job.result

    def _next(self, timeout: float | None) -> _Job | None:
        if self._held:
            return self._held.popleft()
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def _loop(self) -> None:
        while True:
            first = self._next(None)
            if first is None:
                continue
            jobs = [first]
            if first.config.seed is None:
                deadline = time.monotonic() + self.max_wait_s
                skipped: list[_Job] = []
                while sum(len(j.prompts) for j in jobs) < self.max_prompts:
                    nxt = self._next(max(0.0, deadline - time.monotonic()))
                    if nxt is None:
                        break
                    (jobs if nxt.config == first.config else skipped).append(nxt)
                self._held.extend(skipped)
            try:
                out = self.generator.generate([p for j in jobs for p in j.prompts], first.config)
                at = 0
                for j in jobs:
                    j.result = out[at : at + len(j.prompts)]
                    at += len(j.prompts)
            except BaseException as e:  # handed to the waiting request threads, which turn it into HTTP 500
                for j in jobs:
                    j.error = e
            for j in jobs:
                j.done.set()


def create_app(
    generator: HFGenerator,
    model_name: str,
    *,
    default_max_tokens: int = 256,
    max_wait_ms: float = 5.0,
) -> FastAPI:
    """The FastAPI app serving ``generator`` under the model id ``model_name``."""
    app = FastAPI(title="EffiRAG OpenAI-compatible server")
    batcher = MicroBatcher(generator, max_wait_ms=max_wait_ms, max_prompts=max(generator.max_batch_size, 1) * 4)
    created = int(time.time())

    @app.exception_handler(_HTTPError)
    async def _http_error(_: Request, e: _HTTPError) -> JSONResponse:
        return _error(e.status, e.message)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, e: RequestValidationError) -> JSONResponse:
        msgs = "; ".join(f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in e.errors())
        return _error(400, msgs)

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": model_name, "object": "model", "created": created, "owned_by": "effirag"}],
        }

    @app.post("/tokenize")
    def tokenize(req: TokenizeRequest) -> dict[str, Any]:
        if req.model is not None:
            _check_model(req.model, model_name)
        ids = generator.tokenizer.encode(req.prompt, add_special_tokens=req.add_special_tokens)
        return {"tokens": ids, "count": len(ids), "max_model_len": None}

    @app.post("/v1/completions")
    def completions(req: CompletionRequest) -> dict[str, Any]:
        _check_model(req.model, model_name)
        prompts = [req.prompt] if isinstance(req.prompt, str) else list(req.prompt)
        if not prompts:
            raise _HTTPError(400, "prompt: must not be empty")
        config = _config(req, default_max_tokens, logprobs=req.logprobs is not None)
        results = _run(batcher, prompts, config)
        choices = []
        for j, comps in enumerate(results):
            for k, c in enumerate(comps):
                choice = _choice_common(c, j * config.n + k, req.include_stop_str_in_output)
                choice["text"] = choice.pop("_text")
                choice["logprobs"] = _completion_logprobs(generator, c) if config.logprobs else None
                choices.append(choice)
        return _response("text_completion", model_name, choices, generator, prompts, results)

    @app.post("/v1/chat/completions")
    def chat(req: ChatRequest) -> dict[str, Any]:
        _check_model(req.model, model_name)
        if not req.messages:
            raise _HTTPError(400, "messages: must not be empty")
        prompt = render_chat(generator.tokenizer, [m.model_dump() for m in req.messages])
        config = _config(req, default_max_tokens, logprobs=req.logprobs)
        results = _run(batcher, [prompt], config)
        choices = []
        for k, c in enumerate(results[0]):
            choice = _choice_common(c, k, req.include_stop_str_in_output)
            choice["message"] = {"role": "assistant", "content": choice.pop("_text")}
            choice["logprobs"] = _chat_logprobs(generator, c) if config.logprobs else None
            choices.append(choice)
        return _response("chat.completion", model_name, choices, generator, [prompt], results)

    return app


def render_chat(tokenizer: Any, messages: list[dict[str, str]]) -> str:
    """The model's chat template applied with a generation prompt; a plain ``role: content`` layout if it has none."""
    if getattr(tokenizer, "chat_template", None):
        return str(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
    return "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:"


class BackgroundServer:
    """Serve an ASGI app with uvicorn on a thread, on a free port of 127.0.0.1 (tests, notebooks, benchmarks).

    ``with BackgroundServer(app) as srv: srv.url  # http://127.0.0.1:PORT``
    """

    def __init__(self, app: Any, host: str = "127.0.0.1") -> None:
        import uvicorn

        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))
        self.port = int(self._sock.getsockname()[1])
        self.url = f"http://{host}:{self.port}"
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    def __enter__(self) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start on {self.url}")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()


def _check_model(requested: str, served: str) -> None:
    if requested != served:
        raise _HTTPError(404, f"model {requested!r} not found; this server serves {served!r}")


def _config(req: _Req, default_max_tokens: int, *, logprobs: bool) -> GenerationConfig:
    if req.stream:
        raise _HTTPError(400, "stream: streaming is not supported by effirag serve")
    stop: Sequence[str] = [req.stop] if isinstance(req.stop, str) else (req.stop or [])
    try:
        return GenerationConfig(
            max_new_tokens=req.max_tokens if req.max_tokens is not None else default_max_tokens,
            temperature=req.temperature,
            top_p=req.top_p,
            stop=tuple(stop),
            n=req.n,
            seed=req.seed,
            logprobs=logprobs,
            frequency_penalty=req.frequency_penalty,
            presence_penalty=req.presence_penalty,
        )
    except ConfigError as e:
        raise _HTTPError(400, str(e)) from e


def _run(batcher: MicroBatcher, prompts: list[str], config: GenerationConfig) -> list[list[Completion]]:
    try:
        return batcher.submit(prompts, config)
    except Exception as e:
        log.exception("generation failed")
        raise _HTTPError(500, f"generation failed: {type(e).__name__}: {e}") from e


def _choice_common(c: Completion, index: int, keep_stop: bool) -> dict[str, Any]:
    return {
        "index": index,
        "_text": c.text if keep_stop else strip_stop(c.text, c.stop_string),
        "finish_reason": c.finish_reason,
        "stop_reason": c.stop_string,
        "token_ids": list(c.token_ids),
    }


def _completion_logprobs(gen: HFGenerator, c: Completion) -> dict[str, Any]:
    tokens = [gen.tokenizer.decode([t]) for t in c.token_ids]
    return {"tokens": tokens, "token_logprobs": list(c.logprobs or ()), "top_logprobs": None}


def _chat_logprobs(gen: HFGenerator, c: Completion) -> dict[str, Any]:
    content = [
        {"token": gen.tokenizer.decode([t]), "logprob": lp, "bytes": None, "top_logprobs": []}
        for t, lp in zip(c.token_ids, c.logprobs or (), strict=False)
    ]
    return {"content": content}


def _response(
    kind: str,
    model: str,
    choices: list[dict[str, Any]],
    gen: HFGenerator,
    prompts: list[str],
    results: list[list[Completion]],
) -> dict[str, Any]:
    prompt_tokens = sum(len(gen.tokenizer.encode(p, add_special_tokens=gen.add_special_tokens)) for p in prompts)
    completion_tokens = sum(len(c.token_ids) for comps in results for c in comps)
    return {
        "id": f"{'chatcmpl' if kind == 'chat.completion' else 'cmpl'}-{uuid.uuid4().hex}",
        "object": kind,
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _error(status: int, message: str) -> JSONResponse:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return JSONResponse(status_code=status, content={"error": {"message": message, "type": kind, "code": status}})
