"""TeaRAG's KAG (§4.2.4) and PPR filter (§4.2.5): edge rules edge by edge, eq. 1/2 by hand, a hand-solved PPR."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from effirag.errors import ConfigError
from effirag.retrieval.kag import (
    KAGConfig,
    KAGFilter,
    chunk_relevance,
    kag_edges,
    kag_personalization,
    kag_weights,
    sigmoid,
    triplet_relevance,
)
from effirag.retrieval.ppr import personalized_pagerank
from effirag.types import ItemKind, RetrievedItem, Triplet


def chunk(pid: str, title: str, text: str = "text") -> RetrievedItem:
    return RetrievedItem(ItemKind.CHUNK, pid, text, 0.0, title=title)


def trip(tid: str, t: Triplet) -> tuple[RetrievedItem, Triplet]:
    return RetrievedItem(ItemKind.TRIPLET, tid, t.text, 0.0), t


CHUNKS = [chunk("p1", "Hank Snow"), chunk("p2", "Tennessee")]
TRIPLETS = [
    trip("t0", Triplet("Hank Snow", "lived in", "Tennessee", "p1")),  # source p1 is retrieved
    trip("t5", Triplet("Tennessee", "borders", "North Carolina", "p9")),  # source not retrieved
    trip("t7", Triplet("Tennessee", "is", "tennessee", "p2")),  # head == tail after normalisation
]
CHUNK_SIMS = [0.0, 1.0]
TRIPLET_SIMS = [2.0, -3.0, 0.0]


def test_relevance_equations_by_hand() -> None:
    """eq. 1: sigmoid(0) = 0.5, sigmoid(1) = 1/(1+e⁻¹) = 0.7310585786.
    eq. 2 (τ = 0.2): sigmoid(2) − 0.2 = 0.8807970780 − 0.2 = 0.6807970780; sigmoid(0) − 0.2 = 0.3;
    sigmoid(−3) − 0.2 = 0.0474258732 − 0.2 < 0 → 0."""
    assert chunk_relevance(0.0) == 0.5
    assert chunk_relevance(1.0) == pytest.approx(0.7310585786, abs=1e-10)
    assert triplet_relevance(2.0, 0.2) == pytest.approx(0.6807970780, abs=1e-10)
    assert triplet_relevance(0.0, 0.2) == pytest.approx(0.3)
    assert triplet_relevance(-3.0, 0.2) == 0.0
    assert sigmoid(-800.0) == 0.0 and sigmoid(800.0) == 1.0  # no overflow


def test_kag_edges_match_the_rules_edge_by_edge() -> None:
    """Expected edges, by rule:
    chunk–subquery (eq. 1): p1 sim 0 → 0.5; p2 sim 1 → 0.7310585786.
    chunk–title: p1–hank snow, p2–tennessee.
    t0 = (Hank Snow, lived in, Tennessee) from p1 (retrieved): entity–entity hank snow–tennessee; triplet–entity
      t0–hank snow, t0–tennessee; chunk–triplet p1–t0; chunk–entity p1–tennessee (p1–hank snow already exists as the
      title edge, kept once with weight 1); triplet–subquery sigmoid(2) − 0.2 = 0.6807970780.
    t5 = (Tennessee, borders, North Carolina) from p9 (not retrieved): entity–entity tennessee–north carolina;
      triplet–entity t5–tennessee, t5–north carolina; no chunk edge; triplet–subquery sigmoid(−3) − 0.2 < 0 → none.
    t7 = (Tennessee, is, tennessee) from p2: head = tail → no entity–entity edge; one triplet–entity edge
      t7–tennessee; chunk–triplet p2–t7 (p2–tennessee exists as title edge); triplet–subquery 0.5 − 0.2 = 0.3.
    """
    g = kag_edges(["Hank Snow"], CHUNKS, TRIPLETS, CHUNK_SIMS, TRIPLET_SIMS, tau=0.2)
    expected = {
        frozenset({"c:p1", "q"}): 0.5,
        frozenset({"c:p2", "q"}): 0.7310585786,
        frozenset({"c:p1", "e:hank snow"}): 1.0,
        frozenset({"c:p2", "e:tennessee"}): 1.0,
        frozenset({"e:hank snow", "e:tennessee"}): 1.0,
        frozenset({"t:t0", "e:hank snow"}): 1.0,
        frozenset({"t:t0", "e:tennessee"}): 1.0,
        frozenset({"c:p1", "t:t0"}): 1.0,
        frozenset({"c:p1", "e:tennessee"}): 1.0,
        frozenset({"t:t0", "q"}): 0.6807970780,
        frozenset({"e:tennessee", "e:north carolina"}): 1.0,
        frozenset({"t:t5", "e:tennessee"}): 1.0,
        frozenset({"t:t5", "e:north carolina"}): 1.0,
        frozenset({"t:t7", "e:tennessee"}): 1.0,
        frozenset({"c:p2", "t:t7"}): 1.0,
        frozenset({"t:t7", "q"}): 0.3,
    }
    got = {frozenset({e.u, e.v}): e.weight for e in g.edges}
    assert set(got) == set(expected)
    for pair, w in expected.items():
        assert got[pair] == pytest.approx(w, abs=1e-10), pair
    assert len(g.edges) == len(expected)  # no duplicate pair
    kinds = {n.id: n.kind for n in g.nodes}
    assert kinds == {
        "q": "subquery",
        "e:hank snow": "entity",
        "c:p1": "chunk",
        "c:p2": "chunk",
        "e:tennessee": "entity",
        "t:t0": "triplet",
        "t:t5": "triplet",
        "e:north carolina": "entity",
        "t:t7": "triplet",
    }


def test_personalization_and_weights() -> None:
    """p: 1 on q, 0.5 on the key entity node; an unknown key entity gets its own (isolated) node."""
    g = kag_edges(["Hank Snow", "Paris"], CHUNKS, TRIPLETS, CHUNK_SIMS, TRIPLET_SIMS, tau=0.2)
    p = kag_personalization(g, ["Hank Snow", "Paris"], KAGConfig())
    ids = [n.id for n in g.nodes]
    assert p[ids.index("q")] == 1.0 and p[ids.index("e:hank snow")] == 0.5 and p[ids.index("e:paris")] == 0.5
    assert p.sum() == 2.0
    w = kag_weights(g)
    assert np.array_equal(w, w.T) and w[:, ids.index("e:paris")].sum() == 0.0


def test_ppr_filter_hand_solved() -> None:
    """One chunk (sim 0), no triplets, no key entity. Nodes q, c, e(title); edges q–c 0.5, c–e 1.
    W columns: q → c (1); c → q 0.5/1.5 = 1/3, e 2/3; e → c (1). p = e_q, α = ½:
      πq = ½·⅓πc + ½,  πc = ½(πq + πe),  πe = ½·⅔πc = πc/3
      ⇒ πc = ½πq + πc/6 ⇒ πc = 0.6πq; πq = 0.1πq + ½ ⇒ πq = 5/9, πc = 1/3, πe = 1/9 (sum 1).
    """
    res = KAGFilter().filter_scored([], [chunk("p1", "Hank Snow")], [], [0.0], [])
    assert res.scores == pytest.approx({"q": 5 / 9, "c:p1": 1 / 3, "e:hank snow": 1 / 9}, abs=1e-12)
    assert [(it.id, it.kind) for it in res.items] == [("p1", ItemKind.CHUNK)]
    assert res.items[0].score == pytest.approx(1 / 3, abs=1e-12)
    assert set(res.timings) == {"kag_build", "ppr"}


class ScriptedSimilarity:
    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores
        self.calls = 0

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.calls += 1
        return [self.scores[t] for t in texts]


def test_filter_keeps_top_kf_by_ppr() -> None:
    texts = {"Hank Snow\ntext": 0.0, "Tennessee\ntext": 1.0}
    texts.update({it.text: s for (it, _), s in zip(TRIPLETS, TRIPLET_SIMS, strict=True)})
    sim = ScriptedSimilarity(texts)
    res = KAGFilter(KAGConfig(k_f=3)).filter("where did he live", ["Hank Snow"], CHUNKS, TRIPLETS, sim)
    assert sim.calls == 1
    g = res.graph
    pi = personalized_pagerank(kag_weights(g), kag_personalization(g, ["Hank Snow"], KAGConfig()))
    ranked = sorted((i for i, n in enumerate(g.nodes) if n.kind in ("chunk", "triplet")), key=lambda i: (-pi[i], i))[:3]
    assert [g.nodes[i].id for i in ranked] == [
        ("c:" if it.kind is ItemKind.CHUNK else "t:") + it.id for it in res.items
    ]
    assert len(res.items) == 3 and all(a.score >= b.score for a, b in zip(res.items, res.items[1:], strict=False))
    assert "t5" not in {it.id for it in res.items}  # only reachable through entities, no relevance edge
    assert math.isclose(sum(res.scores.values()), 1.0, abs_tol=1e-12)
    assert {"similarity", "kag_build", "ppr"} <= set(res.timings)


def test_config_validation_names_the_field() -> None:
    with pytest.raises(ConfigError, match="k_d=30"):
        KAGConfig(k_d=30)
    with pytest.raises(ConfigError, match=r"tau=1\.5"):
        KAGConfig(tau=1.5)
    with pytest.raises(ConfigError, match="k_f=0"):
        KAGConfig(k_f=0)
    c = KAGConfig()
    assert (c.semantic_top, c.k_d, c.n_entities, c.k_e, c.n_triplets, c.k_t, c.k_f) == (20, 5, 10, 5, 20, 10, 5)
    assert (c.tau, c.alpha, c.iterations) == (0.2, 0.5, 200)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="empty subquery"):
        KAGFilter().filter(" ", [], CHUNKS, [], ScriptedSimilarity({}))
    with pytest.raises(ValueError, match="2 chunks / 1 sims"):
        kag_edges([], CHUNKS, [], [0.0], [], 0.2)
