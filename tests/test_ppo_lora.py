"""PPO with LoRA (configs/rl/searchr1_ppo_lora.yaml on the tiny random-init policy): two steps move only the adapters
and the value head (the base weights stay bit-identical, the optimiser holds nothing else, the KL reference is the
base with the adapters off), the saved adapter on the base model gives the merged policy's logits, and a run resumed
after step 1 ends step 2 at the weights of an uninterrupted run."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from effirag.config import load_config
from effirag.errors import ConfigError
from effirag.train.rl.log import read_steps
from effirag.train.rl.ppo_config import PPORunConfig
from effirag.train.rl.ppo_lora import AdapterDisabled
from effirag.train.rl.ppo_run import load_parts, run_ppo

pytestmark = pytest.mark.slow
CONFIG = Path("configs/rl/searchr1_ppo_lora.yaml")


def _cfg(setup: dict[str, str], out: Path, *extra: str) -> PPORunConfig:
    overrides = [
        *(f"env.{key}={value}" for key, value in setup.items()),  # model, index, questions
        f"output_dir={out}",
        "steps=2",
        "save_steps=1",
        "lr=0.01",
        "lora.r=4",
        "questions_per_step=2",
        "samples_per_question=2",
        "mini_batch_size=2",
        "kl_coef=0.05",
        "env.engine.max_steps=2",
        "env.engine.max_new_tokens=8",
        "env.engine.max_inserted_tokens=48",
        "env.engine.k=1",
        "env.engine.passage_mode=sparse",
        "objective.format_weight=0.5",  # random turns differ in format, so the advantages are not all 0
        *extra,
    ]
    return load_config(PPORunConfig, CONFIG, overrides)


@pytest.fixture(scope="module")
def full_run(setup: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted two-step LoRA PPO run; its output folder."""
    out = tmp_path_factory.mktemp("ppo-lora") / "full"
    assert run_ppo(_cfg(setup, out)).steps == 2
    return out


def test_two_steps_move_only_the_adapters_and_the_value_head(setup: dict[str, str], tmp_path: Path) -> None:
    from effirag.train.rl.ppo_trainer import ppo_step

    cfg = _cfg(setup, tmp_path / "run")
    assert cfg.lora.enabled
    parts, start = load_parts(cfg, tmp_path / "run", resume=False)
    assert start == 0
    assert isinstance(parts.ref, AdapterDisabled) and parts.ref.policy is parts.policy  # no second copy
    before = {n: p.detach().clone() for n, p in parts.policy.named_parameters()}
    head_before = {n: p.detach().clone() for n, p in parts.head.named_parameters()}
    lora = {n for n in before if "lora_" in n}
    assert lora and len(lora) < len(before)
    trained = {id(p) for n, p in parts.policy.named_parameters() if n in lora}
    trained |= {id(p) for p in parts.head.parameters()}
    assert {id(p) for g in parts.optimizer.param_groups for p in g["params"]} == trained

    records = [ppo_step(parts, step) for step in range(2)]

    # Adapters start with B = 0: the policy is the base model, so the KL to the reference is exactly 0 at first; once
    # trained, the adapted policy moves away from the adapters-off reference.
    assert records[0]["kl"] == 0.0
    assert records[1]["kl"] > 0
    after = dict(parts.policy.named_parameters())
    assert sorted(n for n in lora if torch.equal(before[n], after[n])) == []
    assert sorted(n for n in before.keys() - lora if not torch.equal(before[n], after[n])) == []
    head_after = dict(parts.head.named_parameters())
    assert all(not torch.equal(head_before[n], head_after[n]) for n in head_before)


def test_the_saved_adapter_on_the_base_gives_the_merged_policys_logits(setup: dict[str, str], full_run: Path) -> None:
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    assert (full_run / "checkpoint-1" / "adapter" / "adapter_config.json").is_file()
    assert not (full_run / "checkpoint-2" / "policy").exists()  # a LoRA checkpoint holds the adapter alone
    base_file = load_file(str(Path(setup["model"]) / "model.safetensors"))
    assert load_file(str(full_run / "policy" / "model.safetensors")).keys() == base_file.keys()  # merged: no lora_*
    ids = torch.tensor([list(range(3, 40)), list(range(60, 97))])
    base = AutoModelForCausalLM.from_pretrained(setup["model"]).eval()
    with torch.no_grad():
        base_logits = base(input_ids=ids).logits
        adapted = PeftModel.from_pretrained(base, str(full_run / "adapter")).eval()
        adapter_logits = adapted(input_ids=ids).logits
        merged = AutoModelForCausalLM.from_pretrained(str(full_run / "policy")).eval()
        merged_logits = merged(input_ids=ids).logits
    assert float((adapter_logits - base_logits).abs().max()) > 1e-3  # the adapter was trained
    assert float((adapter_logits - merged_logits).abs().max()) < 1e-4


def test_resume_after_step_one_ends_step_two_at_the_uninterrupted_weights(
    setup: dict[str, str], full_run: Path, tmp_path: Path
) -> None:
    """Tolerance: max |Δw| ≤ 1e-6 per tensor of the adapter and the value head (CPU float32, as the full-weight
    resume test); the adapters' init is drawn from the seed, the checkpoint restores them, AdamW's state and the RNG."""
    from safetensors.torch import load_file

    cut = tmp_path / "cut"
    run_ppo(_cfg(setup, cut, "steps=1"))
    assert [s["step"] for s in read_steps(cut / "steps.jsonl")] == [1]
    res = run_ppo(_cfg(setup, cut), resume=True)
    assert res.steps == 2
    assert [s["step"] for s in read_steps(cut / "steps.jsonl")] == [1, 2]
    for name in ("adapter/adapter_model.safetensors", "value_head.safetensors", "policy/model.safetensors"):
        a, b = load_file(str(full_run / name)), load_file(str(cut / name))
        assert a.keys() == b.keys() and a, name
        worst = max(float((a[k] - b[k]).abs().max()) for k in a)
        assert worst <= 1e-6, (name, worst)


def test_resuming_with_other_lora_settings_fails_naming_them(setup: dict[str, str], full_run: Path) -> None:
    with pytest.raises(ConfigError, match="has no policy/"):
        load_parts(_cfg(setup, full_run, "lora.enabled=false"), full_run, resume=True)
    with pytest.raises(ConfigError, match="holds r=4"):
        load_parts(_cfg(setup, full_run, "lora.r=8"), full_run, resume=True)
