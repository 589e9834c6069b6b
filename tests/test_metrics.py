"""QA metrics: hand-worked cases plus parity with an independently written reference (FlashRAG's rules)."""

from __future__ import annotations

import re
import string
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from effirag.metrics import cover_exact_match, exact_match, f1_score, normalize_answer


def test_normalize_answer_hand_cases() -> None:
    """lowercase → drop punctuation → drop articles → collapse whitespace.

    "The  Eiffel-Tower!" → "the  eiffeltower" → " eiffeltower" → "eiffeltower".
    "A man, a plan" → "a man a plan" → " man  plan" → "man plan".
    """
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("A man, a plan") == "man plan"
    assert normalize_answer("  ") == ""
    assert normalize_answer("theatre") == "theatre"  # 'the' inside a word is not an article


def test_exact_match_max_over_golds() -> None:
    assert exact_match("the Beatles", ["Rolling Stones", "Beatles"]) == 1.0
    assert exact_match("Beatles band", ["Beatles"]) == 0.0
    assert exact_match("Paris", "paris.") == 1.0


def test_cover_exact_match() -> None:
    """Gold 'G. Stanley Hall' → 'g stanley hall', contained in 'it was g stanley hall in 1892'."""
    assert cover_exact_match("It was G. Stanley Hall in 1892", ["G. Stanley Hall"]) == 1.0
    assert cover_exact_match("Stanley", ["G. Stanley Hall"]) == 0.0
    assert cover_exact_match("anything", ["the"]) == 0.0  # a gold that normalises to "" covers nothing


def test_f1_hand_worked() -> None:
    """pred 'new york city' vs gold 'york city center': common {york, city} = 2;
    precision 2/3, recall 2/3 → F1 = 2·(4/9)/(4/3) = 2/3."""
    assert f1_score("new york city", ["york city center"]) == pytest.approx(2 / 3)
    # max over golds: second gold equals the prediction → 1.0
    assert f1_score("new york city", ["york city center", "New York City"]) == 1.0
    assert f1_score("abc", ["xyz"]) == 0.0


def test_f1_yes_no_rule() -> None:
    """FlashRAG: yes/no/noanswer score 0 unless both sides are equal — 'no' vs 'no way' shares 'no' but scores 0."""
    assert f1_score("no", ["no way"]) == 0.0
    assert f1_score("no way", ["no"]) == 0.0
    assert f1_score("Yes.", ["yes"]) == 1.0
    assert f1_score("yes", ["no"]) == 0.0


# --- reference implementation, written separately in the style of FlashRAG's evaluation code -------------------


def _ref_normalize(s: str) -> str:
    def remove_articles(text: str) -> str:
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text: str) -> str:
        return " ".join(text.split())

    def remove_punc(text: str) -> str:
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def _ref_em(pred: str, golds: list[str]) -> float:
    return max(float(_ref_normalize(pred) == _ref_normalize(g)) for g in golds)


def _ref_f1(pred: str, golds: list[str]) -> float:
    best = 0.0
    for g in golds:
        np_, ng = _ref_normalize(pred), _ref_normalize(g)
        if np_ in ["yes", "no", "noanswer"] and np_ != ng:
            continue
        if ng in ["yes", "no", "noanswer"] and np_ != ng:
            continue
        pt, gt = np_.split(), ng.split()
        common = Counter(pt) & Counter(gt)
        num_same = sum(common.values())
        if num_same == 0:
            continue
        p, r = num_same / len(pt), num_same / len(gt)
        best = max(best, (2 * p * r) / (p + r))
    return best


def _ref_cover(pred: str, golds: list[str]) -> float:
    np_ = _ref_normalize(pred)
    return float(any(_ref_normalize(g) and _ref_normalize(g) in np_ for g in golds))


_words = st.sampled_from(
    ["the", "a", "an", "yes", "no", "Paris", "new", "York", "city", "1892", "Hall", "G.", "-", ","]
)
_answer = st.lists(_words, min_size=0, max_size=6).map(" ".join)


@settings(max_examples=400, deadline=None)
@given(pred=_answer, golds=st.lists(_answer, min_size=1, max_size=3))
def test_parity_with_reference(pred: str, golds: list[str]) -> None:
    assert normalize_answer(pred) == _ref_normalize(pred)
    assert exact_match(pred, golds) == _ref_em(pred, golds)
    assert f1_score(pred, golds) == pytest.approx(_ref_f1(pred, golds))
    assert cover_exact_match(pred, golds) == _ref_cover(pred, golds)
