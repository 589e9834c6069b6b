"""ReasonRAG SPRE (eq. 1) and UCT (eq. 5); RouteRAG stage-2 efficiency rewards (Appendix A, eq. 6–7)."""

from __future__ import annotations

import math

import pytest

from effirag.rewards.routerag import efficiency_rewards
from effirag.rewards.spre import spre_value, uct_score


def test_spre_value_hand_worked() -> None:
    """k = 3 rollouts, α = 0.9: values [1, 0, 1], steps [2, 1, 4].
    1·0.9² = 0.81; 0·0.9 = 0; 1·0.9⁴ = 0.6561. Sum 1.4661, /3 = 0.4887."""
    assert spre_value([1.0, 0.0, 1.0], [2, 1, 4], alpha=0.9) == pytest.approx(0.4887)


def test_spre_prefers_short_paths() -> None:
    """Both rollouts correct: 1 step → 0.5¹ = 0.5; 3 steps → 0.5³ = 0.125. α = 1 removes the discount: mean 1."""
    assert spre_value([1.0], [1], alpha=0.5) == 0.5
    assert spre_value([1.0], [3], alpha=0.5) == 0.125
    assert spre_value([1.0, 1.0], [1, 3], alpha=1.0) == 1.0


def test_spre_edges() -> None:
    """No rollouts → 0.0 (an unexplored node's value); mismatched lengths and α outside (0, 1] are errors."""
    assert spre_value([], [], alpha=0.9) == 0.0
    with pytest.raises(ValueError, match="equal length"):
        spre_value([1.0], [1, 2], alpha=0.9)
    with pytest.raises(ValueError, match="alpha"):
        spre_value([1.0], [1], alpha=0.0)


def test_uct_score_hand_worked() -> None:
    """Q = 0.5, N = 3, ΣN = 16, c = 1.4: 0.5 + 1.4·√16/(1 + 3) = 0.5 + 1.4·4/4 = 1.9.
    Unvisited child: Q = 0, N = 0, ΣN = 9, c = 2: 0 + 2·3/1 = 6.
    No visits anywhere: ΣN = 0 → Q alone."""
    assert uct_score(0.5, 3, 16, 1.4) == pytest.approx(1.9)
    assert uct_score(0.0, 0, 9, 2.0) == 6.0
    assert uct_score(0.25, 0, 0, 2.0) == 0.25
    with pytest.raises(ValueError, match="exceeds"):
        uct_score(0.0, 5, 4, 1.0)


def test_efficiency_rewards_hand_worked() -> None:
    """outcomes [1, 1, 0, 1], times [0.2, 0.6, 0.1, 0.3] s, T = 0.5.
    t_avg = (0.2 + 0.6 + 0.1 + 0.3)/4 = 0.3 (the wrong rollout's time counts too).
    r₀ = 1 + (0.3 − 0.2)/0.5 = 1.2; r₁ = 1 + (0.3 − 0.6)/0.5 = 0.4; r₂ = 0 (wrong: outcome kept);
    r₃ = 1 + 0/0.5 = 1.0."""
    out = efficiency_rewards([1, 1, 0, 1], [0.2, 0.6, 0.1, 0.3], T=0.5)
    assert out == pytest.approx([1.2, 0.4, 0.0, 1.0])


def test_efficiency_rewards_edges() -> None:
    """Empty batch → []; a batch of one correct rollout → its time is the mean → outcome unchanged;
    all-equal times → no bonus; T ≤ 0 is refused."""
    assert efficiency_rewards([], [], T=1.0) == []
    assert efficiency_rewards([1.0], [3.0], T=1.0) == [1.0]
    out = efficiency_rewards([1.0, 0.0], [0.5, 0.5], T=2.0)
    assert out == [1.0, 0.0] and not any(math.isnan(x) for x in out)
    with pytest.raises(ValueError, match="T="):
        efficiency_rewards([1.0], [1.0], T=0.0)
