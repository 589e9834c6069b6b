"""The policy and frozen reference of a PPO run, full or LoRA.

Full fine-tuning (``lora.enabled`` false): the policy is ``model`` (or a checkpoint's ``policy/``) and the KL
reference is a second, frozen copy of ``model``, loaded only when ``kl_coef`` > 0.

LoRA (``lora.enabled`` true): the policy is ``model`` wrapped in peft adapters (:class:`~effirag.train.sft.LoraConfig`,
the same section GRPO and SFT read), of which only the adapters receive gradients; the value head on top stays fully
trained. The base weights therefore never change, so the reference — the start model — is the same network with its
adapters switched off (:class:`AdapterDisabled`, peft's ``disable_adapter()``): one model in memory instead of two,
which is what lets a KL-penalised PPO of a large policy fit where its full copy would not. A checkpoint holds the
adapter alone (``checkpoint-N/adapter``); resuming puts it back on ``model``, trainable. The policy runs in eval mode
throughout PPO, so ``lora.dropout`` has no effect here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from effirag.errors import ConfigError
from effirag.train.rl.ppo_config import PPORunConfig
from effirag.train.sft import LoraConfig, peft_config


class AdapterDisabled:
    """The frozen reference of a LoRA policy: calling it runs ``policy`` with its adapters off, which is the base model
    the policy was built on (LoRA training never changes it). It has no weights of its own and no gradient flows."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy

    def __call__(self, **inputs: Any) -> Any:
        with self.policy.disable_adapter():
            return self.policy(**inputs)


def lora_policy(lora: LoraConfig, base: Any, seed: int, adapter: Path | None = None) -> Any:
    """``base`` with trainable LoRA adapters: new ones (their random init drawn from ``seed``, leaving torch's global
    random stream as it was), or the ones saved in ``adapter`` (a checkpoint), whose rank and alpha must be
    ``lora``'s."""
    import torch
    from peft import PeftModel, get_peft_model

    if adapter is None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return get_peft_model(base, peft_config(lora))
    model = PeftModel.from_pretrained(base, str(adapter), is_trainable=True)
    saved: Any = model.peft_config["default"]  # peft's LoraConfig
    if (saved.r, saved.lora_alpha) != (lora.r, lora.alpha):
        raise ConfigError(
            "PPORunConfig",
            "lora",
            f"r={lora.r}, alpha={lora.alpha}",
            f"{adapter} holds r={saved.r}, alpha={saved.lora_alpha}: resume with the run's own LoRA settings",
        )
    return model


def model_folder(cfg: PPORunConfig) -> str:
    """The name of a checkpoint's trained-model folder: ``adapter`` with LoRA, else ``policy``."""
    return "adapter" if cfg.lora.enabled else "policy"


def load_policy(cfg: PPORunConfig, checkpoint: Path | None) -> tuple[Any, Any]:
    """(policy, reference or None) on ``cfg.device``: from ``cfg.env.model``, or with the trained weights of
    ``checkpoint`` (see the module docstring)."""
    from transformers import AutoModelForCausalLM

    saved = checkpoint / model_folder(cfg) if checkpoint else None
    if saved is not None and not saved.is_dir():
        raise ConfigError(
            "PPORunConfig",
            "lora.enabled",
            cfg.lora.enabled,
            f"{checkpoint} has no {saved.name}/: it was written by a run with lora.enabled={not cfg.lora.enabled}",
        )
    if not cfg.lora.enabled:
        policy: Any = AutoModelForCausalLM.from_pretrained(str(saved or cfg.env.model_dir))
        ref: Any = (
            AutoModelForCausalLM.from_pretrained(cfg.env.model_dir) if cfg.kl_coef > 0 else None
        )  # the start model
        return policy.to(cfg.device), None if ref is None else ref.to(cfg.device)
    base = AutoModelForCausalLM.from_pretrained(
        cfg.env.model_dir
    )  # on the CPU: the adapters' init uses the CPU generator
    policy = lora_policy(cfg.lora, base, cfg.seed, saved).to(cfg.device)
    return policy, AdapterDisabled(policy) if cfg.kl_coef > 0 else None
