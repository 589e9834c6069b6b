"""Comparison questions drawn afresh from an EffiRAG-World's facts, for the demo policy's comparison rows and drill.

A world's train split holds ~120 comparisons, too few for a 5M-parameter policy to learn to compare two values it has
read; these generators ask the world's four comparison kinds over facts no dev or test question asks.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from effirag.errors import DataError
from effirag.train.gold_paths import GoldPath, asked_facts, build_path, load_world_triplets, triplets_by_source
from effirag.types import QAExample, SubQuestion


def compared_first(values: Sequence[str], *, where: str = "") -> int:
    """Index of the earliest of two or more dates or years ("24 June 1975", "1921"), compared by year: the answer of
    EffiRAG-World's "which came first" comparisons, whose two years always differ. A value that does not end in a
    year, or a tie, is a DataError naming ``where``."""
    years = []
    for v in values:
        last = v.rsplit(" ", 1)[-1]
        if not last.isdigit():
            raise DataError("expected a date or year ending in the year", record=where, field="value", value=v)
        years.append(int(last))
    best = min(years)
    if years.count(best) > 1:
        raise DataError("two values share the earliest year", record=where, field="value", value=list(values))
    return years.index(best)


def world_comparison_paths(
    world_dir: str | Path, n: int, *, seed: int = 0, exclude_splits: Sequence[str] = ("dev", "test")
) -> list[GoldPath]:
    """``n`` comparison questions drawn afresh from an EffiRAG-World's facts, as gold paths (two hops, one per side).

    Why: a world's train split has ~120 comparisons, too few for a small policy to learn to compare two years it has
    read (the demo policy read both sides, then answered a third name). These paths ask the
    world's four comparison kinds (questions.COMPARISONS, drawn uniformly; half of the nationality pairs share one)
    over facts no question of ``exclude_splits`` asks, so no evaluated pair or side is trained on. Pairs are distinct,
    the "first" kinds never tie on the year, and the hops are resolved as :func:`world_paths` does (known facts
    flagged). Randomness from ``"{seed}/comparison-paths"``; fewer than ``n`` only when the world runs out of pairs.
    """
    import random

    from effirag.data import load_corpus
    from effirag.world import World
    from effirag.world.questions import COMPARISON_KINDS, COMPARISONS

    d = Path(world_dir)
    world = World.load(d)
    corpus = load_corpus(d / "corpus.jsonl")
    excluded = asked_facts(world, d, exclude_splits, corpus)
    pools = {
        kind: [f for f in world.facts.values()
               if f.subject_type == etype and f.relation == rel and f.id not in excluded and f.passages]
        for kind, (etype, rel, _) in COMPARISONS.items()
    }  # fmt: skip
    by_source = triplets_by_source(load_world_triplets(d / "triplets.jsonl"))

    def knows(question: str) -> str | None:
        fact = world.fact_for(question)
        return fact.text if fact is not None and world.knows(fact) else None

    rng = random.Random(f"{seed}/comparison-paths")
    seen: set[tuple[str, str]] = set()
    paths: list[GoldPath] = []
    for _attempt in range(50 * n):
        if len(paths) == n:
            break
        kind = COMPARISON_KINDS[rng.randrange(len(COMPARISON_KINDS))]
        pool = pools[kind]
        if len(pool) < 2:
            continue
        a, b = rng.sample(pool, 2)
        if kind == "nationality" and rng.random() < 0.5:
            same = [f for f in pool if f.object == a.object and f.id != a.id]
            b = same[rng.randrange(len(same))] if same else b
        key = (min(a.id, b.id), max(a.id, b.id))
        values = [a.object, b.object]
        if key in seen or (kind != "nationality" and len({v.rsplit(" ", 1)[-1] for v in values}) < 2):
            continue
        seen.add(key)
        templates = COMPARISONS[kind][2]
        question = rng.choice(templates).format(x=a.subject, y=b.subject)
        if kind == "nationality":
            answers: tuple[str, ...] = ("yes",) if a.object == b.object else ("no",)
        else:
            first = (a, b)[compared_first(values, where=f"cmp:{a.id}|{b.id}")]
            answers = tuple(dict.fromkeys((first.subject, world.entities[first.subject_id].name)))
        decomposition = tuple(SubQuestion(f.question, f.object, f.passages[0]) for f in (a, b))
        support = tuple(dict.fromkeys(f.passages[0] for f in (a, b)))
        ex = QAExample(f"cmp:{a.id}|{b.id}", question, answers, 2, "comparison", support, decomposition)
        paths.append(build_path(ex, corpus.by_id, by_source, knows))
    return paths


def sides_swapped(path: GoldPath) -> GoldPath:
    """A two-hop comparison asked with its sides in the other order: the two names swap places in the question and the
    hops run in that order; the answers stay. Why: the demo policy's answer to a comparison does not follow the values
    it has read; with both orders of one question in the data, naming a side by its position
    is wrong for exactly one of the two, and only the compare is right for both."""
    if path.qtype != "comparison" or len(path.hops) != 2 or not all(h.entities for h in path.hops):
        raise ValueError(f"sides_swapped: {path.id!r} is not a two-hop comparison naming both sides")
    a, b = path.hops[0].entities[0], path.hops[1].entities[0]
    if a in b or b in a or path.question.count(a) != 1 or path.question.count(b) != 1:
        raise ValueError(f"sides_swapped: {path.id!r}: {a!r} and {b!r} must each be named once in {path.question!r}")
    question = path.question.replace(a, "\0").replace(b, a).replace("\0", b)
    return GoldPath(f"{path.id}~swapped", question, path.answers, path.hops[::-1], path.qtype)
