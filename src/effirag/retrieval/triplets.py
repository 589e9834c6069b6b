"""Two-stage triplet retrieval (TeaRAG §4.2.3): key entities → nearest KG entities → their one-hop triplets → top-k_t.

For each key entity v of a subquery q the entity query is ``"Key entity: v. Query: q."`` (:func:`entity_query`); it
retrieves the ``n_entities`` nearest KG entities by dense similarity, of which ``k_e`` are kept (reranked with the
optional :class:`~effirag.retrieval.base.Similarity`, else by the dense score). The one-hop triplets of the kept
entities are ranked for q: dense top-``n_triplets``, then reranked (same rule) to ``k_t``. Paper defaults: entities
10 → 5, triplets 20 → 10.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from effirag.config import check, option
from effirag.errors import IndexMismatchError
from effirag.retrieval.base import Encoder, Similarity
from effirag.retrieval.kg import KnowledgeGraph
from effirag.types import ItemKind, RetrievedItem, Triplet


@dataclass(frozen=True)
class TripletStage:
    """The sizes of one two-stage triplet retrieval (defaults: TeaRAG §5.1)."""

    k_t: int = option(10, help="Triplets kept after reranking (k_t).")
    k_e: int = option(5, help="KG entities kept per key entity after reranking (k_e).")
    n_entities: int = option(10, help="KG entities retrieved per key-entity query before reranking.")
    n_triplets: int = option(20, help="One-hop triplets ranked by dense similarity before reranking.")

    def __post_init__(self) -> None:
        for name in ("k_t", "k_e", "n_entities", "n_triplets"):
            check(getattr(self, name) > 0, self, name, "must be > 0")


def entity_query(entity: str, subquery: str) -> str:
    """TeaRAG §4.2.3's entity-retrieval query for key entity ``entity`` and subquery ``subquery``."""
    return f"Key entity: {entity}. Query: {subquery}."


def triplet_item(kg: KnowledgeGraph, index: int, score: float) -> RetrievedItem:
    """The :class:`RetrievedItem` of triplet ``index`` (id ``"t{index}"``; title: its source passage's title)."""
    t = kg.triplets[index]
    pi = int(kg.triplet_passage[index])
    return RetrievedItem(
        ItemKind.TRIPLET, f"t{index}", t.text, float(score), title=kg.passages[pi].title if pi >= 0 else ""
    )


def triplet_index(item_id: str) -> int:
    """Inverse of the ``"t{index}"`` item id."""
    if not (item_id.startswith("t") and item_id[1:].isdigit()):
        raise ValueError(f"{item_id!r} is not a triplet item id (expected 't<index>')")
    return int(item_id[1:])


class TwoStageTripletRetriever:
    """TeaRAG's graph retrieval over a :class:`KnowledgeGraph` with entity and triplet embeddings."""

    def __init__(self, kg: KnowledgeGraph, encoder: Encoder, reranker: Similarity | None = None) -> None:
        self.kg, self.encoder, self.reranker = kg, encoder, reranker

    def retrieve(
        self,
        entities: Sequence[str],
        subquery: str,
        k_t: int = 10,
        k_e: int = 5,
        n_entities: int = 10,
        n_triplets: int = 20,
    ) -> list[RetrievedItem]:
        """Top-``k_t`` triplets for ``subquery`` around the key ``entities`` (score: rerank or dense score)."""
        stage = TripletStage(k_t, k_e, n_entities, n_triplets)
        return [item for item, _ in self.search(entities, subquery, stage)]

    def retrieve_with_triplets(
        self,
        entities: Sequence[str],
        subquery: str,
        k_t: int = 10,
        k_e: int = 5,
        n_entities: int = 10,
        n_triplets: int = 20,
        vectors: np.ndarray | None = None,
    ) -> list[tuple[RetrievedItem, Triplet]]:
        """:meth:`search` with the stage's sizes given one by one (the form older callers use)."""
        return self.search(entities, subquery, TripletStage(k_t, k_e, n_entities, n_triplets), vectors=vectors)

    def search(
        self,
        entities: Sequence[str],
        subquery: str,
        stage: TripletStage | None = None,
        *,
        vectors: np.ndarray | None = None,
    ) -> list[tuple[RetrievedItem, Triplet]]:
        """Top-``stage.k_t`` triplets for ``subquery``, each item paired with its :class:`Triplet` (what the KAG filter
        needs).

        Without key entities the subquery alone is the entity query (``"Query: q."``). ``vectors``: the query
        embeddings of :meth:`queries` ``(entities, subquery)``, when the caller encoded many at once.
        """
        if not subquery.strip():
            raise ValueError("empty subquery")
        st = stage or TripletStage()
        if self.kg.triplet_embeddings is None:
            raise IndexMismatchError("the knowledge graph has no triplet embeddings: call kg.embed(encoder) first")
        queries = self.queries(entities, subquery)
        if vectors is None:
            vectors = self.encoder.encode_queries(queries)
        vecs = np.asarray(vectors, np.float32)  # (n_entity_queries + 1, dim)
        if vecs.shape[0] != len(queries):
            raise ValueError(f"{vecs.shape[0]} query vectors for {len(queries)} queries")
        queries = queries[:-1]
        chosen: dict[int, None] = {}
        for query, hits in zip(queries, self.kg.search_entities(vecs[:-1], st.n_entities), strict=True):
            names = [self.kg.entity_names[i] for i, _ in hits]
            for e in self._rerank(query, [(i, s) for i, s in hits], names, st.k_e):
                chosen.setdefault(e[0], None)
        cands = sorted({t for e in chosen for t in self.kg.one_hop(e)})
        if not cands:
            return []
        dense = self.kg.triplet_embeddings[cands] @ vecs[-1]  # (n_candidates,)
        order = np.lexsort((np.asarray(cands), -dense))[: st.n_triplets]
        top = [(cands[i], float(dense[i])) for i in order]
        ranked = self._rerank(subquery, top, [self.kg.triplets[i].text for i, _ in top], st.k_t)
        return [(triplet_item(self.kg, i, s), self.kg.triplets[i]) for i, s in ranked]

    @staticmethod
    def queries(entities: Sequence[str], subquery: str) -> list[str]:
        """The texts encoded for one retrieval: one entity query per key entity (or ``"Query: q."``), then q."""
        ents = [e for e in entities if e.strip()]
        return [*([entity_query(e, subquery) for e in ents] or [f"Query: {subquery}."]), subquery]

    def _rerank(self, query: str, hits: list[tuple[int, float]], texts: list[str], k: int) -> list[tuple[int, float]]:
        """Keep ``k`` of ``hits`` (already in dense order): by the reranker's score when set, ties by dense order."""
        if self.reranker is None or not hits:
            return hits[:k]
        scores = self.reranker.score(query, texts)
        order = sorted(range(len(hits)), key=lambda j: (-scores[j], j))[:k]
        return [(hits[j][0], float(scores[j])) for j in order]
