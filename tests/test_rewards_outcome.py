"""Outcome rewards: EM (Search-R1, RouteRAG stage 1), F1 (TeaRAG eq. 5), cover-EM (HiPRAG's A)."""

from __future__ import annotations

import pytest

from effirag.rewards.outcome import cover_em_reward, em_reward, f1_reward, outcome_rewards


def test_outcome_rewards_hand_worked() -> None:
    """Prediction "the Arvel city", gold "Arvel" (normalised: "arvel city" vs "arvel").
    EM: "arvel city" ≠ "arvel" → 0. cover-EM: "arvel" ⊂ "arvel city" → 1.
    F1: common {arvel} = 1; precision 1/2, recall 1/1 → F1 = 2·(1/2)·1/(1/2 + 1) = 2/3."""
    assert em_reward("the Arvel city", ["Arvel"]) == 0.0
    assert cover_em_reward("the Arvel city", ["Arvel"]) == 1.0
    assert f1_reward("the Arvel city", ["Arvel"]) == pytest.approx(2 / 3)
    # max over aliases: the second gold equals the prediction
    assert em_reward("Arvel City", ["Arvel", "Arvel city"]) == 1.0


def test_outcome_rewards_no_answer_and_batch() -> None:
    """No prediction (episode ended without answer) → 0 under every metric; a batch maps pairwise:
    F1("Dunmore", "Dunmore") = 1, F1(None, …) = 0, F1("x y", "y z") = precision 1/2, recall 1/2 → 1/2."""
    assert em_reward(None, "Arvel") == f1_reward(None, "Arvel") == cover_em_reward(None, "Arvel") == 0.0
    out = outcome_rewards(["Dunmore", None, "x y"], ["Dunmore", ["Arvel"], "y z"], metric="f1")
    assert out == pytest.approx([1.0, 0.0, 0.5])
    with pytest.raises(ValueError, match="at least one gold"):
        em_reward("Arvel", [])
    with pytest.raises(ValueError, match="2 predictions but 1"):
        outcome_rewards(["a", "b"], ["a"], metric="em")
