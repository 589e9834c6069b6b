"""The token-level generation interface: prompt ids in; completion ids, their log-probs and the stop reason out.

A :class:`TokenRequest` carries one prompt's ids and its own sampling settings (:class:`GenerationConfig`: length,
temperature, top-p, penalties, seed, ``n``, stop strings, whether to return log-probs), so one call can mix requests
of different settings, as a rollout engine serving several episodes or an RL trainer does. Each request gets
``config.n`` :class:`~effirag.llm.base.Completion` s: ``token_ids`` (the sampled ids, end-of-sequence excluded),
``logprobs`` aligned with them (the model's raw distribution, before temperature / top-p), ``finish_reason``
(``"stop"``: end-of-sequence or a stop string; ``"length"``: ``max_new_tokens`` reached) and ``stop_string`` (the
stop string that ended it, if any).

Backends that continue ids natively per request (vLLM) implement :class:`TokenLevelGenerator` themselves; a
:class:`~effirag.llm.base.TokenGenerator` whose ``generate_ids`` takes one config per call (HF, scripted) is adapted
by :func:`as_token_level`, which serves each distinct config with one call, so its outputs are exactly those of
``generate_ids`` on the same rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from effirag.errors import BackendError
from effirag.llm.base import Completion, GenerationConfig, TokenGenerator
from effirag.llm.stops import first_stop


@dataclass(frozen=True)
class TokenRequest:
    """One prompt, as token ids used as given (never re-encoded), and the sampling settings of its completions."""

    prompt_ids: tuple[int, ...]
    config: GenerationConfig


@runtime_checkable
class TokenLevelGenerator(Protocol):
    """Generates from token ids, each request with its own sampling settings (see the module docstring)."""

    @property
    def name(self) -> str: ...

    def encode(self, text: str, *, prompt: bool = False) -> list[int]:
        """``text``'s ids under the policy tokenizer; ``prompt=True`` adds what the backend adds to a prompt."""
        ...

    def generate_tokens(self, requests: Sequence[TokenRequest]) -> list[list[Completion]]:
        """Per request, in order, ``request.config.n`` completions."""
        ...


class GroupedTokenGenerator:
    """A :class:`TokenLevelGenerator` over a :class:`~effirag.llm.base.TokenGenerator` (one config per call).

    Requests are grouped by their config (in order of first appearance) and each group is one ``generate_ids``
    call, so a batch whose requests share one config gives exactly the outputs of a single ``generate_ids`` call.
    """

    def __init__(self, inner: TokenGenerator) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    def encode(self, text: str, *, prompt: bool = False) -> list[int]:
        return self.inner.encode(text, prompt=prompt)

    def generate_tokens(self, requests: Sequence[TokenRequest]) -> list[list[Completion]]:
        groups: dict[GenerationConfig, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault(r.config, []).append(i)
        out: list[list[Completion] | None] = [None] * len(requests)
        for config, members in groups.items():
            got = self.inner.generate_ids([requests[i].prompt_ids for i in members], config)
            if len(got) != len(members):
                raise BackendError(f"{self.name}: {len(got)} completion lists for {len(members)} prompts")
            for i, completions in zip(members, got, strict=True):
                out[i] = completions
        done = [c for c in out if c is not None]
        assert len(done) == len(requests)  # every request belongs to exactly one group
        return done


def as_token_level(gen: object) -> TokenLevelGenerator:
    """``gen`` itself when it implements :class:`TokenLevelGenerator`, else a :class:`GroupedTokenGenerator` over it
    (it must then be a :class:`~effirag.llm.base.TokenGenerator`)."""
    if isinstance(gen, TokenLevelGenerator):
        return gen
    if isinstance(gen, TokenGenerator):
        return GroupedTokenGenerator(gen)
    name = getattr(gen, "name", type(gen).__name__)
    raise BackendError(f"{name}: token-level generation needs a backend with encode / generate_ids (hf, vllm)")


def finish_ids(
    ids: Sequence[int],
    logprobs: Sequence[float] | None,
    stops: Sequence[str],
    eos_ids: frozenset[int],
    decode: Callable[[Sequence[int]], str],
    finish: str = "length",
) -> Completion:
    """One sampled row → a :class:`Completion`, by the rule every token backend shares: cut at the first
    end-of-sequence id (excluded; ``finish_reason`` "stop"), then at the first stop string of the decoded text (kept;
    ``token_ids`` end with the fewest tokens whose text contains it, that last token kept whole). ``finish`` is the
    reason when neither applies (the backend's own: ``"length"`` at the token limit)."""
    ids = list(ids)
    for k, t in enumerate(ids):
        if t in eos_ids:
            ids, finish = ids[:k], "stop"
            break
    text = decode(ids)
    stop_string = None
    if stops and first_stop(text, stops) is not None:
        lo, hi = 1, len(ids)  # fewest leading tokens whose text holds a stop string (the full list does)
        while lo < hi:
            mid = (lo + hi) // 2
            if first_stop(decode(ids[:mid]), stops) is not None:
                hi = mid
            else:
                lo = mid + 1
        ids = ids[:lo]
        prefix = decode(ids)
        hit = first_stop(prefix, stops)
        assert hit is not None
        text, stop_string, finish = prefix[: hit[0]], hit[1], "stop"
    return Completion(
        text=text,
        token_ids=tuple(ids),
        finish_reason=finish,
        logprobs=None if logprobs is None else tuple(logprobs[: len(ids)]),
        stop_string=stop_string,
    )
