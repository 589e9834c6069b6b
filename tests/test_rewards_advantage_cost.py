"""The group z-score (RouteRAG eq. 8), Dynamic Search-R1 costs and cost-aware advantages (eq. 2, 3, 5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from effirag.rewards.advantage import zscore
from effirag.rewards.cost import grpo_cost_aware_advantages, latency_cost, memory_cost, ppo_cost_reward


def _z(values: object) -> list[float]:
    return [float(x) for x in zscore(values)]  # type: ignore[arg-type]


def test_zscore_hand_worked() -> None:
    """rewards [1, 0, 0, 1]: mean 0.5; deviations ±0.5; population variance (4·0.25)/4 = 0.25 → std 0.5;
    advantages [+1, −1, −1, +1]. (TRL's ddof = 1 would give std √(1/3) ≈ 0.577 and ±0.866.)"""
    assert _z([1.0, 0.0, 0.0, 1.0]) == pytest.approx([1.0, -1.0, -1.0, 1.0])


def test_zscore_uneven() -> None:
    """rewards [2, 0, 1]: mean 1; deviations [1, −1, 0]; variance 2/3 → std √(2/3) ≈ 0.816497;
    advantages [1/0.816497, −1/0.816497, 0] = [1.224745, −1.224745, 0]."""
    assert _z([2.0, 0.0, 1.0]) == pytest.approx([1.224745, -1.224745, 0.0], abs=1e-6)


def test_zscore_edges() -> None:
    """Group of one → std 0 → [0]; empty group → []; all-equal floats whose computed std is ~1e-17 → zeros, no NaN."""
    assert _z([0.7]) == [0.0]
    assert _z([]) == []
    equal = [0.1 + 0.2, 0.3, 0.30000000000000004]  # 0.1 + 0.2 is 0.30000000000000004 in floating point
    assert _z(equal) == [0.0, 0.0, 0.0]
    assert _z(np.array([0.3, 0.3, 0.3])) == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="not finite"):
        _z([1.0, float("nan")])


def test_memory_and_latency_cost_hand_worked() -> None:
    """memory: 120 generated + 380 inserted = 500 tokens.
    latency: 120·0.02 + 380·0.001 = 2.4 + 0.38 = 2.78 s.
    batch: generated [10, 0], inserted [0, 100], c_g 0.5, c_e 0.01 → [5.0, 1.0]."""
    assert memory_cost(120, 380) == 500.0
    assert latency_cost(120, 380, c_g=0.02, c_e=0.001) == pytest.approx(2.78)
    assert latency_cost([10, 0], [0, 100], 0.5, 0.01).tolist() == pytest.approx([5.0, 1.0])
    assert memory_cost([0], [0]).tolist() == [0.0]  # an empty trajectory costs nothing
    with pytest.raises(ValueError, match="inserted_tokens"):
        memory_cost(1, -1)
    with pytest.raises(ValueError, match="c_g"):
        latency_cost(1, 1, c_g=-0.1, c_e=0.0)


def test_grpo_cost_aware_advantages_hand_worked() -> None:
    """rewards [1, 1, 0, 0]: mean 0.5, std 0.5 → z_r = [1, 1, −1, −1].
    costs [100, 300, 200, 200]: mean 200, deviations [−100, 100, 0, 0], variance 20000/4 = 5000, std 70.7107
    → z_c = [−1.414214, 1.414214, 0, 0].
    α = 0.5: A = z_r − 0.5·z_c = [1 + 0.707107, 1 − 0.707107, −1, −1] = [1.707107, 0.292893, −1, −1]."""
    out = grpo_cost_aware_advantages([1, 1, 0, 0], [100, 300, 200, 200], alpha=0.5)
    assert out == pytest.approx([1.707107, 0.292893, -1.0, -1.0], abs=1e-6)


def test_grpo_cost_aware_advantages_equal_columns() -> None:
    """All-equal costs → z_c = 0 → plain GRPO: rewards [1, 0] → [1, −1].
    All-equal rewards [1, 1], costs [10, 30] → z_r = 0, z_c = [−1, 1] → A = −α·z_c = [0.2, −0.2] for α = 0.2.
    All equal both → [0, 0] (no NaN). Group of one → [0]."""
    assert grpo_cost_aware_advantages([1, 0], [50, 50], alpha=1.0) == pytest.approx([1.0, -1.0])
    assert grpo_cost_aware_advantages([1, 1], [10, 30], alpha=0.2) == pytest.approx([0.2, -0.2])
    out = grpo_cost_aware_advantages([0.5, 0.5], [7, 7], alpha=3.0)
    assert out == [0.0, 0.0] and not any(math.isnan(x) for x in out)
    assert grpo_cost_aware_advantages([1.0], [123.0], alpha=1.0) == [0.0]
    with pytest.raises(ValueError, match="differ in shape"):
        grpo_cost_aware_advantages([1, 0], [1], alpha=1.0)


def test_ppo_cost_reward_hand_worked() -> None:
    """r = 1, c = 2, α = 0.1: r − αc = 0.8 > rε = 0.2 → 0.8.
    r = 1, c = 20, α = 0.1: r − αc = −1 < rε = 0.2 → 0.2 (the floor).
    r = 0, c = 5: max(0, −0.5) = 0 — a wrong answer is not punished further for its cost."""
    assert ppo_cost_reward(1.0, 2.0, alpha=0.1) == pytest.approx(0.8)
    assert ppo_cost_reward(1.0, 20.0, alpha=0.1) == pytest.approx(0.2)
    assert ppo_cost_reward(0.0, 5.0, alpha=0.1) == 0.0
    assert ppo_cost_reward(1.0, 20.0, alpha=0.1, epsilon=0.5) == pytest.approx(0.5)
