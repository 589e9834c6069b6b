"""PPO's value model (critic), shared or separate.

- ``critic: shared`` (default): :class:`ValueHead`, a linear layer on the policy's last hidden state. One model in
  memory and one forward pass give both log-probs and values; the value loss also shapes the shared trunk, weighted
  by ``vf_coef``.
- ``critic: separate``: :class:`SeparateCritic`, a value model of its own as Search-R1 and verl's PPO train it: the
  trunk of a causal LM (``critic_model``, by default the policy's start model; loaded without its LM head) with its
  own linear :class:`ValueHead`, its own AdamW parameter group (``critic_lr``) and its own gradient-norm clipping.
  ``critic_lora`` trains LoRA adapters on its trunk instead of every weight (the head trains fully). The policy's
  loss then never reaches the critic and the value loss never reaches the policy.

A checkpoint (and the run's output folder) holds the value head in ``value_head.safetensors`` either way; a separate
critic's trunk is saved beside it in ``critic/`` (``save_pretrained``: the whole trunk, or with ``critic_lora`` its
adapter alone, which a resumed run puts back on ``critic_model``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from effirag.errors import ConfigError
from effirag.train.rl.ppo_batch import PPOBatch, forward
from effirag.train.rl.ppo_config import PPORunConfig
from effirag.train.rl.sources import policy_folder
from effirag.train.sft import LoraConfig, peft_config

CRITIC_FOLDER = "critic"


class ValueHead(torch.nn.Module):
    """V(s_t) = w·h_t + b on a last hidden state h_t [.., H] → [.., 1]; seeded small init, zero bias."""

    def __init__(self, hidden_size: int, seed: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(hidden_size, 1)
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            self.linear.weight.copy_(torch.randn(1, hidden_size, generator=g) / hidden_size)
            self.linear.bias.zero_()

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.linear(hidden)  # type: ignore[no-any-return]


class SeparateCritic(torch.nn.Module):
    """A value model of its own: ``trunk`` (a Hugging Face base model, e.g. ``AutoModel``; or its peft wrapper) and
    ``head``. Called with a batch's ids and attention [B, L], it returns values [B, T], T = L − 1: column j is the
    value of the state before token j + 1 (the column layout of :mod:`effirag.train.rl.ppo_batch`)."""

    def __init__(self, trunk: Any, head: ValueHead) -> None:
        super().__init__()
        self.trunk = trunk
        self.head = head

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out = self.trunk(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        hidden = out.last_hidden_state[:, :-1]  # [B, T, H]
        return self.head(hidden.float()).squeeze(-1)  # type: ignore[no-any-return]


def load_critic(cfg: PPORunConfig, checkpoint: Path | None = None) -> SeparateCritic | None:
    """The separate critic of PPO run ``cfg`` on ``cfg.device`` (None for ``critic: shared``): the trunk of
    ``cfg.critic_model`` (or ``cfg.env.model``), with LoRA adapters when ``cfg.critic_lora.enabled`` (their init drawn
    from ``cfg.seed + 1``, torch's global stream untouched); from ``checkpoint``'s ``critic/`` when given. The head is
    freshly initialised; a resumed run loads its weights with the checkpoint's value head."""
    from transformers import AutoModel

    if cfg.critic != "separate":
        return None
    source = cfg.critic_model or policy_folder(cfg)
    if not Path(source).is_dir():
        raise ConfigError("PPORunConfig", "critic_model", source, "must be a local Hugging Face model directory")
    saved = checkpoint / CRITIC_FOLDER if checkpoint is not None else None
    if saved is not None and not saved.is_dir():
        raise ConfigError("PPORunConfig", "critic", cfg.critic, f"{checkpoint} has no {CRITIC_FOLDER}/ to resume")
    if not cfg.critic_lora.enabled:
        trunk: Any = AutoModel.from_pretrained(str(saved or source))
    else:
        trunk = _lora_trunk(cfg.critic_lora, AutoModel.from_pretrained(source), cfg.seed + 1, saved)
    head = ValueHead(int(trunk.config.hidden_size), cfg.seed)
    return SeparateCritic(trunk, head).to(cfg.device).eval()


def _lora_trunk(lora: LoraConfig, base: Any, seed: int, adapter: Path | None) -> Any:
    from peft import PeftModel, get_peft_model

    if adapter is not None:
        return PeftModel.from_pretrained(base, str(adapter), is_trainable=True)
    config = peft_config(lora)
    config.task_type = "FEATURE_EXTRACTION"  # a trunk without LM head: forward returns its hidden states
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return get_peft_model(base, config)


def save_critic(critic: SeparateCritic | None, folder: Path) -> None:
    """Write a separate critic's trunk to ``folder/critic`` (nothing for a shared critic)."""
    if critic is not None:
        critic.trunk.save_pretrained(str(folder / CRITIC_FOLDER))


def logits_and_values(
    policy: Any, head: ValueHead, critic: SeparateCritic | None, batch: PPOBatch, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The policy's logits [B, L, V] and the values [B, T] of ``batch``: from the policy's own hidden state (shared
    ``head``) or from the separate ``critic``'s forward pass."""
    if critic is None:
        logits, values = forward(policy, head, batch, temperature)
        assert values is not None
        return logits, values
    logits, _ = forward(policy, None, batch, temperature)
    return logits, critic(batch.input_ids, batch.attention)
