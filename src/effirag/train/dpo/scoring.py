"""One IP-DPO round's scoring and pairing (TeaRAG §4.3.2): sampled paths → (format, outcome, process) → pairs.

Per path: ``format`` is the protocol's own format verdict (``trajectory.format_ok``, its parser and rule);
``outcome`` the outcome metric of the prediction against the gold answers (F1 in TeaRAG, eq. 5); ``process`` TeaRAG's
process reward (eq. 7–13: entity–subquery consistency and the memory of the gold evidence in the subqueries,
contexts and summaries, divided by the number of steps) against the question's gold evidence texts. Single-hop
questions take the single-hop rule instead: outcome / k and no process reward (§4.3.2). The paths of each question
are then paired by :func:`~effirag.rewards.tearag.build_dpo_pairs` (eq. 14 and its format / easy / hard rejections)
with the run's :class:`~effirag.rewards.tearag.PairRule` (how paths of equal merit are ordered by length; the default
is TeaRAG's own order), and each (chosen, rejected) path becomes a pair of engine samples
(:func:`~effirag.train.dpo.pairs.pair_from_samples`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from effirag.errors import DataError
from effirag.rewards.outcome import outcome_rewards
from effirag.rewards.tearag import (
    DPOSample,
    PairRule,
    PathLength,
    SimFn,
    build_dpo_pairs,
    single_hop_rewards,
    token_cost_score,
    trajectory_process_reward,
)
from effirag.train.dpo.pairs import PreferencePair, pair_from_samples
from effirag.train.samples import EpisodeSample, episode_samples
from effirag.types import QAExample, Trajectory


def is_single_hop(question: QAExample) -> bool:
    """Single-hop by the dataset's hop count, else by its question type."""
    if question.hops is not None:
        return question.hops == 1
    return question.qtype == "single-hop"


def score_paths(trajectories: Sequence[Trajectory], question: QAExample, metric: str, sim: SimFn) -> list[DPOSample]:
    """The (format, outcome, process) scores of one question's sampled paths (see the module docstring)."""
    outcomes = outcome_rewards([t.prediction for t in trajectories], [question.answers] * len(trajectories), metric)
    evidence = [e.text for e in question.evidence]
    single = is_single_hop(question)
    out: list[DPOSample] = []
    for traj, outcome in zip(trajectories, outcomes, strict=True):
        if single:
            outcome, process = single_hop_rewards(outcome, traj.n_searches)
        else:
            process = trajectory_process_reward(traj, evidence, sim)
        out.append(DPOSample(format=int(traj.format_ok), outcome=outcome, process=process))
    return out


def path_sample(traj: Trajectory) -> EpisodeSample | None:
    """The one training sequence of an append-only path; None when the policy wrote no token (it ended at once)."""
    samples = episode_samples(traj)
    if len(samples) > 1:
        raise DataError(
            f"protocol {traj.protocol!r} rebuilds its prompt between turns ({len(samples)} sequences in one path): "
            "IP-DPO pairs whole paths and needs an append-only protocol",
            record=f"{traj.question_id} sample {traj.sample_index}",
        )
    return samples[0] if samples else None


@dataclass
class RoundPairs:
    """What one round's scoring produced: the pairs, one JSON record per pair, every path's scores (and one JSON
    record per path), and how many pairs were dropped because a side held no policy token."""

    pairs: list[PreferencePair] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    scores: list[DPOSample] = field(default_factory=list)
    paths: list[dict[str, Any]] = field(default_factory=list)
    dropped: int = 0


def _by_question(trajectories: Sequence[Trajectory]) -> dict[str, list[Trajectory]]:
    groups: dict[str, list[Trajectory]] = {}
    for t in trajectories:
        groups.setdefault(t.question_id, []).append(t)
    return groups


def path_lengths(trajectories: Sequence[Trajectory]) -> list[PathLength]:
    """Each path's generated policy tokens and steps (what a length-aware :class:`PairRule` orders by)."""
    return [PathLength(generated_tokens=t.generated_tokens, steps=len(t.steps)) for t in trajectories]


def round_pairs(
    trajectories: Sequence[Trajectory],
    questions: Sequence[QAExample],
    metric: str,
    sim: SimFn,
    rule: PairRule = PairRule(),
) -> RoundPairs:
    """Score every question's paths and pair them (TeaRAG eq. 14, ordered by ``rule``); see the module docstring."""
    by_id = {q.id: q for q in questions}
    out = RoundPairs()
    for qid, paths in _by_question(trajectories).items():
        if qid not in by_id:
            raise DataError("a sampled path's question is not among the training questions", record=qid)
        question = by_id[qid]
        scores = score_paths(paths, question, metric, sim)
        lengths = path_lengths(paths)
        out.scores += scores
        out.paths += [_path_record(qid, t, sc, question, rule) for t, sc in zip(paths, scores, strict=True)]
        for c, r in build_dpo_pairs(scores, is_single_hop(question), lengths, rule):
            chosen, rejected = path_sample(paths[c]), path_sample(paths[r])
            if chosen is None or rejected is None:
                out.dropped += 1
                continue
            meta = {"question_id": qid, "chosen": paths[c].sample_index, "rejected": paths[r].sample_index}
            out.pairs.append(pair_from_samples(chosen, rejected, meta))
            out.records.append(
                {
                    **meta,
                    "chosen_scores": vars_of(scores[c]),
                    "rejected_scores": vars_of(scores[r]),
                    "chosen_prediction": paths[c].prediction,
                    "rejected_prediction": paths[r].prediction,
                    "chosen_policy_tokens": chosen.policy_tokens,
                    "rejected_policy_tokens": rejected.policy_tokens,
                }
            )
    return out


def _path_record(qid: str, t: Trajectory, sc: DPOSample, question: QAExample, rule: PairRule) -> dict[str, Any]:
    """One path's JSON record: its scores, what it spent, its prediction (and its cost-adjusted total if priced)."""
    rec = {
        "question_id": qid, "sample": t.sample_index, "single_hop": is_single_hop(question), **vars_of(sc),
        "searches": t.n_searches, "steps": len(t.steps), "generated_tokens": t.generated_tokens,
        "prediction": t.prediction,
    }  # fmt: skip
    if rule.token_cost > 0:
        rec["cost_total"] = token_cost_score(sc.total, t.generated_tokens, rule.token_cost)
    return rec


def vars_of(s: DPOSample) -> dict[str, float]:
    """A path's scores as a JSON-ready dict."""
    return {"format": float(s.format), "outcome": s.outcome, "process": s.process, "total": s.total}
