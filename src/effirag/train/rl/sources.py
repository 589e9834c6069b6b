"""The pieces of a GRPO or PPO run's environment that both the trainer and each Ray rollout actor build from the run
config (:mod:`effirag.train.rl.rollout_ray`): the retriever and the policy network as the trainer holds it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from effirag.retrieval.base import Retriever
from effirag.retrieval.tokens import PolicyTokens


def make_retriever(cfg: Any, tokenizer: Any) -> Retriever | None:
    """The retriever a GRPO or PPO run config names: a client of ``cfg.retriever`` (`effirag serve retrieval`, which
    holds the index; item token counts are then the server's), else ``cfg.index`` loaded here, else None."""
    if cfg.retriever:
        from effirag.retrieval.remote import RemoteRetriever

        return RemoteRetriever(cfg.retriever, token=os.environ.get("EFFIRAG_TOKEN"))
    if cfg.index:
        from effirag.retrieval.facade import load_retriever

        reranker = Path(cfg.reranker) if cfg.reranker else None
        return load_retriever(cfg.index, tokenizer=PolicyTokens(tokenizer), reranker=reranker).load()
    return None


def policy_network(cfg: Any) -> Any:
    """``cfg.model`` as the trainer holds it: the plain causal LM, or with LoRA wrapped in the same peft adapters, so
    that its parameter names are the trainer's and the trainer's weights load into it strictly."""
    from transformers import AutoModelForCausalLM

    from effirag.train.rl.ppo_lora import lora_policy

    model = AutoModelForCausalLM.from_pretrained(cfg.model)
    return lora_policy(cfg.lora, model, cfg.seed) if cfg.lora.enabled else model
