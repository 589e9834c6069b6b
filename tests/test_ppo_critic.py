"""PPO's separate critic (``critic: separate``) beside the shared value head: settings checked, values from the
critic's own trunk with gradients kept apart from the policy's, five steps that move every policy and critic weight
and save the critic, and a LoRA critic resumed from a checkpoint ending at the uninterrupted run's weights."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from effirag.config import load_config
from effirag.env import EnvConfig
from effirag.errors import ConfigError
from effirag.train.ppo import ppo_policy_loss, value_loss
from effirag.train.rl.log import read_steps
from effirag.train.rl.ppo_batch import PPOBatch, token_logprobs
from effirag.train.rl.ppo_config import PPORunConfig
from effirag.train.rl.ppo_critic import SeparateCritic, load_critic, logits_and_values
from effirag.train.rl.ppo_run import run_ppo
from effirag.train.sft import LoraConfig

CONFIG = Path("configs/rl/dsr1_ppo_cost.yaml")


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"critic": "both"}, "critic"),  # not a critic kind
        ({"critic_model": "some/dir"}, "critic_model"),  # a model for the shared head, which has none
        ({"critic_lr": 1e-5}, "critic_lr"),  # its own lr likewise
        ({"critic_lora": LoraConfig(enabled=True)}, "critic_lora"),  # and its own adapters
        ({"critic": "separate", "critic_lr": -1.0}, "critic_lr"),  # a negative learning rate
    ],
)
def test_critic_settings_are_checked(settings: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        PPORunConfig(**settings)


def test_critic_model_must_be_a_folder(tmp_path: Path) -> None:
    cfg = PPORunConfig(env=EnvConfig(model=str(tmp_path)), critic="separate", critic_model=str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="critic_model"):
        load_critic(cfg)
    assert load_critic(PPORunConfig(env=EnvConfig(model=str(tmp_path)))) is None  # shared: no model of its own


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_models import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("critic") / "model", arch="qwen2", seed=3)


def test_separate_critic_reads_its_own_trunk_and_its_gradients_stay_apart(tiny: Path) -> None:
    """Values are the critic head on its own trunk's last hidden state, one per next-token column ([B, T]); the value
    loss gives the policy no gradient and the policy loss gives the critic none."""
    from transformers import AutoModel, AutoModelForCausalLM

    cfg = PPORunConfig(env=EnvConfig(model=str(tiny)), critic="separate")
    critic = load_critic(cfg)
    assert isinstance(critic, SeparateCritic) and not hasattr(critic.trunk, "lm_head")
    policy = AutoModelForCausalLM.from_pretrained(str(tiny)).eval()
    ids = torch.tensor([[5, 17, 40, 9, 2, 0], [7, 7, 30, 11, 4, 8]])
    attention = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])
    mask = torch.tensor([[0, 0, 1, 1, 0], [0, 1, 1, 0, 1]], dtype=torch.float32)
    batch = PPOBatch(ids, attention, mask)
    logits, values = logits_and_values(policy, critic.head, critic, batch, 1.0)
    assert tuple(logits.shape[:2]) == (2, 6) and tuple(values.shape) == (2, 5)
    with torch.no_grad():
        hidden = AutoModel.from_pretrained(str(tiny))(input_ids=ids, attention_mask=attention).last_hidden_state
        expected = critic.head(hidden[:, :-1]).squeeze(-1)
    assert torch.allclose(values.detach(), expected, atol=1e-5)

    returns = torch.ones_like(values)
    value_loss(values, values.detach(), returns, mask, 0.2).backward()  # type: ignore[no-untyped-call]
    assert all(p.grad is None for p in policy.parameters())
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in critic.parameters())
    critic.zero_grad(set_to_none=True)
    logp = token_logprobs(logits, ids, 1.0)
    ppo_policy_loss(logp, logp.detach() - 0.1, torch.ones_like(logp), mask, 0.2).backward()  # type: ignore[no-untyped-call]
    assert all(p.grad is None for p in critic.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.parameters())


def _overrides(setup: dict[str, str], out: Path, steps: int, *extra: str) -> list[str]:
    """test_ppo_run's tiny PPO run with a separate critic (a later key=value wins)."""
    from test_ppo_run import _overrides as base

    return [*base(setup, out, steps), "critic=separate", "critic_lr=0.01", *extra]


def _tensors(folder: Path, name: str = "model.safetensors") -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / name))


@pytest.mark.slow
def test_five_steps_move_policy_and_critic_and_save_the_critic(setup: dict[str, str], tmp_path: Path) -> None:
    from effirag.train.rl.ppo_critic import ValueHead

    cfg = load_config(PPORunConfig, CONFIG, _overrides(setup, tmp_path / "run", 5))
    assert run_ppo(cfg).steps == 5
    steps = read_steps(tmp_path / "run" / "steps.jsonl")
    assert [r["step"] for r in steps] == [1, 2, 3, 4, 5]
    assert all(r["critic_grad_norm"] > 0 and "value_loss" in r and "grad_norm" in r for r in steps)
    for folder in (tmp_path / "run", tmp_path / "run" / "checkpoint-5"):
        assert (folder / "critic" / "model.safetensors").is_file() and (folder / "value_head.safetensors").is_file()
    start = _tensors(Path(setup["model"]))
    policy = _tensors(tmp_path / "run" / "policy")
    assert start.keys() == policy.keys() and all((start[k] != policy[k]).any() for k in start)
    critic = _tensors(tmp_path / "run" / "critic")
    trunk_start = {k.removeprefix("model."): v for k, v in start.items() if k.startswith("model.")}
    assert critic.keys() == trunk_start.keys()  # the trunk alone: no LM head
    assert all((trunk_start[k] != critic[k]).any() for k in critic)
    head, head_start = _tensors(tmp_path / "run", "value_head.safetensors"), ValueHead(64, cfg.seed).state_dict()
    assert head.keys() == head_start.keys() and all((head[k] != head_start[k]).any() for k in head)


@pytest.mark.slow
def test_lora_critic_resumed_ends_at_the_uninterrupted_weights(setup: dict[str, str], tmp_path: Path) -> None:
    """Two steps in one go, or one step then ``resume`` from checkpoint-1: the policy, the critic's LoRA adapter
    and its head agree to 1e-6 (CPU float32); the critic's base weights never change (only its adapter is saved)."""
    lora = ("critic_lora.enabled=true", "critic_lora.r=4")
    full = load_config(PPORunConfig, CONFIG, _overrides(setup, tmp_path / "full", 2, *lora))
    run_ppo(full)
    cut = tmp_path / "cut"
    run_ppo(load_config(PPORunConfig, CONFIG, _overrides(setup, cut, 1, *lora)))
    assert (cut / "checkpoint-1" / "critic" / "adapter_model.safetensors").is_file()
    run_ppo(load_config(PPORunConfig, CONFIG, _overrides(setup, cut, 2, *lora)), resume=True)
    assert [r["step"] for r in read_steps(cut / "steps.jsonl")] == [1, 2]
    adapter = "adapter_model.safetensors"
    pairs = [
        (_tensors(tmp_path / "full" / "policy"), _tensors(cut / "policy")),
        (_tensors(tmp_path / "full" / "critic", adapter), _tensors(cut / "critic", adapter)),
        (_tensors(tmp_path / "full", "value_head.safetensors"), _tensors(cut, "value_head.safetensors")),
    ]
    for a, b in pairs:
        assert a.keys() == b.keys() and a
        assert max(float((a[k] - b[k]).abs().max()) for k in a) <= 1e-6
    critic = _tensors(tmp_path / "full" / "critic", adapter)
    assert all("lora_" in k for k in critic)  # the adapter alone
