"""Run one stage of the demo policy's recipe (and, first, every earlier stage whose export is missing).

    python recipes/demo_policy/stage.py --config recipes/demo_policy/stage7_compare_decide.yaml [key=value ...]
    python recipes/demo_policy/stage.py --config ... --data-only     # build the rows, print their fingerprint

A stage = the library's pieces (gold paths of the world, start model, ``run_sft``, export) around the recipe's own
mixture (mixture.py). Every stage resumes from its ``train.output_dir/checkpoint-*`` when interrupted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `demo_policy` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from demo_policy.config import StageConfig
from demo_policy.mixture import build_mixture
from effirag.config import load_config
from effirag.train.data_source import load_gold
from effirag.train.pipeline import (
    PipelineReport,
    data_counts,
    finish_run,
    load_start,
    start_run,
    token_counter,
    write_sample,
)
from effirag.train.sft import run_sft
from effirag.train.sft_data import tokenize_examples

log = logging.getLogger(__name__)


def stage_rows(cfg: StageConfig, tokenizer: Any, rep: PipelineReport) -> tuple[list[Any], list[dict[str, list[int]]]]:
    """The stage's examples and their tokenised rows; counts and seconds go into ``rep``."""
    t = time.perf_counter()
    gold = load_gold(cfg.data.source)
    examples, counts = build_mixture(cfg, gold, token_counter(tokenizer))
    rows = tokenize_examples(examples, tokenizer, cfg.train.max_length)
    rep.seconds["data"] = time.perf_counter() - t
    rep.counts.update(counts, **data_counts(examples, rows))
    return examples, rows


def rows_fingerprint(rows: Sequence[dict[str, list[int]]]) -> str:
    """SHA-256 of the rows' ``input_ids`` and ``labels``, in order: two stages train on the same data exactly when
    their fingerprints agree."""
    h = hashlib.sha256()
    for r in rows:
        h.update(json.dumps([r["input_ids"], r["labels"]]).encode())
    return h.hexdigest()


def run_stage(cfg: StageConfig, *, progress: bool = True, chain: tuple[Path, ...] = ()) -> PipelineReport:
    """Train one stage; when its start model is missing and ``previous_stage`` exports it, that stage runs first
    (``chain``: the stage files already on the stack, to refuse a cycle)."""
    if cfg.previous_stage is not None and not (Path(str(cfg.train.model)) / "config.json").is_file():
        run_previous_stage(cfg, progress=progress, chain=chain)
    rep = PipelineReport()
    out = start_run(cfg, cfg.train.output_dir)
    tok, model = load_start(cfg.train, cfg.data.source, rep)
    examples, rows = stage_rows(cfg, tok, rep)
    write_sample(out, examples)
    log.info("SFT data: %s", rep.counts)
    t = time.perf_counter()
    rep.result = run_sft(cfg.train, model, tok, rows, progress=progress)
    rep.seconds["sft"] = time.perf_counter() - t
    finish_run(cfg.train, rep, Path(str(cfg.data.source.world)))
    return rep


def run_previous_stage(cfg: StageConfig, *, progress: bool = True, chain: tuple[Path, ...] = ()) -> None:
    """Run the earlier stage that produces ``cfg.train.model`` (recursively: it may have its own)."""
    assert cfg.previous_stage is not None and cfg.train.model is not None
    here = Path(cfg.previous_stage).resolve()
    if here in chain:
        raise ValueError(f"previous_stage {cfg.previous_stage} is already being run: the stages form a cycle")
    prev = load_config(StageConfig, cfg.previous_stage, ())
    if prev.train.export_dir is None or Path(prev.train.export_dir) != Path(cfg.train.model):
        raise ValueError(
            f"previous_stage {cfg.previous_stage}: its train.export_dir ({prev.train.export_dir}) must be this "
            f"stage's train.model ({cfg.train.model}), or this stage would not start from what it trains"
        )
    log.info("model %s does not exist yet: running the previous stage %s first", cfg.train.model, cfg.previous_stage)
    run_stage(prev, progress=progress, chain=(*chain, here))


def data_only(cfg: StageConfig) -> dict[str, Any]:
    """The stage's rows without training: their count and fingerprint (the tokenizer is ``train.tokenizer``'s or
    ``train.model``'s, which must exist)."""
    from effirag.train.tokenizer import load_tokenizer

    source = cfg.train.tokenizer if cfg.train.tokenizer is not None else cfg.train.model
    if source is None:
        raise ValueError("--data-only needs train.model or train.tokenizer (the tokenizer that encodes the rows)")
    rep = PipelineReport()
    _, rows = stage_rows(cfg, load_tokenizer(source), rep)
    return {"sha256": rows_fingerprint(rows), "rows": len(rows)}


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, type=Path, help="A stage YAML of this recipe.")
    ap.add_argument("--data-only", action="store_true", help="Build the rows and print their fingerprint; no training.")
    ap.add_argument("--quiet", action="store_true", help="No progress bar.")
    ap.add_argument("overrides", nargs="*", help="key=value overrides, e.g. train.optim.max_steps=20")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    cfg = load_config(StageConfig, args.config, args.overrides)
    if args.data_only:
        print(json.dumps(data_only(cfg)))
        return
    rep = run_stage(cfg, progress=not args.quiet)
    assert rep.result is not None
    print(json.dumps({"steps": rep.result.steps, "train_loss": rep.result.train_loss, **rep.counts}, default=str))


if __name__ == "__main__":
    main()
