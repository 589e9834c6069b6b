"""The SFT pipeline behind ``effirag train sft``: world → tokenizer → model → SFT data → TRL SFT → exported checkpoint.

Each stage is skipped when its input is given (an existing world folder, a tokenizer or start checkpoint), so the same
command fine-tunes a user's Qwen/Llama checkpoint or builds the embedded demo policy from nothing.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from effirag.config import to_dict
from effirag.train.sft import SFTConfig, SFTResult, run_sft

if TYPE_CHECKING:
    from effirag.train.rename import EntityPool

log = logging.getLogger(__name__)


@dataclass
class PipelineReport:
    """What a pipeline run did, stage by stage (seconds, counts) and the SFT result."""

    seconds: dict[str, float] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=dict)
    result: SFTResult | None = None


def ensure_world(config: SFTConfig) -> Path:
    """The world folder of ``config``, generated first when it does not exist yet."""
    if config.world is None:
        raise ValueError("SFTConfig.world is None: give a world folder (it is generated when missing)")
    d = Path(config.world)
    if not (d / "world.json").is_file():
        from effirag.world import generate_world, load_world_config

        log.info("generating world preset=%s seed=%d into %s", config.world_preset, config.world_seed, d)
        generate_world(load_world_config(config.world_preset, seed=config.world_seed), d)
    return d


def tokenizer_texts(world: Path) -> list[str]:
    """Text the policy's BPE is trained on: corpus passages, train questions, known facts, and protocol prompts."""
    from effirag.agent.protocols import PROTOCOLS, get_protocol
    from effirag.data.io import iter_jsonl
    from effirag.train.trajectories import SUMMARY_TEXT, SUMMARY_TRIPLET

    texts = [f"{r['title']}\n{r['text']}" for _, r in iter_jsonl(world / "corpus.jsonl")]
    texts += [r["question"] for _, r in iter_jsonl(world / "questions_train.jsonl")]
    for _, r in iter_jsonl(world / "knowledge.jsonl"):
        texts += [r["text"], r["question"]]
    texts += [get_protocol(p).build_prompt("Who is it?", "Doc 1") for p in PROTOCOLS] * 50
    # the SFT data's own phrases (summaries, triplet documents, answer lines), so BPE learns them as words
    filled = [t.format(t="(A, b, C)", a="C", s="A b C.") for t in SUMMARY_TRIPLET + SUMMARY_TEXT]
    texts += [*filled, "Doc 1 (Triplet) (A, b, C)\nFinal answer: C"] * 50
    return texts


def entity_names(world: Path) -> list[str]:
    """Every entity name of a generated world (``world.json``), for ``tokenizer_train.entity_tokens``."""
    from effirag.world.world import World

    if not (world / "world.json").is_file():
        raise FileNotFoundError(
            f"tokenizer_train.entity_tokens needs a generated world, but {world / 'world.json'} does not exist"
        )
    return sorted({e.name for e in World.load(world).entities.values()})


def entity_pool(world: Path) -> EntityPool:
    """The entity names of a generated world by type, for ``sft_data.rename_rate``."""
    from effirag.train.rename import EntityPool
    from effirag.world.world import World

    if not (world / "world.json").is_file():
        raise FileNotFoundError(
            f"sft_data.rename_rate needs a generated world, but {world / 'world.json'} does not exist"
        )
    return EntityPool.from_names((e.name, e.type) for e in World.load(world).entities.values())


def run_pipeline(config: SFTConfig, *, progress: bool = True, _chain: tuple[Path, ...] = ()) -> PipelineReport:
    """Run every stage of ``config`` and save the run (config, data stats, model, loss curve) in its output_dir.

    When ``config.model`` is missing and ``config.previous_stage`` names the config that exports it, that earlier
    curriculum stage runs first (``_chain``: the stage files already on the stack, to refuse a cycle)."""
    from effirag.train.gold_paths import sides_swapped, world_comparison_paths, world_fact_paths, world_paths
    from effirag.train.knowledge import knowledge_examples, load_known_facts
    from effirag.train.model import build_model, count_parameters
    from effirag.train.sft_data import SFTDataBuilder, final_completion_only, tokenize_examples
    from effirag.train.tokenizer import as_loaded, load_tokenizer, train_tokenizer

    if config.previous_stage is not None and not (Path(str(config.model)) / "config.json").is_file():
        run_previous_stage(config, progress=progress, chain=_chain)
    rep = PipelineReport()
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sft_config.json").write_text(json.dumps(to_dict(config), indent=1, default=str), encoding="utf-8")
    t = time.perf_counter()
    world = ensure_world(config)
    rep.seconds["world"] = time.perf_counter() - t

    t = time.perf_counter()
    if config.tokenizer is not None:
        tok = load_tokenizer(config.tokenizer)
    elif config.model is not None:
        tok = load_tokenizer(config.model)
    else:
        words = entity_names(world) if config.tokenizer_train.entity_tokens else ()
        tok = train_tokenizer(tokenizer_texts(world), config.tokenizer_train, words=words)
    rep.seconds["tokenizer"] = time.perf_counter() - t
    rep.counts["vocab"] = len(tok)

    t = time.perf_counter()
    if config.model is not None:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(str(config.model))
    else:
        model = build_model(config.model_shape, tok)
        # encode the data exactly as the exported checkpoint will be tokenised at inference (see as_loaded)
        tok = as_loaded(tok, model.config, out / "tokenizer")
    rep.counts["parameters"] = count_parameters(model)

    paths, passages, triplets = world_paths(world, "train")

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False))

    pool = entity_pool(world) if config.sft_data.rename_rate else None
    examples = SFTDataBuilder(passages, triplets, count, config.sft_data, pool).build(paths)
    if config.fact_weights:
        fact_data = replace(config.sft_data, protocols=tuple(config.fact_weights), weights=dict(config.fact_weights))
        fact_paths = world_fact_paths(world)
        rep.counts["fact_paths"] = len(fact_paths)
        examples += SFTDataBuilder(passages, triplets, count, fact_data, pool).build(fact_paths)
    n_drill = config.comparison_drill_rows * config.comparison_drill_lines
    # one draw for both: its first `comparison_paths` are what a run without the drill draws; the drill gets the rest
    drawn = world_comparison_paths(world, config.comparison_paths + n_drill, seed=config.optim.seed) if (
        config.comparison_paths or n_drill) else []  # fmt: skip
    if n_drill:
        from effirag.train.drill import comparison_drill

        drill_paths = drawn[config.comparison_paths :]
        if len(drill_paths) < n_drill:
            raise ValueError(f"comparison_drill_rows: the world {world} has {len(drill_paths)} comparison pairs left "
                             f"for the drill, {n_drill} asked; lower comparison_drill_rows")  # fmt: skip
        drill = comparison_drill(
            drill_paths,
            config.comparison_drill_lines,
            with_evidence=config.comparison_drill_evidence,
            evidence_first=config.sft_data.evidence_first,
            decide=config.sft_data.comparison_decision,
            seed=config.sft_data.seed,
        )
        examples += drill * config.comparison_drill_copies
        rep.counts["comparison_drill_lines"] = len(drill_paths)
    if config.comparison_paths:
        cmp_data = replace(
            config.sft_data, protocols=tuple(config.comparison_weights), weights=dict(config.comparison_weights)
        )
        cmp_paths = drawn[: config.comparison_paths]
        if config.comparison_both_orders:
            cmp_paths = [q for p in cmp_paths for q in (p, sides_swapped(p))]
        rep.counts["comparison_paths"] = len(cmp_paths)
        cmp_examples = SFTDataBuilder(passages, triplets, count, cmp_data, pool).build(cmp_paths)
        if config.comparison_train == "final":
            cmp_examples = [final_completion_only(e) for e in cmp_examples]
        examples += cmp_examples
    rep.counts["renamed"] = sum(1 for e in examples if e.meta.get("renamed"))
    if config.knowledge_repeats or config.knowledge_question_repeats > 0:
        facts = load_known_facts(world / "knowledge.jsonl")
        n_q = None if config.knowledge_question_repeats < 0 else config.knowledge_question_repeats  # None: as the text
        examples += knowledge_examples(facts, config.knowledge_repeats, seed=config.optim.seed, question_repeats=n_q)
    rows = tokenize_examples(examples, tok, config.max_length)
    rep.seconds["data"] = time.perf_counter() - t
    n_tokens = sum(len(r["input_ids"]) for r in rows)
    n_trained = sum(sum(1 for x in r["labels"] if x != -100) for r in rows)
    rep.counts.update(
        paths=len(paths),
        examples=len(examples),
        rows=len(rows),
        tokens=n_tokens,
        trained_tokens=n_trained,
        by_protocol=dict(Counter(e.protocol for e in examples)),
        waste=dict(Counter(e.waste for e in examples if e.waste)),
    )
    with (out / "sft_data_sample.jsonl").open("w", encoding="utf-8") as f:
        seen: set[str] = set()
        for e in examples:
            if e.protocol not in seen:  # one readable example per protocol
                seen.add(e.protocol)
                f.write(json.dumps(e.to_dict(), ensure_ascii=False) + "\n")
    log.info("SFT data: %s", rep.counts)

    t = time.perf_counter()
    rep.result = run_sft(config, model, tok, rows, progress=progress)
    rep.seconds["sft"] = time.perf_counter() - t
    summary = {"seconds": rep.seconds, "counts": rep.counts, "steps": rep.result.steps,
               "train_loss": rep.result.train_loss, "tokens_per_s": rep.result.tokens_per_s,
               "world_sha256": world_fingerprint(world)}  # fmt: skip
    (out / "pipeline_report.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    if config.export_dir is not None:
        export(out, Path(config.export_dir))
    return rep


def run_previous_stage(config: SFTConfig, *, progress: bool = True, chain: tuple[Path, ...] = ()) -> None:
    """Run the earlier curriculum stage that produces ``config.model`` (recursively: it may have its own)."""
    from effirag.config import load_config

    assert config.previous_stage is not None and config.model is not None
    here = Path(config.previous_stage).resolve()
    if here in chain:
        raise ValueError(f"previous_stage {config.previous_stage} is already being run: the stages form a cycle")
    prev = load_config(SFTConfig, config.previous_stage, ())
    if prev.export_dir is None or Path(prev.export_dir) != Path(config.model):
        raise ValueError(
            f"previous_stage {config.previous_stage}: its export_dir ({prev.export_dir}) must be this stage's model "
            f"({config.model}), or this stage would not start from what it trains"
        )
    log.info("model %s does not exist yet: running the previous stage %s first", config.model, config.previous_stage)
    run_pipeline(prev, progress=progress, _chain=(*chain, here))


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


def export_checkpoint(checkpoint: Path, dest: Path, run_dir: Path | None = None) -> None:
    """Export an intermediate ``checkpoint-N`` (model, tokenizer, its loss curve from ``trainer_state.json``, and the
    run's config/report when ``run_dir`` holds them) to ``dest`` — for a run stopped before its last step."""
    from effirag.train.sft import save_loss_curve

    state = checkpoint / "trainer_state.json"
    if not state.is_file():
        raise FileNotFoundError(f"not a trainer checkpoint (no trainer_state.json): {checkpoint}")
    export(checkpoint, dest)
    history = json.loads(state.read_text("utf-8")).get("log_history", [])
    save_loss_curve(dest, history)
    if run_dir is not None:
        for name in ("sft_config.json",):
            if (run_dir / name).is_file():
                shutil.copy2(run_dir / name, dest / name)
