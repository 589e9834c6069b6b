"""TeaRAG's Knowledge Association Graph (KAG) and its Personalized-PageRank filter (TeaRAG §4.2.4–4.2.5).

Given a subquery q, its key entities, the retrieved chunks and the retrieved triplets, the KAG has nodes

- ``q`` (the subquery), ``c:<id>`` per chunk, ``t:<id>`` per triplet,
- ``e:<key>`` per entity: key entities, chunk titles, triplet heads and tails (one node per
  :func:`~effirag.retrieval.kg.normalize_entity` key),

and undirected edges (:func:`kag_edges`):

- co-occurrence, weight 1: entity–entity (a triplet's head–tail; none when they coincide), triplet–entity (its head
  and its tail), chunk–triplet when the triplet's source chunk is among the retrieved chunks, chunk–entity for the
  head and tail of such a co-occurring triplet, chunk–entity for the chunk's title;
- relevance: chunk–q with weight sigmoid(sim) (eq. 1), triplet–q with weight max(sigmoid(sim) − τ, 0) (eq. 2; an
  edge of weight 0 is left out).

An edge is a set member: a pair linked twice (e.g. a title entity that is also a co-occurring head) keeps weight 1.
PPR (eq. 3, :func:`~effirag.retrieval.ppr.personalized_pagerank`) with personalization 1 on q and 0.5 on each key
entity node scores every node; the top-k_f chunk and triplet nodes are kept.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from effirag.config import check, option
from effirag.retrieval.base import Similarity
from effirag.retrieval.kg import normalize_entity
from effirag.retrieval.ppr import personalized_pagerank
from effirag.retrieval.triplets import TripletStage
from effirag.types import RetrievedItem, Triplet

SUBQUERY = "q"


@dataclass(frozen=True)
class KAGConfig:
    """TeaRAG's hybrid retrieval and KAG filter settings (defaults: the paper's §5.1 implementation details)."""

    semantic_top: int = option(20, help="Chunks retrieved by dense search before reranking.")
    k_d: int = option(5, help="Chunks kept after reranking (k_d).")
    n_entities: int = option(10, help="KG entities retrieved per key-entity query before reranking.")
    k_e: int = option(5, help="KG entities kept per key entity after reranking.")
    n_triplets: int = option(20, help="One-hop triplets retrieved before reranking.")
    k_t: int = option(10, help="Triplets kept after reranking (k_t).")
    k_f: int = option(5, help="Chunk/triplet nodes kept by the PPR filter (k_f).")
    tau: float = option(0.2, help="Triplet relevance offset τ of eq. 2: weight = max(sigmoid(sim) − τ, 0).")
    alpha: float = option(0.5, help="PPR α of eq. 3: probability of following an edge.")
    iterations: int = option(200, help="PPR iterations N.")
    subquery_weight: float = option(1.0, help="Personalization of the subquery node.")
    entity_weight: float = option(0.5, help="Personalization of each key-entity node.")

    def __post_init__(self) -> None:
        for name in ("semantic_top", "k_d", "n_entities", "k_e", "n_triplets", "k_t", "k_f", "iterations"):
            check(getattr(self, name) > 0, self, name, "must be > 0")
        check(self.k_d <= self.semantic_top, self, "k_d", f"must be <= semantic_top={self.semantic_top}")
        check(self.k_e <= self.n_entities, self, "k_e", f"must be <= n_entities={self.n_entities}")
        check(self.k_t <= self.n_triplets, self, "k_t", f"must be <= n_triplets={self.n_triplets}")
        check(0.0 <= self.tau < 1.0, self, "tau", "must be in [0, 1)")
        check(0.0 <= self.alpha < 1.0, self, "alpha", "must be in [0, 1)")
        check(self.subquery_weight > 0.0, self, "subquery_weight", "must be > 0")
        check(self.entity_weight >= 0.0, self, "entity_weight", "must be >= 0")

    @property
    def triplet_stage(self) -> TripletStage:
        """The two-stage triplet retrieval's sizes (k_t, k_e, n_entities, n_triplets) of these settings."""
        return TripletStage(self.k_t, self.k_e, self.n_entities, self.n_triplets)


def sigmoid(x: float) -> float:
    """Numerically stable logistic function."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def chunk_relevance(sim: float) -> float:
    """TeaRAG eq. 1: weight of the chunk–subquery edge, sigmoid(sim(q, c))."""
    return sigmoid(sim)


def triplet_relevance(sim: float, tau: float) -> float:
    """TeaRAG eq. 2: weight of the triplet–subquery edge, max(sigmoid(sim(q, t)) − τ, 0)."""
    return max(sigmoid(sim) - tau, 0.0)


class KAGNode(NamedTuple):
    id: str
    kind: str  # "subquery" | "chunk" | "triplet" | "entity"
    label: str


class KAGEdge(NamedTuple):
    u: str
    v: str
    weight: float
    kind: str  # "entity-entity" | "triplet-entity" | "chunk-triplet" | "chunk-entity" | "chunk-title" | relevance


@dataclass
class KAGGraph:
    """The KAG as plain data (for the viewer): nodes in insertion order, undirected edges."""

    nodes: list[KAGNode]
    edges: list[KAGEdge]

    def to_dict(self) -> dict[str, list[dict[str, object]]]:
        return {
            "nodes": [{"id": n.id, "kind": n.kind, "label": n.label} for n in self.nodes],
            "edges": [{"u": e.u, "v": e.v, "weight": e.weight, "kind": e.kind} for e in self.edges],
        }


@dataclass
class KAGResult:
    """Top-k_f items (score = PPR mass), the graph, every node's PPR score and stage timings in seconds."""

    items: list[RetrievedItem]
    graph: KAGGraph
    scores: dict[str, float]
    timings: dict[str, float] = field(default_factory=dict)


def entity_node(name: str) -> str:
    return f"e:{normalize_entity(name)}"


def kag_edges(
    key_entities: Sequence[str],
    chunks: Sequence[RetrievedItem],
    triplets: Sequence[tuple[RetrievedItem, Triplet]],
    chunk_sims: Sequence[float],
    triplet_sims: Sequence[float],
    tau: float,
) -> KAGGraph:
    """Nodes and edges of the KAG by the rules of the module docstring (pure; no scoring, no PPR).

    ``chunks`` are the retrieved chunks (``id`` = passage id, ``title`` = its title entity); ``triplets`` pair each
    retrieved triplet item with its :class:`Triplet` (``source_id`` = passage id). ``*_sims`` are sim(q, ·) in the
    same order. Duplicate items (same id) are kept once; entities with an empty key are ignored.
    """
    if len(chunk_sims) != len(chunks) or len(triplet_sims) != len(triplets):
        raise ValueError(
            f"{len(chunks)} chunks / {len(chunk_sims)} sims, {len(triplets)} triplets / {len(triplet_sims)} sims"
        )
    nodes: dict[str, KAGNode] = {SUBQUERY: KAGNode(SUBQUERY, "subquery", "subquery")}
    edges: dict[tuple[str, str], KAGEdge] = {}

    def ent(name: str) -> str | None:
        key = normalize_entity(name)
        if not key:
            return None
        nodes.setdefault(f"e:{key}", KAGNode(f"e:{key}", "entity", name.strip()))
        return f"e:{key}"

    def link(u: str | None, v: str | None, w: float, kind: str) -> None:
        if u is None or v is None or u == v or w <= 0.0:
            return
        key = (u, v) if u < v else (v, u)
        if key not in edges:
            edges[key] = KAGEdge(u, v, w, kind)

    for name in key_entities:
        ent(name)
    chunk_node: dict[str, str] = {}
    for item, sim in zip(chunks, chunk_sims, strict=True):
        c = f"c:{item.id}"
        if c in nodes:
            continue
        nodes[c] = KAGNode(c, "chunk", item.title or item.id)
        chunk_node[item.id] = c
        link(c, SUBQUERY, chunk_relevance(sim), "chunk-subquery")
        if item.title:
            link(c, ent(item.title), 1.0, "chunk-title")
    for (item, trip), sim in zip(triplets, triplet_sims, strict=True):
        t = f"t:{item.id}"
        if t in nodes:
            continue
        nodes[t] = KAGNode(t, "triplet", item.text)
        h, tl = ent(trip.head), ent(trip.tail)
        link(h, tl, 1.0, "entity-entity")
        link(t, h, 1.0, "triplet-entity")
        link(t, tl, 1.0, "triplet-entity")
        src = chunk_node.get(trip.source_id) if trip.source_id is not None else None
        if src is not None:
            link(src, t, 1.0, "chunk-triplet")
            link(src, h, 1.0, "chunk-entity")
            link(src, tl, 1.0, "chunk-entity")
        link(t, SUBQUERY, triplet_relevance(sim, tau), "triplet-subquery")
    return KAGGraph(list(nodes.values()), list(edges.values()))


def kag_personalization(graph: KAGGraph, key_entities: Sequence[str], config: KAGConfig) -> np.ndarray:
    """Unnormalised p: ``subquery_weight`` on q, ``entity_weight`` on each key-entity node, 0 elsewhere."""
    index = {n.id: i for i, n in enumerate(graph.nodes)}
    p = np.zeros(len(graph.nodes))
    p[index[SUBQUERY]] = config.subquery_weight
    for name in key_entities:
        i = index.get(entity_node(name))
        if i is not None and normalize_entity(name):
            p[i] = config.entity_weight
    return p


def kag_weights(graph: KAGGraph) -> np.ndarray:
    """Dense symmetric weight matrix (n_nodes, n_nodes) of the KAG, rows/columns in ``graph.nodes`` order."""
    index = {n.id: i for i, n in enumerate(graph.nodes)}
    w = np.zeros((len(graph.nodes), len(graph.nodes)))
    for e in graph.edges:
        i, j = index[e.u], index[e.v]
        w[i, j] = w[j, i] = e.weight
    return w


class KAGFilter:
    """Build the KAG for one subquery and keep its top-k_f chunk/triplet nodes by PPR (TeaRAG §4.2.4–4.2.5)."""

    def __init__(self, config: KAGConfig | None = None) -> None:
        self.config = config or KAGConfig()

    def filter(
        self,
        subquery: str,
        key_entities: Sequence[str],
        chunks: Sequence[RetrievedItem],
        triplets: Sequence[tuple[RetrievedItem, Triplet]],
        similarity: Similarity,
    ) -> KAGResult:
        """Score chunks and triplets against ``subquery`` with ``similarity`` (one call), then :meth:`filter_scored`."""
        if not subquery.strip():
            raise ValueError("empty subquery")
        t0 = time.perf_counter()
        texts = [f"{c.title}\n{c.text}" if c.title else c.text for c in chunks] + [t.text for t, _ in triplets]
        sims = list(similarity.score(subquery, texts)) if texts else []
        if len(sims) != len(texts):
            raise ValueError(f"similarity returned {len(sims)} scores for {len(texts)} texts")
        t1 = time.perf_counter()
        res = self.filter_scored(key_entities, chunks, triplets, sims[: len(chunks)], sims[len(chunks) :])
        res.timings = {"similarity": t1 - t0, **res.timings}
        return res

    def filter_scored(
        self,
        key_entities: Sequence[str],
        chunks: Sequence[RetrievedItem],
        triplets: Sequence[tuple[RetrievedItem, Triplet]],
        chunk_sims: Sequence[float],
        triplet_sims: Sequence[float],
    ) -> KAGResult:
        """KAG build + PPR + top-k_f from precomputed sim(q, ·) (the part measured against the 1 ms target)."""
        cfg = self.config
        t0 = time.perf_counter()
        graph = kag_edges(key_entities, chunks, triplets, chunk_sims, triplet_sims, cfg.tau)
        w = kag_weights(graph)
        p = kag_personalization(graph, key_entities, cfg)
        t1 = time.perf_counter()
        pi = personalized_pagerank(w, p, cfg.alpha, cfg.iterations)
        t2 = time.perf_counter()
        by_node: dict[str, RetrievedItem] = {f"c:{c.id}": c for c in reversed(chunks)}
        by_node.update({f"t:{t.id}": t for t, _ in reversed(triplets)})
        cand = [(i, n.id) for i, n in enumerate(graph.nodes) if n.kind in ("chunk", "triplet")]
        cand.sort(key=lambda x: (-pi[x[0]], x[0]))
        items = [_rescored(by_node[nid], float(pi[i])) for i, nid in cand[: cfg.k_f]]
        scores = {n.id: float(pi[i]) for i, n in enumerate(graph.nodes)}
        return KAGResult(items, graph, scores, {"kag_build": t1 - t0, "ppr": t2 - t1})


def _rescored(item: RetrievedItem, score: float) -> RetrievedItem:
    return RetrievedItem(item.kind, item.id, item.text, score, item.tokens, item.title)


__all__ = [
    "SUBQUERY",
    "KAGConfig",
    "KAGEdge",
    "KAGFilter",
    "KAGGraph",
    "KAGNode",
    "KAGResult",
    "chunk_relevance",
    "entity_node",
    "kag_edges",
    "kag_personalization",
    "kag_weights",
    "sigmoid",
    "triplet_relevance",
]
