"""GRPO with LoRA (the Gemma recipe's settings on the tiny random-init policy): the adapter is saved on its own, the
saved policy is the base with it merged in (same tensors; the adapted linear layers changed, the embeddings not).
The recipe's bfloat16 runs on a CPU too (autocast; transformers refuses it without ``use_cpu``).
Few-shot demos (``shots``) come from the questions file and are not trained on."""

from __future__ import annotations

from pathlib import Path

import pytest

from effirag.agent import get_protocol
from effirag.config import load_config
from effirag.data.questions import load_questions
from effirag.env import EnvConfig
from effirag.train.rl.grpo import GRPORunConfig
from effirag.train.rl.run import run_grpo

RL_QUESTIONS_N = 2


def test_shots_put_demos_in_the_prompt_and_take_them_out_of_the_training_questions(tmp_path: Path) -> None:
    from test_protocol_fewshot import _questions

    path = _questions(tmp_path)
    from effirag.env.build import _questions

    questions = load_questions(path).examples
    kept, protocol = _questions(EnvConfig(questions=str(path), shots=1), get_protocol("searchr1"))
    assert len(protocol.demos) == 1 and len(kept) == len(questions) - 1
    demo = protocol.demos[0]
    assert demo.id not in {q.id for q in kept}
    assert demo.question in protocol.build_prompt(kept[0].question)


@pytest.mark.slow
def test_lora_grpo_saves_the_adapter_and_a_merged_policy(setup: dict[str, str], tmp_path: Path) -> None:
    from safetensors.torch import load_file

    overrides = [f"env.{k}={v}" for k, v in setup.items()] + [
        f"output_dir={tmp_path / 'run'}",
        "env.shots=0",  # the tiny question file has no gold passages to make demos of
        "max_steps=2",
        "num_generations=2",
        "questions_per_step=2",
        "learning_rate=0.01",
        "lora.r=4",
        "env.engine.max_steps=2",
        "env.engine.max_new_tokens=8",
        "env.engine.k=1",
        # Memory cost: random turns differ in length, so every group has non-zero advantages (EM is 0 throughout).
        "scale_rewards=none",
        "objective.cost=memory",
        "objective.cost_alpha=1.0",
    ]
    cfg = load_config(GRPORunConfig, Path("configs/rl/searchr1_grpo_gemma_lora.yaml"), overrides)
    assert cfg.lora.enabled and cfg.env.shots == 0 and cfg.bf16
    res = run_grpo(cfg)
    assert res.steps == 2
    assert (tmp_path / "run" / "adapter" / "adapter_config.json").is_file()
    before, after = (
        load_file(str(Path(setup["model"]) / "model.safetensors")),
        load_file(str(res.policy_dir / "model.safetensors")),
    )
    assert before.keys() == after.keys()  # merged: no lora_A / lora_B tensors left
    changed = {k for k in before if not (before[k] == after[k]).all()}
    assert any(k.endswith("q_proj.weight") for k in changed), sorted(changed)
    assert not any("embed_tokens" in k for k in changed)
