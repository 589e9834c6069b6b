"""The config of one PPO run of the agent (:mod:`effirag.train.rl.ppo_trainer`).

The sections and knobs GRPO shares (``env``, ``objective``, ``rollout``, ``temperature``, ``seed``, ``save_steps``,
``lora``) are :class:`~effirag.train.rl.run_config.RLRunConfig`'s, so a recipe switches algorithm by changing the
optimisation fields only; ``lora`` is the section GRPO and SFT read (:mod:`effirag.train.rl.ppo_lora`). PPO's own
knobs follow Dynamic Search-R1 §3 (token-level reward eq. 5, GAE eq. 4, a value model trained by MSE).
"""

from __future__ import annotations

from dataclasses import dataclass

from effirag.config import check, option
from effirag.train.rl.run_config import RLRunConfig
from effirag.train.sft import LoraConfig

KL_ESTIMATORS = ("k3", "k1")
CRITICS = ("shared", "separate")


@dataclass(frozen=True)
class PPORunConfig(RLRunConfig):
    """One PPO run: the shared RL sections (:class:`~effirag.train.rl.run_config.RLRunConfig`: env, objective,
    rollout, temperature, seed, save_steps, lora) and PPO's optimisation knobs."""

    output_dir: str = option("runs/ppo", help="Checkpoints, the per-step log (steps.jsonl) and the final policy.")
    questions_per_step: int = option(4, help="Questions per PPO step (one rollout batch).")
    samples_per_question: int = option(1, help="Episodes per question in a step (PPO needs no group; 1 is usual).")
    ppo_epochs: int = option(2, help="Passes over a step's rollout batch.")
    mini_batch_size: int = option(4, help="Episodes per gradient step within an epoch.")
    clip_eps: float = option(0.2, help="Clip range ε of the probability ratio.")
    value_clip: float = option(0.2, help="Clip range of the value prediction around the old value.")
    vf_coef: float = option(0.5, help="Weight of the value loss in the total loss (shared trunk: it shapes it too).")
    critic: str = option(
        "shared",
        help=f"The value model, one of {CRITICS}: shared (a linear head on the policy's last hidden state) or "
        "separate (a model of its own with its own head, optimiser group and grad clipping, as Search-R1 / verl).",
    )
    critic_model: str = option(
        "", help="critic: separate: the value model's start weights, a local HF model directory ('': model)."
    )
    critic_lr: float = option(0.0, help="critic: separate: its AdamW learning rate (0: lr).")
    critic_lora: LoraConfig = option(
        factory=LoraConfig,
        help="critic: separate: LoRA adapters on the value model's trunk instead of training every weight (its "
        "head trains fully); the critic's own section, independent of the policy's lora.",
    )
    kl_coef: float = option(0.001, help="β: per-token KL penalty to the frozen reference in the reward (0: none).")
    kl_estimator: str = option("k3", help=f"Per-token KL: one of {KL_ESTIMATORS} (k1 = log-ratio, as in eq. 5).")
    gamma: float = option(1.0, help="GAE discount γ over policy tokens.")
    lam: float = option(1.0, help="GAE λ.")
    whiten: bool = option(True, help="Whiten the advantages over the step's policy tokens.")
    lr: float = option(1e-6, help="AdamW learning rate (policy and value head).")
    weight_decay: float = option(0.0, help="AdamW weight decay.")
    max_grad_norm: float = option(1.0, help="Clip the global gradient norm to this (0: no clipping).")
    steps: int = option(100, help="PPO steps (one rollout batch each).")
    device: str = option("cpu", help="torch device of the policy, reference and value head (cpu, cuda, cuda:1, ...).")

    def __post_init__(self) -> None:
        super().__post_init__()
        check(self.kl_estimator in KL_ESTIMATORS, self, "kl_estimator", f"must be one of {KL_ESTIMATORS}")
        check(self.questions_per_step >= 1, self, "questions_per_step", "must be >= 1")
        check(self.samples_per_question >= 1, self, "samples_per_question", "must be >= 1")
        check(self.ppo_epochs >= 1, self, "ppo_epochs", "must be >= 1")
        check(self.mini_batch_size >= 1, self, "mini_batch_size", "must be >= 1")
        check(self.clip_eps > 0, self, "clip_eps", "must be > 0")
        check(self.value_clip > 0, self, "value_clip", "must be > 0")
        check(self.vf_coef >= 0, self, "vf_coef", "must be >= 0")
        check(self.critic in CRITICS, self, "critic", f"must be one of {CRITICS}")
        check(self.critic_lr >= 0, self, "critic_lr", "must be >= 0 (0: lr)")
        shared = "applies to critic: separate only (the shared head has no model of its own)"
        check(self.critic == "separate" or not self.critic_model, self, "critic_model", shared)
        check(self.critic == "separate" or self.critic_lr == 0, self, "critic_lr", shared)
        check(self.critic == "separate" or not self.critic_lora.enabled, self, "critic_lora", shared)
        check(self.kl_coef >= 0, self, "kl_coef", "must be >= 0")
        check(0 <= self.gamma <= 1, self, "gamma", "must be in [0, 1]")
        check(0 <= self.lam <= 1, self, "lam", "must be in [0, 1]")
        check(self.lr > 0, self, "lr", "must be > 0")
        check(self.max_grad_norm >= 0, self, "max_grad_norm", "must be >= 0")
        check(self.steps >= 1, self, "steps", "must be >= 1")

    @property
    def rows_per_step(self) -> int:
        return self.questions_per_step * self.samples_per_question
