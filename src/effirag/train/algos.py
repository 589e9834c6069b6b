"""Advantage estimators by name: ``ADVANTAGES`` maps a name to how a batch of episode rewards becomes what a trainer
optimises (in the spirit of verl's ``core_algos``: one pure function per estimator, found through a registry).

The two trainers take an estimator at different points:

- **GRPO** (TRL's GRPOTrainer) receives one value per episode from ``group(cfg, batch)``; TRL then subtracts each
  group's mean and, unless ``scale_rewards`` is ``"none"``, divides by the group's (or batch's) std. An estimator that
  already returns advantages sets ``scale_rewards = "none"``; one that leaves the standardisation to TRL sets None
  (the run's own ``scale_rewards`` applies) — the GRPO adapter passes the result to TRL.
- **PPO** (ours) places ``outcome(cfg, batch)`` at each episode's last policy token; the estimator's ``tokens``
  function turns the token rewards and values into token advantages and returns (default :func:`gae_tokens`: GAE over
  the policy tokens, :func:`effirag.train.ppo.gae`, Dynamic Search-R1 eq. 4, the run's γ and λ).

Built in:

- ``grpo``: the reward r as it is; TRL's group standardisation (RouteRAG eq. 8, DeepSeekMath's GRPO). GRPO only.
- ``dsr1_cost``: Dynamic Search-R1's cost-aware advantage. GRPO: A_i = z(r_i) − α·z(c_i) within each group (eq. 2),
  already an advantage (``scale_rewards="none"``). PPO: the outcome max(r·ε, r − α·c) (eq. 5), then GAE. The cost c
  is memory-bound (generated + inserted tokens) or latency-bound (c_g·generated + c_e·inserted seconds), eq. 3.
- ``gae``: the reward r as PPO's outcome, then GAE. PPO only.

A user's own estimator: :func:`register_advantage` in the user's module, named in the run config
(``objective.imports: [mypackage.algos]``, ``objective.advantage: my_estimator``,
``objective.advantage_args: {...}``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from effirag.config import check, from_dict, option
from effirag.errors import ConfigError
from effirag.rewards.compose import COSTS, RewardConfig
from effirag.rewards.cost import grpo_cost_aware_advantages, latency_cost, memory_cost, ppo_cost_reward
from effirag.rewards.terms import import_modules
from effirag.train.ppo import gae
from effirag.types import Trajectory

TRAINERS = ("grpo", "ppo")


@dataclass(frozen=True)
class EpisodeBatch:
    """One step's episodes, in rollout order: each consecutive ``group_size`` of them answers one question."""

    rewards: list[float]  # the composed scalar reward r per episode
    trajectories: Sequence[Trajectory]
    group_size: int

    def __post_init__(self) -> None:
        if len(self.rewards) != len(self.trajectories):
            raise ValueError(f"{len(self.rewards)} rewards for {len(self.trajectories)} trajectories")
        if self.group_size < 1 or len(self.rewards) % self.group_size:
            raise ValueError(f"{len(self.rewards)} episodes do not split into groups of {self.group_size}")


EpisodeFn = Callable[[Any, EpisodeBatch], list[float]]
LoggedFn = Callable[[Any, EpisodeBatch], dict[str, list[float]]]
TokenFn = Callable[[Any, "TokenBatch"], tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class TokenBatch:
    """PPO's per-token view of a step, every tensor [B, T]: ``rewards`` (−β·KL plus the outcome at the last policy
    token), ``values`` (the old value estimates), ``mask`` (1 at policy tokens); γ and λ are the run's."""

    rewards: torch.Tensor
    values: torch.Tensor
    mask: torch.Tensor
    gamma: float
    lam: float


def gae_tokens(cfg: Any, batch: TokenBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns) [B, T] by GAE over the policy tokens (Dynamic Search-R1 eq. 4; Schulman et al. 2016)."""
    return gae(batch.rewards, batch.values, batch.mask, batch.gamma, batch.lam)


@dataclass(frozen=True)
class Estimator:
    """A registered estimator: its config class and what it gives each trainer (None: it does not serve it)."""

    config: type[Any]
    group: EpisodeFn | None = None
    outcome: EpisodeFn | None = None
    scale_rewards: str | None = None
    logged: LoggedFn | None = None
    tokens: TokenFn | None = None


ADVANTAGES: dict[str, Estimator] = {}


def register_advantage(
    name: str,
    config: type[Any],
    *,
    group: EpisodeFn | None = None,
    outcome: EpisodeFn | None = None,
    scale_rewards: str | None = None,
    logged: LoggedFn | None = None,
    tokens: TokenFn | None = None,
) -> Estimator:
    """Register the estimator ``name``: ``group`` for GRPO (with TRL's ``scale_rewards`` it needs, None: the run's),
    ``outcome`` for PPO with ``tokens`` its token advantages (default with an outcome: :func:`gae_tokens`),
    ``logged`` extra per-episode values for the step log (e.g. the cost)."""
    if group is None and outcome is None:
        raise ValueError(f"estimator {name!r} serves no trainer: give group (GRPO) and/or outcome (PPO)")
    if scale_rewards not in (None, "group", "batch", "none"):
        raise ValueError(f"estimator {name!r}: scale_rewards={scale_rewards!r} is not one of TRL's")
    if outcome is not None and tokens is None:
        tokens = gae_tokens
    est = Estimator(config, group, outcome, scale_rewards, logged, tokens)
    if name in ADVANTAGES and ADVANTAGES[name] != est:
        raise ValueError(f"advantage estimator {name!r} is registered already")
    ADVANTAGES[name] = est
    return est


@dataclass(frozen=True)
class NoSettings:
    """An estimator without settings of its own (GRPO's scale_rewards, PPO's γ and λ are the run's)."""


@dataclass(frozen=True)
class DSR1Cost:
    """Dynamic Search-R1's cost-aware advantage (set by the reward config's flat cost fields)."""

    cost: str = option("memory", help="memory (generated + inserted tokens) or latency (seconds), eq. 3.")
    alpha: float = option(0.1, help="α of A = z(r) − α·z(c) (eq. 2) and of r − α·c (eq. 5).")
    c_g: float = option(0.0, help="Latency cost: seconds per generated token.")
    c_e: float = option(0.0, help="Latency cost: seconds per inserted token.")
    floor: float = option(0.2, help="ε of eq. 5: the PPO outcome is max(r·ε, r − α·c).")

    def __post_init__(self) -> None:
        check(self.cost in COSTS[1:], self, "cost", f"must be one of {COSTS[1:]}")


def identity(cfg: Any, batch: EpisodeBatch) -> list[float]:
    """The reward r as it is (GRPO: TRL standardises it; PPO: the outcome at the last policy token)."""
    return list(batch.rewards)


def dsr1_costs(cfg: DSR1Cost, trajectories: Sequence[Trajectory]) -> list[float]:
    """The cost c of each trajectory (Dynamic Search-R1 eq. 3)."""
    gen = [t.generated_tokens for t in trajectories]
    ins = [t.inserted_tokens for t in trajectories]
    costs = memory_cost(gen, ins) if cfg.cost == "memory" else latency_cost(gen, ins, cfg.c_g, cfg.c_e)
    return [float(x) for x in costs]


def dsr1_group(cfg: DSR1Cost, batch: EpisodeBatch) -> list[float]:
    """GRPO: z(r) − α·z(c) within each group of ``group_size`` (eq. 2; population z-scores, zero group mean)."""
    cost, reward, g = dsr1_costs(cfg, batch.trajectories), batch.rewards, batch.group_size
    out: list[float] = []
    for i in range(0, len(reward), g):
        out += grpo_cost_aware_advantages(reward[i : i + g], cost[i : i + g], cfg.alpha)
    return out


def dsr1_outcome(cfg: DSR1Cost, batch: EpisodeBatch) -> list[float]:
    """PPO: max(r·ε, r − α·c) per episode (eq. 5)."""
    cost = dsr1_costs(cfg, batch.trajectories)
    return [ppo_cost_reward(r, c, cfg.alpha, cfg.floor) for r, c in zip(batch.rewards, cost, strict=True)]


def dsr1_logged(cfg: DSR1Cost, batch: EpisodeBatch) -> dict[str, list[float]]:
    return {"cost": dsr1_costs(cfg, batch.trajectories)}


register_advantage("grpo", NoSettings, group=identity)
register_advantage("gae", NoSettings, outcome=identity, tokens=gae_tokens)
register_advantage(
    "dsr1_cost", DSR1Cost, group=dsr1_group, outcome=dsr1_outcome, scale_rewards="none", logged=dsr1_logged
)


@dataclass(frozen=True)
class Chosen:
    """The estimator a run uses: its name, spec and typed settings."""

    name: str
    estimator: Estimator
    settings: Any


def choose(cfg: RewardConfig, trainer: str) -> Chosen:
    """The estimator ``cfg`` names for ``trainer`` (grpo | ppo), its settings built and checked; the modules of
    ``cfg.imports`` are imported first. '' means dsr1_cost with a cost set, else the trainer's own."""
    if trainer not in TRAINERS:
        raise ValueError(f"trainer must be one of {TRAINERS}, got {trainer!r}")
    import_modules("RewardConfig", cfg.imports)
    name = cfg.advantage or ("dsr1_cost" if cfg.cost != "none" else {"grpo": "grpo", "ppo": "gae"}[trainer])
    if name not in ADVANTAGES:
        raise ConfigError("RewardConfig", "advantage", name, f"unknown estimator; known: {sorted(ADVANTAGES)}")
    est = ADVANTAGES[name]
    if (est.group if trainer == "grpo" else est.outcome) is None:
        raise ConfigError("RewardConfig", "advantage", name, f"does not serve the {trainer} trainer")
    if name == "dsr1_cost":
        if cfg.cost == "none":
            raise ConfigError("RewardConfig", "cost", cfg.cost, "dsr1_cost needs cost: memory or latency")
        if cfg.advantage_args:
            raise ConfigError("RewardConfig", "advantage_args", cfg.advantage_args, "dsr1_cost reads the cost fields")
        settings: Any = DSR1Cost(cfg.cost, cfg.cost_alpha, cfg.c_g, cfg.c_e, cfg.cost_floor)
    else:
        settings = from_dict(est.config, cfg.advantage_args, source="RewardConfig.advantage_args")
    return Chosen(name, est, settings)
