"""Comparison questions drawn afresh from a world's facts (the demo recipe's comparisons.world_comparison_paths) and
the year comparison they share with the world generator (comparisons.compared_first)."""

from __future__ import annotations

from pathlib import Path

import pytest
from demo_policy.comparisons import compared_first, world_comparison_paths

from effirag.config import ConfigError
from effirag.data import load_corpus
from effirag.errors import DataError
from effirag.train.gold_paths import asked_facts, world_paths
from effirag.world import World, generate_world, load_world_config

TINY = ["passages=400", "train_questions=60", "dev_questions=20", "test_questions=40", "two_hop=0.25", "comparison=0.3"]


@pytest.fixture(scope="module")
def world_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("world")
    generate_world(load_world_config("demo", overrides=TINY), out)
    return out


def test_compared_first_picks_the_earliest_year_of_dates_and_years() -> None:
    """Years by hand: "24 June 1975" → 1975, "1921" → 1921, so index 1; "3 May 1901" (1901) before "9 June 1880"
    (1880) → index 1; three values 2012, 1954, 1999 → index 1 (1954). A tie on 1911 and a value not ending in a year
    are errors, not a guess."""
    assert compared_first(["24 June 1975", "1921"]) == 1
    assert compared_first(["3 May 1901", "9 June 1880"]) == 1
    assert compared_first(["1888", "12 February 1890"]) == 0
    assert compared_first(["2012", "1954", "1999"]) == 1
    with pytest.raises(DataError, match="earliest year"):
        compared_first(["1911", "4 May 1911"], where="q1")
    with pytest.raises(DataError, match="Rosikonia"):
        compared_first(["Rosikonia", "1911"], where="q1")


def test_compared_first_agrees_with_every_comparison_the_generator_wrote(world_dir: Path) -> None:
    """Parity with the world generator (which compares its entities' years): every "which first" question of every
    split answers the side compared_first picks from the decomposition's two values."""
    corpus = load_corpus(world_dir / "corpus.jsonl")
    n = 0
    for split in ("train", "dev", "test"):
        paths, _, _ = world_paths(world_dir, split)
        for p in paths:
            if p.qtype != "comparison" or p.answer in ("yes", "no"):
                continue
            n += 1
            i = compared_first([h.answer for h in p.hops], where=p.id)
            assert p.hops[i].entities[0] == p.answer, p.id
    assert n >= 5, n
    assert corpus.passages


def test_comparison_paths_ask_no_evaluated_fact_and_answer_from_the_facts(world_dir: Path) -> None:
    """Each path: two hops asking the canonical questions of two distinct facts of one compared relation, none asked
    by a dev/test hop; "first" answers name the side with the earlier year, nationality answers are yes iff the two
    countries are equal; pairs are never repeated; the same seed draws the same paths and another seed others."""
    world = World.load(world_dir)
    asked = asked_facts(world, world_dir, ("dev", "test"), load_corpus(world_dir / "corpus.jsonl"))
    assert asked
    paths = world_comparison_paths(world_dir, 60, seed=3)
    assert len(paths) == 60
    pairs = set()
    kinds = set()
    for p in paths:
        assert p.qtype == "comparison" and len(p.hops) == 2
        facts = [world.fact_for(h.question) for h in p.hops]
        assert all(f is not None for f in facts)
        a, b = facts[0], facts[1]
        assert a is not None and b is not None
        assert a.id != b.id and a.relation == b.relation and not {a.id, b.id} & asked
        assert [h.answer for h in p.hops] == [a.object, b.object]
        assert a.subject in p.question and b.subject in p.question
        pairs.add(frozenset((a.id, b.id)))
        kinds.add(a.relation)
        if a.relation == "nationality":
            assert p.answers == (("yes",) if a.object == b.object else ("no",))
        else:
            first = (a, b)[compared_first([a.object, b.object])]
            assert p.answer == first.subject
    assert len(pairs) == len(paths)
    assert kinds == {"release_year", "birth_date", "founded_year", "nationality"}
    again = world_comparison_paths(world_dir, 60, seed=3)
    assert [p.id for p in again] == [p.id for p in paths]
    assert [p.id for p in world_comparison_paths(world_dir, 60, seed=4)] != [p.id for p in paths]


def test_sft_config_needs_protocols_for_comparison_paths() -> None:
    from demo_policy.config import ExtraRowsConfig

    with pytest.raises(ConfigError, match="comparison_weights"):
        ExtraRowsConfig(comparison_paths=10)
    with pytest.raises(ConfigError, match="comparison_paths"):
        ExtraRowsConfig(comparison_paths=-1, comparison_weights={"tearag": 1.0})
    assert ExtraRowsConfig(comparison_paths=10, comparison_weights={"tearag": 1.0}).comparison_paths == 10
