"""Parametric knowledge: a world's known facts, and a check that a policy knows them without retrieval.

EffiRAG-World marks a subset of facts as *known* (``knowledge.jsonl``): the policy should answer them from memory, so
that a search for them is an over-search (HiPRAG) rather than a necessity. The check asks every known fact's question
through the ordinary engine with the zero-shot protocol (no retrieval) and reports recall = cover-EM of the answer.
(A model trained from scratch knows nothing: ``recipes/demo_policy`` teaches the facts as SFT rows.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from effirag.data.io import iter_jsonl
from effirag.errors import DataError


@dataclass(frozen=True)
class KnownFact:
    """One known fact: its sentence, the question that asks it, and the answer."""

    id: str
    text: str
    question: str
    answer: str


def load_known_facts(path: str | Path) -> list[KnownFact]:
    """Read ``knowledge.jsonl`` (``{fact_id, text, question, answer}`` per line)."""
    out = []
    for line, r in iter_jsonl(path):
        for f in ("text", "question", "answer"):
            if not isinstance(r.get(f), str) or not r[f].strip():
                raise DataError("expected a non-empty string", path=path, record=line, field=f, value=r.get(f))
        out.append(KnownFact(str(r.get("fact_id", line)), r["text"], r["question"], r["answer"]))
    return out


@dataclass(frozen=True)
class RecallReport:
    n: int
    recall: float
    misses: list[tuple[str, str, str | None]]  # (question, gold, prediction)


def recall_check(generator: Any, facts: Sequence[KnownFact], *, limit: int | None = None) -> RecallReport:
    """Ask each known fact's question with no retrieval (zero-shot protocol); recall = mean cover-EM."""
    from effirag.agent.config import EngineConfig
    from effirag.agent.engine import run_episodes
    from effirag.agent.protocols import get_protocol
    from effirag.metrics import cover_exact_match
    from effirag.types import QAExample

    chosen = list(facts)[:limit] if limit else list(facts)
    if not chosen:
        raise DataError("no known facts to check")
    qs = [QAExample(f.id, f.question, (f.answer,), hops=1) for f in chosen]
    trajs = run_episodes(generator, None, get_protocol("zeroshot"), qs, EngineConfig(max_new_tokens=32, max_steps=1))
    hits, misses = 0.0, []
    for f, t in zip(chosen, trajs, strict=True):
        score = cover_exact_match(t.prediction or "", [f.answer])
        hits += score
        if not score:
            misses.append((f.question, f.answer, t.prediction))
    return RecallReport(len(chosen), hits / len(chosen), misses)
