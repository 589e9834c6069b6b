"""What the report measures on each evaluated policy: per-question figures (for paired tests) and their summaries.

Per question (the mean over its samples): EM, F1, total tokens (generated + inserted), generated tokens, steps,
retrieval turns, latency (retrieval + generation seconds, wall clock), modeled latency (Dynamic Search-R1 eq. 3:
c_g·generated + c_e·inserted seconds, with the token costs a method prices it by; NaN when it has none), inserted tokens
per retrieval turn, the share of retrieval turns that used the knowledge graph (mode graph or hybrid), and — with the
world's oracle — the over-search rate of its search steps and the under-search rate of its other steps. A ratio with an
empty denominator is NaN and that question is left out of the ratio's pairs. Summaries: means over questions, except the
rates, which pool steps over all questions as the papers define them (OSR = over-searches / searches, USR = under-
searches / non-search steps; tokens per retrieval = inserted tokens / retrieval turns; graph share = graph turns /
retrieval turns).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from effirag.errors import DataError
from effirag.metrics import exact_match, f1_score
from effirag.rewards.judges import Judge
from effirag.types import Action, QAExample, Trajectory

GRAPH_MODES = ("graph", "hybrid")
PER_QUESTION = ("em", "f1", "tokens", "generated", "steps", "turns", "latency_s", "latency_model_s")
RATIOS = ("tokens_per_retrieval", "graph_share", "osr", "usr")


def _ratio(num: float, den: float) -> float:
    return num / den if den else math.nan


def per_question(
    examples: Sequence[QAExample],
    trajectories: Sequence[Trajectory],
    judge: Judge | None = None,
    costs: tuple[float, float] | None = None,
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """(question id → metric → value, pooled summary). Every trajectory's question must be among ``examples``.
    ``costs``: (c_g, c_e) seconds per generated / inserted token that price the modeled latency."""
    from effirag.rewards.cost import latency_cost
    from effirag.rewards.hiprag import audit_steps

    gold = {e.id: e.answers for e in examples}
    audits = audit_steps(trajectories, judge) if judge is not None else [None] * len(trajectories)
    sums: dict[str, dict[str, float]] = {}
    pooled = {k: 0.0 for k in ("inserted", "turns", "graph", "over", "searches", "under", "others")}
    for t, audit in zip(trajectories, audits, strict=True):
        if t.question_id not in gold:
            raise DataError("question not in the question file", field="question_id", value=t.question_id)
        graph = sum(1 for s in t.steps if s.action in (Action.SEARCH, Action.MORE_INFO) and s.mode in GRAPH_MODES)
        row = {
            "em": exact_match(t.prediction or "", gold[t.question_id]),
            "f1": f1_score(t.prediction or "", gold[t.question_id]),
            "tokens": float(t.generated_tokens + t.inserted_tokens),
            "generated": float(t.generated_tokens),
            "steps": float(len(t.steps)),
            "turns": float(t.n_searches),
            "latency_s": t.retrieval_s + t.generation_s,
            "latency_model_s": (
                math.nan if costs is None else latency_cost(t.generated_tokens, t.inserted_tokens, *costs)
            ),
            "inserted": float(t.inserted_tokens),
            "graph": float(graph),
            "n": 1.0,
        }
        if audit is not None:
            row |= {"over": float(sum(audit.over)), "searches": float(len(audit.over))}
            row |= {"under": float(sum(audit.under)), "others": float(len(audit.under))}
        acc = sums.setdefault(t.question_id, {})
        for k, v in row.items():
            acc[k] = acc.get(k, 0.0) + v
        for k in pooled:
            pooled[k] += row.get(k, 0.0)
    out: dict[str, dict[str, float]] = {}
    for qid, acc in sums.items():
        n = acc["n"]
        q = {k: acc[k] / n for k in PER_QUESTION}
        q["tokens_per_retrieval"] = _ratio(acc["inserted"], acc["turns"])
        q["graph_share"] = _ratio(acc["graph"], acc["turns"])
        q["osr"] = _ratio(acc.get("over", 0.0), acc.get("searches", 0.0))
        q["usr"] = _ratio(acc.get("under", 0.0), acc.get("others", 0.0))
        out[qid] = q
    return out, summarize(out, pooled, judged=judge is not None)


def summarize(rows: dict[str, dict[str, float]], pooled: dict[str, float], *, judged: bool) -> dict[str, float]:
    n = max(len(rows), 1)
    summary = {k: sum(r[k] for r in rows.values()) / n for k in PER_QUESTION}
    summary["tokens_per_retrieval"] = _ratio(pooled["inserted"], pooled["turns"])
    summary["graph_share"] = _ratio(pooled["graph"], pooled["turns"])
    summary["osr"] = _ratio(pooled["over"], pooled["searches"]) if judged else math.nan
    summary["usr"] = _ratio(pooled["under"], pooled["others"]) if judged else math.nan
    summary["n"] = float(len(rows))
    return summary


def steps_histogram(trajectories: Sequence[Trajectory]) -> dict[str, int]:
    hist: dict[str, int] = {}
    for t in trajectories:
        hist[str(len(t.steps))] = hist.get(str(len(t.steps)), 0) + 1
    return dict(sorted(hist.items(), key=lambda kv: int(kv[0])))


def finite(value: Any) -> Any:
    """JSON has no NaN: a NaN figure is written as null."""
    return None if isinstance(value, float) and math.isnan(value) else value
