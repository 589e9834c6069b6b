"""Compare two QA runs on the same questions: per-question scores, paired differences, intervals and p-values.

A run is an ``eval qa --out`` folder (``trajectories.jsonl`` and ``run.json``, :mod:`effirag.eval.qa`). Each question's
row is the mean over its samples of EM, token F1, total tokens (generated + inserted), generated tokens (the model's
own output, the tokens TeaRAG's claim cuts) and steps. Questions are
paired by id; two runs over different question sets are refused, naming the ids only one of them has.

For each metric the difference is B − A: its mean with a paired bootstrap 95% interval, and a p-value — McNemar's
exact test for EM when every question's EM is 0 or 1 in both runs (one sample, a 0/1 outcome), Wilcoxon's
signed-rank test otherwise (F1, tokens, steps, EM averaged over several samples, and gains) (:mod:`effirag.eval.
significance`).

Two policies whose runs start from different baselines (e.g. the same start policy in two protocols) are compared
by their gains (:func:`gains`): per question, each run's scores minus its own start run's on that question, so B − A
is a difference in differences.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from effirag.data import io
from effirag.errors import DataError
from effirag.eval.qa import QUESTIONS, RUN_FILE, TRAJECTORIES
from effirag.eval.significance import mcnemar_exact, paired_bootstrap, wilcoxon_signed_rank
from effirag.metrics import exact_match, f1_score
from effirag.types import QAExample, Trajectory

METRICS = ("em", "f1", "tokens", "generated", "steps")


@dataclass(frozen=True)
class QuestionScores:
    """One question's scores in one run, each the mean over the run's samples of that question."""

    em: float
    f1: float
    tokens: float
    generated: float
    steps: float
    samples: int


def question_scores(examples: Sequence[QAExample], trajectories: Sequence[Trajectory]) -> dict[str, QuestionScores]:
    """Per-question scores (pure). Every trajectory's question must be among ``examples``."""
    by_id = {e.id: e for e in examples}
    groups: dict[str, list[Trajectory]] = {}
    for t in trajectories:
        if t.question_id not in by_id:
            raise DataError(
                "trajectory of a question the question file lacks", field="question_id", value=t.question_id
            )
        groups.setdefault(t.question_id, []).append(t)
    out: dict[str, QuestionScores] = {}
    for qid, ts in groups.items():
        gold = by_id[qid].answers
        n = len(ts)
        out[qid] = QuestionScores(
            em=sum(exact_match(t.prediction or "", gold) for t in ts) / n,
            f1=sum(f1_score(t.prediction or "", gold) for t in ts) / n,
            tokens=sum(t.generated_tokens + t.inserted_tokens for t in ts) / n,
            generated=sum(t.generated_tokens for t in ts) / n,
            steps=sum(len(t.steps) for t in ts) / n,
            samples=n,
        )
    return out


def compare_scores(
    a: Mapping[str, QuestionScores], b: Mapping[str, QuestionScores], *, seed: int = 0, n_resamples: int = 10_000
) -> dict[str, Any]:
    """Per metric: both runs' means, the mean difference B − A with its 95% interval, the test and its p-value.

    Deterministic for a given ``seed`` (each metric's bootstrap draws from ``numpy.random.default_rng(seed)`` afresh,
    so every metric resamples the same questions)."""
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    if only_a or only_b:
        raise DataError(
            f"the runs answered different questions: {len(only_a)} only in A (first: {only_a[:3]}), "
            f"{len(only_b)} only in B (first: {only_b[:3]})"
        )
    ids = sorted(a)
    out: dict[str, Any] = {"n": len(ids), "metrics": {}}
    binary = all(a[q].samples == 1 and b[q].samples == 1 and {a[q].em, b[q].em} <= {0.0, 1.0} for q in ids)
    for m in METRICS:
        xa = np.array([getattr(a[q], m) for q in ids], dtype=float)
        xb = np.array([getattr(b[q], m) for q in ids], dtype=float)
        out["metrics"][m] = paired_test(xa, xb, binary=binary and m == "em", seed=seed, n_resamples=n_resamples)
    return out


def metric_gains(
    run: Mapping[str, Mapping[str, float]], start: Mapping[str, Mapping[str, float]], *, start_name: str = "the start"
) -> dict[str, dict[str, float]]:
    """Each question's metrics in ``run`` (question id → metric → value) minus ``start``'s on the same question
    (pure): the gain over a start, the one subtraction both ``eval compare --start-a`` and a reproduce claim with
    ``starts`` make. A question ``start`` lacks is refused, naming it (``start_name`` says which start)."""
    lacking = sorted(set(run) - set(start))
    if lacking:
        raise DataError(f"{start_name} lacks {len(lacking)} of the run's questions (first: {lacking[:3]})")
    return {q: {m: v - start[q][m] for m, v in row.items()} for q, row in run.items()}


def gains(run: Mapping[str, QuestionScores], start: Mapping[str, QuestionScores]) -> dict[str, QuestionScores]:
    """Each question's scores in ``run`` minus ``start``'s on the same question (pure, :func:`metric_gains` over
    :data:`METRICS`); ``samples`` is ``run``'s. A question ``start`` lacks is refused, naming it."""

    def metrics(scores: Mapping[str, QuestionScores]) -> dict[str, dict[str, float]]:
        return {q: {m: getattr(s, m) for m in METRICS} for q, s in scores.items()}

    diff = metric_gains(metrics(run), metrics(start), start_name="the start run")
    return {q: QuestionScores(**diff[q], samples=r.samples) for q, r in run.items()}


def paired_test(
    xa: np.ndarray, xb: np.ndarray, *, binary: bool, seed: int = 0, n_resamples: int = 10_000
) -> dict[str, Any]:
    """Both means, the mean difference B − A with its bootstrap 95% interval (``default_rng(seed)``), and McNemar's
    exact test (``binary``: 0/1 outcomes) or Wilcoxon's signed-rank test. Pairs with a NaN on either side (a ratio
    with nothing to divide by) are left out; ``n`` says how many remained."""
    keep = ~(np.isnan(xa) | np.isnan(xb))
    xa, xb = xa[keep], xb[keep]
    if xa.size == 0:
        return {"a": None, "b": None, "n": 0, "diff": None, "test": None}
    iv = paired_bootstrap(xa, xb, np.random.default_rng(seed), n_resamples=n_resamples)
    row: dict[str, Any] = {"a": float(xa.mean()), "b": float(xb.mean()), "n": int(xa.size), "diff": asdict(iv)}
    if binary:
        mc = mcnemar_exact(xa, xb)
        row["test"] = {"name": "mcnemar_exact", "p_value": mc.p_value, "a_only": mc.a_only, "b_only": mc.b_only}
    else:
        w = wilcoxon_signed_rank(xa, xb)
        row["test"] = {"name": f"wilcoxon_{w.method}", "p_value": w.p_value, "statistic": w.statistic, "n": w.n}
    return row


def read_trajectories(path: Path) -> list[Trajectory]:
    """The trajectories of an ``eval qa --out`` folder's ``TRAJECTORIES`` file."""
    if not path.is_file():
        raise DataError(f"no {TRAJECTORIES}: not an `eval qa --out` folder", path=path.parent)
    return io.read_trajectories(path)


def run_questions(run: Path) -> Path:
    """The questions an ``eval qa --out`` run answered, with their gold answers: the run's own ``questions.jsonl``
    (FlashRAG layout), written when the run finishes."""
    path = run / QUESTIONS
    if not path.is_file():
        raise DataError(
            f"no {QUESTIONS} (an unfinished run, or not an `eval qa --out` folder): give the question file with "
            "--questions",
            path=run,
        )
    return path


def load_run(run: Path, examples: Sequence[QAExample]) -> dict[str, QuestionScores]:
    """Per-question scores of an ``eval qa --out`` folder against ``examples``' gold answers."""
    if not (run / RUN_FILE).is_file():
        raise DataError(f"no {RUN_FILE}: not an `eval qa --out` folder", path=run)
    trajs = read_trajectories(run / TRAJECTORIES)
    if not trajs:
        raise DataError("the run holds no trajectories", path=run / TRAJECTORIES)
    return question_scores(examples, trajs)
