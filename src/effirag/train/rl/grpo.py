"""GRPO on TRL's GRPOTrainer with EffiRAG's engine as the rollout and the run's objective as the reward.

How the advantage the update uses comes about (TRL 1.x, ``multi_objective_aggregation="sum_then_normalize"``): TRL
sums the reward functions' outputs (one here: :class:`~effirag.train.objective.ComposedReward`, the values of the
run's advantage estimator, :mod:`effirag.train.algos`), subtracts each group's mean and, unless
``scale_rewards="none"``, divides by the group's *sample* std (ddof = 1) + 1e-4. The estimator says which
``scale_rewards`` it needs: ``grpo`` leaves it to the run (default group); ``dsr1_cost`` returns the cost-aware
advantage A = z(r) − α·z(c) (zero group mean) and needs ``none``, so A is exactly the advantage of the update (up to
float32 rounding).

Inserted tokens (observations, feedback) are in each completion with ``env_mask`` 0, which TRL multiplies into its
loss mask: they carry no policy loss, KL or entropy term.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from effirag.agent.protocols.base import AgentProtocol
from effirag.config import check, option
from effirag.errors import ConfigError
from effirag.retrieval.base import Retriever
from effirag.rewards.compose import RewardConfig
from effirag.rewards.judges import Judge
from effirag.train.objective import ComposedReward, Objective, build_objective
from effirag.train.rl.rollout import EngineRollout, GeneratorFactory, TRLRollout
from effirag.train.rl.run_config import RLRunConfig
from effirag.train.sft import peft_config
from effirag.types import QAExample

LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo")
SCALE_REWARDS = ("", "group", "batch", "none")


@dataclass(frozen=True)
class GRPOStage:
    """One stage of a multi-stage run (RouteRAG's two stages): its length and its objective; every other field is
    the run's. A stage starts from the policy the previous stage saved (the first from ``env.model``)."""

    name: str = option("", help="Stage name: its folder under output_dir ('' → stage1, stage2, ...).")
    max_steps: int = option(100, help="Optimiser steps of this stage.")
    objective: RewardConfig = option(factory=RewardConfig, help="This stage's reward terms and estimator.")

    def __post_init__(self) -> None:
        check(self.max_steps >= 1, self, "max_steps", "must be >= 1")
        check("/" not in self.name and self.name not in (".", ".."), self, "name", "must be a plain folder name")


def _stages(value: Sequence[Any]) -> tuple[GRPOStage, ...]:
    """YAML gives the stages as mappings; the config holds them typed."""
    from effirag.config import from_dict

    return tuple(s if isinstance(s, GRPOStage) else from_dict(GRPOStage, s, source="stages") for s in value)


@dataclass(frozen=True)
class GRPORunConfig(RLRunConfig):
    """One GRPO run: the shared RL sections (:class:`~effirag.train.rl.run_config.RLRunConfig`: env, objective,
    rollout, temperature, seed, save_steps, lora) and TRL's optimisation knobs."""

    output_dir: str = option("runs/grpo", help="Checkpoints, the per-step log (steps.jsonl) and the final policy.")
    loss_type: str = option("grpo", help=f"TRL loss: one of {LOSS_TYPES}.")
    beta: float = option(0.0, help="KL coefficient to the frozen reference policy (0: no reference model).")
    epsilon: float = option(0.2, help="PPO-style clip range of the probability ratio.")
    scale_rewards: str = option(
        "",
        help="TRL reward scaling: group, batch or none; '': the estimator's (grpo: group; dsr1_cost: none). A value "
        "the estimator contradicts is refused.",
    )
    num_generations: int = option(4, help="Samples per question (the GRPO group size G).")
    questions_per_step: int = option(2, help="Questions per optimiser step (batch = questions × G rows).")
    micro_batch_rows: int = option(
        0,
        help="Rows per forward/backward pass: the step's questions × G rows are split into passes of this many, their "
        "gradients accumulated into the one optimiser step (the rollout and the update are unchanged; the peak memory "
        "of the log-prob and loss passes, whose logits grow with rows × tokens × vocabulary, shrinks). 0: all at once.",
    )
    learning_rate: float = option(1e-6, help="AdamW learning rate.")
    max_steps: int = option(100, help="Optimiser steps.")
    bf16: bool = option(False, help="bfloat16 mixed precision (on a CPU, autocast: faster where it has AMX).")
    gradient_checkpointing: bool = option(
        False,
        help="Recompute activations in the backward pass (TRL's default is on): saves memory on a large policy, "
        "costs time on a small one.",
    )
    stages: tuple[GRPOStage, ...] = option(
        factory=tuple,
        help="Stages run one after the other, each with its own max_steps and reward (the run-level ones are then "
        "unused), each in output_dir/<stage name>, starting from the previous stage's policy. Empty: one stage.",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "stages", _stages(self.stages))
        check(self.loss_type in LOSS_TYPES, self, "loss_type", f"must be one of {LOSS_TYPES}")
        check(self.scale_rewards in SCALE_REWARDS, self, "scale_rewards", f"must be one of {SCALE_REWARDS}")
        names = [s.name or f"stage{i + 1}" for i, s in enumerate(self.stages)]
        check(len(set(names)) == len(names), self, "stages", f"stage names must differ, got {names}")
        check(self.num_generations >= 2, self, "num_generations", "must be >= 2 (a group needs two samples)")
        check(self.questions_per_step >= 1, self, "questions_per_step", "must be >= 1")
        rows = self.questions_per_step * self.num_generations
        ok = self.micro_batch_rows == 0 or (self.micro_batch_rows > 0 and rows % self.micro_batch_rows == 0)
        check(ok, self, "micro_batch_rows", f"must be 0 or divide the step's {rows} rows (questions_per_step × G)")
        check(self.beta >= 0, self, "beta", "must be >= 0")
        check(self.max_steps >= 1, self, "max_steps", "must be >= 1")


def scale_rewards(cfg: GRPORunConfig, objective: Objective) -> str:
    """TRL's scale_rewards: the estimator's when it needs one (a run that sets another is refused), else the run's
    (default group)."""
    need = objective.scale_rewards
    if need is not None and cfg.scale_rewards not in ("", need):
        why = f"the {objective.advantage.name} estimator needs {need!r} (its values are advantages already)"
        raise ConfigError("GRPORunConfig", "scale_rewards", cfg.scale_rewards, why)
    return need or cfg.scale_rewards or "group"


def trl_args(cfg: GRPORunConfig, objective: Objective, **extra: Any) -> Any:
    """TRL's GRPOConfig for ``cfg`` (one generation per optimiser step, logging every step; with micro-batches, TRL's
    ``steps_per_generation`` equals the accumulation steps, so one generation still feeds one optimiser step)."""
    import torch
    from trl import GRPOConfig

    rows = cfg.questions_per_step * cfg.num_generations
    micro = cfg.micro_batch_rows or rows
    kwargs: dict[str, Any] = dict(
        output_dir=cfg.output_dir,
        learning_rate=cfg.learning_rate,
        max_steps=cfg.max_steps,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=rows // micro,
        num_generations=cfg.num_generations,
        temperature=cfg.temperature,
        beta=cfg.beta,
        epsilon=cfg.epsilon,
        loss_type=cfg.loss_type,
        scale_rewards=scale_rewards(cfg, objective),
        max_completion_length=cfg.env.engine.max_total_tokens,
        logging_steps=1,
        save_strategy="steps",
        save_steps=cfg.save_steps,
        seed=cfg.seed,
        data_seed=cfg.seed,
        bf16=cfg.bf16,
        use_cpu=not torch.cuda.is_available(),  # transformers refuses bf16 on a machine without a GPU otherwise
        gradient_checkpointing=cfg.gradient_checkpointing,
        report_to="none",
        disable_tqdm=True,
    )
    kwargs.update(extra)
    return GRPOConfig(**kwargs)


@dataclass
class GRPOParts:
    """What :func:`build_grpo_trainer` assembled (the trainer, and the pieces the log reads)."""

    trainer: Any
    rollout: EngineRollout
    reward: ComposedReward
    questions: list[QAExample] = field(default_factory=list)


def question_dataset(questions: Sequence[QAExample]) -> Any:
    """TRL's train dataset: one row per question with its text as ``prompt`` and its answers as ``golds``."""
    from datasets import Dataset

    return Dataset.from_list([{"prompt": q.question, "golds": list(q.answers), "qid": q.id} for q in questions])


def build_grpo_trainer(
    cfg: GRPORunConfig,
    model: Any,
    tokenizer: Any,
    questions: Sequence[QAExample],
    protocol: AgentProtocol,
    retriever: Retriever | None,
    *,
    judge: Judge | None = None,
    generator: GeneratorFactory | None = None,
    callbacks: Sequence[Any] = (),
    **trl_extra: Any,
) -> GRPOParts:
    """A TRL GRPOTrainer whose rollouts are EffiRAG engine episodes and whose reward is ``cfg.objective``
    (built and checked here: its terms, their resources, its estimator). ``generator`` builds the rollout's token
    generator from the live policy (default: ``cfg.rollout.generator``'s, :mod:`effirag.train.rl.vllm_sync`)."""
    import os

    from trl import GRPOTrainer

    from effirag.train.rl.rollout_ray import ray_rollout
    from effirag.train.rl.vllm_sync import rollout_generator, trl_sampler_correction

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is marked experimental in TRL
    objective = build_objective(cfg.objective, "grpo", judge, owner="GRPORunConfig", field="env.judge")
    args = trl_args(cfg, objective, **trl_extra)
    pad = tokenizer.pad_token_id
    rollout = EngineRollout(
        protocol,
        retriever,
        cfg.rollout_engine,
        generator or rollout_generator(cfg, tokenizer),
        pad_id=0 if pad is None else int(pad),
        chunks=cfg.rollout.n_chunks,
        runner=ray_rollout(cfg, protocol),
    )
    reward = ComposedReward(objective, cfg.num_generations)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward],  # type: ignore[list-item]  # a callable instance; TRL's alias wants a function
        args=args,
        train_dataset=question_dataset(questions),
        processing_class=tokenizer,
        rollout_func=TRLRollout(rollout, questions),
        callbacks=list(callbacks),
        peft_config=peft_config(cfg.lora),
    )
    if cfg.rollout.generator != "hf":
        trl_sampler_correction(trainer, cfg.rollout.tis_cap)
    return GRPOParts(trainer, rollout, reward, list(questions))
