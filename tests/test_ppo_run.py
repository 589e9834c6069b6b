"""A whole PPO run from config: a tiny random-init policy, a BM25 index over a handful of passages and a question
file, all built here. Five steps change every trained parameter (policy and value head) and write the per-step log,
checkpoints and the final policy; ``--resume`` after kill -9 ends at the weights of an uninterrupted run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from effirag.config import load_config
from effirag.errors import ConfigError
from effirag.train.rl.log import read_steps
from effirag.train.rl.ppo_config import PPORunConfig
from effirag.train.rl.ppo_run import run_ppo
from rl_overrides import tiny_rl_overrides

pytestmark = pytest.mark.slow
CONFIG = Path("configs/rl/dsr1_ppo_cost.yaml")


def _overrides(setup: dict[str, str], out: Path, steps: int = 5) -> list[str]:
    return [
        *tiny_rl_overrides(setup, out),
        f"steps={steps}",
        "lr=0.001",
        "samples_per_question=2",
        "mini_batch_size=2",
        "ppo_epochs=2",
        "kl_coef=0.05",
        "objective.cost_alpha=0.01",
    ]


def _weights(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    out = load_file(str(folder / "model.safetensors"))
    head = folder.parent / "value_head.safetensors"
    if head.is_file():
        out.update({f"value_head.{k}": v for k, v in load_file(str(head)).items()})
    return out


def test_five_steps_change_every_parameter_and_write_log_and_checkpoints(setup: dict[str, str], tmp_path: Path) -> None:
    from safetensors.torch import load_file

    from effirag.train.rl.ppo_trainer import ValueHead

    cfg = load_config(PPORunConfig, CONFIG, _overrides(setup, tmp_path / "run"))
    res = run_ppo(cfg)
    assert res.steps == 5
    steps = read_steps(tmp_path / "run" / "steps.jsonl")
    assert [r["step"] for r in steps] == [1, 2, 3, 4, 5]
    keys = ["loss", "reward", "reward/total", "em", "reward/cost", "kl", "entropy", "clip_fraction", "value_loss"]
    keys += ["format_rate", "generated_tokens_per_q", "inserted_tokens_per_q", "searches_per_q", "generation_s"]
    keys += ["retrieval_s", "logprob_s", "update_s", "policy_loss", "clip_ratio/region_mean", "grad_norm"]
    for key in keys:
        assert all(key in r for r in steps), key
    assert all(r["questions"] == 4 for r in steps)
    assert any(r["kl"] > 0 for r in steps[1:]), "the policy never moved away from the reference"
    ckpt = tmp_path / "run" / "checkpoint-5"
    for name in ("policy/model.safetensors", "value_head.safetensors", "optimizer.pt", "rng.safetensors"):
        assert (ckpt / name).is_file(), name
    assert (tmp_path / "run" / "curves.png").stat().st_size > 0
    before, after = _weights(Path(setup["model"])), _weights(res.policy_dir)
    start_head = ValueHead(64, cfg.seed).state_dict()
    before.update({f"value_head.{k}": v for k, v in start_head.items()})
    assert before.keys() == after.keys() and "value_head.linear.weight" in after
    unchanged = [k for k in before if (before[k] == after[k]).all()]
    assert unchanged == []
    assert load_file(str(ckpt / "value_head.safetensors")).keys() == start_head.keys()
    with pytest.raises(ConfigError, match="holds a run already"):
        run_ppo(cfg)


def test_resume_after_kill_ends_at_the_uninterrupted_weights(
    setup: dict[str, str], tmp_path: Path, rl_kill_and_resume: Any
) -> None:
    """Tolerance: max |Δw| ≤ 1e-6 per tensor, policy and value head (CPU float32; question order, rollout seeds and
    mini-batch order are functions of (seed, step), and the checkpoint restores weights, AdamW state and RNG)."""
    worst = rl_kill_and_resume(
        "ppo", CONFIG, lambda out: _overrides(setup, out), tmp_path / "full", tmp_path / "cut", "state.json", _weights
    )
    assert worst <= 1e-6
    assert [s["step"] for s in read_steps(tmp_path / "cut" / "steps.jsonl")] == [1, 2, 3, 4, 5]
