"""A run's objective, built once: the named reward terms (:mod:`effirag.rewards.terms`), the resources they need and
the advantage estimator (:mod:`effirag.train.algos`), checked when the run is built, then used at every step.

:class:`ComposedReward` is the objective as TRL's plain reward callable (GRPO); PPO calls :meth:`Objective.outcomes`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from effirag.rewards.compose import RewardConfig, check_resources, reward_components
from effirag.rewards.judges import Judge
from effirag.train.algos import Chosen, EpisodeBatch, EpisodeFn, TokenBatch, choose
from effirag.types import Trajectory


@dataclass(frozen=True)
class Objective:
    """What a trainer optimises: ``reward`` (terms and weights), the ``judge`` its terms need, the estimator."""

    reward: RewardConfig
    advantage: Chosen
    judge: Judge | None = None

    @property
    def scale_rewards(self) -> str | None:
        """TRL's scale_rewards the estimator needs (None: the run's own applies)."""
        return self.advantage.estimator.scale_rewards

    def components(
        self, trajectories: Sequence[Trajectory], golds: Sequence[Sequence[str]], group_size: int
    ) -> dict[str, list[float]]:
        """Every enabled term per trajectory, ``total`` (the reward r), ``em`` and the estimator's logged values."""
        out = reward_components(self.reward, trajectories, golds, self.judge)
        logged = self.advantage.estimator.logged
        if logged is not None:
            out.update(logged(self.advantage.settings, EpisodeBatch(out["total"], trajectories, group_size)))
        return out

    def group_values(
        self, components: dict[str, list[float]], trajectories: Sequence[Trajectory], group_size: int
    ) -> list[float]:
        """GRPO: what TRL receives per episode (TRL then centres it per group, scaled by :attr:`scale_rewards`)."""
        return self._apply(self.advantage.estimator.group, components, trajectories, group_size)

    def outcomes(
        self, components: dict[str, list[float]], trajectories: Sequence[Trajectory], group_size: int
    ) -> list[float]:
        """PPO: the value placed at each episode's last policy token (GAE follows)."""
        return self._apply(self.advantage.estimator.outcome, components, trajectories, group_size)

    def token_advantages(self, batch: TokenBatch) -> tuple[Any, Any]:
        """PPO: the estimator's (advantages, returns) [B, T] from the token rewards and old values."""
        fn = self.advantage.estimator.tokens
        assert fn is not None  # register_advantage gives every PPO estimator one
        return fn(self.advantage.settings, batch)

    def _apply(
        self, fn: EpisodeFn | None, components: dict[str, list[float]], trajs: Sequence[Trajectory], group: int
    ) -> list[float]:
        assert fn is not None  # choose() checked that the estimator serves the trainer
        return fn(self.advantage.settings, EpisodeBatch(components["total"], trajs, group))


def build_objective(
    reward: RewardConfig, trainer: str, judge: Judge | None = None, *, owner: str = "RewardConfig", field: str = "world"
) -> Objective:
    """The objective of a ``trainer`` (grpo | ppo) run: the user's modules imported, every term and the estimator
    looked up and configured, and the resources the terms need checked, once (``owner.field`` names the setting
    that provides a missing resource)."""
    advantage = choose(reward, trainer)
    check_resources(reward, owner, field, judge)
    return Objective(reward, advantage, judge)


class ComposedReward:
    """A TRL-style reward function ``(prompts, completions, **kwargs) -> list[float]`` over engine trajectories.

    It reads ``trajectory`` (one :class:`~effirag.types.Trajectory` per completion) and ``golds`` (one list of gold
    answers per completion) from the keyword arguments (the rollout's extra fields and the dataset's columns), checks
    that each consecutive group of ``group_size`` holds one question, returns the objective's
    :meth:`Objective.group_values`, keeps the components of the last call in ``last`` and reports their means through
    TRL's ``log_metric`` when given.
    """

    __name__ = "effirag_reward"

    def __init__(self, objective: Objective, group_size: int) -> None:
        self.objective = objective
        self.group_size = group_size
        self.last: dict[str, list[float]] = {}

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        trajs: list[Trajectory] = list(kwargs["trajectory"])
        golds: list[Sequence[str]] = list(kwargs["golds"])
        if len(trajs) != len(completions):
            raise ValueError(f"{len(trajs)} trajectories for {len(completions)} completions")
        for g in range(0, len(trajs), self.group_size):
            ids = {t.question_id for t in trajs[g : g + self.group_size]}
            if len(ids) != 1:
                raise ValueError(f"group at {g} mixes questions {sorted(ids)}: groups must hold one question")
        self.last = self.objective.components(trajs, golds, self.group_size)
        values = self.objective.group_values(self.last, trajs, self.group_size)
        log_metric: Callable[[str, float], None] | None = kwargs.get("log_metric")
        if log_metric is not None:
            for name, vals in self.last.items():
                log_metric(f"reward/{name}", float(np.mean(vals)))
        return values
