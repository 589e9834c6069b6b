"""Parametric knowledge: teach the policy the world's known facts, and check that it knows them without retrieval.

EffiRAG-World marks a subset of facts as *known* (``knowledge.jsonl``): the policy should answer them from memory, so
that a search for them is an over-search (HiPRAG) rather than a necessity. A model trained from scratch knows nothing,
so the known facts are taught by causal-LM text (the fact sentence, every token trained) and by zero-shot questions
(``Question → <answer> answer </answer>``, the format the recall check and HiPRAG's non-search steps use).
The check asks every known fact's question through the ordinary engine with the zero-shot protocol (no retrieval)
and reports recall = cover-EM of the answer.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from effirag.data.io import iter_jsonl
from effirag.errors import DataError
from effirag.train.masking import Segment
from effirag.train.sft_data import SFTExample
from effirag.train.trajectories import replay


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


def knowledge_examples(
    facts: Sequence[KnownFact], repeats: int, seed: int = 0, question_repeats: int | None = None
) -> list[SFTExample]:
    """``repeats`` copies of each fact as LM text (fully trained) and ``question_repeats`` (default: ``repeats``) as a
    zero-shot question (answer trained)."""
    from effirag.agent.protocols import get_protocol

    zs = get_protocol("zeroshot")
    rng = random.Random(seed)
    out: list[SFTExample] = []
    n_questions = repeats if question_repeats is None else question_repeats
    for r in range(max(repeats, n_questions)):
        for f in facts:
            if r < repeats:
                out.append(SFTExample(f"{f.id}/text~{r}", "knowledge", [[Segment(f.text, True)]]))
            if r < n_questions:
                turns = [(zs.render_answer(f.answer), None)]  # type: ignore[attr-defined]
                out.append(SFTExample(f"{f.id}/zeroshot~{r}", "zeroshot", replay(zs, f.question, turns)))
    rng.shuffle(out)
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
