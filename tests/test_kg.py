"""Knowledge graph: normalisation, entity index, adjacency, save/load round trip, real MuSiQue OpenIE counts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from effirag.data import load_corpus
from effirag.errors import DataError, IndexMismatchError
from effirag.retrieval.kg import KnowledgeGraph, normalize_entity
from effirag.types import Passage, Triplet
from hash_encoder import HashEncoder

PASSAGES = [
    Passage("p1", "Hank Snow", "Hank Snow was a country singer who lived in Tennessee."),
    Passage("p2", "Tennessee", "Tennessee borders North Carolina to the east."),
    Passage("p3", "Hello Love", "Hello Love is a song performed by Hank Snow."),
]
TRIPLETS = [
    Triplet("Hank Snow", "lived in", "Tennessee", "p1"),
    Triplet("Tennessee", "borders to the east", "North Carolina", "p2"),
    Triplet("Hello Love", "performer", "Hank Snow", "p3"),
    Triplet("hank snow", "is a", "country singer", "p1"),
    Triplet("—", "is", "nothing", "p1"),  # head normalises to "" → dropped
]


def _kg(encoder: HashEncoder | None = None) -> KnowledgeGraph:
    return KnowledgeGraph.build(PASSAGES, TRIPLETS, encoder, aliases={"North Carolina": ["NC", "N.C."]})


def test_normalize_entity() -> None:
    assert normalize_entity("  U.S. Army ") == "u s army"
    assert normalize_entity("Hank_Snow!") == "hank snow"
    assert normalize_entity("Ｐａｒｉｓ") == "paris"  # NFKC folds full-width letters
    assert normalize_entity("—") == ""


def test_entities_and_adjacency() -> None:
    kg = _kg()
    assert kg.entity_names == ["Hank Snow", "Tennessee", "North Carolina", "Hello Love", "country singer"]
    assert kg.dropped == 1 and len(kg.triplets) == 4
    hank = kg.lookup("HANK SNOW")
    assert hank == 0 and kg.lookup("n.c.") == 2 and kg.lookup("NC") == 2 and kg.lookup("Paris") is None
    assert kg.one_hop(0) == [0, 2, 3]
    assert kg.neighbours(0) == [1, 3, 4]
    assert kg.entity_passages[0] == [0, 2]  # Hank Snow is named by triplets of p1 and p3
    assert list(kg.triplet_passage) == [0, 1, 2, 0]


def test_entities_in_longest_match() -> None:
    kg = KnowledgeGraph.build(PASSAGES, [*TRIPLETS, Triplet("North", "is", "a direction", "p2")])
    found = [kg.entity_names[e] for e in kg.entities_in("Which state borders North Carolina, near Hank Snow's home?")]
    assert found == ["North Carolina", "Hank Snow"]  # "North Carolina" wins over its prefix "North"
    assert kg.entities_in("nothing known here") == []


def test_save_load_round_trip(tmp_path: Path) -> None:
    kg = _kg(HashEncoder(64))
    kg.save(tmp_path / "kg")
    back = KnowledgeGraph.load(tmp_path / "kg")
    assert back.passages == kg.passages and back.triplets == kg.triplets
    assert back.entity_names == kg.entity_names and back.aliases == kg.aliases
    assert back.dropped == 1 and back.encoder_name == "hash-64"
    assert back.entity_embeddings is not None and kg.entity_embeddings is not None
    assert np.array_equal(back.entity_embeddings, kg.entity_embeddings)
    assert np.array_equal(back.triplet_embeddings, kg.triplet_embeddings)  # type: ignore[arg-type]
    assert back.one_hop(0) == kg.one_hop(0)
    q = HashEncoder(64).encode_queries(["Tennessee"])
    assert back.search_entities(q, 1)[0][0][0] == 1


def test_load_refuses_changed_or_missing(tmp_path: Path) -> None:
    _kg().save(tmp_path)
    with (tmp_path / "triplets.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"head": "a", "relation": "b", "tail": "c", "source_id": None}) + "\n")
    with pytest.raises(IndexMismatchError, match=r"triplets\.jsonl"):
        KnowledgeGraph.load(tmp_path)
    with pytest.raises(IndexMismatchError, match="no knowledge-graph manifest"):
        KnowledgeGraph.load(tmp_path / "absent")


def test_unknown_source_and_no_embeddings() -> None:
    with pytest.raises(DataError, match="p9"):
        KnowledgeGraph.build(PASSAGES, [Triplet("a", "r", "b", "p9")])
    with pytest.raises(IndexMismatchError, match="embed"):
        _kg().search_entities(np.zeros((1, 64), np.float32), 3)


def test_from_triplets_jsonl_world_layout(tmp_path: Path) -> None:
    path = tmp_path / "triplets.jsonl"
    path.write_text('{"head": "Hank Snow", "relation": "lived in", "tail": "Tennessee", "source": "p1"}\n')
    kg = KnowledgeGraph.from_triplets_jsonl(path, PASSAGES)
    assert kg.triplets == [Triplet("Hank Snow", "lived in", "Tennessee", "p1")]


def test_real_musique_openie_counts(shared_data: Path) -> None:
    """The loader keeps 17,204 of 17,419 raw triples (185 malformed, 30 duplicates); one of them has an object
    that is only punctuation and normalises to "", so the graph holds 17,203. Distinct normalised heads/tails: 16,228;
    1,888 of the 1,890 passages state at least one triplet."""
    corpus = load_corpus(shared_data / "musique_mini" / "corpus.json")
    kg = KnowledgeGraph.from_openie(shared_data / "musique_mini" / "openie_gpt-3.5-turbo-1106.json", corpus)
    assert len(kg.passages) == 1890
    assert len(kg.triplets) == 17203 and kg.dropped == 1
    assert len(kg.entity_names) == 16228
    assert len(set(kg.triplet_passage.tolist())) == 1888
    usa = kg.lookup("United States")
    naming = [
        i for i, t in enumerate(kg.triplets) if "united states" in (normalize_entity(t.head), normalize_entity(t.tail))
    ]
    assert usa is not None and kg.one_hop(usa) == naming and len(naming) > 200
