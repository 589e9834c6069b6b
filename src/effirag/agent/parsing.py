"""Tag-parsing utilities shared by every protocol parser.

A protocol turn is the text one model generation produced. Parsers only ever see model-generated text (retrieved text
is neutralised by :mod:`effirag.agent.escaping` and never parsed). :func:`extract_tag` returns a typed result that tells
apart a tag that is missing, empty, repeated or malformed (unbalanced or nested), so the agent loop and the rewards can
both say *why* a turn failed. :func:`cut_after_first` implements the rule "text after the first closing action tag of a
turn is discarded" (a backend that ignores stop strings cannot smuggle a second action into one turn).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass


class TagStatus(enum.StrEnum):
    """Outcome of looking for one ``<tag> … </tag>`` pair in a text."""

    OK = "ok"
    MISSING = "missing"  # neither the opening nor the closing tag occurs
    EMPTY = "empty"  # exactly one well-formed pair whose content is blank
    MULTIPLE = "multiple"  # more than one well-formed pair
    MALFORMED = "malformed"  # unbalanced, closed before opened, or nested


@dataclass(frozen=True, slots=True)
class TagResult:
    """What :func:`extract_tag` saw: ``value`` is the stripped content of the first pair (None if missing/malformed)."""

    tag: str
    status: TagStatus
    value: str | None = None
    count: int = 0

    @property
    def ok(self) -> bool:
        return self.status is TagStatus.OK

    def describe(self) -> str:
        """``"<search>: empty"`` — for error messages and invalid-step records."""
        return f"<{self.tag}>: {self.status.value}"


def extract_tag(text: str, tag: str) -> TagResult:
    """Find the content of ``<tag> … </tag>`` in ``text`` (exact, case-sensitive tag names).

    MALFORMED when the number of opening and closing tags differ, a closing tag precedes its opening tag, or a pair
    nests inside another; MULTIPLE when several well-formed pairs occur (``value`` is then the first one's content).
    """
    open_t, close_t = f"<{tag}>", f"</{tag}>"
    opens = [m.start() for m in re.finditer(re.escape(open_t), text)]
    closes = [m.start() for m in re.finditer(re.escape(close_t), text)]
    if not opens and not closes:
        return TagResult(tag, TagStatus.MISSING)
    if len(opens) != len(closes):
        return TagResult(tag, TagStatus.MALFORMED, count=max(len(opens), len(closes)))
    prev_close = -1
    for o, c in zip(opens, closes, strict=True):
        if not (prev_close < o < c):
            return TagResult(tag, TagStatus.MALFORMED, count=len(opens))
        prev_close = c
    value = text[opens[0] + len(open_t) : closes[0]].strip()
    if len(opens) > 1:
        return TagResult(tag, TagStatus.MULTIPLE, value, len(opens))
    if not value:
        return TagResult(tag, TagStatus.EMPTY, "", 1)
    return TagResult(tag, TagStatus.OK, value, 1)


def cut_after_first(text: str, closers: Sequence[str]) -> tuple[str, str | None]:
    """``text`` up to and including the earliest occurrence of any of ``closers``, and which closer it was.

    Returns ``(text, None)`` unchanged when no closer occurs. Ties (same start) go to the longer closer.
    """
    best: tuple[int, str] | None = None
    for c in closers:
        i = text.find(c)
        if i >= 0 and (best is None or i < best[0] or (i == best[0] and len(c) > len(best[1]))):
            best = (i, c)
    if best is None:
        return text, None
    return text[: best[0] + len(best[1])], best[1]


def body_without(tags: Sequence[str]) -> str:
    """A regex fragment matching any text that contains none of ``<tag>`` / ``</tag>`` for ``tags`` (lazy)."""
    alt = "|".join(re.escape(t) for t in tags)
    return rf"((?:(?!</?(?:{alt})>).)*?)"


def split_list(value: str, sep: str = ";") -> list[str]:
    """``"A; B ;; C"`` → ``["A", "B", "C"]`` (blank entries dropped, order kept)."""
    return [p.strip() for p in value.split(sep) if p.strip()]
