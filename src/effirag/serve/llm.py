"""``effirag serve``: a small OpenAI-compatible server over any local HF model, behind the shared safety layer.

Routes: ``POST /v1/completions``, ``POST /v1/chat/completions`` (OpenAI schema subset: model, prompt (str or list),
messages, max_tokens, temperature, top_p, n, stop, seed, logprobs, frequency_penalty, presence_penalty),
``GET /v1/models``, ``GET /health`` and vLLM's ``POST /tokenize``. Like vLLM, choices carry ``stop_reason`` (the
matched stop string) and ``token_ids`` (the sampled tokens); the stop string is left out of ``text`` unless
``include_stop_str_in_output`` is true (OpenAI convention).

Limits (:class:`~effirag.serve.llm_schema.LLMServeLimits`): prompt tokens + max_tokens within the model's context
(refused before tokenising more than the context can hold), caps on n, prompts and stops, a bounded admission queue,
a deadline, and generation cancelled between tokens when the client disconnects. Every error is OpenAI-shaped.
Requests with other sampling settings run on other worker threads, never behind an unrelated batch
(:mod:`effirag.serve.batcher`).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from effirag.llm.base import Completion, GenerationConfig
from effirag.llm.hf import GenerationCancelled, HFGenerator
from effirag.llm.stops import strip_stop
from effirag.serve.batcher import MicroBatcher
from effirag.serve.errors import APIError
from effirag.serve.guard import CancelToken, cancel_token
from effirag.serve.llm_budget import PromptBudget, context_length
from effirag.serve.llm_schema import (
    ChatRequest,
    CompletionRequest,
    LLMServeLimits,
    SamplingRequest,
    TokenizeRequest,
    generation_config,
)
from effirag.serve.safety import health_response, install_safety, new_app


def create_app(
    generator: HFGenerator,
    model_name: str,
    *,
    default_max_tokens: int = 256,
    max_wait_ms: float = 5.0,
    limits: LLMServeLimits | None = None,
    token: str | None = None,
    workers: int = 4,
) -> FastAPI:
    """The FastAPI app serving ``generator`` under the model id ``model_name`` (``token``: bearer auth; ``workers``:
    batches generated at once, see :mod:`effirag.serve.batcher`)."""
    limits = limits or LLMServeLimits()
    app = new_app("EffiRAG OpenAI-compatible server", token)
    admission = install_safety(app, limits.http, token=token)
    svc = _Service(generator, model_name, limits, default_max_tokens, max_wait_ms, workers)
    created = int(time.time())

    @app.get("/health")
    def health() -> JSONResponse:
        return health_response(admission)

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        card = {"id": model_name, "object": "model", "created": created, "owned_by": "effirag"}
        return {"object": "list", "data": [{**card, "max_model_len": svc.context}]}

    @app.post("/tokenize")
    def tokenize(req: TokenizeRequest) -> dict[str, Any]:
        if req.model is not None:
            _check_model(req.model, model_name)
        ids = svc.budget.count(req.prompt, max_tokens=0, param="prompt", add_special_tokens=req.add_special_tokens)
        return {"tokens": ids, "count": len(ids), "max_model_len": svc.context}

    @app.post("/v1/completions")
    def completions(req: CompletionRequest, request: Request) -> dict[str, Any]:
        return svc.complete(req, cancel_token(request))

    @app.post("/v1/chat/completions")
    def chat(req: ChatRequest, request: Request) -> dict[str, Any]:
        return svc.chat(req, cancel_token(request))

    return app


class _Service:
    """The model behind the routes: request checks against the limits, batched generation, OpenAI responses."""

    def __init__(
        self,
        gen: HFGenerator,
        model_name: str,
        limits: LLMServeLimits,
        default_max_tokens: int,
        max_wait_ms: float,
        workers: int,
    ) -> None:
        self.gen, self.model_name, self.limits, self.default_max_tokens = gen, model_name, limits, default_max_tokens
        prompts = max(gen.max_batch_size, 1) * 4
        self.batcher = MicroBatcher(gen, max_wait_ms=max_wait_ms, max_prompts=prompts, workers=workers)
        self.context = limits.context_length or context_length(gen.model, gen.tokenizer)
        self.budget = PromptBudget(gen.tokenizer, self.context)

    def prepare(
        self, req: SamplingRequest, prompts: list[str], param: str, logprobs: bool
    ) -> tuple[GenerationConfig, int]:
        """The request's GenerationConfig and prompt token count, or a 400 naming the limit it breaks."""
        _check_model(req.model, self.model_name)
        config = generation_config(
            req,
            self.limits,
            default_max_tokens=self.default_max_tokens,
            context=self.context,
            logprobs=logprobs,
            prompts=len(prompts),
        )
        reserve = config.max_new_tokens if req.max_tokens is not None else 1
        add_special = self.gen.add_special_tokens
        lengths = [
            len(self.budget.count(p, max_tokens=reserve, param=_nth(param, i, prompts), add_special_tokens=add_special))
            for i, p in enumerate(prompts)
        ]
        if req.max_tokens is None:  # the default shrinks to fit the longest prompt, as vLLM's does
            config = replace(config, max_new_tokens=min(config.max_new_tokens, self.context - max(lengths)))
        return config, sum(lengths)

    def complete(self, req: CompletionRequest, cancel: CancelToken) -> dict[str, Any]:
        prompts = [req.prompt] if isinstance(req.prompt, str) else list(req.prompt)
        if not prompts:
            raise APIError(400, "prompt: must not be empty", param="prompt")
        config, prompt_tokens = self.prepare(req, prompts, "prompt", req.logprobs is not None)
        results = _run(self.batcher, prompts, config, cancel)
        choices = []
        for j, comps in enumerate(results):
            for k, c in enumerate(comps):
                choice = _choice_common(c, j * config.n + k, req.include_stop_str_in_output)
                choice["text"] = choice.pop("_text")
                choice["logprobs"] = _completion_logprobs(self.gen, c) if config.logprobs else None
                choices.append(choice)
        return _response("text_completion", self.model_name, choices, prompt_tokens, results)

    def chat(self, req: ChatRequest, cancel: CancelToken) -> dict[str, Any]:
        if not req.messages:
            raise APIError(400, "messages: must not be empty", param="messages")
        if len(req.messages) > self.limits.max_messages:
            msg = f"messages: {len(req.messages)} messages exceed the server's limit of {self.limits.max_messages}"
            raise APIError(400, msg, param="messages")
        prompt = render_chat(self.gen.tokenizer, [m.model_dump() for m in req.messages])
        config, prompt_tokens = self.prepare(req, [prompt], "messages", req.logprobs)
        results = _run(self.batcher, [prompt], config, cancel)
        choices = []
        for k, c in enumerate(results[0]):
            choice = _choice_common(c, k, req.include_stop_str_in_output)
            choice["message"] = {"role": "assistant", "content": choice.pop("_text")}
            choice["logprobs"] = _chat_logprobs(self.gen, c) if config.logprobs else None
            choices.append(choice)
        return _response("chat.completion", self.model_name, choices, prompt_tokens, results)


def _nth(param: str, i: int, items: list[str]) -> str:
    return f"{param}[{i}]" if len(items) > 1 else param


def render_chat(tokenizer: Any, messages: list[dict[str, str]]) -> str:
    """The model's chat template applied with a generation prompt; a plain ``role: content`` layout if it has none."""
    if getattr(tokenizer, "chat_template", None):
        return str(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
    return "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:"


def _check_model(requested: str, served: str) -> None:
    if requested != served:
        raise APIError(404, f"model {requested!r} not found; this server serves {served!r}", param="model")


def _run(
    batcher: MicroBatcher, prompts: list[str], config: GenerationConfig, cancel: CancelToken
) -> list[list[Completion]]:
    try:
        return batcher.submit(prompts, config, cancel)
    except GenerationCancelled as e:
        status = {"deadline": 504, "server shutting down": 503}.get(cancel.reason, 499)
        raise APIError(status, f"generation cancelled: {cancel.reason or e}") from e


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
    kind: str, model: str, choices: list[dict[str, Any]], prompt_tokens: int, results: list[list[Completion]]
) -> dict[str, Any]:
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
