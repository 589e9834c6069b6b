"""PPO's batch of agent episodes as tensors: padding, per-token log-probs and values from one forward pass, the
token-level rewards, advantages and returns, and one mini-batch's loss.

Positions. A batch row is ``prompt_ids + completion_ids`` of one :class:`~effirag.train.samples.EpisodeSample`,
right-padded to L tokens. Every per-token tensor is ``[B, T]`` with T = L − 1: column j scores token j + 1 from the
logits and the hidden state at position j (the state before that token was produced). ``mask[:, j]`` is 1 only where
token j + 1 was sampled by the policy, so prompt, inserted (retrieval observations, feedback) and padding columns carry
no reward, advantage, KL or loss: :func:`effirag.train.ppo.gae` runs over policy tokens as if the others were absent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import torch

from effirag.train.algos import TokenBatch
from effirag.train.ppo import clip_fraction, kl_k3, masked_mean, ppo_policy_loss, token_rewards, value_loss, whiten
from effirag.train.rl.ppo_config import PPORunConfig
from effirag.train.samples import EpisodeSample


@dataclass
class PPOBatch:
    """One step's episodes. ``input_ids`` / ``attention`` are [B, L]; every other tensor is [B, T], T = L − 1.

    ``old_logp`` / ``old_values``: the policy and value head before this step's update (no gradient); ``ref_logp``:
    the frozen reference; ``kl``: the per-token KL penalty's estimate; ``rewards``: token-level rewards (eq. 5);
    ``advantages`` (whitened if configured) and ``returns`` from GAE (eq. 4). ``behaviour_logp``: the sampler's
    log-probs of the policy tokens (0 elsewhere; None when the backend gave none); ``tis``: truncated importance
    weights against the sampler (None: off; :mod:`effirag.train.rl.vllm_sync`).
    """

    input_ids: torch.Tensor
    attention: torch.Tensor
    mask: torch.Tensor
    old_logp: torch.Tensor | None = None
    old_values: torch.Tensor | None = None
    ref_logp: torch.Tensor | None = None
    kl: torch.Tensor | None = None
    rewards: torch.Tensor | None = None
    advantages: torch.Tensor | None = None
    returns: torch.Tensor | None = None
    behaviour_logp: torch.Tensor | None = None
    tis: torch.Tensor | None = None

    def rows(self, index: torch.Tensor) -> PPOBatch:
        """The rows ``index`` of every tensor (a mini-batch)."""
        picked: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            picked[f.name] = None if value is None else value[index]
        return PPOBatch(**picked)

    def to(self, device: torch.device | str) -> PPOBatch:
        """The batch with every tensor on ``device``."""
        moved: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            moved[f.name] = None if value is None else value.to(device)
        return PPOBatch(**moved)

    def need(self, name: str) -> torch.Tensor:
        value = getattr(self, name)
        if value is None:
            raise ValueError(f"PPOBatch.{name} is not computed yet (prepare the batch before the update)")
        return value  # type: ignore[no-any-return]


def pad_samples(samples: Sequence[EpisodeSample], pad_id: int) -> PPOBatch:
    """Right-padded ids, attention and the policy-token mask of ``samples`` (see the module docstring)."""
    if not samples:
        raise ValueError("no episode samples to batch")
    length = max(len(s.input_ids) for s in samples)
    ids = torch.full((len(samples), length), pad_id, dtype=torch.long)
    attention = torch.zeros((len(samples), length), dtype=torch.long)
    mask = torch.zeros((len(samples), length), dtype=torch.float32)
    behaviour = torch.zeros((len(samples), length), dtype=torch.float32)
    for i, s in enumerate(samples):
        n = len(s.input_ids)
        ids[i, :n] = torch.tensor(s.input_ids, dtype=torch.long)
        attention[i, :n] = 1
        mask[i, :n] = torch.tensor(s.full_mask, dtype=torch.float32)
        if s.old_logprobs is not None:
            behaviour[i, len(s.prompt_ids) : n] = torch.tensor(s.old_logprobs, dtype=torch.float32)
    known = all(s.old_logprobs is not None for s in samples)
    return PPOBatch(ids, attention, mask[:, 1:], behaviour_logp=behaviour[:, 1:] if known else None)


def token_logprobs(logits: torch.Tensor, input_ids: torch.Tensor, temperature: float) -> torch.Tensor:
    """[B, T] log-probability of each next token under ``logits`` [B, L, V] / temperature (the sampling law)."""
    logp = torch.log_softmax(logits[:, :-1].float() / temperature, dim=-1)
    return logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)


def token_entropy(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """[B, T] entropy of the next-token distribution at each position."""
    logp = torch.log_softmax(logits[:, :-1].float() / temperature, dim=-1)
    return -(logp.exp() * logp).sum(-1)


def forward(
    model: Any, head: torch.nn.Module | None, batch: PPOBatch, temperature: float
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logits [B, L, V] of ``model`` and, with a value ``head``, values [B, T] read from the last hidden state."""
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention, output_hidden_states=head is not None)
    if head is None:
        return out.logits, None
    hidden = out.hidden_states[-1][:, :-1]  # [B, T, H]
    return out.logits, head(hidden.float()).squeeze(-1)


TokenAdvantages = Callable[[TokenBatch], tuple[torch.Tensor, torch.Tensor]]
"""The run's estimator at token level (:meth:`effirag.train.objective.Objective.token_advantages`): GAE for the
built-in ones (``ADVANTAGES['gae'].tokens``)."""


def shape_rewards(cfg: PPORunConfig, batch: PPOBatch, outcome: torch.Tensor, advantages: TokenAdvantages) -> None:
    """Fill ``kl``, ``rewards``, ``advantages`` and ``returns`` from the old / reference log-probs, the old values and
    each episode's ``outcome`` [B] (already cost-discounted): Dynamic Search-R1 eq. 5 for the rewards, then the run's
    estimator (``advantages``; GAE, eq. 4) for advantages and returns."""
    mask, old = batch.mask, batch.need("old_logp")
    ref = batch.ref_logp if batch.ref_logp is not None else old
    per_token = kl_k3(old, ref) if cfg.kl_estimator == "k3" else old - ref
    batch.kl = torch.where(mask > 0, per_token, torch.zeros_like(per_token))
    batch.rewards = token_rewards(outcome, batch.kl, mask, cfg.kl_coef)
    adv, ret = advantages(TokenBatch(batch.rewards, batch.need("old_values"), mask, cfg.gamma, cfg.lam))
    batch.advantages = whiten(adv, mask) if cfg.whiten else adv
    batch.returns = ret


def minibatch_loss(
    cfg: PPORunConfig, logits: torch.Tensor, values: torch.Tensor, batch: PPOBatch
) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss of one mini-batch, clipped surrogate + vf_coef · clipped value loss, and its statistics.

    Only mask-1 columns enter either term, so logits and values at prompt, inserted or padding positions have no
    effect on the loss or its gradient.
    """
    mask = batch.mask
    logp = token_logprobs(logits, batch.input_ids, cfg.temperature)  # [B, T]
    old, adv = batch.need("old_logp"), batch.need("advantages")
    policy = ppo_policy_loss(logp, old, adv, mask, cfg.clip_eps, batch.tis)
    vloss = value_loss(values, batch.need("old_values"), batch.need("returns"), mask, cfg.value_clip)
    loss = policy + cfg.vf_coef * vloss
    with torch.no_grad():
        stats = {
            "policy_loss": float(policy.detach()),
            "value_loss": float(vloss.detach()),
            "clip_fraction": clip_fraction(logp, old, adv, mask, cfg.clip_eps),
            "entropy": float(masked_mean(token_entropy(logits, cfg.temperature), mask)),
            "approx_kl_old": float(masked_mean(old - logp, mask)),
        }
    return loss, stats
