"""Neutralise protocol markup inside retrieved text, so that a document can never trigger or fake an action.

Every protocol's tags (``<search>``, ``</information>``, ``<context>``, ``</Reference>``, ``<evidence>`` …) and
TeaRAG's plain-text terminator ``Final answer:`` are rewritten with look-alike characters: ``<``/``>`` of a known tag
become ``‹``/``›`` (U+2039/U+203A) and the colon of ``Final answer:`` becomes ``꞉`` (U+A789). The text stays
readable for the model, while neither the engine's parsers nor HiPRAG's format checker (which reads the whole
transcript) can mistake it for markup. Anything that is not a known tag (``a < b``, HTML) is left as it is.
"""

from __future__ import annotations

import re

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
)
_TAG_RE = re.compile(
    r"<(\s*/?\s*(?:" + "|".join(t.replace(" ", r"\s+") for t in PROTOCOL_TAGS) + r")\b[^<>]*)>",
    re.IGNORECASE,
)
_FINAL_RE = re.compile(r"(final\s+answer\s*):", re.IGNORECASE)


def neutralise(text: str) -> str:
    """``text`` with every protocol tag and ``Final answer:`` defused (see module docstring); idempotent."""
    text = _TAG_RE.sub(lambda m: f"\u2039{m.group(1)}\u203a", text)
    return _FINAL_RE.sub(lambda m: f"{m.group(1)}\ua789", text)


def contains_markup(text: str) -> bool:
    """True if ``text`` still holds a live protocol tag or ``Final answer:`` (used by tests and assertions)."""
    return bool(_TAG_RE.search(text) or _FINAL_RE.search(text))
