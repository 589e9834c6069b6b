"""The SFT recipe: TRL's ``SFTTrainer`` on pretokenized ``input_ids``/``labels`` (TeaRAG eq. 4 masking).

Why TRL fits here: since TRL 1.x, ``SFTTrainer`` accepts an already tokenised dataset and uses a ``labels`` column as
is, so our masks (prompt and every inserted span at −100, see :mod:`effirag.train.masking`) reach the loss unchanged;
the trainer brings checkpoints, resume after interruption, gradient accumulation, LR schedules, the progress bar and
LoRA through ``peft``. We add a typed config, the data build, and a saved loss curve (JSON + PNG).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from effirag.config import check, option
from effirag.train.model import ModelConfig
from effirag.train.tokenizer import TokenizerConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoraConfig:
    """LoRA adapters via peft (for users' large models; the demo policy trains fully)."""

    enabled: bool = option(False, help="Train LoRA adapters instead of all weights.")
    r: int = option(16, help="Rank of the adapters.")
    alpha: int = option(32, help="LoRA scaling numerator (scale = alpha / r).")
    dropout: float = option(0.05, help="Dropout on the adapter input.")
    target_modules: tuple[str, ...] = option(
        ("all-linear",),
        help="Module names that get adapters; ['all-linear'] (peft's shorthand) adapts every linear layer but the "
        "output head, whatever the architecture calls them (Qwen's o_proj, LFM2's out_proj and conv in_proj).",
    )

    def __post_init__(self) -> None:
        check(self.r > 0, self, "r", "must be > 0")
        check(0.0 <= self.dropout < 1.0, self, "dropout", "must be in [0, 1)")
        check(len(self.target_modules) > 0, self, "target_modules", "must name at least one module")


@dataclass(frozen=True)
class OptimConfig:
    """Optimisation schedule of one SFT run."""

    learning_rate: float = option(3e-3, help="Peak learning rate (AdamW).")
    weight_decay: float = option(0.01, help="AdamW weight decay.")
    warmup_ratio: float = option(0.05, help="Share of steps with linear warm-up.")
    scheduler: str = option("cosine", help="LR schedule after warm-up (transformers scheduler name).")
    batch_size: int = option(16, help="Sequences per optimiser step (per device).")
    grad_accum: int = option(1, help="Micro-batches accumulated per optimiser step.")
    epochs: float = option(1.0, help="Passes over the SFT data (ignored when max_steps > 0).")
    max_steps: int = option(-1, help="Optimiser steps; -1 means run `epochs` epochs.")
    max_grad_norm: float = option(1.0, help="Gradient clipping norm.")
    seed: int = option(0, help="Seed of data order and dropout.")

    def __post_init__(self) -> None:
        check(self.learning_rate > 0, self, "learning_rate", "must be > 0")
        check(0.0 <= self.warmup_ratio < 1.0, self, "warmup_ratio", "must be in [0, 1)")
        check(self.batch_size >= 1, self, "batch_size", "must be >= 1")
        check(self.grad_accum >= 1, self, "grad_accum", "must be >= 1")
        check(self.epochs > 0, self, "epochs", "must be > 0")
        check(self.max_steps == -1 or self.max_steps > 0, self, "max_steps", "must be -1 or > 0")


@dataclass(frozen=True)
class SFTConfig:
    """Trainer settings of one SFT run: the start model, the schedule, and where results go (the data is
    :class:`~effirag.train.sft_data.SFTDataConfig`)."""

    output_dir: Path = option(Path("runs/sft"), help="Run folder: checkpoints, final model, loss curve, config.")
    export_dir: Path | None = option(None, help="Also copy the final model + tokenizer here (e.g. the checkpoint).")
    model: Path | None = option(None, help="Start checkpoint (HF folder); None: a fresh model from `model_shape`.")
    tokenizer: Path | None = option(None, help="Tokenizer folder; None: the start checkpoint's, or train one.")
    model_shape: ModelConfig = option(factory=ModelConfig, help="Shape of a fresh model.")
    tokenizer_train: TokenizerConfig = option(factory=TokenizerConfig, help="How a fresh tokenizer is trained.")
    optim: OptimConfig = option(factory=OptimConfig, help="Optimisation schedule.")
    lora: LoraConfig = option(factory=LoraConfig, help="LoRA options.")
    new_tokens: dict[str, str] = option(
        factory=dict,
        help="Tokens the start tokenizer lacks, each added as one atomic token whose embedding starts as a copy of "
        "the named existing token's, e.g. {'<memory>': '<subquery>'} (a tag a protocol gained after the start "
        "checkpoint was trained); a token already held is left as it is.",
    )
    max_length: int = option(1024, help="Longest training sequence in tokens (longer ones are cut at the right).")
    save_steps: int = option(200, help="Checkpoint every this many optimiser steps.")
    save_total_limit: int = option(2, help="Checkpoints kept on disk.")
    logging_steps: int = option(10, help="Log the loss every this many optimiser steps.")
    group_by_length: bool = option(True, help="Batch rows of similar length together (far less padding).")
    resume: bool = option(True, help="Resume from the newest checkpoint in output_dir when there is one.")
    threads: int = option(0, help="torch CPU threads; 0 keeps torch's default.")
    gradient_checkpointing: bool = option(
        True,
        help="Recompute activations in the backward pass (TRL's default): less memory for a large model, more "
        "compute. On the 5M demo model on CPU it made no difference to the step time.",
    )
    decision_weight: float = option(
        1.0,
        help="Loss weight of each decision token: the trained token right after one of `decision_markers` (search "
        "again or answer). 1.0: plain SFT, TRL's own loss (train/weighting.py).",
    )
    decision_markers: tuple[str, ...] = option(
        ("</summary>\n", "</think>\n"),
        help="Texts whose next token is a decision: TeaRAG's `<entities>` or `Final`, Search-R1's `<search>` or "
        "`<answer>` (the newline is part of the marker: the step's tag is followed by one).",
    )

    def __post_init__(self) -> None:
        check(self.max_length >= 16, self, "max_length", "must be >= 16")
        check(self.save_steps >= 1, self, "save_steps", "must be >= 1")
        check(self.logging_steps >= 1, self, "logging_steps", "must be >= 1")
        check(self.threads >= 0, self, "threads", "must be >= 0")
        check(self.decision_weight > 0, self, "decision_weight", "must be > 0")


@dataclass
class SFTResult:
    """What one SFT run produced."""

    output_dir: Path
    steps: int
    train_loss: float
    trained_tokens: int
    seconds: float
    log_history: list[dict[str, Any]] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float:
        return self.trained_tokens / self.seconds if self.seconds > 0 else 0.0


def to_dataset(examples: Sequence[dict[str, list[Any]]]) -> Any:
    """A ``datasets.Dataset`` of ``input_ids``/``labels`` rows, and ``loss_weights`` when the rows carry them
    (sequences with nothing to learn are dropped)."""
    from datasets import Dataset

    rows = [e for e in examples if any(x != -100 for x in e["labels"])]
    cols = ("input_ids", "labels", "loss_weights") if rows and "loss_weights" in rows[0] else ("input_ids", "labels")
    return Dataset.from_dict({c: [e[c] for e in rows] for c in cols})


def last_checkpoint(output_dir: Path) -> Path | None:
    """The newest ``checkpoint-N`` folder in ``output_dir`` (the resume point), if any."""
    ckpts = [p for p in output_dir.glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()]
    return max(ckpts, key=lambda p: int(p.name.split("-")[-1])) if ckpts else None


def run_sft(
    config: SFTConfig,
    model: Any,
    tokenizer: Any,
    examples: Sequence[dict[str, list[int]]],
    *,
    progress: bool = True,
) -> SFTResult:
    """Train ``model`` on pretokenized ``examples`` with TRL's SFTTrainer, save the result in ``config.output_dir``.

    The final model and tokenizer are saved with ``save_pretrained`` at the root of ``output_dir`` (merged when LoRA
    is on, with the adapter alone in ``adapter/``); ``loss_curve.json`` and ``loss_curve.png`` go next to them.
    """
    import time

    import torch

    if config.threads:
        torch.set_num_threads(config.threads)
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    trainer = make_trainer(config, model, tokenizer, examples, progress=progress)
    resume = last_checkpoint(out) if config.resume else None
    if resume is not None:
        log.info("resuming from %s", resume)
    # read now: once the run saves save_total_limit newer checkpoints, the one it resumed from is deleted
    start = json.loads((resume / "trainer_state.json").read_text("utf-8"))["global_step"] if resume else 0
    t0 = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    seconds = time.perf_counter() - t0
    final: Any = trainer.model
    if config.lora.enabled:  # the adapter alone (peft's format) and, below, the merged model
        final.save_pretrained(str(out / "adapter"))
        final = final.merge_and_unload()
    final.config.use_cache = True  # transformers' Trainer turned it off for training; generation needs it on
    final.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    history = list(trainer.state.log_history)
    save_loss_curve(out, history)
    # Tokens that passed through the model (the throughput denominator): every position of every example seen
    # *in this call* — after a resume, the steps before the checkpoint took time this call did not measure.
    steps = int(trainer.state.global_step)
    seen = (steps - int(start)) * config.optim.batch_size * config.optim.grad_accum
    mean_len = sum(len(e["input_ids"]) for e in examples) / max(len(examples), 1)
    return SFTResult(out, steps, float(result.training_loss), int(seen * mean_len), seconds, history)


def make_trainer(
    config: SFTConfig, model: Any, tokenizer: Any, examples: Sequence[dict[str, list[int]]], *, progress: bool
) -> Any:
    """TRL's ``SFTTrainer`` (or its decision-weighted subclass when ``decision_weight`` != 1) over ``examples``."""
    from trl import SFTTrainer

    weighted = config.decision_weight != 1.0
    rows: Sequence[dict[str, list[Any]]] = examples
    if weighted:
        from effirag.train.weighting import decision_weights

        markers = [tokenizer.encode(m, add_special_tokens=False) for m in config.decision_markers]
        rows = [
            {**e, "loss_weights": decision_weights(e["input_ids"], e["labels"], markers, config.decision_weight)}
            for e in examples
        ]
    common = {
        "model": model,
        "args": training_args(config, progress=progress),
        "train_dataset": to_dataset(rows),
        "processing_class": tokenizer,
        "peft_config": peft_config(config.lora),
    }
    if weighted:
        from effirag.train.weighting import collate_weighted, weighted_sft_trainer

        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        trainer = weighted_sft_trainer(**common, data_collator=lambda batch: collate_weighted(batch, pad))
    else:
        trainer = SFTTrainer(**common)
    if not progress:
        from transformers import PrinterCallback

        trainer.remove_callback(PrinterCallback)  # logs still reach log_history and the loss curve
    else:
        from effirag.train.progress import progress_on_stderr

        progress_on_stderr(trainer)
    return trainer


def training_args(config: SFTConfig, *, progress: bool) -> Any:
    """TRL's ``SFTConfig`` for ``config``: our rows are tokenised and masked already, so TRL prepares nothing."""
    import torch
    from trl import SFTConfig as TRLConfig

    o = config.optim
    return TRLConfig(
        output_dir=str(config.output_dir),
        per_device_train_batch_size=o.batch_size,
        gradient_accumulation_steps=o.grad_accum,
        learning_rate=o.learning_rate,
        weight_decay=o.weight_decay,
        warmup_steps=o.warmup_ratio,
        lr_scheduler_type=o.scheduler,
        num_train_epochs=o.epochs,
        max_steps=o.max_steps,
        max_grad_norm=o.max_grad_norm,
        seed=o.seed,
        data_seed=o.seed,
        logging_steps=config.logging_steps,
        save_steps=config.save_steps,
        save_total_limit=config.save_total_limit,
        save_strategy="steps",
        report_to=[],
        disable_tqdm=not progress,
        use_cpu=not torch.cuda.is_available(),
        max_length=config.max_length,
        dataloader_num_workers=0,
        dataset_kwargs={"skip_prepare_dataset": True},
        remove_unused_columns=False,
        # batches of similar length: the data mixes 20-token fact rows with 800-token trajectories, and padding a
        # random batch to its longest row would multiply the compute several times
        train_sampling_strategy="group_by_length" if config.group_by_length else "random",
        bf16=False,
        fp16=False,
        **checkpointing_arg(TRLConfig, config.gradient_checkpointing),
    )


def peft_config(lora: LoraConfig) -> Any:
    """peft's LoRA config for ``lora``, or None when LoRA is off (every weight trains)."""
    if not lora.enabled:
        return None
    from peft import LoraConfig as PeftLoraConfig

    targets = "all-linear" if lora.target_modules == ("all-linear",) else list(lora.target_modules)
    return PeftLoraConfig(
        r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=targets, task_type="CAUSAL_LM"
    )


def save_loss_curve(out: Path, history: Sequence[dict[str, Any]]) -> None:
    """Write ``loss_curve.json`` (step, loss, learning rate) and ``loss_curve.png``."""
    points = [
        {"step": int(h["step"]), "loss": float(h["loss"]), "learning_rate": float(h.get("learning_rate", 0.0))}
        for h in history
        if "loss" in h and "step" in h
    ]
    (out / "loss_curve.json").write_text(json.dumps(points, indent=1), encoding="utf-8")
    if not points:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([p["step"] for p in points], [p["loss"] for p in points])
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("masked token loss (TeaRAG eq. 4)")
    ax.set_title(out.name)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "loss_curve.png", dpi=100)
    plt.close(fig)


def checkpointing_arg(args_class: type, enabled: bool) -> dict[str, Any]:
    """The activation-checkpointing switch under the name this transformers version takes.

    transformers 5.x renamed ``gradient_checkpointing`` to ``activation_checkpointing`` and warns on the old name;
    ``pyproject.toml`` allows any 5.x, so the name is read off the arguments class instead of pinned.
    """
    names = {f.name for f in fields(args_class)}
    return {"activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing": enabled}
