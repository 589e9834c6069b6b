"""HiPRAG's hierarchical reward and its efficiency rates (over-search and under-search).

Reward (HiPRAG §3.3): R(T) = A(T)·(1 − λ_f) + λ_f·F(T) + λ_p·A(T)·F(T)·N_corr(T)/N(T), where A is answer correctness
(cover-EM), F the format check, N the number of steps and N_corr the *optimal* ones (neither an over-search nor an
under-search). The process bonus is paid only to correct, well-formed trajectories, so the policy never trades
accuracy for efficiency.

Rates (HiPRAG §4): over-search rate OSR = over-search steps / all search steps of a set of trajectories; under-search
rate USR = under-search steps / all non-search steps. In engine trajectories a search step has ``Action.SEARCH`` and a
non-search step ``Action.REASON`` (the answer is not a step of the ``<think>`` block).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from effirag.rewards.judges import Judge, StepView
from effirag.rewards.outcome import cover_em_reward
from effirag.types import Action, Trajectory


def hierarchical_reward(
    answer_correct: float,
    format_ok: float,
    n_optimal_steps: int,
    n_steps: int,
    lambda_f: float = 0.2,
    lambda_p: float = 0.4,
) -> float:
    """HiPRAG's hierarchical reward: A(1 − λf) + λf·F + λp·A·F·N_corr/N; the process term is 0 when N = 0.

    ``answer_correct`` A and ``format_ok`` F are 0/1 (bools accepted); ``n_optimal_steps`` N_corr ≤ ``n_steps`` N.
    """
    a, f = float(answer_correct), float(format_ok)
    if a not in (0.0, 1.0) or f not in (0.0, 1.0):
        raise ValueError(f"answer_correct={answer_correct!r} and format_ok={format_ok!r} must be 0 or 1")
    if not 0 <= n_optimal_steps <= n_steps:
        raise ValueError(f"need 0 <= n_optimal_steps <= n_steps, got {n_optimal_steps} and {n_steps}")
    if not (0.0 <= lambda_f <= 1.0 and lambda_p >= 0.0):
        raise ValueError(f"lambda_f={lambda_f!r} must be in [0, 1] and lambda_p={lambda_p!r} >= 0")
    process = lambda_p * a * f * n_optimal_steps / n_steps if n_steps else 0.0
    return a * (1.0 - lambda_f) + lambda_f * f + process


def search_views(trajectory: Trajectory) -> list[StepView]:
    """The search steps of a trajectory, as the judges see them."""
    return [StepView.of(trajectory, s) for s in trajectory.steps if s.action is Action.SEARCH]


def non_search_views(trajectory: Trajectory) -> list[StepView]:
    """The non-search (reasoning-only) steps of a trajectory, as the judges see them."""
    return [StepView.of(trajectory, s) for s in trajectory.steps if s.action is Action.REASON]


@dataclass(frozen=True)
class StepAudit:
    """Per-step verdicts of one trajectory: ``over[i]`` for its i-th search step, ``under[j]`` for its j-th
    non-search step."""

    over: tuple[bool, ...] = field(default=())
    under: tuple[bool, ...] = field(default=())

    @property
    def n_steps(self) -> int:
        return len(self.over) + len(self.under)

    @property
    def n_optimal(self) -> int:
        return self.n_steps - sum(self.over) - sum(self.under)


def _split(flags: list[bool], sizes: list[int]) -> list[tuple[bool, ...]]:
    out, i = [], 0
    for n in sizes:
        out.append(tuple(flags[i : i + n]))
        i += n
    return out


def _batched(views: list[list[StepView]], verdict: str, judge: Judge) -> list[tuple[bool, ...]]:
    """One judge call over the steps of all trajectories (LLM judges batch their generations), split back."""
    flat = [v for vs in views for v in vs]
    flags = getattr(judge, verdict)(flat) if flat else []
    if len(flags) != len(flat):
        raise ValueError(f"{type(judge).__name__}.{verdict} returned {len(flags)} verdicts for {len(flat)} steps")
    return _split(list(flags), [len(vs) for vs in views])


def audit_steps(trajectories: Sequence[Trajectory], judge: Judge) -> list[StepAudit]:
    """Over- and under-search verdicts for every step of every trajectory (two batched judge calls)."""
    over = _batched([search_views(t) for t in trajectories], "over_search", judge)
    under = _batched([non_search_views(t) for t in trajectories], "under_search", judge)
    return [StepAudit(o, u) for o, u in zip(over, under, strict=True)]


def over_search_rate(trajectories: Sequence[Trajectory], judge: Judge) -> float:
    """OSR: over-search steps / all search steps over the set; 0.0 when the set has no search step."""
    flags = [f for fs in _batched([search_views(t) for t in trajectories], "over_search", judge) for f in fs]
    return sum(flags) / len(flags) if flags else 0.0


def under_search_rate(trajectories: Sequence[Trajectory], judge: Judge) -> float:
    """USR: under-search steps / all non-search steps over the set; 0.0 when the set has no non-search step."""
    flags = [f for fs in _batched([non_search_views(t) for t in trajectories], "under_search", judge) for f in fs]
    return sum(flags) / len(flags) if flags else 0.0


def hierarchical_rewards(
    trajectories: Sequence[Trajectory],
    golds: Sequence[str | Sequence[str]],
    judge: Judge,
    lambda_f: float = 0.2,
    lambda_p: float = 0.4,
) -> list[float]:
    """:func:`hierarchical_reward` for a batch: A = cover-EM of ``trajectory.prediction``, F = ``trajectory.format_ok``
    (set by the engine from the protocol's ``format_check``: for HiPRAG, F(T)), N and N_corr from the judge."""
    if len(trajectories) != len(golds):
        raise ValueError(f"{len(trajectories)} trajectories but {len(golds)} gold lists")
    audits = audit_steps(trajectories, judge)
    return [
        hierarchical_reward(cover_em_reward(t.prediction, g), t.format_ok, a.n_optimal, a.n_steps, lambda_f, lambda_p)
        for t, g, a in zip(trajectories, golds, audits, strict=True)
    ]
