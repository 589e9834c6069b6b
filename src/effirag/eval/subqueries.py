"""Retrieval on gold sub-questions (TeaRAG Table 7 style): does each hop's retrieval contain that hop's answer, and
at what token cost?

For a MuSiQue-layout question with decomposition q₁…qₙ, sub-question i is retrieved with ``#j`` replaced by the gold
answer of hop j; its key entities are the KG entities named in it (:meth:`KnowledgeGraph.entities_in`) plus the
previous hop's answer. A hop counts as recalled when its normalised answer (:func:`effirag.metrics.normalize_answer`)
occurs as a whole-token span in the normalised concatenation of the retrieved texts (chunk: title + text; triplet:
its ``(head, relation, tail)`` text). Tokens per retrieval: the tokens of those same texts under ``tokenizer``
(whitespace-separated words when None; a Hugging Face tokenizer's special tokens are not counted).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from effirag.metrics import normalize_answer
from effirag.retrieval.base import Retriever
from effirag.retrieval.kg import KnowledgeGraph, normalize_entity
from effirag.retrieval.tokens import TextTokenizer, count_tokens
from effirag.types import ItemKind, QAExample, RetrievedItem

RetrieveFn = Callable[[str, list[str]], Sequence[RetrievedItem]]
_REF = re.compile(r"#(\d+)")


def resolve_subquestion(question: str, answers: Sequence[str], where: str = "") -> str:
    """Replace ``#j`` (1-based hop reference) with ``answers[j-1]``; a reference to a later hop is an error."""

    def sub(m: re.Match[str]) -> str:
        j = int(m.group(1))
        if not 1 <= j <= len(answers):
            raise ValueError(f"{where}: {m.group(0)} refers to a hop not answered yet in {question!r}")
        return answers[j - 1]

    return _REF.sub(sub, question)


def key_entities(kg: KnowledgeGraph, subquestion: str, previous_answer: str | None) -> list[str]:
    """KG entities named in ``subquestion`` (display names, in order), plus ``previous_answer`` when not among them."""
    names = [kg.entity_names[e] for e in kg.entities_in(subquestion)]
    if previous_answer and normalize_entity(previous_answer) not in {normalize_entity(n) for n in names}:
        names.append(previous_answer)
    return names


def item_text(item: RetrievedItem) -> str:
    """What the model reads for an item: a chunk's title and text, a triplet's text."""
    return f"{item.title}\n{item.text}" if item.kind is ItemKind.CHUNK and item.title else item.text


def answer_recalled(answer: str, texts: Sequence[str]) -> bool:
    """Normalised ``answer`` occurs as a whole-token span of the normalised ``texts`` ("35" ≠ "1935")."""
    a = normalize_answer(answer)
    return bool(a) and f" {a} " in f" {normalize_answer(' '.join(texts))} "


def evaluate_gold_subqueries(
    examples: Sequence[QAExample],
    retrieve: RetrieveFn | Retriever,
    kg: KnowledgeGraph,
    k: int = 5,
    tokenizer: TextTokenizer | None = None,
    *,
    mode: str = "kag",
) -> dict[str, Any]:
    """Answer recall (0–100) and tokens per retrieval over every gold sub-question of ``examples``.

    ``retrieve`` is ``fn(subquestion, key_entities) -> items`` or a :class:`Retriever` (called with ``mode``, ``k``
    and ``entities``); at most ``k`` items of each retrieval are scored. Questions without a decomposition are
    skipped and counted. Returns ``{"n_questions", "n_subqueries", "skipped", "k", "answer_recall",
    "tokens_per_retrieval", "items_per_retrieval", "recall_by_hop", "tokenizer", "per_subquery"}``; ``per_subquery``
    lists each retrieval as ``{"id", "hop", "recalled", "tokens", "items"}`` (for tests paired by sub-question).
    """
    if k <= 0:
        raise ValueError(f"k={k!r}: must be > 0")
    fn = _as_fn(retrieve, mode, k)
    hits = tokens = n_items = n_sub = n_q = skipped = 0
    by_hop: dict[int, list[int]] = {}
    rows: list[dict[str, Any]] = []
    for ex in examples:
        if not ex.decomposition:
            skipped += 1
            continue
        n_q += 1
        answers: list[str] = []
        for hop, sq in enumerate(ex.decomposition, start=1):
            question = resolve_subquestion(sq.question, answers, where=f"question {ex.id} hop {hop}")
            ents = key_entities(kg, question, answers[-1] if answers else None)
            items = list(fn(question, ents))[:k]
            texts = [item_text(it) for it in items]
            hit = answer_recalled(sq.answer, texts)
            hits += hit
            by_hop.setdefault(hop, []).append(int(hit))
            n_tokens = sum(count_tokens(tokenizer, t) if tokenizer is not None else len(t.split()) for t in texts)
            tokens += n_tokens
            n_items += len(items)
            rows.append({"id": ex.id, "hop": hop, "recalled": int(hit), "tokens": n_tokens, "items": len(items)})
            n_sub += 1
            answers.append(sq.answer)
    return {
        "n_questions": n_q,
        "n_subqueries": n_sub,
        "skipped": skipped,
        "k": k,
        "answer_recall": 100.0 * hits / n_sub if n_sub else 0.0,
        "tokens_per_retrieval": tokens / n_sub if n_sub else 0.0,
        "items_per_retrieval": n_items / n_sub if n_sub else 0.0,
        "recall_by_hop": {str(h): 100.0 * sum(v) / len(v) for h, v in sorted(by_hop.items())},
        "tokenizer": type(tokenizer).__name__ if tokenizer is not None else "whitespace",
        "per_subquery": rows,
    }


def _as_fn(retrieve: RetrieveFn | Retriever, mode: str, k: int) -> RetrieveFn:
    if isinstance(retrieve, Retriever):
        r = retrieve
        return lambda q, ents: r.retrieve(q, mode=mode, k=k, entities=ents).items
    return retrieve
