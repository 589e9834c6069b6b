"""A PPO run from its config: load the policy, its frozen reference, questions, index and judge; train; save.

``OUTPUT_DIR`` holds ``checkpoint-N`` folders (:mod:`effirag.train.rl.ppo_checkpoint`: what ``resume`` continues
from), ``steps.jsonl`` (one record per step, the keys of the GRPO log plus ``policy_loss``, ``value_loss``,
``clip_fraction``, ``logprob_s``), ``config.yaml`` (the resolved run config) and, at the end, ``curves.png``,
``policy/`` (the trained model and tokenizer, ``hf:OUTPUT_DIR/policy``; with LoRA the adapters are merged into it, and
``adapter/`` holds them alone, as a GRPO run saves them) and ``value_head.safetensors`` (with ``critic: separate``
also ``critic/``, the value model's trunk or its LoRA adapter).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from safetensors.torch import save_file

from effirag.agent.settings import carry_settings
from effirag.config import to_dict
from effirag.distributed import import_ray
from effirag.llm.live import LivePolicy
from effirag.train.outputs import check_output_dir, save_policy
from effirag.train.rl.log import plot_steps, read_steps
from effirag.train.rl.ppo_checkpoint import checkpoints, restore_checkpoint, save_checkpoint
from effirag.train.rl.ppo_config import PPORunConfig
from effirag.train.rl.ppo_critic import load_critic, save_critic
from effirag.train.rl.ppo_lora import load_policy, model_folder
from effirag.train.rl.ppo_trainer import PPOParts, build_ppo, ppo_step
from effirag.train.rl.run import environment
from effirag.train.rl.sources import policy_folder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PPOResult:
    output_dir: Path
    policy_dir: Path
    steps: int
    seconds: float
    last: dict[str, Any]


def _check_output(cfg: PPORunConfig, resume: bool) -> Path:
    policy_folder(cfg)
    out = check_output_dir("PPORunConfig", cfg.output_dir, resume, has_checkpoint=lambda p: bool(checkpoints(p)))
    out.mkdir(parents=True, exist_ok=True)
    return out


def load_parts(cfg: PPORunConfig, out: Path, resume: bool) -> tuple[PPOParts, int]:
    """The run's parts and the step to start from; with ``resume``, the policy (or LoRA adapter), value head,
    optimiser and RNG of the last checkpoint in ``out``. The reference is always the start model."""
    from transformers import AutoTokenizer

    last = checkpoints(out)[-1] if resume else None
    tokenizer = AutoTokenizer.from_pretrained(policy_folder(cfg))
    policy, ref = load_policy(cfg, last)
    critic = load_critic(cfg, last)
    live = LivePolicy()  # the step judge's re-answers: the policy as it sampled this step's episodes
    env = environment(cfg, tokenizer, live)
    parts = build_ppo(cfg, policy, ref, tokenizer, env.questions, env.protocol, env.retriever, env.judge, critic)
    live.bind(lambda: parts.rollout.sampler(parts.policy))
    start = restore_checkpoint(last, parts.head, parts.optimizer) if last else 0
    return parts, start


def _keep_log(path: Path, upto: int) -> None:
    """A resumed run's log keeps the steps up to its checkpoint, so the log has each step once."""
    if path.is_file():
        kept = [r for r in read_steps(path) if r["step"] <= upto]
        path.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")


def run_ppo(cfg: PPORunConfig, *, resume: bool = False, progress: bool = False) -> PPOResult:
    """Train ``cfg``; with ``resume``, continue from the last checkpoint in ``cfg.output_dir`` (which must exist).
    ``progress``: a progress bar over the steps."""
    from tqdm.auto import tqdm

    if cfg.rollout.ray_actors:
        import_ray("RolloutConfig", "ray_actors")  # before anything is loaded or written
    out = _check_output(cfg, resume)
    (out / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False), encoding="utf-8")
    parts, start = load_parts(cfg, out, resume)
    steps_log, trained = out / "steps.jsonl", model_folder(cfg)
    _keep_log(steps_log, start)
    t0 = time.perf_counter()
    try:
        for step in tqdm(range(start, cfg.steps), initial=start, total=cfg.steps, disable=not progress, desc="PPO"):
            rec = ppo_step(parts, step)
            with steps_log.open("a", encoding="utf-8") as f:
                f.write(json.dumps(rec) + "\n")
            if (step + 1) % cfg.save_steps == 0 or step + 1 == cfg.steps:
                save_checkpoint(
                    out, step + 1, parts.policy, parts.tokenizer, parts.head, parts.optimizer, trained, parts.critic
                )
    finally:
        parts.rollout.close()
    seconds = time.perf_counter() - t0
    policy = out / "policy"
    save_policy(parts.policy, parts.tokenizer, policy, out / "adapter" if cfg.lora.enabled else None)
    carry_settings(Path(policy_folder(cfg)), policy)
    save_file({k: v.contiguous() for k, v in parts.head.state_dict().items()}, str(out / "value_head.safetensors"))
    save_critic(parts.critic, out)
    steps = read_steps(steps_log)
    plot_steps(steps_log, out / "curves.png", loss_label="PPO loss (policy + vf_coef · value)")
    log.info("PPO: %d steps in %.1f s; policy saved to %s", cfg.steps, seconds, policy)
    return PPOResult(out, policy, cfg.steps, seconds, steps[-1] if steps else {})
