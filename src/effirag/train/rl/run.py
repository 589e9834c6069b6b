"""A GRPO run from its config: load the policy, questions, index and judge; train; save the policy and the log.

A staged run (``stages``, e.g. RouteRAG's outcome-then-efficiency GRPO) runs one such run per stage in
``OUTPUT_DIR/<stage name>``, each from the policy the previous stage saved.

``OUTPUT_DIR`` holds TRL's ``checkpoint-N`` folders (weights, optimiser, scheduler and RNG states: what ``resume``
continues from), ``steps.jsonl`` (:mod:`effirag.train.rl.log`), ``config.yaml`` (the resolved run config) and, at the
end, ``curves.png`` (loss and reward) and ``policy/`` (the trained model and tokenizer, ``hf:OUTPUT_DIR/policy``;
with LoRA the adapters are merged into it, and ``adapter/`` holds them alone).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from effirag.agent.settings import carry_settings
from effirag.config import to_dict
from effirag.distributed import import_ray
from effirag.env import Env, build_env
from effirag.llm.base import Generator
from effirag.llm.live import LivePolicy
from effirag.train.outputs import check_output_dir, save_policy
from effirag.train.rl.grpo import GRPOParts, GRPORunConfig, build_grpo_trainer
from effirag.train.rl.log import StepLog, instrument, plot_steps, read_steps
from effirag.train.rl.ppo_config import PPORunConfig
from effirag.train.rl.rollout import GeneratorFactory, trainer_policy
from effirag.train.rl.sources import policy_folder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GRPOResult:
    output_dir: Path
    policy_dir: Path
    steps: int
    seconds: float
    last: dict[str, Any]


def environment(cfg: GRPORunConfig | PPORunConfig, tokenizer: Any, judge_policy: Generator | None = None) -> Env:
    """The environment of a GRPO or PPO run config (:func:`effirag.env.build_env`): questions (required), protocol,
    retriever (none here when Ray actors build their own, :mod:`effirag.train.rl.rollout_ray`) and judge, whose
    re-answers (``env.judge`` closed-book or llm:BACKEND) come from ``judge_policy`` (the run's :class:`LivePolicy`)."""
    owner = type(cfg).__name__
    return build_env(
        cfg.env,
        tokenizer,
        need_questions=True,
        with_retriever=not cfg.rollout.ray_actors,
        owner=owner,
        judge_policy=judge_policy,
    )


def judged_grpo_trainer(
    cfg: GRPORunConfig, model: Any, tokenizer: Any, *, generator: GeneratorFactory | None = None, **kw: Any
) -> GRPOParts:
    """The run's environment and GRPO trainer, the step judge's re-answers bound to the policy being trained: the
    generator each step's episodes were sampled with (:meth:`EngineRollout.sampler`). ``generator``: the rollout's
    generator factory (default the config's); ``kw`` go to :func:`build_grpo_trainer`."""
    live = LivePolicy()
    env = environment(cfg, tokenizer, live)
    parts = build_grpo_trainer(
        cfg, model, tokenizer, env.questions, env.protocol, env.retriever, judge=env.judge, generator=generator, **kw
    )
    live.bind(lambda: parts.rollout.sampler(trainer_policy(parts.trainer)))
    return parts


def stage_configs(cfg: GRPORunConfig) -> list[GRPORunConfig]:
    """The one-stage run configs of a staged run, in order: stage i trains with its own objective and max_steps in
    ``output_dir/<name>``, from ``env.model`` (i = 1) or from stage i − 1's saved policy."""
    out: list[GRPORunConfig] = []
    model = cfg.env.model
    for i, stage in enumerate(cfg.stages):
        folder = Path(cfg.output_dir) / (stage.name or f"stage{i + 1}")
        out.append(
            replace(
                cfg,
                stages=(),
                env=replace(cfg.env, model=model),
                objective=stage.objective,
                max_steps=stage.max_steps,
                output_dir=str(folder),
            )
        )
        model = str(folder / "policy")
    return out


def _run_stages(cfg: GRPORunConfig, resume: bool, progress: bool) -> GRPOResult:
    """Each stage in turn; with ``resume``, finished stages (their policy saved) are kept and the first unfinished
    one continues from its last checkpoint, or starts if it has none."""
    t0 = time.perf_counter()
    steps = 0
    res: GRPOResult | None = None
    for sub in stage_configs(cfg):
        out = Path(sub.output_dir)
        if resume and (out / "policy" / "config.json").is_file():
            done = read_steps(out / "steps.jsonl")
            res = GRPOResult(out, out / "policy", len(done), 0.0, done[-1] if done else {})
        else:
            res = run_grpo(sub, resume=resume and any(out.glob("checkpoint-*")), progress=progress)
        steps += res.steps
    assert res is not None  # the config has at least one stage
    log.info("GRPO: %d stages, %d steps; final policy %s", len(cfg.stages), steps, res.policy_dir)
    return GRPOResult(res.output_dir, res.policy_dir, steps, time.perf_counter() - t0, res.last)


def run_grpo(cfg: GRPORunConfig, *, resume: bool = False, progress: bool = False) -> GRPOResult:
    """Train ``cfg``; with ``resume``, continue from the last checkpoint in ``cfg.output_dir`` (which must exist).
    ``progress``: TRL's progress bar. A config with ``stages`` runs them one after the other (:func:`stage_configs`).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if cfg.stages:
        return _run_stages(cfg, resume, progress)

    model_dir = policy_folder(cfg)
    out = check_output_dir("GRPORunConfig", cfg.output_dir, resume)
    if cfg.rollout.ray_actors:
        import_ray("RolloutConfig", "ray_actors")  # before anything is loaded or written
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False), encoding="utf-8")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    parts = judged_grpo_trainer(cfg, model, tokenizer, disable_tqdm=not progress)
    parts.trainer.add_callback(StepLog(out / "steps.jsonl", parts.rollout, instrument(parts.trainer)))
    if not progress:
        from transformers.trainer_callback import PrinterCallback

        parts.trainer.remove_callback(PrinterCallback)  # no log dicts on stdout: steps.jsonl has them
    else:
        from effirag.train.progress import progress_on_stderr

        progress_on_stderr(parts.trainer)
    t0 = time.perf_counter()
    try:
        parts.trainer.train(resume_from_checkpoint=True if resume else None)
    finally:
        parts.rollout.close()
    seconds = time.perf_counter() - t0
    policy = out / "policy"
    model = parts.trainer.accelerator.unwrap_model(parts.trainer.model)
    save_policy(model, tokenizer, policy, out / "adapter" if cfg.lora.enabled else None)
    carry_settings(Path(model_dir), policy)
    steps = read_steps(out / "steps.jsonl")
    plot_steps(out / "steps.jsonl", out / "curves.png")
    log.info("GRPO: %d steps in %.1f s; policy saved to %s", parts.trainer.state.global_step, seconds, policy)
    return GRPOResult(out, policy, int(parts.trainer.state.global_step), seconds, steps[-1] if steps else {})
