"""Prompt length against the model's context, without tokenising more text than the context can hold.

A 5 MB prompt must be refused in milliseconds, not after minutes of tokenisation and gigabytes of ids. No token of
the vocabulary spells more than ``L`` characters (the longest vocabulary entry: byte-level BPE entries are one
character per byte, SentencePiece and WordPiece entries at least as long as the text they stand for), so a text of
``(room + 1) · L`` characters has more than ``room`` tokens. Only such a prefix is ever tokenised for a prompt that
is longer; should a normaliser break the bound (it can only make text shorter before tokenising), the full prompt
is tokenised, which is slower but still exact.
"""

from __future__ import annotations

from typing import Any

from effirag.errors import ConfigError
from effirag.serve.errors import APIError


def longest_token_chars(tokenizer: Any) -> int:
    """Most characters any single token of ``tokenizer`` can stand for (≥ 1)."""
    return max((len(t) for t in tokenizer.get_vocab()), default=1) or 1


def context_length(model: Any, tokenizer: Any) -> int:
    """Positions the model attends to: its config's ``max_position_embeddings``, else a sane tokenizer limit."""
    n = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if isinstance(n, int) and n > 1:
        return n
    t = getattr(tokenizer, "model_max_length", None)
    if isinstance(t, int) and 1 < t < 10**7:  # transformers uses a huge sentinel when it does not know
        return t
    raise ConfigError(
        "LLMServeLimits", "context_length", None, "the model config names no max_position_embeddings: set it"
    )


class PromptBudget:
    """Counts prompt tokens for requests that must fit ``context`` together with their ``max_tokens``."""

    def __init__(self, tokenizer: Any, context: int) -> None:
        self.tokenizer = tokenizer
        self.context = context
        self.chars_per_token = longest_token_chars(tokenizer)

    def count(self, prompt: str, *, max_tokens: int, param: str, add_special_tokens: bool) -> list[int]:
        """The prompt's token ids; a 400 naming both numbers when prompt tokens + ``max_tokens`` exceed the
        context, and for an empty prompt."""
        if not prompt:
            raise APIError(400, f"{param}: must not be empty", param=param)
        room = self.context - max_tokens
        cap = (room + 1) * self.chars_per_token
        if len(prompt) > cap:
            head = self.tokenizer.encode(prompt[:cap], add_special_tokens=add_special_tokens)
            if len(head) > room:
                raise APIError(
                    400,
                    f"{param}: the prompt ({len(prompt)} characters) has more than {room} tokens; with "
                    f"max_tokens={max_tokens} it exceeds the model's context of {self.context} tokens",
                    param=param,
                )
        ids: list[int] = self.tokenizer.encode(prompt, add_special_tokens=add_special_tokens)
        if not ids:
            raise APIError(400, f"{param}: tokenises to no tokens", param=param)
        if len(ids) + max_tokens > self.context:
            raise APIError(
                400,
                f"{param}: prompt of {len(ids)} tokens + max_tokens={max_tokens} = {len(ids) + max_tokens} exceeds "
                f"the model's context of {self.context} tokens",
                param=param,
            )
        return ids
