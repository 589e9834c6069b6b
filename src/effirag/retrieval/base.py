"""Protocols of the retrieval layer: the Retriever facade the agent calls, and the Similarity scorer.

``Retriever.retrieve`` is the single entry point the agent runtime uses; ``offset`` serves deep paging
(Dynamic Search-R1's ``<more info> k``): items ``offset … offset+k-1`` of the query's ranked list.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from effirag.types import RetrievedItem


class RetrievalMode(enum.StrEnum):
    """passage: dense chunks; sparse: BM25 chunks; graph: HippoRAG-style PPR over the KG; hybrid: RRF of passage and
    graph (RouteRAG); kag: TeaRAG's chunks + triplets filtered by PPR on the Knowledge Association Graph;
    chunks_triplets: top chunks concatenated with top triplets (Single-Con baseline)."""

    PASSAGE = "passage"
    SPARSE = "sparse"
    GRAPH = "graph"
    HYBRID = "hybrid"
    KAG = "kag"
    CHUNKS_TRIPLETS = "chunks_triplets"


@dataclass
class RetrievalResult:
    """Ranked items plus per-stage timings in seconds (e.g. ``semantic``, ``graph``, ``kag_ppr``).

    ``extras`` carries stage outputs worth keeping (the KAG and its PPR scores, for the viewer).
    """

    items: list[RetrievedItem]
    timings: dict[str, float] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Retriever(Protocol):
    def retrieve(
        self,
        query: str,
        mode: RetrievalMode | str = RetrievalMode.PASSAGE,
        k: int = 5,
        entities: Sequence[str] | None = None,
        offset: int = 0,
    ) -> RetrievalResult: ...


@runtime_checkable
class Similarity(Protocol):
    """Relevance of texts to a query; higher is more relevant. Used for reranking and for process rewards."""

    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


@runtime_checkable
class VectorCache(Protocol):
    """A scorer that can be handed stored embeddings of texts (an index's), so it never encodes them again."""

    encoder: Encoder

    def prime(self, texts: Sequence[str], vectors: Any) -> None: ...


@runtime_checkable
class Encoder(Protocol):
    """Dense text encoder. Returns L2-normalised float32 embeddings, shape (len(texts), dim)."""

    @property
    def dim(self) -> int: ...

    @property
    def name(self) -> str: ...

    def encode_queries(self, texts: Sequence[str]) -> Any: ...

    def encode_passages(self, texts: Sequence[str]) -> Any: ...
