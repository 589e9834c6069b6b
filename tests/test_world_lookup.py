"""``World.fact_for``: (sub-)question text → the one fact it asks, or None."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from effirag.world import World, generate_world, load_world_config
from effirag.world.lookup import NameIndex, normalize, relation_for
from effirag.world.schema import RELATIONS

SMALL = ["passages=300", "train_questions=30", "dev_questions=10", "test_questions=30", "collision_share=0.2"]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[World, Path]:
    out = tmp_path_factory.mktemp("lookup")
    generate_world(load_world_config("demo", overrides=SMALL), out)
    return World.load(out), out


def test_normalize_drops_case_punctuation_and_possessives() -> None:
    assert normalize("Who was Mira Talvenor's father?") == ["who", "was", "mira", "talvenor", "father"]
    assert normalize("Arvel (Tornia)") == ["arvel", "tornia"]


def test_every_question_variant_of_every_fact_maps_back(world: tuple[World, Path]) -> None:
    w, _ = world
    for f in w.facts.values():
        for template in RELATIONS[(f.subject_type, f.relation)].questions:
            q = template.format(s=f.subject)
            for form in (q, q.lower().rstrip("?."), q.upper()):
                got = w.fact_for(form)
                assert got is not None and got.id == f.id, (form, got)


def test_decomposition_steps_map_to_their_facts_and_whole_questions_do_not(world: tuple[World, Path]) -> None:
    w, out = world
    for split in ("train", "dev", "test"):
        for line in (out / f"questions_{split}.jsonl").read_text().splitlines():
            q = json.loads(line)
            meta = q["metadata"]
            for step, fid in zip(meta["decomposition"], meta["facts"], strict=True):
                got = w.fact_for(step["question"])
                assert got is not None and got.id == fid
                assert step["question"] == w.facts[fid].question
            if meta["hops"] > 1:  # multi-hop and comparison questions ask more than one fact
                assert w.fact_for(q["question"]) is None, q["question"]


def test_shared_names_resolve_by_qualifier_words_or_not_at_all(world: tuple[World, Path]) -> None:
    w, _ = world
    films = [e for e in w.entities.values() if e.type == "film" and e.display != e.name]
    assert films, "collision_share=0.2 must produce films sharing a title"
    film = films[0]
    year = film.display.split("(")[1].split()[0]
    assert w.fact_for(f"Who directed {film.name}?") is None  # ambiguous
    got = w.fact_for(f"Who directed the {year} film {film.name}?")
    assert got is not None and got.id == f"{film.id}.directed_by"


def test_unrelated_or_unknown_text_maps_to_nothing(world: tuple[World, Path]) -> None:
    w, _ = world
    person = next(e for e in w.entities.values() if e.type == "person")
    assert w.fact_for("What is the meaning of life?") is None
    assert w.fact_for(f"Tell me about {person.display}.") is None
    assert w.fact_for(f"Who directed {person.display}?") is None  # persons have no director


def test_relation_rules_on_hand_made_word_lists() -> None:
    """Hand-worked: 'when was X born' hits birth_date {born, when} ⊃ born_in {born} → birth_date;
    'when was the father of X born' keeps father {father} and birth_date → two relations → None;
    a film with 'born' (a person cue) nests a hop → None."""
    assert relation_for("person", ["when", "was", "born"]) == "birth_date"
    assert relation_for("person", ["where", "was", "born"]) == "born_in"
    assert relation_for("person", ["when", "was", "the", "father", "of", "born"]) is None
    assert relation_for("film", ["where", "was", "the", "director", "of", "born"]) is None
    assert relation_for("company", ["in", "which", "country", "is", "the", "city", "where", "headquartered"]) is None
    assert relation_for("company", ["when", "was", "founded"]) == "founded_year"
    assert relation_for("company", ["who", "founded"]) == "founded_by"


def test_name_index_takes_the_longest_single_entity() -> None:
    idx = NameIndex([("e1", "Arvel", "Arvel"), ("e2", "University of Arvel", "University of Arvel")])
    assert idx.find(normalize("Where is University of Arvel located?")) == ("e2", ["where", "is", "located"])
    assert idx.find(normalize("Is Arvel near University of Arvel?"))[0] is None  # two entities named


def test_facts_stated_finds_true_assertions_and_ignores_wrong_ones(world: tuple[World, Path]) -> None:
    w, _ = world
    for f in list(w.facts.values())[::7]:
        stated = w.facts_stated(f.text)
        assert f in stated, (f.text, stated)
    person = next(e for e in w.entities.values() if e.type == "person")
    born = w.facts[f"{person.id}.born_in"]
    wrong_city = next(e for e in w.entities.values() if e.type == "city" and e.id != born.object_id)
    assert born not in w.facts_stated(f"{person.display} was born in {wrong_city.display}.")
    assert w.facts_stated("Nobody was born anywhere.") == []
