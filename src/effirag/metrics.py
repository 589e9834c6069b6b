"""QA answer metrics: exact match, token F1 and cover exact match.

Normalisation is SQuAD's, as FlashRAG and Search-R1 use it: lowercase, remove punctuation, remove the articles
a/an/the, collapse whitespace. Every metric takes the maximum over the gold answers (gold + aliases).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)
_SPECIAL = ("yes", "no", "noanswer")


def normalize_answer(s: str) -> str:
    """SQuAD normalisation: lowercase → drop punctuation → drop articles → collapse whitespace."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _golds(golds: str | Sequence[str]) -> list[str]:
    return [golds] if isinstance(golds, str) else list(golds)


def exact_match(prediction: str, golds: str | Sequence[str]) -> float:
    """1.0 if the normalised prediction equals some normalised gold, else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in _golds(golds)))


def cover_exact_match(prediction: str, golds: str | Sequence[str]) -> float:
    """1.0 if some normalised gold is a substring of the normalised prediction (HiPRAG's A(a), FlashRAG's acc)."""
    pred = normalize_answer(prediction)
    return float(any(normalize_answer(g) in pred for g in _golds(golds) if normalize_answer(g)))


def f1_score(prediction: str, golds: str | Sequence[str]) -> float:
    """Token-level F1, max over golds (TeaRAG eq. 5's outcome reward).

    FlashRAG's rule: when either side normalises to yes / no / noanswer, the pair scores 0 unless both are equal.
    """
    pred = normalize_answer(prediction)
    best = 0.0
    for gold in _golds(golds):
        g = normalize_answer(gold)
        if (pred in _SPECIAL or g in _SPECIAL) and pred != g:
            continue
        p_toks, g_toks = pred.split(), g.split()
        common = Counter(p_toks) & Counter(g_toks)
        same = sum(common.values())
        if same == 0:
            continue
        precision, recall = same / len(p_toks), same / len(g_toks)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best
