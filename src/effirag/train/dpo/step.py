"""Step-level DPO (ReasonRAG §2.3, eq. 3) from its config: DPO on a JSONL of step preference pairs.

ReasonRAG's eq. 3 is printed without the reference policy; it cites standard DPO (Rafailov et al.), whose loss with
the frozen reference's log-ratio is what TRL computes and what is trained here (``train.beta`` is its β).

The pairs are RAG-ProGuide-shaped (:func:`~effirag.train.dpo.pairs.load_text_pairs`): the prompt is the trajectory
prefix the policy saw, the two completions are alternative next steps; what the protocol inserts inside a step (an
observation, engine feedback) is masked. Any user-supplied file in that shape trains the same way.

``OUTPUT_DIR`` holds ``config.yaml``, ``steps.jsonl`` (one record per optimiser step), TRL's ``checkpoint-N`` folders
(weights, optimiser, scheduler and RNG states: what ``resume`` continues from),
and at the end ``curves.png`` and ``policy/`` (the trained model and tokenizer; a LoRA adapter merged; the start's
inference.yaml, when it has one).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from effirag.config import to_dict
from effirag.errors import ConfigError
from effirag.train.dpo.config import StepDPORunConfig
from effirag.train.rl.log import plot_steps, read_steps

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepDPOResult:
    output_dir: Path
    policy_dir: Path
    steps: int
    pairs: int
    seconds: float
    last: dict[str, Any]


def run_step_dpo(cfg: StepDPORunConfig, *, resume: bool = False, progress: bool = False) -> StepDPOResult:
    """Train ``cfg`` (see the module docstring); with ``resume``, continue from the last checkpoint in
    ``cfg.output_dir``. ``progress``: TRL's progress bar and log lines."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.trainer_callback import PrinterCallback

    from effirag.agent import get_protocol
    from effirag.agent.settings import carry_settings
    from effirag.train.dpo.pairs import load_text_pairs
    from effirag.train.dpo.trainer import DPOStepLog, build_dpo_trainer
    from effirag.train.outputs import check_output_dir, save_policy

    if not cfg.model or not Path(cfg.model).is_dir():
        raise ConfigError("StepDPORunConfig", "model", cfg.model, "must be a local Hugging Face model directory")
    if not cfg.data:
        raise ConfigError("StepDPORunConfig", "data", cfg.data, "a pairs JSONL file is required (--data)")
    out = check_output_dir("StepDPORunConfig", cfg.output_dir, resume)
    tokenizer = AutoTokenizer.from_pretrained(cfg.model)
    pairs = load_text_pairs(cfg.data, tokenizer, get_protocol(cfg.protocol))
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False), encoding="utf-8")
    model = AutoModelForCausalLM.from_pretrained(cfg.model)
    trainer = build_dpo_trainer(
        cfg.train, model, tokenizer, pairs, out, save_steps=cfg.save_steps, callbacks=[DPOStepLog(out / "steps.jsonl")],
        disable_tqdm=not progress,
    )  # fmt: skip
    if not progress:
        trainer.remove_callback(PrinterCallback)  # steps.jsonl has the step records
    t0 = time.perf_counter()
    trainer.train(resume_from_checkpoint=True if resume else None)
    seconds = time.perf_counter() - t0
    policy = save_policy(trainer.accelerator.unwrap_model(trainer.model), tokenizer, out / "policy")
    carry_settings(Path(cfg.model), policy)  # the policy runs with its start's inference settings
    steps = read_steps(out / "steps.jsonl")
    plot_steps(out / "steps.jsonl", out / "curves.png", loss_label="DPO loss")
    log.info(
        "step-level DPO: %d pairs, %d steps in %.1f s; policy %s",
        len(pairs),
        trainer.state.global_step,
        seconds,
        policy,
    )
    return StepDPOResult(out, policy, int(trainer.state.global_step), len(pairs), seconds, steps[-1] if steps else {})
