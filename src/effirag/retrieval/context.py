"""What the retrieval-mode components share: the retriever's settings and a context over one loaded index.

A :class:`ModeContext` holds the loaded index, the query encoder, the similarity, the reranker (the second stage of
the modes that take one), the settings, and the heavy helpers
that several modes use (the HippoRAG-style graph retriever, the two-stage triplet retriever), each built once on first
use. Components (:mod:`effirag.retrieval.modes`) are built through :meth:`ModeContext.component`, once per name, so a
composing mode (hybrid, kag) shares the very components it composes with the modes of the same name.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from effirag.config import check, option
from effirag.retrieval.base import Encoder, Similarity
from effirag.retrieval.graph import GraphConfig, HippoGraphRetriever
from effirag.retrieval.index import LoadedIndex
from effirag.retrieval.kag import KAGConfig
from effirag.retrieval.kg import KnowledgeGraph
from effirag.retrieval.similarity import BiEncoderSimilarity
from effirag.retrieval.triplets import TwoStageTripletRetriever
from effirag.types import ItemKind, RetrievedItem

if TYPE_CHECKING:
    from effirag.retrieval.modes.base import ModeComponent

MAX_K = 10_000
T = TypeVar("T")


@dataclass(frozen=True)
class RetrieverConfig:
    """Settings of the retrieval modes over one index (the facade's; every component reads its own part)."""

    rrf_k: int = option(60, help="hybrid: RRF constant k (RouteRAG eq. 1: 60).")
    fusion_depth: int = option(50, help="hybrid: depth of each ranking fed to RRF (at least offset + k).")
    verify_checksums: bool = option(True, help="Verify every index file's SHA-256 when loading.")
    kag: KAGConfig = option(
        help="kag mode: TeaRAG's candidate sizes and PPR filter (k_f is the call's k).", factory=KAGConfig
    )
    graph: GraphConfig = option(help="graph/hybrid modes: HippoRAG-style PPR settings.", factory=GraphConfig)
    rerank_depth: int = option(
        20,
        help="With a cross-encoder reranker: how many of a mode's top candidates it reorders (passage, sparse, "
        "graph, hybrid; KAG reranks its own semantic_top).",
    )

    def __post_init__(self) -> None:
        check(self.rerank_depth > 0, self, "rerank_depth", "must be > 0")
        check(self.fusion_depth > 0, self, "fusion_depth", "must be > 0")
        check(self.rrf_k >= 0, self, "rrf_k", "must be >= 0")


class ModeContext:
    """One loaded index with its encoder, similarity, reranker and settings, plus the helpers the modes share."""

    def __init__(
        self,
        index: LoadedIndex,
        encoder: Encoder | None,
        similarity: Similarity | None,
        config: RetrieverConfig,
        reranker: Similarity | None = None,
    ) -> None:
        self.index, self.encoder, self.similarity, self.config = index, encoder, similarity, config
        self.reranker = reranker
        self._components: dict[str, ModeComponent] = {}
        self._shared: dict[str, Any] = {}

    @property
    def max_k(self) -> int:
        """The largest k a query may ask for: the corpus size, at most 10,000."""
        return min(MAX_K, len(self.index.passages))

    def component(self, name: str) -> ModeComponent:
        """The component of mode ``name`` over this context, built on first use."""
        from effirag.retrieval.modes import mode_class

        if name not in self._components:
            self._components[name] = mode_class(name)(self)
        return self._components[name]

    def shared(self, key: str, build: Callable[[], T]) -> T:
        """``build()`` once per context and ``key``: a heavy helper several components use."""
        if key not in self._shared:
            self._shared[key] = build()
        out: T = self._shared[key]
        return out

    # -- searches the modes are made of ---------------------------------------------------------------------
    def chunk(self, row: int, score: float) -> RetrievedItem:
        p = self.index.passages[row]
        return RetrievedItem(ItemKind.CHUNK, p.id, p.text, float(score), title=p.title)

    def dense_search(self, query: str, k: int) -> list[RetrievedItem]:
        assert self.index.dense is not None
        q = np.asarray(self.require_encoder().encode_queries([query]), dtype=np.float32)  # (1, dim)
        rows, scores = self.index.dense.search(q, k)
        return [self.chunk(int(r), float(s)) for r, s in zip(rows[0], scores[0], strict=True) if r >= 0]

    def sparse_search(self, query: str, k: int) -> list[RetrievedItem]:
        assert self.index.sparse is not None
        rows, scores = self.index.sparse.search(query, k)
        return [self.chunk(int(r), float(s)) for r, s in zip(rows, scores, strict=True)]

    def hippo(self) -> HippoGraphRetriever:
        """The HippoRAG-style retriever over the loaded KG, built once; it reuses the index's passage embeddings when
        the KG holds the index's passages in the same order (same texts, same encoder)."""

        def build() -> HippoGraphRetriever:
            emb = None
            kg, dense = self.kg(), self.index.dense_embeddings()
            if dense is not None and [p.id for p in kg.passages] == [p.id for p in self.index.passages]:
                emb = np.asarray(dense, dtype=np.float32)
            return HippoGraphRetriever(kg, self.require_encoder(), self.config.graph, passage_embeddings=emb)

        return self.shared("hippo", build)

    def two_stage(self) -> TwoStageTripletRetriever:
        """TeaRAG's two-stage triplet retriever over the loaded KG; it reranks with the similarity unless that is the
        index's plain bi-encoder (whose order the dense scores already are)."""

        def build() -> TwoStageTripletRetriever:
            rerank = None if isinstance(self.similarity, BiEncoderSimilarity) else self.similarity
            return TwoStageTripletRetriever(self.kg(), self.require_encoder(), reranker=rerank)

        return self.shared("two_stage", build)

    def kg(self) -> KnowledgeGraph:
        assert self.index.kg is not None  # the facade refuses graph modes over an index without one
        return self.index.kg

    def require_encoder(self) -> Encoder:
        assert self.encoder is not None  # the facade refuses dense modes without an encoder
        return self.encoder


def rendered(it: RetrievedItem) -> str:
    """The text the agent inserts for ``it``: ``title\\ntext`` for a titled chunk, else the text."""
    return f"{it.title}\n{it.text}" if it.kind is ItemKind.CHUNK and it.title else it.text


def timed(timings: dict[str, float], name: str, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, its wall time added to ``timings[name]``."""
    t0 = time.perf_counter()
    out = fn(*args)
    timings[name] = timings.get(name, 0.0) + time.perf_counter() - t0
    return out
