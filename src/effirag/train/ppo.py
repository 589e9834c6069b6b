"""PPO's loss terms for multi-turn agent episodes, as pure functions over per-token tensors.

Search-R1's objective (restated as Dynamic Search-R1, Table 1) trains only the tokens the policy generated: the
indicator I(y_t) is 1 at policy tokens and 0 at the tokens the engine inserted (retrieved observations, feedback).
Here that indicator is ``mask``. Token-level rewards follow Dynamic Search-R1 eq. 5 (a per-token KL penalty to the
reference, plus the episode's outcome at the last policy token), advantages follow eq. 4 with generalised advantage
estimation (Schulman et al., 2016), and the losses are PPO's clipped surrogate and clipped value regression.

Shapes: every per-token tensor is ``[T]`` (one episode) or ``[B, T]`` (a padded batch), T = the tokens after the
prompt, in the order the episode produced them (policy turns and inserted observations interleaved). Nothing here
reads files or draws random numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

Tensorish = torch.Tensor | Sequence[float] | Sequence[Sequence[float]]


def _t(x: Tensorish, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return x if isinstance(x, torch.Tensor) else torch.tensor(x, dtype=dtype)


def _same_shape(**tensors: torch.Tensor) -> None:
    shapes = {name: tuple(t.shape) for name, t in tensors.items()}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"per-token tensors must have one shape, got {shapes}")


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``x`` over the positions where ``mask`` is 1 (all rows together); 0 when no position is."""
    m = mask.to(x.dtype)
    return (x * m).sum() / m.sum().clamp(min=1.0)


def gae(
    rewards: Tensorish, values: Tensorish, mask: Tensorish, gamma: float = 1.0, lam: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over policy tokens only (Dynamic Search-R1 eq. 4; Schulman et al. 2016).

    The recursion δ_t = r_t + γ·V_next − V_t, A_t = δ_t + γλ·A_next runs over the positions with ``mask`` 1 as if
    the masked (inserted) positions were absent: their rewards and values are ignored, and "next" is the next
    policy token. The value after the last policy token is 0. Advantages and returns are 0 at masked positions;
    elsewhere returns = advantages + values.

    Returns ``(advantages, returns)``, each of the input's shape ([T] or [B, T]).
    """
    r, v, m = _t(rewards), _t(values), _t(mask)
    _same_shape(rewards=r, values=v, mask=m)
    r, v = r.to(v.dtype), v
    on = m > 0
    adv = torch.zeros_like(v)
    next_v = torch.zeros_like(v[..., 0])  # [] or [B]
    next_a = torch.zeros_like(v[..., 0])
    for t in range(v.shape[-1] - 1, -1, -1):
        delta = r[..., t] + gamma * next_v - v[..., t]
        a = delta + gamma * lam * next_a
        adv[..., t] = torch.where(on[..., t], a, torch.zeros_like(a))
        next_v = torch.where(on[..., t], v[..., t], next_v)
        next_a = torch.where(on[..., t], a, next_a)
    returns = torch.where(on, adv + v, torch.zeros_like(v))
    return adv, returns


def ppo_policy_loss(
    logp_new: Tensorish,
    logp_old: Tensorish,
    advantages: Tensorish,
    mask: Tensorish,
    clip_eps: float,
    weights: Tensorish | None = None,
) -> torch.Tensor:
    """PPO's clipped surrogate (Search-R1 / Dynamic Search-R1 Table 1), as a loss to minimise.

    The mean over mask-1 tokens of w·max(−A·ρ, −A·clip(ρ, 1−ε, 1+ε)), ρ = exp(logp_new − logp_old), w = ``weights``
    (per-token importance weights, e.g. truncated IS against the sampler; None: 1). Gradients flow through
    ``logp_new`` only.
    """
    new, old, a, m = _t(logp_new), _t(logp_old), _t(advantages), _t(mask)
    _same_shape(logp_new=new, logp_old=old, advantages=a, mask=m)
    if clip_eps <= 0:
        raise ValueError(f"clip_eps must be > 0, got {clip_eps}")
    ratio = torch.exp(new - old.detach())
    a = a.detach().to(ratio.dtype)
    per_token = torch.maximum(-a * ratio, -a * torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps))
    if weights is not None:
        w = _t(weights)
        _same_shape(logp_new=new, weights=w)
        per_token = per_token * w.detach().to(per_token.dtype)
    return masked_mean(per_token, m)


def clip_fraction(
    logp_new: Tensorish, logp_old: Tensorish, advantages: Tensorish, mask: Tensorish, clip_eps: float
) -> float:
    """Share of mask-1 tokens whose clipped term is the larger one in :func:`ppo_policy_loss` (no gradient flows)."""
    new, old, a, m = _t(logp_new), _t(logp_old), _t(advantages), _t(mask)
    ratio = torch.exp(new - old)
    clipped = -a * torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) > -a * ratio
    return float(masked_mean(clipped.to(ratio.dtype), m))


def value_loss(
    values: Tensorish, old_values: Tensorish, returns: Tensorish, mask: Tensorish, clip: float
) -> torch.Tensor:
    """PPO's clipped value regression: ½ · mean over mask-1 tokens of max((V − R)², (V_clip − R)²), where
    V_clip = V_old + clamp(V − V_old, −clip, clip). Dynamic Search-R1 §3 trains its value model by MSE."""
    v, old, ret, m = _t(values), _t(old_values), _t(returns), _t(mask)
    _same_shape(values=v, old_values=old, returns=ret, mask=m)
    old, ret = old.detach().to(v.dtype), ret.detach().to(v.dtype)
    v_clip = old + torch.clamp(v - old, -clip, clip)
    return 0.5 * masked_mean(torch.maximum((v - ret) ** 2, (v_clip - ret) ** 2), m)


def kl_k3(logp: Tensorish, ref_logp: Tensorish) -> torch.Tensor:
    """Schulman's k3 estimate of KL(π ‖ π_ref) per token: exp(ref − logp) − (ref − logp) − 1 (≥ 0, 0 when equal)."""
    lp, ref = _t(logp), _t(ref_logp)
    _same_shape(logp=lp, ref_logp=ref)
    d = ref.to(lp.dtype) - lp
    return torch.exp(d) - d - 1.0


def token_rewards(outcome: Tensorish, kl: Tensorish, mask: Tensorish, beta: float) -> torch.Tensor:
    """Token-level rewards of Dynamic Search-R1 eq. 5: −β·KL_t at every policy token, plus the episode's outcome
    (already cost-discounted, e.g. by :func:`effirag.rewards.cost.ppo_cost_reward`) at its last policy token.

    ``outcome`` is a scalar for one episode ([T] tensors) or [B] for a batch; 0 at masked positions. An episode
    without a single policy token is an error: its outcome would be silently lost.
    """
    k, m = _t(kl), _t(mask)
    _same_shape(kl=k, mask=m)
    batched = k.dim() == 2
    k2, m2 = (k, m) if batched else (k.unsqueeze(0), m.unsqueeze(0))  # [B, T]
    out = _t(outcome).to(k2.dtype).reshape(-1)  # [B]
    if out.numel() != k2.shape[0]:
        raise ValueError(f"outcome has {out.numel()} entries for {k2.shape[0]} episodes")
    on = m2 > 0
    empty = (~on.any(dim=-1)).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"episode(s) {empty} have no policy token (mask all 0): nowhere to put the outcome")
    r = torch.where(on, -beta * k2, torch.zeros_like(k2))
    positions = torch.arange(k2.shape[-1], device=k2.device).expand_as(k2)
    last = torch.where(on, positions, torch.full_like(positions, -1)).max(dim=-1).values  # [B]
    r[torch.arange(k2.shape[0], device=k2.device), last] += out.to(k2.device)
    return r if batched else r.squeeze(0)


def whiten(x: Tensorish, mask: Tensorish, shift_mean: bool = True, eps: float = 1e-8) -> torch.Tensor:
    """Advantage whitening over mask-1 positions (all rows together): (x − mean) / sqrt(var + eps), population
    variance; with ``shift_mean`` False the mean is added back (scale only). Masked positions come out 0."""
    v, m = _t(x), _t(mask)
    _same_shape(x=v, mask=m)
    mean = masked_mean(v, m)
    var = masked_mean((v - mean) ** 2, m)
    out = (v - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return torch.where(m > 0, out, torch.zeros_like(out))
