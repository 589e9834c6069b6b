"""EffiRAG-World generation: determinism, file layouts, ground-truth walks, splits, hop mix, knowledge."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from effirag.data import load_corpus, load_openie, load_questions
from effirag.world import World, generate_world, load_world_config
from effirag.world.plan import make_plan

TINY = [
    "passages=400",
    "train_questions=60",
    "dev_questions=20",
    "test_questions=40",
    "one_hop=0.25",
    "two_hop=0.35",
    "three_hop=0.15",
    "four_hop=0.1",
    "comparison=0.15",
]
FILES = [
    "corpus.jsonl",
    "triplets.jsonl",
    "openie.json",
    "questions_train.jsonl",
    "questions_dev.jsonl",
    "questions_test.jsonl",
    "hipporag_questions_train.json",
    "hipporag_questions_dev.json",
    "hipporag_questions_test.json",
    "knowledge.jsonl",
    "world.json",
]
SPLITS = ("train", "dev", "test")


@pytest.fixture(scope="module")
def world_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("world")
    generate_world(load_world_config("demo", overrides=TINY), out)
    return out


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _questions(d: Path) -> dict[str, list[dict[str, Any]]]:
    return {s: _jsonl(d / f"questions_{s}.jsonl") for s in SPLITS}


def test_same_seed_gives_byte_identical_files_and_another_seed_differs(world_dir: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    generate_world(load_world_config("demo", overrides=TINY), again)
    for name in FILES:
        assert (world_dir / name).read_bytes() == (again / name).read_bytes(), name
    other = tmp_path / "other"
    generate_world(load_world_config("demo", overrides=[*TINY, "seed=1"]), other)
    for name in ("corpus.jsonl", "triplets.jsonl", "questions_test.jsonl", "knowledge.jsonl", "world.json"):
        assert (world_dir / name).read_bytes() != (other / name).read_bytes(), name


def test_files_have_the_fixed_layouts(world_dir: Path) -> None:
    corpus = _jsonl(world_dir / "corpus.jsonl")
    assert len(corpus) == 400
    assert all(list(r) == ["id", "title", "text", "contents"] for r in corpus)
    assert all(r["contents"] == f'"{r["title"]}"\n{r["text"]}' for r in corpus)
    assert len({r["id"] for r in corpus}) == 400
    words = [len(r["text"].split()) for r in corpus]
    assert min(words) >= 60 and max(words) <= 150
    triplets = _jsonl(world_dir / "triplets.jsonl")
    assert triplets and all(list(t) == ["head", "relation", "tail", "source"] for t in triplets)
    ids = {r["id"] for r in corpus}
    assert all(t["source"] in ids for t in triplets)
    for split, qs in _questions(world_dir).items():
        for q in qs:
            assert list(q) == ["id", "question", "golden_answers", "metadata"]
            meta = q["metadata"]
            assert {"hops", "type", "decomposition", "supporting_ids", "evidence", "facts"} <= set(meta), q["id"]
            assert q["id"].startswith(f"{split}-")
    all_ids = [q["id"] for qs in _questions(world_dir).values() for q in qs]
    assert len(all_ids) == len(set(all_ids))


def test_loaders_read_everything_back_and_find_every_gold_passage(world_dir: Path) -> None:
    corpus = load_corpus(world_dir / "corpus.jsonl")
    for split in SPLITS:
        qs = load_questions(world_dir / f"questions_{split}.jsonl", corpus)
        assert qs.layout == "flashrag" and qs.missing_gold == []
        assert all(ex.decomposition and ex.supporting_ids for ex in qs.examples)
        hippo = load_questions(world_dir / f"hipporag_questions_{split}.json", corpus)
        assert hippo.layout == "musique" and hippo.missing_gold == []
        assert [e.id for e in hippo.examples] == [e.id for e in qs.examples]
        assert [e.supporting_ids for e in hippo.examples] == [e.supporting_ids for e in qs.examples]
    oie = load_openie(world_dir / "openie.json", corpus)
    lines = _jsonl(world_dir / "triplets.jsonl")
    assert oie.malformed == 0 and oie.duplicates == 0
    assert [(t.head, t.relation, t.tail, t.source_id) for t in oie.triplets] == [
        (t["head"], t["relation"], t["tail"], t["source"]) for t in lines
    ]


def test_every_chain_walks_to_the_gold_answer_using_only_corpus_and_triplets(world_dir: Path) -> None:
    """The checker sees corpus.jsonl, triplets.jsonl and the question files, nothing else.

    Per hop: the support passage is about the hop's subject (its title is named by the sub-question, and by the
    question itself for hop 1), states the sub-answer, and the next sub-question names that answer; the last
    sub-answer is the gold answer. Triplets confirm most hops (some facts are text-only by design).
    """
    passages = {r["id"]: r for r in _jsonl(world_dir / "corpus.jsonl")}
    triplets = {(t["source"], t["head"], t["tail"]) for t in _jsonl(world_dir / "triplets.jsonl")}
    confirmed = total = 0
    for qs in _questions(world_dir).values():
        for q in qs:
            meta = q["metadata"]
            if meta["type"] == "comparison":
                continue
            steps = meta["decomposition"]
            assert len(steps) == meta["hops"] == len(meta["facts"])
            assert passages[steps[0]["support"]]["title"] in q["question"], q["id"]
            for i, step in enumerate(steps):
                p = passages[step["support"]]
                assert p["title"] in step["question"], (q["id"], i)
                assert step["answer"] in p["text"], (q["id"], i)
                if i:
                    assert steps[i - 1]["answer"] in step["question"], (q["id"], i)
                total += 1
                key = (p["id"], p["title"], step["answer"])
                confirmed += key in triplets or (p["id"], step["answer"], p["title"]) in triplets
            assert steps[-1]["answer"] == q["golden_answers"][0], q["id"]
            assert meta["supporting_ids"] == list(dict.fromkeys(s["support"] for s in steps))
    assert total > 100
    assert 0.5 < confirmed / total < 1.0  # text_only_share = 0.2 of facts have no triplet


def test_every_comparison_is_supported_by_its_evidence(world_dir: Path) -> None:
    passages = {r["id"]: r for r in _jsonl(world_dir / "corpus.jsonl")}
    n = 0
    for qs in _questions(world_dir).values():
        for q in qs:
            meta = q["metadata"]
            if meta["type"] != "comparison":
                continue
            n += 1
            ev = meta["evidence"]
            assert len(ev) == 2
            for t in ev:
                p = passages[t["source"]]
                assert p["title"] == t["head"] and t["tail"] in p["text"], q["id"]
                assert t["head"] in q["question"]
            if meta["comparison"] == "nationality":
                assert q["golden_answers"] == ["yes" if ev[0]["tail"] == ev[1]["tail"] else "no"]
            else:
                years = [int(re.findall(r"\d{4}", t["tail"])[-1]) for t in ev]
                assert years[0] != years[1]
                assert q["golden_answers"][0] == ev[years.index(min(years))]["head"], q["id"]
    assert n >= 10


def _parts(chain: tuple[str, ...]) -> set[tuple[str, ...]]:
    return {chain} | {chain[i:j] for i in range(len(chain)) for j in range(i + 2, len(chain) + 1)}


def test_no_chain_or_multi_hop_part_of_one_is_shared_between_splits(world_dir: Path) -> None:
    owned: dict[str, set[tuple[str, ...]]] = {}
    for split, qs in _questions(world_dir).items():
        owned[split] = set()
        for q in qs:
            facts = tuple(q["metadata"]["facts"])
            key = ("cmp", *sorted(facts)) if q["metadata"]["type"] == "comparison" else facts
            assert key not in owned[split] or q["metadata"]["type"] != "comparison"
            owned[split] |= _parts(key)
    assert not owned["train"] & owned["test"]
    assert not owned["train"] & owned["dev"]
    assert not owned["dev"] & owned["test"]


def test_hop_mix_matches_the_config_within_five_percent(world_dir: Path) -> None:
    cfg = load_world_config("demo", overrides=TINY)
    for split, qs in _questions(world_dir).items():
        meta = [q["metadata"] for q in qs]
        kinds = Counter("comparison" if m["type"] == "comparison" else str(m["hops"]) for m in meta)
        assert sum(kinds.values()) == getattr(cfg, f"{split}_questions")
        for kind, share in cfg.hop_mix().items():
            assert abs(kinds[kind] / len(qs) - share) <= 0.05, (split, kind)


def test_knows_agrees_with_knowledge_jsonl(world_dir: Path) -> None:
    w = World.load(world_dir)
    records = _jsonl(world_dir / "knowledge.jsonl")
    assert {r["fact_id"] for r in records} == w.known == {f.id for f in w.known_facts()}
    assert 0.15 < len(w.known) / len(w.facts) < 0.45  # known_share = 0.3
    for r in records:
        fact = w.facts[r["fact_id"]]
        assert w.knows(fact) and w.knows(r["fact_id"])
        assert r["text"] == fact.text and r["answer"] == fact.object
        got = w.fact_for(r["question"])
        assert got is not None and got.id == fact.id
    unknown = [f for f in w.facts.values() if f.id not in w.known]
    assert unknown and not any(w.knows(f) for f in unknown)


def test_every_fact_is_stated_by_its_passages(world_dir: Path) -> None:
    passages = {r["id"]: r for r in _jsonl(world_dir / "corpus.jsonl")}
    w = World.load(world_dir)
    for f in w.facts.values():
        assert f.passages[0] in w.entity(f.subject_id).passages
        for pid in f.passages:
            p = passages[pid]
            assert f.object in p["text"] or f.object == p["title"], (f.id, pid)
            assert f.subject in p["text"] or f.subject == p["title"], (f.id, pid)


def test_names_collide_on_purpose_and_display_names_disambiguate(tmp_path: Path) -> None:
    generate_world(load_world_config("demo", overrides=["collision_share=0.3"]), tmp_path)
    w = World.load(tmp_path)
    names = Counter(e.name for e in w.entities.values())
    shared = [e for e in w.entities.values() if names[e.name] > 1]
    assert {e.type for e in shared} == {"film", "city"}
    assert len({e.display for e in w.entities.values()}) == len(w.entities)
    with pytest.raises(KeyError, match="shared by"):
        w.entity(shared[0].name)
    assert w.entity(shared[0].display) == shared[0]
    surnames = Counter(e.name.split()[-1] for e in w.entities.values() if e.type == "person")
    assert surnames.most_common(1)[0][1] >= 3  # people share surnames


def test_plan_counts_match_the_generated_world(world_dir: Path) -> None:
    w = World.load(world_dir)
    plan = make_plan(load_world_config("demo", overrides=TINY))
    assert Counter(e.type for e in w.entities.values()) == Counter(plan.counts)
    assert sum(len(e.passages) for e in w.entities.values()) == 400


def test_hand_assembled_json_lines_equal_json_dumps() -> None:
    """The writer assembles hot records from escaped strings; they must equal the standard encoder's output."""
    from json.encoder import encode_basestring  # type: ignore[attr-defined]

    from effirag.data.writers import passage_to_flashrag
    from effirag.types import Passage
    from effirag.world.build import corpus_line, openie_line, triplet_line

    p = Passage("w1", 'A "b" é\\', 'line\nnext \\ x\t"q" ü')
    qt = encode_basestring(p.text)
    assert corpus_line(p.id, p.title, p.text, qt) == json.dumps(passage_to_flashrag(p), ensure_ascii=False)
    ts = [('h"', "r", "t"), ("a", "b\n", "c")]
    doc = {
        "idx": p.id,
        "title": p.title,
        "text": p.text,
        "passage": p.key,
        "extracted_entities": sorted({x for h, _, t in ts for x in (h, t)}),
        "extracted_triples": [list(x) for x in ts],
    }
    assert openie_line(p.id, p.title, p.text, ts, qt) == json.dumps(doc, ensure_ascii=False)
    row = {"head": 'h"', "relation": "r\\", "tail": "t é", "source": "w1"}
    assert triplet_line(*row.values()) == json.dumps(row, ensure_ascii=False)


def test_chain_patterns_are_well_typed() -> None:
    """Each hop's subject type is the previous hop's object type; only the last hop may end in a value."""
    from effirag.world.schema import CHAIN_PATTERNS, relation, start_type

    for hops, patterns in CHAIN_PATTERNS.items():
        for kind, rels in patterns:
            assert len(rels) == hops
            t: str | None = start_type(kind)
            for i, name in enumerate(rels):
                assert t is not None, (kind, rels)
                t = relation(t, name).object_type
                if i < hops - 1:
                    assert t is not None, (kind, rels, name)


def test_gold_hops_name_the_entity_their_sub_question_asks_about(world_dir: Path) -> None:
    """Every searched hop's key entities are named in its sub-question (TeaRAG's ``<entities>`` line is copied from
    the question it asks): before, 9% of the demo world's hops had none (OpenIE missed the fact) and 4% listed a
    date or another triplet's name ("University of Wuvia" contains its answer "Wuvia")."""
    from effirag.train.gold_paths import world_paths

    paths, _, _ = world_paths(world_dir, "train")
    hops = [h for p in paths for h in p.hops if not h.known]
    assert hops
    for h in hops:
        assert h.entities and all(e in h.question for e in h.entities), (h.question, h.entities)


def test_fact_paths_cover_unknown_facts_no_evaluated_question_asks(world_dir: Path) -> None:
    """One single-hop path per fact that is neither known nor asked by a dev/test hop; its entity is the subject."""
    from effirag.train.gold_paths import resolve_refs, world_fact_paths

    world = World.load(world_dir)
    corpus = load_corpus(world_dir / "corpus.jsonl")
    asked = set()
    for split in ("dev", "test"):
        for ex in load_questions(world_dir / f"questions_{split}.jsonl", corpus).examples:
            answers: list[str] = []
            for sq in ex.decomposition:
                fact = world.fact_for(resolve_refs(sq.question, answers))
                asked |= {fact.id} if fact is not None else set()
                answers.append(sq.answer)
    assert asked
    paths = world_fact_paths(world_dir)
    ids = [p.id.removeprefix("fact:") for p in paths]
    assert set(ids) == {f for f in world.facts if f not in asked and not world.knows(f)}
    for p in paths:
        fact = world.facts[p.id.removeprefix("fact:")]
        (hop,) = p.hops
        assert hop.question == fact.question and hop.answer == fact.object and p.answers == (fact.object,)
        assert hop.entities == (fact.subject,) and hop.passage is not None and hop.passage.id == fact.passages[0]
