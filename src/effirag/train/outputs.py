"""What every trainer does with its output folder: refuse to overwrite a finished run, and save the final policy."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from effirag.errors import ConfigError


def _any_checkpoint(out: Path) -> bool:
    return any(out.glob("checkpoint-*"))


def check_output_dir(
    owner: str,
    output_dir: str,
    resume: bool,
    log: str = "steps.jsonl",
    has_checkpoint: Callable[[Path], bool] | None = _any_checkpoint,
) -> Path:
    """The run's output folder (not created here): without ``resume``, one whose ``log`` exists holds a run already
    and is refused; with ``resume``, one without a checkpoint (``has_checkpoint``; None: the run resumes from its log
    alone) is refused. ``owner`` is the config class named in the error."""
    out = Path(output_dir)
    if resume and has_checkpoint is not None and not has_checkpoint(out):
        raise ConfigError(owner, "output_dir", output_dir, "has no checkpoint-* to resume from")
    if not resume and (out / log).is_file():
        raise ConfigError(owner, "output_dir", output_dir, "holds a run already (use --resume)")
    return out


def save_policy(model: Any, tokenizer: Any, policy: str | Path, adapter: str | Path | None = None) -> Path:
    """The trained ``model`` (unwrapped from any trainer) as a plain HF folder ``policy``, with the tokenizer. A LoRA
    model (a peft model) is merged into its base weights first, in place: ``model`` holds no adapters afterwards;
    with ``adapter`` set, the adapter alone is saved there before the merge. Every trainer saves its policy this way."""
    if adapter is not None:
        model.save_pretrained(str(adapter))
        tokenizer.save_pretrained(str(adapter))
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    model.config.use_cache = True  # transformers' Trainer turned it off for training; generation needs it on
    model.save_pretrained(str(policy))
    tokenizer.save_pretrained(str(policy))
    return Path(policy)
