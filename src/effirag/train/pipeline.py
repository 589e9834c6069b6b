"""The SFT pipeline behind ``effirag train sft``: gold paths → tokenizer → model → SFT data → TRL SFT → exported
checkpoint.

The gold paths come from a world or from a user's question file with gold decompositions
(:class:`~effirag.train.data_source.DataSource`). Each stage is skipped when its input is given (an existing world
folder, a tokenizer or start checkpoint), so the same command fine-tunes a user's Qwen/Llama checkpoint or trains a
fresh small model. Recipes that build their own mixture (``recipes/demo_policy``) reuse :func:`load_start`,
:func:`data_counts`, :func:`finish_run` and :func:`run_sft`.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from effirag.agent.settings import SETTINGS_FILE, carry_settings
from effirag.config import option, to_dict
from effirag.train.data_source import DataSource
from effirag.train.sft import SFTConfig, SFTResult, run_sft
from effirag.train.sft_data import SFTDataConfig

if TYPE_CHECKING:
    from effirag.train.sft_data import SFTExample

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SFTRunConfig:
    """One ``effirag train sft`` run: the trainer's settings and the data mixture, as two YAML sections."""

    train: SFTConfig = option(factory=SFTConfig, help="Trainer settings: start model, schedule, output folders.")
    data: SFTDataConfig = option(factory=SFTDataConfig, help="Gold-path source and the mixture drawn from it.")


@dataclass
class PipelineReport:
    """What a pipeline run did, stage by stage (seconds, counts) and the SFT result."""

    seconds: dict[str, float] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=dict)
    result: SFTResult | None = None


def load_start(train: SFTConfig, source: DataSource, rep: PipelineReport) -> tuple[Any, Any]:
    """The tokenizer and model a run starts from: ``train.model``'s (or ``train.tokenizer``), else a BPE trained on the
    source's text and a fresh model of ``train.model_shape``. Times and sizes go into ``rep``."""
    from effirag.train.data_source import entity_names, tokenizer_texts
    from effirag.train.model import add_tokens_like, build_model, count_parameters
    from effirag.train.tokenizer import as_loaded, load_tokenizer, train_tokenizer

    t = time.perf_counter()
    if train.tokenizer is not None:
        tok = load_tokenizer(train.tokenizer)
    elif train.model is not None:
        tok = load_tokenizer(train.model)
    else:
        words = entity_names(source) if train.tokenizer_train.entity_tokens else ()
        tok = train_tokenizer(tokenizer_texts(source), train.tokenizer_train, words=words)
    rep.seconds["tokenizer"] = time.perf_counter() - t
    rep.counts["vocab"] = len(tok)
    if train.model is not None:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(str(train.model))
        rep.counts["new_tokens"] = len(add_tokens_like(model, tok, train.new_tokens))
    else:
        model = build_model(train.model_shape, tok)
        # encode the data exactly as the exported checkpoint will be tokenised at inference (see as_loaded)
        tok = as_loaded(tok, model.config, Path(train.output_dir) / "tokenizer")
    rep.counts["parameters"] = count_parameters(model)
    return tok, model


def token_counter(tokenizer: Any) -> Any:
    """``count(text)``: the number of tokens of ``text`` (no special tokens), for observation budgets."""

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False))

    return count


def data_counts(examples: Sequence[SFTExample], rows: Sequence[dict[str, list[int]]]) -> dict[str, Any]:
    """Sizes of an SFT mixture: examples, rows, tokens, trained tokens, examples per protocol and per waste kind."""
    return {
        "examples": len(examples),
        "rows": len(rows),
        "tokens": sum(len(r["input_ids"]) for r in rows),
        "trained_tokens": sum(sum(1 for x in r["labels"] if x != -100) for r in rows),
        "by_protocol": dict(Counter(e.protocol for e in examples)),
        "waste": dict(Counter(e.waste for e in examples if e.waste)),
    }


def write_sample(out: Path, examples: Sequence[SFTExample]) -> None:
    """``sft_data_sample.jsonl``: the first example of each protocol, readable."""
    with (out / "sft_data_sample.jsonl").open("w", encoding="utf-8") as f:
        seen: set[str] = set()
        for e in examples:
            if e.protocol not in seen:
                seen.add(e.protocol)
                f.write(json.dumps(e.to_dict(), ensure_ascii=False) + "\n")


def start_run(config: Any, output_dir: Path) -> Path:
    """Create the run folder and save ``config`` there as ``sft_config.json``."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sft_config.json").write_text(json.dumps(to_dict(config), indent=1, default=str), encoding="utf-8")
    return out


def finish_run(train: SFTConfig, rep: PipelineReport, world: Path | None) -> None:
    """Write ``pipeline_report.json`` next to the trained model and export the run when ``train.export_dir`` is set.

    The export runs with its start's inference settings (``inference.yaml`` of ``train.model``, as the RL and DPO
    trainers carry them), unless the export folder already holds its own (a checkpoint whose settings were chosen
    for it, e.g. on dev, keeps them)."""
    assert rep.result is not None
    summary = {"seconds": rep.seconds, "counts": rep.counts, "steps": rep.result.steps,
               "train_loss": rep.result.train_loss, "tokens_per_s": rep.result.tokens_per_s}  # fmt: skip
    if world is not None:
        summary["world_sha256"] = world_fingerprint(world)
    out = Path(train.output_dir)
    (out / "pipeline_report.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    if train.export_dir is not None:
        dest = Path(train.export_dir)
        export(out, dest)
        if train.model is not None and not (dest / SETTINGS_FILE).is_file():
            carry_settings(Path(train.model), dest)


def run_pipeline(config: SFTRunConfig, *, progress: bool = True) -> PipelineReport:
    """Build the SFT data of ``config.data`` (every configured protocol's trajectories of every gold path), train with
    ``config.train``, and save the run (config, data stats, model, loss curve) in its output_dir."""
    from effirag.train.data_source import load_gold
    from effirag.train.sft_data import SFTDataBuilder, tokenize_examples

    rep = PipelineReport()
    t = time.perf_counter()
    gold = load_gold(config.data.source)
    rep.seconds["paths"] = time.perf_counter() - t
    out = start_run(config, config.train.output_dir)
    tok, model = load_start(config.train, config.data.source, rep)
    t = time.perf_counter()
    count = token_counter(tok)
    examples = SFTDataBuilder(gold.passages, gold.triplets, count, config.data).build(gold.paths)
    if config.data.chat:
        from effirag.llm.chat import chat_prompt
        from effirag.train.sft_data import in_chat

        examples = in_chat(examples, lambda text: chat_prompt(tok, text, f"train.model {config.train.model}"))
    rows = tokenize_examples(examples, tok, config.train.max_length)
    rep.seconds["data"] = time.perf_counter() - t
    rep.counts.update(paths=len(gold.paths), **data_counts(examples, rows))
    write_sample(out, examples)
    log.info("SFT data: %s", rep.counts)
    t = time.perf_counter()
    rep.result = run_sft(config.train, model, tok, rows, progress=progress)
    rep.seconds["sft"] = time.perf_counter() - t
    finish_run(config.train, rep, gold.world)
    return rep


def world_fingerprint(world: Path) -> str:
    """SHA-256 of the world's ``knowledge.jsonl``: what the policy was taught to know (checked by the demo)."""
    import hashlib

    return hashlib.sha256((world / "knowledge.jsonl").read_bytes()).hexdigest()


EXPORTED = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "loss_curve.json",
    "loss_curve.png",
    "sft_config.json",
    "pipeline_report.json",
)


def export(run_dir: Path, dest: Path) -> None:
    """Copy the final model, tokenizer and run records (no optimiser state) from ``run_dir`` to ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in EXPORTED:
        if (run_dir / name).is_file():
            shutil.copy2(run_dir / name, dest / name)


def export_checkpoint(checkpoint: Path, dest: Path, run_dir: Path | None = None, base: Path | None = None) -> None:
    """Export an intermediate ``checkpoint-N`` (model, tokenizer, its loss curve from ``trainer_state.json``, and the
    run's config/report when ``run_dir`` holds them) to ``dest`` — for a run stopped before its last step.

    A LoRA checkpoint (``adapter_config.json``, no model weights) is merged onto its base model — ``base``, else the
    adapter's ``base_model_name_or_path`` — into a plain model folder, with the adapter alone in ``dest/adapter``, as
    a finished run saves its policy."""
    from effirag.train.sft import save_loss_curve

    state = checkpoint / "trainer_state.json"
    if not state.is_file():
        raise FileNotFoundError(f"not a trainer checkpoint (no trainer_state.json): {checkpoint}")
    if (checkpoint / "adapter_config.json").is_file():
        merge_adapter(checkpoint, dest, base)
    else:
        export(checkpoint, dest)
    history = json.loads(state.read_text("utf-8")).get("log_history", [])
    save_loss_curve(dest, history)
    if run_dir is not None:
        for name in ("sft_config.json",):
            if (run_dir / name).is_file():
                shutil.copy2(run_dir / name, dest / name)


def merge_adapter(adapter: Path, dest: Path, base: Path | None = None) -> None:
    """The LoRA ``adapter`` folder merged onto its base model, saved as a plain model folder ``dest`` (the adapter
    alone in ``dest/adapter``); the base is ``base``, else the adapter config's ``base_model_name_or_path``."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from effirag.train.outputs import save_policy

    config = adapter / "adapter_config.json"
    named = json.loads(config.read_text("utf-8")).get("base_model_name_or_path") or ""
    folder = base if base is not None else Path(named)
    if not (folder / "config.json").is_file():
        where = "--base" if base is not None else f"{config}: base_model_name_or_path"
        raise FileNotFoundError(f"{where}={str(folder)!r} is not a model folder (no config.json); pass --base DIR")
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(folder), str(adapter))
    save_policy(model, AutoTokenizer.from_pretrained(adapter), dest, dest / "adapter")
