"""RL rollouts on vLLM (``rollout.generator: vllm``): a vLLM engine in the trainer's process, the trainer's weights
loaded into it before every step, its sampled ids and behaviour log-probs the samples the trainers train on; and the
pure formulas that measure and correct the mismatch between vLLM's and the trainer's log-probs.

Sync. :class:`VLLMSync` is the rollout's generator factory (:data:`~effirag.train.rl.rollout.GeneratorFactory`): called
with the live policy network before a step's episodes, it starts the engine once (``vllm:`` over the run's ``model``
folder, float32, eager, its context the longest sequence the run's episode budgets allow: :func:`episode_context`),
then loads the policy's full weights (:func:`policy_weights`: a peft policy's LoRA deltas merged in, the trainer's
network left untouched) into vLLM's model through its workers' in-place ``reload_weights`` (the model's own
``load_weights`` maps the HF names onto vLLM's fused layers; the backend's post-load processing runs again), and
drops vLLM's prefix cache (cached KV blocks were computed with the old weights).

Mismatch. vLLM's kernels round differently from the trainer's forward pass, so the behaviour log-probs differ a little
from the trainer's recomputed ones even with equal weights. Every step logs the mean and max |Δ| over policy tokens
(:func:`logprob_gap`, named as TRL logs it: ``sampling/sampling_logp_difference/{mean,max}``); ``rollout.tis_cap`` > 0
weights each policy token's loss by the truncated importance ratio min(π_trainer / π_vLLM, cap) (:func:`tis_weights`;
Yao et al. 2025, "Your efficient RL framework secretly brings you off-policy RL training", as TRL's ``token_truncate``
and verl's TIS). Both compare the models' raw distributions (vLLM returns raw log-probs), which is the sampling
distribution at temperature 1.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from effirag.agent.config import EngineConfig
from effirag.errors import BackendError, ConfigError
from effirag.train.rl.rollout import GeneratorFactory, hf_generator

log = logging.getLogger(__name__)


def policy_weights(policy: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """(HF name, tensor) of every weight of ``policy`` as the plain model names it; for a peft model, each LoRA-wrapped
    layer's weight is its base weight + the active adapters' deltas (computed, not merged in place: the trainer's
    weights stay bit for bit)."""
    if not hasattr(policy, "peft_config"):
        for name, t in policy.state_dict().items():
            yield name, t.detach()
        return
    base = policy.get_base_model()
    deltas: dict[str, torch.Tensor] = {}
    for mname, mod in base.named_modules():
        if hasattr(mod, "base_layer") and hasattr(mod, "get_delta_weight"):
            for adapter in mod.active_adapters:
                d = mod.get_delta_weight(adapter).detach()
                deltas[f"{mname}.weight"] = deltas.get(f"{mname}.weight", 0) + d
    for name, t in base.state_dict().items():
        if "lora_" in name:
            continue
        plain = name.replace(".base_layer.", ".")
        yield plain, (t.detach() + deltas[plain]) if plain in deltas else t.detach()


class VLLMSync:
    """Generator factory: the live policy → the colocated vLLM generator with the policy's weights loaded (see the
    module docstring). ``sync_s`` holds the last sync's seconds."""

    def __init__(
        self,
        model_dir: str,
        *,
        kv_cache_gb: float = 1.0,
        seed: int = 0,
        chat: bool = False,
        context: int | None = None,
    ) -> None:
        self.model_dir, self.kv_cache_gb, self.seed, self.chat = model_dir, kv_cache_gb, seed, chat
        self.context = context  # tokens an episode's sequence can reach (None: the model's whole context)
        self.generator: Any = None
        self.sync_s = 0.0

    def __call__(self, policy: Any) -> Any:
        from effirag.llm.vllm_engine import VLLMGenerator

        if self.generator is None:
            self.generator = VLLMGenerator(
                self.model_dir,
                dtype="float32",
                max_model_len=self._max_model_len(),
                kv_cache_gb=self.kv_cache_gb,
                seed=self.seed,
                eager=True,
                chat=self.chat,
            ).load()
        t0 = time.perf_counter()
        self.load(policy)
        self.sync_s = time.perf_counter() - t0
        return self.generator

    def _max_model_len(self) -> int | None:
        """The engine's context: the episodes' (``context``), at most the model's own (vLLM refuses a longer one)."""
        from effirag.llm.vllm_engine import model_context

        if self.context is None:
            return None
        cfg_file = Path(self.model_dir) / "config.json"
        try:
            own = model_context(json.loads(cfg_file.read_text()))
        except (OSError, ValueError) as e:
            raise BackendError(f"vllm:{self.model_dir}: cannot read {cfg_file}: {e}") from e
        return self.context if own is None else min(self.context, own)

    def load(self, policy: Any) -> None:
        """Load ``policy``'s weights into the engine's model and drop the prefix cache."""
        weights = [(n, t.to("cpu", torch.float32)) for n, t in policy_weights(policy)]
        llm = self.generator.llm
        # vLLM's in-place reload: checkpoint-format (HF-named) tensors through the model's own load_weights, then the
        # backend's post-load processing again (the CPU backend repacks linear weights after loading).
        llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(weights), "is_checkpoint_format": True})
        llm.reset_prefix_cache()

    def close(self) -> None:
        if self.generator is not None:
            self.generator.close()
            self.generator = None


def rollout_generator(cfg: Any, tokenizer: Any) -> GeneratorFactory:
    """The generator factory a GRPO or PPO run config's ``rollout.generator`` names; episodes start in the chat
    template when ``env.model`` says ``?chat=1`` (:attr:`~effirag.env.EnvConfig.chat`)."""
    spec, chat = cfg.rollout.generator, cfg.env.chat
    if spec == "hf":
        return hf_generator(tokenizer, chat=chat)
    if spec == "vllm":
        context = episode_context(cfg.env.engine)
        return VLLMSync(
            cfg.env.model_dir, kv_cache_gb=cfg.rollout.vllm_kv_cache_gb, seed=cfg.seed, chat=chat, context=context
        )
    raise ConfigError("RolloutConfig", "generator", spec, "not a rollout generator (hf, vllm)")


def episode_context(engine: EngineConfig) -> int:
    """Most tokens one episode's sequence can hold under ``engine``'s budgets: the rollout engine's context length.

    A turn starts only while the episode's counted tokens are at most ``max_total_tokens`` and adds at most
    ``max_new_tokens``; the sequence also keeps sampled ids a parser cut from its counted text (at most one turn's
    ``max_new_tokens`` per earlier turn). So ``max_total_tokens + max_steps * max_new_tokens`` bounds it. E.g. the
    Gemma recipe's budgets (1536 total, 3 turns of 64): 1536 + 3 × 64 = 1728 tokens, where Gemma's own context is
    32,768: the KV cache vLLM must be able to hold for one sequence shrinks 19-fold. (A prompt longer than that
    bound fails in vLLM, which names both lengths.)"""
    return engine.max_total_tokens + engine.max_steps * engine.max_new_tokens


def logprob_gap(trainer: torch.Tensor, behaviour: torch.Tensor, mask: torch.Tensor) -> tuple[float, float]:
    """(mean, max) of |trainer − behaviour| over the positions where ``mask`` is 1 (tensors [B, T]); (0, 0) when none
    is."""
    d = (trainer - behaviour).abs()[mask > 0]
    return (float(d.mean()), float(d.max())) if d.numel() else (0.0, 0.0)


def tis_weights(trainer: torch.Tensor, behaviour: torch.Tensor, mask: torch.Tensor, cap: float) -> torch.Tensor:
    """Truncated importance-sampling weights [B, T]: min(exp(trainer − behaviour), cap) at mask-1 positions, 0
    elsewhere (Yao et al. 2025, TIS); no gradient flows through them."""
    if cap <= 0:
        raise ValueError(f"tis_cap must be > 0, got {cap}")
    ratio = torch.exp((trainer - behaviour).detach()).clamp(max=cap)
    return torch.where(mask > 0, ratio, torch.zeros_like(ratio))


class _SyncedElsewhere:
    """TRL's ``vllm_generation`` slot: the weights are synced by the rollout's :class:`VLLMSync`, not by TRL."""

    def sync_weights(self) -> None:
        return None


def trl_sampler_correction(trainer: Any, tis_cap: float) -> None:
    """Make TRL's GRPOTrainer treat the rollout's log-probs as a vLLM sampler's (its ``use_vllm`` path, TRL 1.x):
    it then recomputes the old log-probs every step, logs ``sampling/sampling_logp_difference/{mean,max}`` and
    multiplies each token's loss by its importance ratio clamped to [1, 1] (``tis_cap`` 0: weight exactly 1, no
    correction) or to [-, ``tis_cap``] (``token_truncate``: TIS). TRL's own vLLM engine is never built: the weight
    sync it would call is :class:`VLLMSync`'s, done by the rollout."""
    trainer.use_vllm = True
    trainer.vllm_generation = _SyncedElsewhere()
    trainer._last_loaded_step = -1
    trainer.vllm_importance_sampling_correction = True
    trainer.vllm_importance_sampling_mode = "token_truncate"
    trainer.vllm_importance_sampling_clip_min = None if tis_cap > 0 else 1.0
    trainer.vllm_importance_sampling_clip_max = tis_cap if tis_cap > 0 else 1.0
