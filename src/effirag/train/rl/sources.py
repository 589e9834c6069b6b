"""The pieces of a GRPO or PPO run that both the trainer and each Ray rollout actor build from the run config
(:mod:`effirag.train.rl.rollout_ray`): the policy's folder and the policy network as the trainer holds it (the
retriever: :func:`effirag.env.make_retriever`)."""

from __future__ import annotations

from typing import Any


def policy_folder(cfg: Any) -> str:
    """``cfg.env.model`` as the local Hugging Face folder a trainer loads (``hf:DIR`` is taken as DIR); anything
    else fails naming the run config."""
    return str(cfg.env.trainer_model(type(cfg).__name__))


def policy_network(cfg: Any) -> Any:
    """``cfg.env.model`` as the trainer holds it: the plain causal LM, or with LoRA wrapped in the same peft
    adapters, so that its parameter names are the trainer's and the trainer's weights load into it strictly."""
    from transformers import AutoModelForCausalLM

    from effirag.train.rl.ppo_lora import lora_policy

    model = AutoModelForCausalLM.from_pretrained(policy_folder(cfg))
    return lora_policy(cfg.lora, model, cfg.seed) if cfg.lora.enabled else model
