"""Neutralise protocol markup inside retrieved text, so that a document can never trigger or fake an action.

Every protocol's tags (``<search>``, ``</information>``, ``<context>``, ``</Reference>``, ``<evidence>`` …) and
TeaRAG's plain-text terminator ``Final answer:`` are rewritten with look-alike characters: ``<``/``>`` of a known tag
become ``‹``/``›`` (U+2039/U+203A) and the colon of ``Final answer:`` becomes ``꞉`` (U+A789). The text stays
readable for the model, while neither the engine's parsers nor HiPRAG's format checker (which reads the whole
transcript) can mistake it for markup. Anything that is not a known tag (``a < b``, HTML) is left as it is.

Chat control strings are defused the same way, so that a document cannot close the policy's turn or open a new role
once the text is tokenised: the common chat-template markers (:data:`CHAT_MARKERS`: ChatML's ``<|im_start|>``,
Llama 3's ``<|eot_id|>``, Gemma's ``<start_of_turn>`` …) always, and, through :func:`defuse_controls`, every special
token of the policy's own tokenizer (``HFGenerator.control_strings``). A tokenizer turns such a string into its control
token only when it appears verbatim, so changing one character of it is enough: ``<``/``>`` become ``‹``/``›``,
``[``/``]`` become ``⁅``/``⁆``, and a marker with none of these gets a word joiner (U+2060) after its first character.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Union of every protocol's tag names (case-insensitive; "more info" contains a space).
PROTOCOL_TAGS = (
    "think",
    "search",
    "information",
    "answer",
    "more info",
    "step",
    "reasoning",
    "context",
    "conclusion",
    "reference",
    "summary",
    "entities",
    "subquery",
    "query",
    "evidence",
    "documents",
    "memory",
)
_TAG_RE = re.compile(
    r"<(\s*/?\s*(?:" + "|".join(t.replace(" ", r"\s+") for t in PROTOCOL_TAGS) + r")\b[^<>]*)>",
    re.IGNORECASE,
)
_FINAL_RE = re.compile(r"(final\s+answer\s*):", re.IGNORECASE)

CHAT_MARKERS = (
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|end|>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<bos>",
    "<eos>",
    "[INST]",
    "[/INST]",
)
"""Control strings of widespread chat templates (ChatML / Qwen, Llama 3, Phi, Gemma, Mistral), defused in every
observation whatever the policy's tokenizer."""
_LOOKALIKE = str.maketrans({"<": "\u2039", ">": "\u203a", "[": "\u2045", "]": "\u2046"})


def neutralise(text: str) -> str:
    """``text`` with every protocol tag, ``Final answer:`` and chat marker defused (see module docstring);
    idempotent."""
    text = _TAG_RE.sub(lambda m: f"\u2039{m.group(1)}\u203a", text)
    text = _FINAL_RE.sub(lambda m: f"{m.group(1)}\ua789", text)
    return defuse_controls(text, CHAT_MARKERS)


def defuse(control: str) -> str:
    """A look-alike of ``control`` that no tokenizer reads as the control token (see module docstring)."""
    changed = control.translate(_LOOKALIKE)
    return changed if changed != control else control[:1] + "\u2060" + control[1:]


def defuse_controls(text: str, controls: Iterable[str]) -> str:
    """``text`` with every occurrence of each control string replaced by its look-alike (longest first, so that a
    marker containing another is defused whole); empty strings are ignored."""
    for c in sorted({c for c in controls if c}, key=len, reverse=True):
        if c in text:
            text = text.replace(c, defuse(c))
    return text


def contains_markup(text: str) -> bool:
    """True if ``text`` still holds a live protocol tag, ``Final answer:`` or chat marker (tests and assertions)."""
    return bool(_TAG_RE.search(text) or _FINAL_RE.search(text) or any(m in text for m in CHAT_MARKERS))
