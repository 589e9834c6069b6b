"""Outcome rewards: how right the final answer is, from :mod:`effirag.metrics`.

- EM: Search-R1's and RouteRAG's (stage 1) outcome reward.
- F1: TeaRAG eq. 5, r_o = F1(prediction, gold) (token F1, max over gold + aliases).
- cover-EM: HiPRAG's answer correctness A(a) — the normalised gold is contained in the normalised answer.

A trajectory that produced no answer (``prediction is None``) scores 0 under every metric.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence

from effirag.metrics import cover_exact_match, exact_match, f1_score


class OutcomeMetric(enum.StrEnum):
    EM = "em"
    F1 = "f1"
    COVER_EM = "cover_em"


_METRICS: dict[OutcomeMetric, Callable[[str, str | Sequence[str]], float]] = {
    OutcomeMetric.EM: exact_match,
    OutcomeMetric.F1: f1_score,
    OutcomeMetric.COVER_EM: cover_exact_match,
}


def _golds(golds: str | Sequence[str]) -> str | Sequence[str]:
    if not isinstance(golds, str) and len(golds) == 0:
        raise ValueError("golds is empty: an outcome reward needs at least one gold answer")
    return golds


def em_reward(prediction: str | None, golds: str | Sequence[str]) -> float:
    """Exact-match outcome reward (Search-R1; RouteRAG stage 1): 1.0 iff the normalised answer equals a gold."""
    return 0.0 if prediction is None else exact_match(prediction, _golds(golds))


def f1_reward(prediction: str | None, golds: str | Sequence[str]) -> float:
    """TeaRAG eq. 5: r_o = token F1 between the final answer and the gold (max over aliases)."""
    return 0.0 if prediction is None else f1_score(prediction, _golds(golds))


def cover_em_reward(prediction: str | None, golds: str | Sequence[str]) -> float:
    """HiPRAG's A(a): 1.0 iff some normalised gold is a substring of the normalised answer."""
    return 0.0 if prediction is None else cover_exact_match(prediction, _golds(golds))


def outcome_rewards(
    predictions: Sequence[str | None], golds: Sequence[str | Sequence[str]], metric: OutcomeMetric | str
) -> list[float]:
    """Batch form: one outcome reward per (prediction, golds) pair under ``metric`` (em / f1 / cover_em)."""
    if len(predictions) != len(golds):
        raise ValueError(f"{len(predictions)} predictions but {len(golds)} gold lists")
    fn = _METRICS[OutcomeMetric(metric)]
    return [0.0 if p is None else fn(p, _golds(g)) for p, g in zip(predictions, golds, strict=True)]
