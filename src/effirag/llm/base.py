"""The Generator protocol: batched prompts in, completions with token ids (and optional logprobs) out.

Every backend (Hugging Face, OpenAI-compatible HTTP, scripted) implements it, and everything above the LLM layer
(agent loop, judges, data construction, trainers' rollouts) depends only on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from effirag.config import check, option


@dataclass(frozen=True)
class GenerationConfig:
    """Sampling settings of one generate call."""

    max_new_tokens: int = option(256, help="Most tokens generated per completion.")
    temperature: float = option(0.0, help="Sampling temperature; 0 means greedy decoding.")
    top_p: float = option(1.0, help="Nucleus sampling mass (1.0 disables it).")
    stop: tuple[str, ...] = option(factory=tuple, help="Stop strings; the completion ends after the first one, kept.")
    n: int = option(1, help="Completions sampled per prompt.")
    seed: int | None = option(None, help="Seed for reproducible sampling (None: nondeterministic).")
    logprobs: bool = option(False, help="Return the log-probability of every generated token.")
    frequency_penalty: float = option(
        0.0,
        help="Subtracted from a token's logit once per time it already occurs in this completion (the prompt is not "
        "counted; the OpenAI / vLLM parameter). Positive values break repetition loops.",
    )
    presence_penalty: float = option(
        0.0, help="Subtracted from the logit of every token already generated in this completion (OpenAI / vLLM)."
    )

    def __post_init__(self) -> None:
        check(self.max_new_tokens > 0, self, "max_new_tokens", "must be > 0")
        check(self.temperature >= 0.0, self, "temperature", "must be >= 0")
        check(0.0 < self.top_p <= 1.0, self, "top_p", "must be in (0, 1]")
        check(self.n >= 1, self, "n", "must be >= 1")
        check(-2.0 <= self.frequency_penalty <= 2.0, self, "frequency_penalty", "must be in [-2, 2] (OpenAI's range)")
        check(-2.0 <= self.presence_penalty <= 2.0, self, "presence_penalty", "must be in [-2, 2] (OpenAI's range)")


@dataclass(frozen=True)
class Completion:
    """One completion. ``text`` ends with the stop string that ended it (``finish_reason == "stop"``), if any.

    ``token_ids`` are the policy tokenizer's ids of ``text``; ``logprobs`` (when asked for) align with them. When a stop
    string ends inside a token, ``token_ids`` keep that whole sampled token (as vLLM does): ``decode(token_ids)`` starts
    with ``text`` and exceeds it by at most the rest of that last token. An end-of-sequence token is never included.
    """

    text: str
    token_ids: tuple[int, ...]
    finish_reason: str = "stop"
    logprobs: tuple[float, ...] | None = None
    stop_string: str | None = None


@runtime_checkable
class Tokenizer(Protocol):
    """The part of a tokenizer EffiRAG needs for token accounting."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


@runtime_checkable
class Generator(Protocol):
    """A batched text generator. ``generate`` returns, per prompt, ``config.n`` completions."""

    @property
    def name(self) -> str:
        """Backend and model, for logs and error messages (e.g. ``hf:/models/demo`` or ``openai:http://h:8000#m``)."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under the policy's tokenizer (no special tokens added)."""
        ...

    def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[list[Completion]]: ...


@runtime_checkable
class TokenGenerator(Generator, Protocol):
    """A generator that also continues token ids directly (the exact path for training on sampled episodes).

    Policy-gradient training must score the very tokens the policy saw and produced. Re-encoding a text transcript
    can split the text differently from how the turns were sampled, so a token generator is fed the episode's ids:
    the prompt's ids, then each turn's sampled ids and each inserted text's ids, concatenated. HF and scripted
    backends implement it; HTTP backends (text in, text out) do not.
    """

    def encode(self, text: str, *, prompt: bool = False) -> list[int]:
        """``text``'s ids under the policy tokenizer; ``prompt=True`` adds what the backend adds to a prompt (e.g. a
        BOS token), ``False`` adds nothing (inserted observations mid-episode)."""
        ...

    def generate_ids(self, prompts: Sequence[Sequence[int]], config: GenerationConfig) -> list[list[Completion]]:
        """As :meth:`Generator.generate`, from prompt ids (used as given, not re-encoded)."""
        ...


def special_strings(tokenizer: Any) -> tuple[str, ...]:
    """A HF tokenizer's special tokens as text: ``all_special_tokens`` (BOS, EOS, pad, …) and every added token
    flagged special (chat markers). Added tokens that are not special (protocol tags, whole-word names) are left out."""
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    specials = {str(t) for t in getattr(tokenizer, "all_special_tokens", [])}
    specials |= {str(t.content) for t in added.values() if getattr(t, "special", False)}
    return tuple(sorted(specials))
