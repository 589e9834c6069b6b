"""RouteRAG's two-stage GRPO rewards.

Stage 1 trains for accuracy with the exact-match outcome reward (:func:`effirag.rewards.outcome.em_reward`). Stage 2
adds a retrieval-time efficiency term (RouteRAG Appendix A, eq. 6–7): a correct rollout that retrieved faster than the
batch average earns a bonus, a slower one a penalty, scaled by the time constant T; a wrong rollout keeps its outcome
(0), so speed never pays for a wrong answer.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt


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
