"""RouteRAG's two-stage GRPO rewards.

Stage 1 trains for accuracy with the exact-match outcome reward (:func:`effirag.rewards.outcome.em_reward`). Stage 2
adds a retrieval-time efficiency term (RouteRAG Appendix A, eq. 6–7): a correct rollout that retrieved faster than the
batch average earns a bonus, a slower one a penalty, scaled by the time constant T; a wrong rollout keeps its outcome
(0), so speed never pays for a wrong answer.

The rollout's retrieval time t is either measured (its wall-clock retrieval seconds, the paper's literal t) or modeled
by :func:`modeled_retrieval_times`: the sum over its searches of a fixed cost per retrieval mode. Measured seconds
carry the machine's load and warm-up (the first graph search of a process pays for loading the graph), so two runs of
the same seed reward the same rollouts differently and stage 2 trains a different policy each time; the policy can
only choose its routes, which the modeled time prices the same in every run (as Dynamic Search-R1's latency cost
prices tokens with profiled constants).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from effirag.types import Action, Trajectory

_RETRIEVALS = (Action.SEARCH, Action.MORE_INFO)


def efficiency_rewards(
    outcomes: Sequence[float] | npt.NDArray[np.floating],
    retrieval_times: Sequence[float] | npt.NDArray[np.floating],
    T: float,
) -> list[float]:
    """Stage-2 rewards (RouteRAG eq. 6–7): r_i = o_i if o_i = 0, else o_i + (t_avg − t_i) / T.

    ``outcomes``: per-rollout outcome (EM) of the whole batch; ``retrieval_times``: each rollout's total retrieval time
    in seconds; ``t_avg`` is the mean retrieval time over the whole batch (correct and wrong rollouts alike); ``T`` > 0
    the time scale. An empty batch gives ``[]``.
    """
    o = np.asarray(outcomes, dtype=np.float64)
    t = np.asarray(retrieval_times, dtype=np.float64)
    if o.shape != t.shape or o.ndim != 1:
        raise ValueError(f"outcomes and retrieval_times must be 1-D of equal length, got {o.shape} and {t.shape}")
    if not (T > 0 and np.isfinite(T)):
        raise ValueError(f"T={T!r} must be finite and > 0")
    if np.any(t < 0) or not np.all(np.isfinite(t)):
        raise ValueError(f"retrieval_times must be finite and >= 0, got {t.tolist()}")
    if o.size == 0:
        return []
    t_avg = float(t.mean())
    r = np.where(o == 0, o, o + (t_avg - t) / T)
    return [float(x) for x in r]


def modeled_retrieval_times(trajectories: Sequence[Trajectory], mode_seconds: Mapping[str, float]) -> list[float]:
    """Each trajectory's modeled retrieval time: Σ ``mode_seconds[step.mode]`` over its retrieval steps (searches and
    ``<more info>`` requests, the steps the engine served), independent of how long they took in this run.

    Raises ValueError naming the question, step and mode when a retrieval step's mode has no cost.
    """
    out = []
    for t in trajectories:
        total = 0.0
        for i, s in enumerate(t.steps):
            if s.action not in _RETRIEVALS:
                continue
            if s.mode is None or s.mode not in mode_seconds:
                raise ValueError(
                    f"question {t.question_id!r} step {i}: retrieval mode {s.mode!r} has no modeled cost "
                    f"(routerag_mode_s names {sorted(mode_seconds)})"
                )
            total += float(mode_seconds[s.mode])
        out.append(total)
    return out
