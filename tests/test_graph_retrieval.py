"""Two-stage triplet retrieval (TeaRAG §4.2.3) and HippoRAG-style graph retrieval (RouteRAG's [graph])."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from effirag.errors import ConfigError, IndexMismatchError
from effirag.retrieval.graph import GraphConfig, HippoGraphRetriever, seed_weights
from effirag.retrieval.kg import KnowledgeGraph
from effirag.retrieval.ppr import personalized_pagerank
from effirag.retrieval.triplets import TwoStageTripletRetriever, entity_query, triplet_index
from effirag.types import ItemKind, Passage, Triplet
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
    Triplet("Hank Snow", "is a", "country singer", "p1"),
]


@pytest.fixture
def kg() -> KnowledgeGraph:
    return KnowledgeGraph.build(PASSAGES, TRIPLETS, HashEncoder())


def test_entity_query_text() -> None:
    assert entity_query("Hank Snow", "Where did he live?") == "Key entity: Hank Snow. Query: Where did he live?."
    assert triplet_index("t12") == 12
    with pytest.raises(ValueError, match="x3"):
        triplet_index("x3")


def test_two_stage_triplets(kg: KnowledgeGraph) -> None:
    """Key entity Hank Snow → entity 0 (1 of 2 kept); its one-hop triplets are t0, t2, t3; t0 shares four tokens
    with the subquery (hank, snow, lived, in), the others two, so t0 is first; k_t = 2 keeps two."""
    r = TwoStageTripletRetriever(kg, HashEncoder())
    pairs = r.retrieve_with_triplets(["Hank Snow"], "Hank Snow lived in which state", k_t=2, k_e=1, n_entities=2)
    assert pairs[0][0].id == "t0" and len(pairs) == 2
    assert {it.id for it, _ in pairs} <= {"t0", "t2", "t3"}
    item, t = pairs[0]
    assert item.kind is ItemKind.TRIPLET and t == TRIPLETS[0] and item.text == t.text and item.title == "Hank Snow"
    assert [it.id for it in r.retrieve(["Hank Snow"], "Hank Snow lived in which state", 2, 1, 2)] == [
        it.id for it, _ in pairs
    ]


class ReverseSimilarity:
    """Scores texts by how late they come: reverses whatever order it is given."""

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return [float(i) for i in range(len(texts))]


def test_reranker_reorders(kg: KnowledgeGraph) -> None:
    r = TwoStageTripletRetriever(kg, HashEncoder(), reranker=ReverseSimilarity())
    dense = TwoStageTripletRetriever(kg, HashEncoder()).retrieve(["Hank Snow"], "Hank Snow lived in", 3, 1, 1, 3)
    reranked = r.retrieve(["Hank Snow"], "Hank Snow lived in", 3, 1, 1, 3)
    assert [it.id for it in reranked] == [it.id for it in reversed(dense)]


def test_two_stage_bad_input() -> None:
    bare = KnowledgeGraph.build(PASSAGES, TRIPLETS)
    with pytest.raises(IndexMismatchError, match="embed"):
        TwoStageTripletRetriever(bare, HashEncoder()).retrieve(["x"], "q")
    kg = KnowledgeGraph.build(PASSAGES, TRIPLETS, HashEncoder())
    with pytest.raises(ValueError, match="k_t=0"):
        TwoStageTripletRetriever(kg, HashEncoder()).retrieve(["x"], "q", k_t=0)
    with pytest.raises(ValueError, match="empty"):
        TwoStageTripletRetriever(kg, HashEncoder()).retrieve(["x"], "  ")


def test_seed_weights_by_hand() -> None:
    """Facts (0, 0.8) and (2, 0.4); heads [0, 1, 3], tails [1, 2, 0]; passages per entity [2, 2, 1, 1].
    fact 0 → e0 += 0.8/2 = 0.4, e1 += 0.4; fact 2 → e3 += 0.4/1 = 0.4, e0 += 0.4/2 = 0.2.
    Means: e0 = (0.4 + 0.2)/2 = 0.3, e1 = 0.4, e3 = 0.4 → top 2 = e1, e3 (tie broken by id). A fact with score
    ≤ 0 seeds nothing."""
    heads, tails = np.array([0, 1, 3]), np.array([1, 2, 0])
    got = seed_weights([(0, 0.8), (2, 0.4), (1, -0.1)], heads, tails, [2, 2, 1, 1], top=2)
    assert got == pytest.approx({1: 0.4, 3: 0.4})
    assert list(got) == [1, 3]
    assert seed_weights([(0, 0.8), (2, 0.4)], heads, tails, [2, 2, 1, 1], top=5)[0] == pytest.approx(0.3)


def test_adjacency_by_hand(kg: KnowledgeGraph) -> None:
    """Entities 0 Hank Snow, 1 Tennessee, 2 North Carolina, 3 Hello Love, 4 country singer; passages → nodes 5-7.
    Triplet edges 0–1, 1–2, 3–0, 0–4; context edges e0–p1, e0–p3, e1–p1, e1–p2, e2–p2, e3–p3, e4–p1."""
    a = HippoGraphRetriever(kg, HashEncoder(), GraphConfig(synonym_k=0)).adjacency().toarray()
    expect = np.zeros((8, 8))
    for i, j in [(0, 1), (1, 2), (3, 0), (0, 4), (0, 5), (0, 7), (1, 5), (1, 6), (2, 6), (3, 7), (4, 5)]:
        expect[i, j] = expect[j, i] = 1.0
    assert np.array_equal(a, expect)


def test_graph_retrieval_ranks_by_ppr(kg: KnowledgeGraph) -> None:
    """The retriever's ranking equals PPR computed here from the same seeds and the same adjacency."""
    cfg = GraphConfig(synonym_k=0, n_facts=2, n_seed_entities=3)
    enc = HashEncoder()
    r = HippoGraphRetriever(kg, enc, cfg).load()
    query = "Which state borders the state where Hank Snow lived"
    items = r.retrieve(query, k=3)
    assert [it.kind for it in items] == [ItemKind.CHUNK] * 3 and len({it.id for it in items}) == 3
    q = enc.encode_queries([query])[0]
    facts = kg.triplet_embeddings @ q  # type: ignore[operator]
    top = np.lexsort((np.arange(facts.size), -facts))[:2]
    seeds = seed_weights([(int(f), float(facts[f])) for f in top], kg.head_ids, kg.tail_ids, [2, 2, 1, 1, 1], 3)
    dense = r.passage_embeddings @ q  # type: ignore[operator]
    p = np.zeros(8)
    p[5:] = 0.05 * (dense - dense.min()) / (dense.max() - dense.min())
    for e, w in seeds.items():
        p[e] += w
    pi = personalized_pagerank(r.adjacency(), p, alpha=0.5)[5:]
    assert [it.id for it in items] == [PASSAGES[i].id for i in np.lexsort((np.arange(3), -pi))]
    assert [it.score for it in items] == pytest.approx(sorted(pi, reverse=True), abs=1e-8)


def test_graph_retrieval_push_path_agrees(kg: KnowledgeGraph) -> None:
    query = "Hello Love performer"
    exact = HippoGraphRetriever(kg, HashEncoder(), GraphConfig(synonym_k=0)).retrieve(query, 3)
    push = HippoGraphRetriever(kg, HashEncoder(), GraphConfig(synonym_k=0, push_above=1, push_epsilon=1e-12))
    assert [it.id for it in push.retrieve(query, 3)] == [it.id for it in exact]


def test_synonym_edges() -> None:
    kg = KnowledgeGraph.build(PASSAGES, [*TRIPLETS, Triplet("Hank Snow singer", "is", "famous", "p1")], HashEncoder())
    a = HippoGraphRetriever(kg, HashEncoder(), GraphConfig(synonym_k=3, synonym_threshold=0.8)).adjacency()
    hs, hss = kg.lookup("Hank Snow"), kg.lookup("Hank Snow singer")
    assert hs is not None and hss is not None
    assert a[hs, hss] == pytest.approx(2 / np.sqrt(6), abs=1e-6)  # cosine of {hank, snow} and {hank, snow, singer}


def test_graph_bad_input(kg: KnowledgeGraph) -> None:
    r = HippoGraphRetriever(kg, HashEncoder())
    with pytest.raises(ValueError, match="empty query"):
        r.retrieve("", 3)
    with pytest.raises(ValueError, match="k=0"):
        r.retrieve("x", 0)
    with pytest.raises(ConfigError, match=r"damping=1\.0"):
        GraphConfig(damping=1.0)
    assert [it.id for it in r.retrieve("zzz unknown words", 2)]  # no seed entity: dense ranking, not an error
