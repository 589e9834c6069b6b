"""Dynamic Search-R1's cost-aware rewards and advantages: token costs of a trajectory and how they enter training.

Costs of one trajectory (eq. 3): the memory-bound cost counts tokens held in the KV cache — those the model generated
and those the engine inserted from retrieval; the latency-bound cost weighs each kind by its measured time per token,
c_g seconds per generated (decoded) token and c_e seconds per inserted (encoded, prefilled) token. The profiler that
measures c_g and c_e on a running backend lives in :mod:`effirag.rewards.profiling` (it does I/O; everything here is
pure).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

import numpy as np
import numpy.typing as npt

from effirag.rewards.advantage import zscore

ArrayLike = Sequence[float] | npt.NDArray[np.floating] | npt.NDArray[np.integer]


def _nonneg(arr: npt.NDArray[np.float64], name: str) -> None:
    if np.any(arr < 0) or not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero((arr < 0) | ~np.isfinite(arr))[0])
        raise ValueError(f"{name}[{bad}] = {arr.reshape(-1)[bad]!r} must be finite and >= 0")


@overload
def memory_cost(generated_tokens: float, inserted_tokens: float) -> float: ...
@overload
def memory_cost(generated_tokens: ArrayLike, inserted_tokens: ArrayLike) -> npt.NDArray[np.float64]: ...
def memory_cost(
    generated_tokens: float | ArrayLike, inserted_tokens: float | ArrayLike
) -> float | npt.NDArray[np.float64]:
    """Memory-bound cost (Dynamic Search-R1 eq. 3, memory case): generated + inserted tokens.

    Scalars give a float; sequences / arrays (one entry per trajectory) give an array.
    """
    g = np.asarray(generated_tokens, dtype=np.float64)
    e = np.asarray(inserted_tokens, dtype=np.float64)
    _nonneg(g.reshape(-1), "generated_tokens")
    _nonneg(e.reshape(-1), "inserted_tokens")
    out = g + e
    return float(out) if out.ndim == 0 else out


@overload
def latency_cost(generated_tokens: float, inserted_tokens: float, c_g: float, c_e: float) -> float: ...
@overload
def latency_cost(
    generated_tokens: ArrayLike, inserted_tokens: ArrayLike, c_g: float, c_e: float
) -> npt.NDArray[np.float64]: ...
def latency_cost(
    generated_tokens: float | ArrayLike, inserted_tokens: float | ArrayLike, c_g: float, c_e: float
) -> float | npt.NDArray[np.float64]:
    """Latency-bound cost (Dynamic Search-R1 eq. 3): generated·c_g + inserted·c_e, in seconds.

    ``c_g`` / ``c_e``: seconds per generated / per inserted (encoded) token, e.g. from
    :func:`effirag.rewards.profiling.profile_token_costs`.
    """
    if not (c_g >= 0 and c_e >= 0 and np.isfinite(c_g) and np.isfinite(c_e)):
        raise ValueError(f"c_g={c_g!r} and c_e={c_e!r} must be finite and >= 0")
    g = np.asarray(generated_tokens, dtype=np.float64)
    e = np.asarray(inserted_tokens, dtype=np.float64)
    _nonneg(g.reshape(-1), "generated_tokens")
    _nonneg(e.reshape(-1), "inserted_tokens")
    out = g * c_g + e * c_e
    return float(out) if out.ndim == 0 else out


def grpo_cost_aware_advantages(rewards: ArrayLike, costs: ArrayLike, alpha: float) -> list[float]:
    """Cost-aware GRPO advantages of one group (Dynamic Search-R1 eq. 2): A_i = z(r_i) − α·z(c_i).

    Each z standardises within the group with the population std (ddof = 0) and is 0 for every member when that std
    is ~0 (see :mod:`effirag.rewards.advantage`), so all-equal rewards leave only the cost term and all-equal costs
    leave plain GRPO. A group of one gets ``[0.0]``.
    """
    r = np.asarray(rewards, dtype=np.float64)
    c = np.asarray(costs, dtype=np.float64)
    if r.shape != c.shape:
        raise ValueError(f"rewards and costs differ in shape: {r.shape} vs {c.shape}")
    if not np.isfinite(alpha):
        raise ValueError(f"alpha={alpha!r} must be finite")
    return [float(a) for a in zscore(r, name="rewards") - alpha * zscore(c, name="costs")]


def ppo_cost_reward(reward: float, cost: float, alpha: float, epsilon: float = 0.2) -> float:
    """Cost-aware PPO reward (Dynamic Search-R1 eq. 5): max(r·ε, r − α·c).

    The floor r·ε keeps a correct but expensive trajectory from being pushed below a fraction ε of its reward. The
    trainer places this scalar on the last generated token of the trajectory.
    """
    for name, v in (("reward", reward), ("cost", cost), ("alpha", alpha), ("epsilon", epsilon)):
        if not np.isfinite(v):
            raise ValueError(f"{name}={v!r} must be finite")
    return float(max(reward * epsilon, reward - alpha * cost))
