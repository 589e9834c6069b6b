"""A whole GRPO run from config: a tiny random-init policy, a BM25 index over a handful of passages and a question
file, all built here. Five steps change every trained parameter and write the per-step log, checkpoints and the
final policy; ``--resume`` after kill -9 ends at the weights of an uninterrupted run."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from effirag.config import load_config
from effirag.errors import ConfigError
from effirag.train.rl.grpo import GRPORunConfig
from effirag.train.rl.log import read_steps
from effirag.train.rl.run import run_grpo
from rl_overrides import tiny_rl_overrides

pytestmark = pytest.mark.slow


RL_QUESTIONS_N = 2  # questions in the run's file (the `setup` fixture of conftest.py builds it)


def _overrides(setup: dict[str, str], out: Path, steps: int = 5) -> list[str]:
    # Memory cost with α = 1: random turns differ in length, so every group has non-zero advantages.
    return [
        *tiny_rl_overrides(setup, out),
        f"max_steps={steps}",
        "learning_rate=0.001",
        "num_generations=3",
        "beta=0.04",
        "scale_rewards=none",
        "objective.cost=memory",
        "objective.cost_alpha=1.0",
    ]


def _weights(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_five_steps_change_every_parameter_and_write_log_and_checkpoints(setup: dict[str, str], tmp_path: Path) -> None:
    cfg = load_config(GRPORunConfig, Path("configs/rl/dsr1_grpo_cost.yaml"), _overrides(setup, tmp_path / "run"))
    res = run_grpo(cfg)
    assert res.steps == 5
    steps = read_steps(tmp_path / "run" / "steps.jsonl")
    assert [r["step"] for r in steps] == [1, 2, 3, 4, 5]
    keys = ["reward", "reward/total", "em", "reward/cost", "kl", "entropy", "clip_ratio/region_mean", "format_rate"]
    keys += ["generated_tokens_per_q", "inserted_tokens_per_q", "searches_per_q", "generation_s", "retrieval_s"]
    for key in [*keys, "update_s", "reward_s", "logprob_s", "overhead_s"]:
        assert all(key in r for r in steps), key
    assert all(r["reward_s"] > 0 and r["overhead_s"] >= r["reward_s"] for r in steps)  # the reward was timed
    assert all(r["questions"] == 6 for r in steps)
    assert (tmp_path / "run" / "checkpoint-5").is_dir() and (tmp_path / "run" / "config.yaml").is_file()
    assert (tmp_path / "run" / "curves.png").stat().st_size > 0
    before, after = _weights(Path(setup["model"])), _weights(res.policy_dir)
    assert before.keys() == after.keys()
    unchanged = [k for k in before if (before[k] == after[k]).all()]
    assert unchanged == []
    with pytest.raises(ConfigError, match="holds a run already"):
        run_grpo(cfg)


def test_micro_batches_accumulate_to_the_same_step(setup: dict[str, str], tmp_path: Path) -> None:
    """``micro_batch_rows=3`` splits a step's 6 rows (2 questions × G 3) into two passes accumulated into one optimiser
    step: the same rollout (one generation per step, the same seed), so the loss and the gradient norm of each step
    equal the one-pass run's (tolerance: relative 1e-4, float32 sums taken in another order). A value that does not
    divide the rows is refused."""
    runs = {}
    for micro in (0, 3):
        out = tmp_path / f"micro{micro}"
        cfg = load_config(
            GRPORunConfig,
            Path("configs/rl/dsr1_grpo_cost.yaml"),
            [*_overrides(setup, out, 2), f"micro_batch_rows={micro}"],
        )
        assert run_grpo(cfg).steps == 2
        runs[micro] = read_steps(out / "steps.jsonl")
        state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
        assert state["train_batch_size"] == (micro or 6) and state["global_step"] == 2  # rows per pass
    for one, split in zip(runs[0], runs[3], strict=True):
        assert split["questions"] == one["questions"] == 6
        assert split["reward/total"] == one["reward/total"]  # the same samples
        assert split["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-4)
        assert split["loss"] == pytest.approx(one["loss"], rel=1e-4, abs=1e-7)
    with pytest.raises(ConfigError, match=r"micro_batch_rows.*must be 0 or divide the step's 6 rows"):
        load_config(
            GRPORunConfig, Path("configs/rl/dsr1_grpo_cost.yaml"), [*_overrides(setup, tmp_path), "micro_batch_rows=4"]
        )


def test_resume_after_kill_ends_at_the_uninterrupted_weights(
    setup: dict[str, str], tmp_path: Path, rl_kill_and_resume: Any
) -> None:
    """Tolerance: max |Δw| ≤ 1e-6 per tensor (CPU float32; the same seeds and data order replayed from the checkpoint
    and its RNG states)."""
    worst = rl_kill_and_resume(
        "grpo",
        Path("configs/rl/dsr1_grpo_cost.yaml"),
        lambda out: _overrides(setup, out),
        tmp_path / "full",
        tmp_path / "cut",
        "trainer_state.json",
        _weights,
    )
    assert worst <= 1e-6
    assert [s["step"] for s in read_steps(tmp_path / "cut" / "steps.jsonl")] == [1, 2, 3, 4, 5]


def test_step_seconds_split_the_step_by_part() -> None:
    """A 10 s step: rollout 6 s (generation 4, retrieval 1.5, so the engine's own 0.5), reward 0.25 s, no-gradient
    log-probs 1 s. Overhead = 0.5 + 0.25 = 0.75; update = 10 − 6 − 0.25 − 1 = 2.75."""
    from effirag.train.rl.log import step_seconds

    got = step_seconds(
        10.0, {"rollout_s": 6.0, "generation_s": 4.0, "retrieval_s": 1.5}, {"reward_s": 0.25, "logprob_s": 1.0}
    )
    assert got == {"step_s": 10.0, "reward_s": 0.25, "logprob_s": 1.0, "overhead_s": 0.75, "update_s": 2.75}


def test_step_seconds_keep_the_weight_sync_out_of_the_overhead() -> None:
    """The step above with 0.4 s of its rollout spent loading the policy's weights into the generator (sync_s):
    overhead = 6 − 0.4 − 4 − 1.5 + 0.25 = 0.35; update unchanged, 10 − 6 − 0.25 − 1 = 2.75."""
    from effirag.train.rl.log import step_seconds

    stats = {"rollout_s": 6.0, "sync_s": 0.4, "generation_s": 4.0, "retrieval_s": 1.5}
    got = step_seconds(10.0, stats, {"reward_s": 0.25, "logprob_s": 1.0})
    assert got == pytest.approx(
        {"step_s": 10.0, "reward_s": 0.25, "logprob_s": 1.0, "overhead_s": 0.35, "update_s": 2.75}
    )


def test_call_timer_times_only_the_named_bucket() -> None:
    from effirag.train.rl.log import CallTimer

    timer = CallTimer()
    slow = timer.wrap(lambda: time.sleep(0.05) or 7, lambda: "a")
    untimed = timer.wrap(lambda: time.sleep(0.05) or 8, lambda: None)
    assert (slow(), untimed()) == (7, 8)
    assert set(timer.seconds) == {"a"} and timer.seconds["a"] >= 0.05
    timer.reset()
    assert dict(timer.seconds) == {}


def test_lora_two_steps_save_the_adapter_and_a_merged_policy_that_agree(setup: dict[str, str], tmp_path: Path) -> None:
    """LoRA GRPO: only the adapted linear weights move (embeddings and norms stay), the adapter is saved alone, and
    the base model with that adapter loaded computes the merged policy's logits (float32, atol 1e-5)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    lora = ["lora.enabled=true", "lora.r=4", "lora.alpha=8", "lora.dropout=0.0", "beta=0.0"]
    cfg = load_config(
        GRPORunConfig, Path("configs/rl/dsr1_grpo_cost.yaml"), [*_overrides(setup, tmp_path / "run", 2), *lora]
    )
    res = run_grpo(cfg)
    assert res.steps == 2 and len(read_steps(tmp_path / "run" / "steps.jsonl")) == 2
    before, after = _weights(Path(setup["model"])), _weights(res.policy_dir)
    assert before.keys() == after.keys()
    moved = {k for k in before if not torch.equal(before[k], after[k])}
    assert any("q_proj" in k for k in moved) and not any("embed" in k or "norm" in k for k in moved), sorted(moved)
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    base = AutoModelForCausalLM.from_pretrained(setup["model"])
    adapted = PeftModel.from_pretrained(base, str(tmp_path / "run" / "adapter")).eval()
    merged = AutoModelForCausalLM.from_pretrained(res.policy_dir).eval()
    with torch.no_grad():
        assert torch.allclose(adapted(ids).logits, merged(ids).logits, atol=1e-5)
