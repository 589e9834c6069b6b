"""The demo policy's SFT mixture for one stage: the library's trajectories of the world's train paths (written as
``writing`` says), then the rows of ``extra`` in a fixed order — fact reads, the comparison drill, comparison
questions, known facts. The order and every seed are part of the recipe: the committed rows' fingerprints
(data_fingerprints.json) depend on them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from demo_policy.comparisons import sides_swapped, world_comparison_paths
from demo_policy.config import StageConfig
from demo_policy.writing import entity_pool, final_completion_only, make_transform
from effirag.train.data_source import GoldData
from effirag.train.gold_paths import GoldPath, world_fact_paths
from effirag.train.sft_data import SFTDataBuilder, SFTExample


def build_mixture(
    cfg: StageConfig, gold: GoldData, count: Callable[[str], int]
) -> tuple[list[SFTExample], dict[str, Any]]:
    """Every SFT example of the stage, and what went in (counts)."""
    assert gold.world is not None  # StageConfig trains on a world
    world = gold.world
    pool = entity_pool(world) if cfg.writing.rename_rate else None
    transform = make_transform(cfg.writing, pool)
    render = cfg.writing.render_options()

    def build(weights: dict[str, float] | None, paths: list[GoldPath]) -> list[SFTExample]:
        data = cfg.data if weights is None else replace(cfg.data, protocols=tuple(weights), weights=dict(weights))
        builder = SFTDataBuilder(gold.passages, gold.triplets, count, data, render_options=render, transform=transform)
        return builder.build(paths)

    counts: dict[str, Any] = {"paths": len(gold.paths)}
    examples = build(None, gold.paths)
    extra = cfg.extra
    if extra.fact_weights:
        fact_paths = world_fact_paths(world)
        counts["fact_paths"] = len(fact_paths)
        examples += build(extra.fact_weights, fact_paths)
    n_drill = extra.drill.rows * extra.drill.lines
    # one draw for both: its first `comparison_paths` are what a stage without the drill draws; the drill gets the rest
    n_drawn = extra.comparison_paths + n_drill
    drawn = world_comparison_paths(world, n_drawn, seed=cfg.train.optim.seed) if n_drawn else []
    if n_drill:
        examples += drill_rows(cfg, world, drawn[extra.comparison_paths :])
        counts["comparison_drill_lines"] = len(drawn) - extra.comparison_paths
    if extra.comparison_paths:
        cmp_paths = drawn[: extra.comparison_paths]
        if extra.comparison_both_orders:
            cmp_paths = [q for p in cmp_paths for q in (p, sides_swapped(p))]
        counts["comparison_paths"] = len(cmp_paths)
        cmp_examples = build(extra.comparison_weights, cmp_paths)
        if extra.comparison_train == "final":
            cmp_examples = [final_completion_only(e) for e in cmp_examples]
        examples += cmp_examples
    counts["renamed"] = sum(1 for e in examples if e.meta.get("renamed"))
    examples += knowledge_rows(cfg, world)
    return examples, counts


def drill_rows(cfg: StageConfig, world: Path, paths: list[GoldPath]) -> list[SFTExample]:
    """The comparison drill's rows over ``paths`` (each row ``drill.copies`` times)."""
    from demo_policy.drill import comparison_drill

    drill = cfg.extra.drill
    if len(paths) < drill.rows * drill.lines:
        raise ValueError(f"extra.drill.rows: the world {world} has {len(paths)} comparison pairs left for the drill, "
                         f"{drill.rows * drill.lines} asked; lower extra.drill.rows")  # fmt: skip
    rows = comparison_drill(
        paths,
        drill.lines,
        with_evidence=drill.evidence,
        evidence_first=cfg.writing.evidence_first,
        decide=cfg.writing.comparison_decision,
        seed=cfg.data.seed,
    )
    return rows * drill.copies


def knowledge_rows(cfg: StageConfig, world: Path) -> list[SFTExample]:
    """The known facts as LM text and zero-shot questions (``extra.knowledge_*``); none when both are 0."""
    from demo_policy.knowledge_rows import knowledge_examples
    from effirag.train.knowledge import load_known_facts

    extra = cfg.extra
    if not (extra.knowledge_repeats or extra.knowledge_question_repeats > 0):
        return []
    facts = load_known_facts(world / "knowledge.jsonl")
    n_q = None if extra.knowledge_question_repeats < 0 else extra.knowledge_question_repeats  # None: as the text
    return knowledge_examples(facts, extra.knowledge_repeats, seed=cfg.train.optim.seed, question_repeats=n_q)
