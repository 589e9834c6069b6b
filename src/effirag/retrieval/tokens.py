"""Token counting for retrieved items with the caller's tokenizer.

The agent's token ledger counts what retrieval inserts into the context with the *policy's* tokenizer, so the retriever
takes any object with ``encode(str) -> list[int]`` (a Hugging Face tokenizer, ``tokenizers.Tokenizer`` wrappers, ours).
Without one, a whitespace count is used and the result says so (``RetrievalResult.extras["tokenizer"]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class TextTokenizer(Protocol):
    """Anything that turns a string into token ids."""

    def encode(self, text: str) -> Sequence[int]: ...


class WhitespaceTokenizer:
    """The fallback: one token per whitespace-separated word (ids are word positions, only their count matters)."""

    name = "whitespace"

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(range(len(text.split())))


def count_tokens(tokenizer: TextTokenizer, text: str) -> int:
    """Number of tokens of ``text``; special tokens a HF tokenizer adds by default are not counted."""
    try:
        ids = tokenizer.encode(text, add_special_tokens=False)  # type: ignore[call-arg]
    except TypeError:  # not a HF tokenizer: no such keyword
        ids = tokenizer.encode(text)
    return len(ids)
