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

from effirag.config import to_dict
from effirag.distributed import import_ray
from effirag.errors import ConfigError
from effirag.train.outputs import check_output_dir, save_policy
from effirag.train.rl.grpo import GRPORunConfig, build_grpo_trainer
from effirag.train.rl.log import StepLog, instrument, plot_steps, read_steps
from effirag.train.rl.ppo_config import PPORunConfig
from effirag.train.rl.sources import make_retriever

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GRPOResult:
    output_dir: Path
    policy_dir: Path
    steps: int
    seconds: float
    last: dict[str, Any]


def environment(cfg: GRPORunConfig | PPORunConfig, tokenizer: Any) -> tuple[Any, Any, Any, Any]:
    """(questions, protocol, retriever or None, judge or None) named by a GRPO or PPO run config."""
    from effirag.agent import get_protocol
    from effirag.data.questions import load_questions

    if not cfg.questions:
        raise ConfigError(type(cfg).__name__, "questions", cfg.questions, "a training questions file is required")
    questions = load_questions(cfg.questions).examples
    if cfg.max_questions:
        questions = questions[: cfg.max_questions]
    # Ray actors build their own retrievers (:mod:`effirag.train.rl.rollout_ray`): none is needed here then
    retriever = None if cfg.rollout.ray_actors else make_retriever(cfg, tokenizer)
    judge = None
    if cfg.world:
        from effirag.rewards.judges import WorldJudge
        from effirag.world.world import World

        judge = WorldJudge(World.load(cfg.world))
    return questions, get_protocol(cfg.protocol), retriever, judge


def with_demos(cfg: GRPORunConfig, questions: list[Any], protocol: Any) -> tuple[list[Any], Any]:
    """``cfg.shots`` few-shot demos from the questions file in the protocol's prompt, and the questions without them
    (the same demos evaluation draws from that file: :func:`effirag.agent.protocols.fewshot.split_demos`)."""
    from effirag.agent.protocols.fewshot import split_demos
    from effirag.data.questions import load_questions

    qs = load_questions(cfg.questions)
    demos, rest = split_demos(qs.examples, {p.id: p for p in qs.passages}, cfg.shots)
    kept = {q.id for q in rest}
    return [q for q in questions if q.id in kept], protocol.use_demos(demos)


def stage_configs(cfg: GRPORunConfig) -> list[GRPORunConfig]:
    """The one-stage run configs of a staged run, in order: stage i trains with its own reward and max_steps in
    ``output_dir/<name>``, from ``model`` (i = 1) or from stage i − 1's saved policy."""
    out: list[GRPORunConfig] = []
    model = cfg.model
    for i, stage in enumerate(cfg.stages):
        folder = Path(cfg.output_dir) / (stage.name or f"stage{i + 1}")
        out.append(
            replace(cfg, stages=(), model=model, reward=stage.reward, max_steps=stage.max_steps, output_dir=str(folder))
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

    if not cfg.model or not Path(cfg.model).is_dir():
        raise ConfigError("GRPORunConfig", "model", cfg.model, "must be a local Hugging Face model directory")
    out = check_output_dir("GRPORunConfig", cfg.output_dir, resume)
    if cfg.rollout.ray_actors:
        import_ray("RolloutConfig", "ray_actors")  # before anything is loaded or written
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False), encoding="utf-8")
    tokenizer = AutoTokenizer.from_pretrained(cfg.model)
    model = AutoModelForCausalLM.from_pretrained(cfg.model)
    questions, protocol, retriever, judge = environment(cfg, tokenizer)
    if cfg.shots:
        questions, protocol = with_demos(cfg, questions, protocol)
    parts = build_grpo_trainer(
        cfg, model, tokenizer, questions, protocol, retriever, judge=judge, disable_tqdm=not progress
    )
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
    steps = read_steps(out / "steps.jsonl")
    plot_steps(out / "steps.jsonl", out / "curves.png")
    log.info("GRPO: %d steps in %.1f s; policy saved to %s", parts.trainer.state.global_step, seconds, policy)
    return GRPOResult(out, policy, int(parts.trainer.state.global_step), seconds, steps[-1] if steps else {})
