"""ReasonRAG's Shortest Path Reward Estimation (SPRE) and the UCT selection score of its MCTS.

SPRE (ReasonRAG eq. 1) scores a partial reasoning path by k Monte-Carlo rollouts from it: rollout i ends with outcome
value v_i after steps_i further steps, and long paths are discounted by α^steps_i, so that among paths that reach the
right answer the shortest one is preferred: V = (1/k) Σ_i v_i · α^{steps_i}.

UCT (ReasonRAG eq. 5) balances a child's estimated value Q against how rarely it has been visited:
UCT = Q + c · √(Σ_siblings N) / (1 + N).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt


def spre_value(
    values: Sequence[float] | npt.NDArray[np.floating],
    steps: Sequence[int] | npt.NDArray[np.integer],
    alpha: float,
) -> float:
    """SPRE (ReasonRAG eq. 1): (1/k) · Σ_i v_i · α^{steps_i} over the k rollouts of a node.

    ``values[i]`` is rollout i's outcome value, ``steps[i]`` the number of steps it took, ``alpha`` ∈ (0, 1] the
    per-step discount. A node with no rollouts (k = 0) has value 0.0, the usual initial Q of an unexplored MCTS node.
    """
    v = np.asarray(values, dtype=np.float64)
    s = np.asarray(steps, dtype=np.float64)
    if v.shape != s.shape or v.ndim != 1:
        raise ValueError(f"values and steps must be 1-D of equal length, got shapes {v.shape} and {s.shape}")
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha={alpha!r} must be in (0, 1]")
    if np.any(s < 0):
        raise ValueError(f"steps must be >= 0, got {s.tolist()}")
    if v.size == 0:
        return 0.0
    return float(np.mean(v * np.power(alpha, s)))


def uct_score(q: float, n: int, n_parent_children_total: int, c: float) -> float:
    """UCT (ReasonRAG eq. 5): Q + c · √(Σ N) / (1 + N).

    ``q``: the child's value estimate; ``n``: its visit count N; ``n_parent_children_total``: Σ N over all children of
    its parent (the sibling visits, the child included); ``c``: exploration constant.
    """
    if n < 0 or n_parent_children_total < 0:
        raise ValueError(f"visit counts must be >= 0, got n={n}, n_parent_children_total={n_parent_children_total}")
    if n > n_parent_children_total:
        raise ValueError(f"n={n} exceeds the parent's children total {n_parent_children_total}")
    return float(q + c * math.sqrt(n_parent_children_total) / (1 + n))
