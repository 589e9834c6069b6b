"""TRL's loss_type choices reach the loss: on one batch at the first step (probability ratio 1, no KL, so each policy
token's loss is −A of its episode), grpo, bnpo, dapo and dr_grpo normalise the same token losses differently."""

from __future__ import annotations

from pathlib import Path

import pytest

from effirag.rewards.compose import RewardConfig
from test_grpo_trainer import G1, G2, Q1, Q2, _loss_and_grads, _rows, _trainer, model_dir  # noqa: F401

# The cost-aware advantages and episode lengths of test_grpo_trainer's first test (hand-worked there).
A = [1.043141, 0.000278, -1.043418, 0.353553, -0.707107, 0.353553]
L = [24, 54, 23, 23, 42, 23]


@pytest.mark.slow
def test_loss_types_normalise_as_documented(model_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    """Σ_i A_i·L_i = 25.035384 + 0.015012 − 23.998614 + 8.131719 − 29.698494 + 8.131719 = −12.383274; Σ L = 189.
    grpo: −mean_i(A_i) = 0 (each group's advantages sum to 0); bnpo and dapo: −Σ A·L / Σ L = 0.065520;
    dr_grpo: −Σ A·L / (B · max_completion_length) = 12.383274 / (6 · 4096) = 0.000504."""
    expected = {"grpo": 0.0, "bnpo": 0.065520, "dapo": 0.065520, "dr_grpo": 0.000504}
    got = {}
    for loss_type in expected:
        reward = RewardConfig(cost="memory", cost_alpha=0.5)
        parts = _trainer(model_dir, tmp_path / loss_type, {Q1.question: G1, Q2.question: G2}, reward,
                         loss_type=loss_type)  # fmt: skip
        inputs = parts.trainer._generate_and_score_completions(_rows())
        assert inputs["completion_mask"].sum(1).tolist() == L
        got[loss_type], _ = _loss_and_grads(parts.trainer, inputs, None)
    assert got == pytest.approx(expected, abs=2e-5)
