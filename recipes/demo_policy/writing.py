"""Rewrites of built SFT examples that only the demo recipe uses: renaming entities, cutting a trajectory after its
first steps, training only its final step."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

from demo_policy.config import WritingConfig
from demo_policy.rename import EntityPool, draw_renaming, path_names, rename_pairs
from effirag.train.gold_paths import GoldPath
from effirag.train.masking import Segment
from effirag.train.sft_data import SFTExample, Transform


def entity_pool(world: Path) -> EntityPool:
    """The entity names of a generated world by type, for ``writing.rename_rate``."""
    from effirag.world.world import World

    if not (world / "world.json").is_file():
        raise FileNotFoundError(
            f"writing.rename_rate needs a generated world, but {world / 'world.json'} does not exist"
        )
    return EntityPool.from_names((e.name, e.type) for e in World.load(world).entities.values())


def make_transform(writing: WritingConfig, pool: EntityPool | None) -> Transform | None:
    """The builder's per-example rewrite for ``writing`` (None when it renames and cuts nothing)."""
    if not writing.rename_rate and not writing.max_completions:
        return None
    if writing.rename_rate and pool is None:
        raise ValueError(f"writing.rename_rate={writing.rename_rate} needs the world's entity pool; none was given")

    def transform(example: SFTExample, path: GoldPath, rng: random.Random) -> SFTExample | None:
        if writing.rename_rate:
            assert pool is not None
            example = maybe_rename(example, path, rng, writing.rename_rate, pool)
        if writing.max_completions:
            example = first_completions(example, writing.max_completions)
        return example

    return transform


def maybe_rename(example: SFTExample, path: GoldPath, rng: random.Random, rate: float, pool: EntityPool) -> SFTExample:
    """``example`` with its entity names swapped (``rate`` of the paths that search every hop: a hop answered from
    memory must keep the world's real names, or the policy would learn false facts)."""
    if any(h.known for h in path.hops) or rng.random() >= rate:
        return example
    text = "".join(s.text for pair in example.pairs for s in pair)
    mapping = draw_renaming(path_names(path, pool), pool, text, rng)
    pairs = rename_pairs(example.pairs, mapping, pool)
    return replace(example, pairs=pairs, meta={**example.meta, "renamed": mapping})


def first_completions(example: SFTExample, n: int) -> SFTExample:
    """``example`` cut after its first ``n`` trained segments (later pairs and segments dropped; marked incomplete
    when anything was cut, so that no EOS is trained where the trajectory does not end)."""
    pairs: list[list[Segment]] = []
    seen = 0
    for pair in example.pairs:
        kept: list[Segment] = []
        for seg in pair:
            if seen == n:
                break
            kept.append(seg)
            seen += seg.trained
        if any(s.trained for s in kept):
            pairs.append(kept)
        if seen == n:
            break
    cut = sum(len(p) for p in pairs) < sum(len(p) for p in example.pairs)
    return replace(example, pairs=pairs, complete=example.complete and not cut)


def final_completion_only(example: SFTExample) -> SFTExample:
    """``example`` with only its last trained segment still trained (the final step: for TeaRAG the last summary and
    the answer); every earlier completion stays in the text as context. Pairs before the last one that trains
    anything are dropped, since they would train nothing."""
    last = max((i for i, pair in enumerate(example.pairs) if any(s.trained for s in pair)), default=None)
    if last is None:
        raise ValueError(f"SFT example {example.id!r} trains no segment; nothing is left to train in its final step")
    pair = example.pairs[last]
    final = max(j for j, seg in enumerate(pair) if seg.trained)
    kept = [seg if j == final else replace(seg, trained=False) for j, seg in enumerate(pair)]
    return replace(example, pairs=[kept])
