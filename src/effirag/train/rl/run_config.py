"""What a GRPO run and a PPO run share (:class:`RLRunConfig`): the environment, the objective, where rollouts run,
the sampling temperature, the seed, the checkpoint interval and LoRA.

:class:`~effirag.train.rl.grpo.GRPORunConfig` and :class:`~effirag.train.rl.ppo_config.PPORunConfig` extend it with
their own optimisation knobs; a YAML keeps these fields at its top level (``env:``, ``objective:``, ``temperature:``
...), so a recipe switches algorithm by changing the optimisation fields only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from effirag.agent import EngineConfig
from effirag.config import check, option
from effirag.env import EnvConfig
from effirag.rewards.compose import RewardConfig
from effirag.train.rl.rollout_split import RolloutConfig
from effirag.train.sft import LoraConfig


@dataclass(frozen=True)
class RLRunConfig:
    """The sections and knobs every RL run has; the algorithm's config adds its own."""

    env: EnvConfig = option(
        factory=EnvConfig,
        help="Policy (PPO: also the frozen reference), questions, protocol, retrieval, judge, engine budgets "
        "(temperature and seed come from this config).",
    )
    objective: RewardConfig = option(
        factory=RewardConfig,
        help="Reward terms and weights, and the advantage estimator (default: GRPO grpo, PPO gae; cost: memory | "
        "latency → dsr1_cost).",
    )
    rollout: RolloutConfig = option(
        factory=RolloutConfig,
        help="Where each step's rollout runs: chunks of the step's rows, in this process or on Ray actors (defaults: "
        "one engine call here).",
    )
    temperature: float = option(1.0, help="Sampling temperature of the rollouts and of the trained log-probs (> 0).")
    seed: int = option(
        0,
        help="Seed of the rollouts and the trainer (GRPO: TRL's init and data order; PPO: the value head, question "
        "order and mini-batch order).",
    )
    save_steps: int = option(50, help="Checkpoint every N steps (and at the end).")
    lora: LoraConfig = option(
        factory=LoraConfig,
        help="LoRA adapters via peft instead of training every weight (the saved policy has them merged in; the "
        "adapter alone is saved beside it). PPO: the value head still trains fully and the KL reference is the "
        "policy with its adapters off (no second copy).",
    )

    def __post_init__(self) -> None:
        check(self.temperature > 0, self, "temperature", "must be > 0 (the rollouts sample)")
        check(self.save_steps >= 1, self, "save_steps", "must be >= 1")
        check(
            not (self.env.chat and self.rollout.ray_actors),
            self,
            "rollout",
            "ray_actors sample without the chat template: run a chat policy (env.model ...?chat=1) with ray_actors=0",
        )

    @property
    def rollout_engine(self) -> EngineConfig:
        """The engine config the rollouts use: this run's temperature and seed, token path on."""
        return replace(self.env.engine, temperature=self.temperature, seed=self.seed, token_ids=True)
