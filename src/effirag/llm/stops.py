"""Stop-string handling shared by every backend: find where a completion ends, keep the stop string.

A completion ends at the stop string whose occurrence *ends* first (that is the moment a streaming decoder would have
noticed it); the stop string is kept in the text so that parsers see e.g. ``</search>``.
"""

from __future__ import annotations

from collections.abc import Sequence


def first_stop(text: str, stops: Sequence[str]) -> tuple[int, str] | None:
    """(end offset, stop string) of the stop occurrence that ends earliest in ``text``; ``None`` if none occurs.

    Ties on the end offset go to the longer stop string (it started earlier). Empty stop strings are ignored.
    """
    best: tuple[int, str] | None = None
    for s in stops:
        if not s:
            continue
        i = text.find(s)
        if i < 0:
            continue
        end = i + len(s)
        if best is None or end < best[0] or (end == best[0] and len(s) > len(best[1])):
            best = (end, s)
    return best


def truncate_at_stop(text: str, stops: Sequence[str]) -> tuple[str, str | None]:
    """``text`` cut right after its first stop string (kept), and that stop string; unchanged and ``None`` if none."""
    hit = first_stop(text, stops)
    if hit is None:
        return text, None
    return text[: hit[0]], hit[1]


def strip_stop(text: str, stop: str | None) -> str:
    """``text`` without a trailing ``stop`` (the OpenAI API convention: the stop string is not returned)."""
    if stop and text.endswith(stop):
        return text[: -len(stop)]
    return text
