"""Retrieval evaluation: Recall@k against gold supporting passages, answer recall, tokens per retrieval.

Recall@k follows HippoRAG (Gutiérrez et al. 2024, §4 "Metrics"): for one question, |gold ∩ top-k| / |gold|, averaged
over questions. Answer recall@k: 1 when some normalised gold answer (SQuAD normalisation) occurs in the normalised
text of the top-k items (whole-token match). Both are reported as percentages (0–100).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from effirag.eval.subqueries import answer_recalled
from effirag.retrieval.base import RetrievalResult
from effirag.types import QAExample, RetrievedItem

log = logging.getLogger(__name__)

SearchFn = Callable[[str, int], RetrievalResult]


def recall_at_k(retrieved_ids: Sequence[str], gold_ids: Collection[str], k: int) -> float:
    """HippoRAG's Recall@k for one question: |gold ∩ top-k retrieved| / |gold|, in [0, 1].

    Duplicate retrieved ids count once. A question without gold passages has no recall: ``ValueError``.
    """
    if k <= 0:
        raise ValueError(f"k={k}: must be > 0")
    gold = set(gold_ids)
    if not gold:
        raise ValueError("recall is undefined without gold passages")
    return len(gold & set(retrieved_ids[:k])) / len(gold)


def answer_recall_at_k(texts: Sequence[str], answers: Sequence[str], k: int) -> float:
    """1.0 when some gold answer occurs, normalised, as a whole-token span of the normalised top-k texts.

    The rule is :func:`effirag.eval.subqueries.answer_recalled` ("35" is not recalled by "1935"), shared with the
    gold-sub-query evaluation so both report the same quantity.
    """
    if k <= 0:
        raise ValueError(f"k={k}: must be > 0")
    return float(any(answer_recalled(a, texts[:k]) for a in answers))


def item_text(it: RetrievedItem) -> str:
    return f"{it.title}\n{it.text}" if it.title else it.text


@dataclass
class RetrievalReport:
    retriever: str
    n_questions: int
    recall: dict[str, float]
    answer_recall: dict[str, float]
    tokens_per_retrieval: dict[str, float]
    n_without_gold: int = 0
    per_question: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self, per_question: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "retriever": self.retriever,
            "n_questions": self.n_questions,
            "recall": self.recall,
            "answer_recall": self.answer_recall,
            "tokens_per_retrieval": self.tokens_per_retrieval,
            "n_without_gold": self.n_without_gold,
        }
        if per_question:
            d["per_question"] = self.per_question
        return d


def evaluate_retrieval(
    examples: Sequence[QAExample], search: SearchFn, ks: Sequence[int], name: str = "", progress: bool = False
) -> RetrievalReport:
    """Run ``search(question, max(ks))`` once per question and score every k on that ranking.

    Recall averages over questions with gold passages (the others are counted in ``n_without_gold``); answer recall
    and tokens (sum of item token counts in the top-k) average over all questions.
    """
    if not examples:
        raise ValueError("no questions to evaluate")
    if not ks or any(k <= 0 for k in ks):
        raise ValueError(f"ks={list(ks)}: need at least one k, all > 0")
    ks = sorted(set(ks))
    kmax = ks[-1]
    rec: dict[int, list[float]] = {k: [] for k in ks}
    ans: dict[int, list[float]] = {k: [] for k in ks}
    tok: dict[int, list[float]] = {k: [] for k in ks}
    per_q: list[dict[str, Any]] = []
    from tqdm.auto import tqdm

    for ex in tqdm(examples, desc=f"retrieve {name}", disable=not progress):
        items = search(ex.question, kmax).items
        ids, texts = [it.id for it in items], [item_text(it) for it in items]
        row: dict[str, Any] = {"id": ex.id, "retrieved": ids}
        for k in ks:
            if ex.supporting_ids:
                rec[k].append(recall_at_k(ids, ex.supporting_ids, k))
            ans[k].append(answer_recall_at_k(texts, ex.answers, k))
            tok[k].append(float(sum(it.tokens or 0 for it in items[:k])))
        per_q.append(row)
    n_gold = sum(1 for ex in examples if ex.supporting_ids)
    return RetrievalReport(
        retriever=name,
        n_questions=len(examples),
        recall={str(k): _pct(rec[k]) for k in ks} if n_gold else {},
        answer_recall={str(k): _pct(ans[k]) for k in ks},
        tokens_per_retrieval={str(k): round(_mean(tok[k]), 1) for k in ks},
        n_without_gold=len(examples) - n_gold,
        per_question=per_q,
    )


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _pct(xs: Sequence[float]) -> float:
    return round(100.0 * _mean(xs), 2)
