"""Counterfactual entity renaming of SFT trajectories (the demo recipe's rename.py, writing.rename_rate)."""

from __future__ import annotations

import random

import pytest
from demo_policy.config import WritingConfig
from demo_policy.rename import EntityPool, draw_renaming, path_names, rename_text
from demo_policy.writing import make_transform

from effirag.train.gold_paths import GoldHop, GoldPath
from effirag.train.sft_data import SFTDataBuilder, SFTDataConfig
from effirag.types import Passage, Triplet

POOL = EntityPool.from_names(
    [("Oskar", "city"), ("Brill", "city"), ("Tamsk", "city"), ("Oskar State University", "university"),
     ("Veltrania", "country"), ("Quarnia", "country"), ("Mira Talvenor", "person"), ("Ivo Plent", "person")]
)  # fmt: skip


def words(text: str) -> int:
    return len(text.split())


def _path(*, known: bool) -> GoldPath:
    p1 = Passage("a", "Mira Talvenor", "Mira Talvenor was born in Oskar. She studied law.")
    p2 = Passage("b", "Oskar", "Oskar is a town located in Veltrania. Oskar State University is there.")
    hops = (
        GoldHop("Where was Mira Talvenor born?", "Oskar", p1, (Triplet("Mira Talvenor", "born in", "Oskar", "a"),),
                ("Mira Talvenor",), known=known, known_text="Mira Talvenor was born in Oskar."),
        GoldHop("In which country is Oskar?", "Veltrania", p2, (Triplet("Oskar", "country", "Veltrania", "b"),),
                ("Oskar",)),
    )  # fmt: skip
    return GoldPath("p1", "In which country was Mira Talvenor born?", ("Veltrania",), hops)


def test_pool_groups_by_type_and_finds_longer_names_and_drops_ambiguous_names() -> None:
    assert POOL.by_type["city"] == ("Brill", "Oskar", "Tamsk")
    assert POOL.containing == {"Oskar": ("Oskar State University",)}
    two = EntityPool.from_names([("Oskar", "city"), ("Oskar", "company"), ("Brill", "city"), ("Brill", "city")])
    assert dict(two.types) == {"Brill": "city"}  # "Oskar" names two kinds of entity: never renamed


def test_rename_text_swaps_in_one_pass_and_keeps_longer_names() -> None:
    """Oskar→Brill and Brill→Oskar at once: a two-pass replace would turn both into the same name. The university
    that contains "Oskar" stays whole, and "Oskarsson" is not a whole-word match."""
    text = "Oskar and Brill; Oskar State University; Oskarsson."
    got = rename_text(text, {"Oskar": "Brill", "Brill": "Oskar"}, POOL)
    assert got == "Brill and Oskar; Oskar State University; Oskarsson."
    assert rename_text(text, {}, POOL) == text


def test_path_names_and_draw_renaming() -> None:
    """The path names Mira Talvenor (hop 1's entity), Oskar (hop 1's answer, hop 2's entity) and Veltrania (hop 2's
    answer and the final answer). With "Tamsk" in the text, the only free city for Oskar is Brill; the only other
    country is Quarnia and the only other person Ivo Plent."""
    path = _path(known=False)
    names = path_names(path, POOL)
    assert names == ["Mira Talvenor", "Oskar", "Veltrania"]
    mapping = draw_renaming(names, POOL, "... Tamsk ...", random.Random(0))
    assert mapping == {"Mira Talvenor": "Ivo Plent", "Oskar": "Brill", "Veltrania": "Quarnia"}
    # No free candidate: the name is kept (absent from the mapping).
    assert draw_renaming(["Oskar"], POOL, "Brill Tamsk", random.Random(0)) == {}


def test_builder_renames_only_all_search_paths_consistently() -> None:
    cfg = SFTDataConfig(protocols=("tearag",), redundant_step_rate=0.0, single_hop_rate=0.0)
    rename = make_transform(WritingConfig(rename_rate=1.0), POOL)
    renamed = SFTDataBuilder([], [], words, cfg, transform=rename).build([_path(known=False)])
    assert len(renamed) == 1
    mapping = renamed[0].meta["renamed"]
    assert set(mapping) == {"Mira Talvenor", "Oskar", "Veltrania"}
    text = "".join(s.text for pair in renamed[0].pairs for s in pair)
    for old, new in mapping.items():
        assert old not in text.replace("Oskar State University", "")
        assert new in text
    assert text.rstrip().endswith(f"Final answer: {mapping['Veltrania']}")
    # A path with a hop answered from memory keeps the world's real names.
    kept = SFTDataBuilder([], [], words, cfg, transform=rename).build([_path(known=True)])
    assert "renamed" not in kept[0].meta
    assert "Mira Talvenor" in kept[0].pairs[0][0].text


def test_rename_rate_zero_leaves_data_unchanged_and_needs_a_pool() -> None:
    base = SFTDataConfig(protocols=("tearag", "searchr1"), redundant_step_rate=0.3, seed=3)
    a = SFTDataBuilder([], [], words, base).build([_path(known=False)] * 3)
    none = make_transform(WritingConfig(rename_rate=0.0), POOL)
    assert none is None  # nothing to rename: the builder runs as without the recipe
    b = SFTDataBuilder([], [], words, base, transform=none).build([_path(known=False)] * 3)
    assert [e.to_dict() for e in a] == [e.to_dict() for e in b]
    with pytest.raises(ValueError, match=r"rename_rate=0\.5 needs the world.s entity pool"):
        make_transform(WritingConfig(rename_rate=0.5), None)
    with pytest.raises(ValueError, match="rename_rate"):
        WritingConfig(rename_rate=1.5)


def test_entity_pool_of_a_generated_world(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Every world entity is in the pool under its type, and a missing world names its world.json."""
    from demo_policy.writing import entity_pool

    from effirag.world import World, WorldConfig, generate_world

    generate_world(WorldConfig(passages=200, train_questions=10, dev_questions=5, test_questions=5), tmp_path)
    pool = entity_pool(tmp_path)
    world = World.load(tmp_path)
    assert {e.name: e.type for e in world.entities.values()} == dict(pool.types)
    assert sum(len(v) for v in pool.by_type.values()) == len(pool.types)
    with pytest.raises(FileNotFoundError, match=r"world\.json"):
        entity_pool(tmp_path / "nowhere")
