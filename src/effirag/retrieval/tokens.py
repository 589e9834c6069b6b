"""Token counting for retrieved items with the caller's tokenizer.

The agent's token ledger counts what retrieval inserts into the context with the *policy's* tokenizer, so the retriever
takes any object with ``encode(str) -> list[int]`` (a Hugging Face tokenizer, ``tokenizers.Tokenizer`` wrappers, ours).
Without one, a whitespace count is used and the result says so (``RetrievalResult.extras["tokenizer"]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class TextTokenizer(Protocol):
    """Anything that turns a string into token ids."""

    def encode(self, text: str) -> Sequence[int]: ...


class WhitespaceTokenizer:
    """The fallback: one token per whitespace-separated word (ids are word positions, only their count matters)."""

    name = "whitespace"

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(range(len(text.split())))


class PolicyTokens:
    """The retriever's item token counts in the policy's own tokens: ``policy`` is a generator (its
    ``count_tokens``, :class:`effirag.llm.base.Generator`) or a Hugging Face tokenizer (no special tokens added).
    Only the count of the ids it returns is read."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy

    def encode(self, text: str) -> list[int]:
        count = getattr(self.policy, "count_tokens", None)
        if count is not None:
            return [0] * int(count(text))
        return list(self.policy.encode(text, add_special_tokens=False))


def count_tokens(tokenizer: TextTokenizer, text: str) -> int:
    """Number of tokens of ``text``; special tokens a HF tokenizer adds by default are not counted."""
    try:
        ids = tokenizer.encode(text, add_special_tokens=False)  # type: ignore[call-arg]
    except TypeError:  # not a HF tokenizer: no such keyword
        ids = tokenizer.encode(text)
    return len(ids)
