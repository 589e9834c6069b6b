"""HippoRAG-2-style graph retrieval (RouteRAG's ``[graph]`` mode): query → seed entities → PPR → ranked passages.

Graph (undirected, nodes = entities then passages):
- entity–entity: weight = number of triplets linking the two (self-loops dropped);
- entity–passage ("context" edges): weight 1 when the entity is a head or tail of a triplet of that passage;
- synonymy: entity pairs whose name embeddings have cosine ≥ ``synonym_threshold`` among each entity's
  ``synonym_k`` nearest, weight = the cosine (HippoRAG's synonymy edges).

Query (:func:`seed_weights`): the query's ``n_facts`` nearest triplets by dense similarity seed their head and tail
entities with weight = fact score / number of passages mentioning the entity (node specificity), averaged over the
facts that name it; the ``n_seed_entities`` strongest are kept. Every passage is seeded with
``passage_node_weight`` × its min–max-normalised dense score (0.05, HippoRAG 2). PPR with damping 0.5 (α in
:mod:`effirag.retrieval.ppr`: the probability of following an edge) ranks the passage nodes. When no entity is seeded
the ranking is the dense passage ranking (HippoRAG 2 does the same). We skip HippoRAG 2's LLM recognition-memory
fact filter: no LLM is assumed here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from effirag.config import check, option
from effirag.errors import IndexMismatchError
from effirag.retrieval.base import Encoder
from effirag.retrieval.kg import KnowledgeGraph
from effirag.retrieval.ppr import column_stochastic, local_push_ppr, ppr_from_transition
from effirag.types import ItemKind, RetrievedItem

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GraphConfig:
    """Settings of :class:`HippoGraphRetriever` (defaults: HippoRAG 2)."""

    damping: float = option(0.5, help="PPR α: probability of following an edge (HippoRAG 2: 0.5).")
    passage_node_weight: float = option(0.05, help="Scale of the dense passage scores in the personalization.")
    n_facts: int = option(5, help="Nearest triplets (facts) of the query whose entities seed the PPR.")
    n_seed_entities: int = option(5, help="Seed entities kept after weighting (HippoRAG 2's linking top-k).")
    synonym_threshold: float = option(0.8, help="Cosine above which two entity names get a synonymy edge.")
    synonym_k: int = option(10, help="Nearest entity names considered for synonymy edges (0 disables them).")
    iterations: int = option(200, help="Most PPR updates (power iteration).")
    tol: float = option(1e-10, help="Power iteration stops once an update moves π by less than this (L1).")
    push_above: int = option(200_000, help="Graphs with more nodes than this use local push PPR.")
    push_epsilon: float = option(1e-7, help="Local push residual threshold per node.")

    def __post_init__(self) -> None:
        check(0.0 <= self.damping < 1.0, self, "damping", "must be in [0, 1)")
        check(self.passage_node_weight >= 0.0, self, "passage_node_weight", "must be >= 0")
        check(self.n_facts > 0, self, "n_facts", "must be > 0")
        check(self.n_seed_entities > 0, self, "n_seed_entities", "must be > 0")
        check(-1.0 <= self.synonym_threshold <= 1.0, self, "synonym_threshold", "must be a cosine in [-1, 1]")
        check(self.synonym_k >= 0, self, "synonym_k", "must be >= 0")
        check(self.iterations > 0, self, "iterations", "must be > 0")
        check(self.tol >= 0.0, self, "tol", "must be >= 0")
        check(self.push_epsilon > 0.0, self, "push_epsilon", "must be > 0")


def seed_weights(
    fact_scores: Sequence[tuple[int, float]],
    heads: NDArray[np.int64],
    tails: NDArray[np.int64],
    n_passages: Sequence[int],
    top: int,
) -> dict[int, float]:
    """Entity seeds from scored facts (HippoRAG 2): mean over facts naming e of score / max(1, |passages(e)|).

    Facts with a score ≤ 0 seed nothing. Returns the ``top`` strongest, ties broken by entity id.
    """
    total: dict[int, float] = {}
    count: dict[int, int] = {}
    for f, s in fact_scores:
        if s <= 0:
            continue
        for e in {int(heads[f]), int(tails[f])}:
            total[e] = total.get(e, 0.0) + s / max(1, n_passages[e])
            count[e] = count.get(e, 0) + 1
    mean = {e: total[e] / count[e] for e in total}
    return dict(sorted(mean.items(), key=lambda kv: (-kv[1], kv[0]))[:top])


class HippoGraphRetriever:
    """Passages ranked by PPR over the entity–passage graph. ``load()`` builds the graph and passage embeddings."""

    def __init__(
        self,
        kg: KnowledgeGraph,
        encoder: Encoder,
        config: GraphConfig | None = None,
        passage_embeddings: NDArray[np.float32] | None = None,
    ) -> None:
        self.kg, self.encoder, self.config = kg, encoder, config or GraphConfig()
        self.passage_embeddings = passage_embeddings  # (n_passages, dim), rows in kg.passages order
        self.transition: sp.csc_array | None = None

    @property
    def n_nodes(self) -> int:
        return len(self.kg.entity_names) + len(self.kg.passages)

    def load(self) -> HippoGraphRetriever:
        """Build the column-stochastic graph and embed passages (unless given); idempotent."""
        if self.transition is not None:
            return self
        if self.kg.triplet_embeddings is None or self.kg.entity_embeddings is None:
            raise IndexMismatchError("graph retrieval needs entity and triplet embeddings: call kg.embed(encoder)")
        if self.passage_embeddings is None:
            texts = [p.key for p in self.kg.passages]
            self.passage_embeddings = np.asarray(self.encoder.encode_passages(texts), np.float32)
        if self.passage_embeddings.shape[0] != len(self.kg.passages):
            raise IndexMismatchError(
                f"{self.passage_embeddings.shape[0]} passage embeddings for {len(self.kg.passages)} passages"
            )
        self.transition = column_stochastic(self.adjacency())
        return self

    def adjacency(self) -> sp.csr_array:
        """Symmetric weighted adjacency (n_entities + n_passages)², as described in the module docstring."""
        kg, n_e = self.kg, len(self.kg.entity_names)
        rows: list[NDArray[np.int64]] = []
        cols: list[NDArray[np.int64]] = []
        vals: list[NDArray[np.float64]] = []
        h, t = kg.head_ids, kg.tail_ids
        keep = h != t
        rows.append(h[keep])
        cols.append(t[keep])
        vals.append(np.ones(int(keep.sum())))
        ep = [(e, n_e + pi) for e, ps in enumerate(kg.entity_passages) for pi in ps]
        if ep:
            arr = np.asarray(ep, np.int64)
            rows.append(arr[:, 0])
            cols.append(arr[:, 1])
            vals.append(np.ones(len(ep)))
        if self.config.synonym_k and kg.entity_embeddings is not None and n_e > 1:
            r, c, v = synonym_pairs(kg.entity_embeddings, self.config.synonym_k, self.config.synonym_threshold)
            rows.append(r)
            cols.append(c)
            vals.append(v)
        n = self.n_nodes
        upper = sp.coo_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n))
        return sp.csr_array(upper + upper.T)  # duplicates sum: parallel triplets add weight

    def retrieve(self, query: str, k: int = 5) -> list[RetrievedItem]:
        """Top-``k`` passages for ``query`` (score: PPR mass of the passage node)."""
        if not query.strip():
            raise ValueError("empty query")
        if k <= 0:
            raise ValueError(f"k={k!r}: must be > 0")
        self.load()
        assert self.transition is not None and self.passage_embeddings is not None
        kg, cfg, n_e = self.kg, self.config, len(self.kg.entity_names)
        q = np.asarray(self.encoder.encode_queries([query]), np.float32)[0]  # (dim,)
        dense = self.passage_embeddings @ q  # (n_passages,)
        assert kg.triplet_embeddings is not None
        facts = kg.triplet_embeddings @ q if len(kg.triplets) else np.zeros(0, np.float32)
        top_facts = np.lexsort((np.arange(facts.size), -facts))[: cfg.n_facts]
        n_pass = [len(ps) for ps in kg.entity_passages]
        seeds = seed_weights(
            [(int(f), float(facts[f])) for f in top_facts], kg.head_ids, kg.tail_ids, n_pass, cfg.n_seed_entities
        )
        if not seeds:
            log.debug("no seed entity for %r: dense passage ranking", query)
            order = np.lexsort((np.arange(dense.size), -dense))[:k]
            return [self._item(int(i), float(dense[i])) for i in order]
        span = float(dense.max() - dense.min()) if dense.size else 0.0
        norm = (dense - dense.min()) / span if span > 0 else np.ones_like(dense)
        p = np.zeros(self.n_nodes)
        p[n_e:] = cfg.passage_node_weight * norm
        for e, w in seeds.items():
            p[e] += w
        p /= p.sum()
        if self.n_nodes > cfg.push_above:
            res = local_push_ppr(
                self.transition, {int(i): float(p[i]) for i in np.flatnonzero(p)}, cfg.damping, cfg.push_epsilon
            )
            pi = res.dense(self.n_nodes)
        else:
            pi = ppr_from_transition(self.transition, p, cfg.damping, cfg.iterations, tol=cfg.tol)
        scores = pi[n_e:]
        order = np.lexsort((np.arange(scores.size), -scores))[:k]
        return [self._item(int(i), float(scores[i])) for i in order]

    def _item(self, i: int, score: float) -> RetrievedItem:
        p = self.kg.passages[i]
        return RetrievedItem(ItemKind.CHUNK, p.id, p.text, score, title=p.title)


def synonym_pairs(
    emb: NDArray[np.float32], k: int, threshold: float, block: int = 2048
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """Pairs (i < j), j among i's k nearest or vice versa, with cosine ≥ threshold; O(block·n) memory."""
    n = emb.shape[0]
    k = min(k, n - 1)
    pairs: dict[tuple[int, int], float] = {}
    for start in range(0, n, block):
        sims = emb[start : start + block] @ emb.T  # (block, n)
        for r in range(sims.shape[0]):
            sims[r, start + r] = -np.inf
        nn = np.argpartition(-sims, k - 1, axis=1)[:, :k] if k > 0 else np.zeros((sims.shape[0], 0), np.int64)
        for r in range(sims.shape[0]):
            i = start + r
            for j in nn[r]:
                s = float(sims[r, j])
                if s >= threshold:
                    pairs[(min(i, int(j)), max(i, int(j)))] = s
    if not pairs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    keys = np.asarray(list(pairs), np.int64)
    return keys[:, 0], keys[:, 1], np.asarray(list(pairs.values()))
