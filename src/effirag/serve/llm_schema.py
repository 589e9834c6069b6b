"""The LLM server's request schema (an OpenAI subset), its limits, and the request → GenerationConfig check.

Static ranges are part of the schema (OpenAI's own: temperature in [0, 2], top_p in (0, 1], penalties in [-2, 2],
seed within uint64; every float finite; no JSON boolean taken as an integer); the limits that depend on the
deployment (``n``, prompts per request, context) are checked against :class:`LLMServeLimits` and name the value and
the limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from effirag.config import check, option
from effirag.errors import ConfigError
from effirag.llm.base import GenerationConfig
from effirag.serve.errors import APIError, JSONInt
from effirag.serve.limits import ServeLimits

UINT64_MAX = 2**64 - 1


@dataclass(frozen=True)
class LLMServeLimits:
    """Per-request limits of ``effirag serve`` (the transport limits are nested under ``http``)."""

    http: ServeLimits = option(factory=ServeLimits, help="Body size, admission queue, deadline and drain.")
    context_length: int | None = option(
        None, help="Positions the model attends to; prompt tokens + max_tokens must fit (None: the model config's)."
    )
    max_n: int = option(16, help="Largest n (completions per prompt).")
    max_prompts: int = option(64, help="Most prompts in one /v1/completions request.")
    max_rows: int = option(256, help="Most prompt × n rows in one request.")
    max_logprobs: int = option(20, help="Largest logprobs value of /v1/completions.")
    max_stops: int = option(16, help="Most stop strings per request.")
    max_stop_chars: int = option(256, help="Longest stop string, in characters.")
    max_messages: int = option(256, help="Most chat messages in one /v1/chat/completions request.")

    def __post_init__(self) -> None:
        check(self.context_length is None or self.context_length >= 2, self, "context_length", "must be >= 2")
        for name in ("max_n", "max_prompts", "max_rows", "max_stops", "max_stop_chars", "max_messages"):
            check(getattr(self, name) >= 1, self, name, "must be >= 1")
        check(self.max_logprobs >= 0, self, "max_logprobs", "must be >= 0")


class SamplingRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)
    model: str
    max_tokens: JSONInt | None = Field(None, ge=1)
    temperature: float = Field(1.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    n: JSONInt = 1  # n < 1 is refused by GenerationConfig, naming the value
    stop: str | list[str] | None = None
    seed: JSONInt | None = Field(None, ge=0, le=UINT64_MAX)
    frequency_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    presence_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    stream: bool = False
    include_stop_str_in_output: bool = False


class CompletionRequest(SamplingRequest):
    prompt: str | list[str]
    logprobs: JSONInt | None = Field(None, ge=0)


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: str
    content: str


class ChatRequest(SamplingRequest):
    messages: list[ChatMessage]
    logprobs: bool = False


class TokenizeRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str | None = None
    prompt: str
    add_special_tokens: bool = True


def generation_config(
    req: SamplingRequest, limits: LLMServeLimits, *, default_max_tokens: int, context: int, logprobs: bool, prompts: int
) -> GenerationConfig:
    """The request's sampling settings, after every deployment limit; a 400 names the field, value and limit."""
    if req.stream:
        raise APIError(400, "stream: streaming is not supported by effirag serve", param="stream")
    _at_most("n", req.n, limits.max_n)
    _at_most("prompt", prompts, limits.max_prompts, what="prompts per request")
    _at_most("n", prompts * req.n, limits.max_rows, what="prompts × n")
    if isinstance(req, CompletionRequest) and req.logprobs is not None:
        _at_most("logprobs", req.logprobs, limits.max_logprobs)
    max_tokens = req.max_tokens if req.max_tokens is not None else min(default_max_tokens, context - 1)
    if max_tokens >= context:
        raise APIError(
            400,
            f"max_tokens={max_tokens} leaves no room for the prompt in the model's context of {context} tokens",
            param="max_tokens",
        )
    stop: Sequence[str] = [req.stop] if isinstance(req.stop, str) else (req.stop or [])
    _at_most("stop", len(stop), limits.max_stops, what="stop strings")
    for i, s in enumerate(stop):
        if not s:
            raise APIError(400, f"stop[{i}]: an empty stop string would end every completion at once", param="stop")
        _at_most("stop", len(s), limits.max_stop_chars, what=f"characters in stop[{i}]")
    try:
        return GenerationConfig(
            max_new_tokens=max_tokens,
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
        raise APIError(400, str(e), param=e.field) from e


def _at_most(param: str, value: int, limit: int, *, what: str | None = None) -> None:
    if value > limit:
        raise APIError(400, f"{param}: {what or param}={value} exceeds the server's limit of {limit}", param=param)
