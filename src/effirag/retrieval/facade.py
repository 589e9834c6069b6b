"""The one retrieval entry point of the agent: :class:`EffiRetriever` implements the ``Retriever`` protocol over a
persisted index (see :mod:`effirag.retrieval.index`).

Modes (``RetrievalMode``):
- ``passage`` — dense FAISS search over passages (timing ``semantic``);
- ``sparse`` — BM25 (timing ``sparse``);
- ``graph`` — HippoRAG-style PPR over the knowledge graph (timing ``graph``);
- ``hybrid`` — RouteRAG eq. 1: RRF (k = 60) of the dense and graph rankings (timings ``semantic``, ``graph``,
  ``fusion``);
- ``kag`` — TeaRAG: dense top-20 chunks reranked to k_d, two-stage triplets (k_t), then the KAG + PPR filter keeps k
  (timings ``semantic``, ``rerank``, ``triplets``, ``kag_ppr``);
- ``chunks_triplets`` — the Single-Con baseline: top-k chunks followed by top-k triplets.

Every item carries its token count under the caller's tokenizer (counted on ``title + "\\n" + text`` for chunks, the
text the agent inserts). ``offset`` returns items offset…offset+k−1 of the same ranking (deep paging).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from effirag.config import check, option
from effirag.errors import ConfigError, IndexMismatchError
from effirag.retrieval.base import Encoder, RetrievalMode, RetrievalResult, Similarity, VectorCache
from effirag.retrieval.encoders import EncoderConfig, SentenceTransformerEncoder
from effirag.retrieval.graph import GraphConfig, HippoGraphRetriever
from effirag.retrieval.index import LoadedIndex, load_index, passage_text
from effirag.retrieval.kag import KAGConfig, KAGFilter
from effirag.retrieval.kg import KnowledgeGraph
from effirag.retrieval.similarity import BiEncoderSimilarity
from effirag.retrieval.tokens import TextTokenizer, WhitespaceTokenizer, count_tokens
from effirag.retrieval.triplets import TwoStageTripletRetriever
from effirag.types import ItemKind, RetrievedItem

log = logging.getLogger(__name__)

MAX_K = 10_000
GRAPH_MODES = (RetrievalMode.GRAPH, RetrievalMode.HYBRID, RetrievalMode.KAG, RetrievalMode.CHUNKS_TRIPLETS)


@dataclass(frozen=True)
class RetrieverConfig:
    rrf_k: int = option(60, help="hybrid: RRF constant k (RouteRAG eq. 1: 60).")
    fusion_depth: int = option(50, help="hybrid: depth of each ranking fed to RRF (at least offset + k).")
    verify_checksums: bool = option(True, help="Verify every index file's SHA-256 when loading.")
    kag: KAGConfig = option(
        help="kag mode: TeaRAG's candidate sizes and PPR filter (k_f is the call's k).", factory=KAGConfig
    )
    graph: GraphConfig = option(help="graph/hybrid modes: HippoRAG-style PPR settings.", factory=GraphConfig)

    def __post_init__(self) -> None:
        check(self.fusion_depth > 0, self, "fusion_depth", "must be > 0")
        check(self.rrf_k >= 0, self, "rrf_k", "must be >= 0")


def parse_mode(mode: RetrievalMode | str) -> RetrievalMode:
    try:
        return RetrievalMode(mode)
    except ValueError:
        known = ", ".join(m.value for m in RetrievalMode)
        raise ConfigError("retrieve", "mode", mode, f"unknown retrieval mode; known: {known}") from None


class EffiRetriever:
    """``retrieve(query, mode, k, entities, offset)`` over a loaded index. Cheap to construct; the encoder loads on the
    first dense query (or :meth:`load`)."""

    def __init__(
        self,
        index: LoadedIndex,
        encoder: Encoder | None = None,
        *,
        config: RetrieverConfig | None = None,
        tokenizer: TextTokenizer | None = None,
        similarity: Similarity | None = None,
    ) -> None:
        self.index = index
        self.encoder = encoder
        self.config = config or RetrieverConfig()
        self.tokenizer: TextTokenizer = tokenizer or WhitespaceTokenizer()
        self.similarity = similarity or (BiEncoderSimilarity(encoder) if encoder is not None else None)
        self._graph: HippoGraphRetriever | None = None
        self._two_stage: TwoStageTripletRetriever | None = None
        self._token_cache: dict[tuple[str, str], int] = {}

    @property
    def n_passages(self) -> int:
        return len(self.index.passages)

    @property
    def max_k(self) -> int:
        """The largest k a query may ask for: the corpus size, at most 10,000."""
        return min(MAX_K, self.n_passages)

    def load(self) -> EffiRetriever:
        if self.encoder is not None and hasattr(self.encoder, "load"):
            self.encoder.load()
        load = getattr(self.similarity, "load", None)
        if load is not None:
            load()
        self._prime_similarity()
        return self

    def _prime_similarity(self) -> None:
        """Hand a :class:`VectorCache` scorer the index's stored embeddings (passages as indexed, KG triplets and
        entities), so reranking and KAG scoring never re-encode them. Only when it scores with the index's encoder."""
        sim = self.similarity
        if not isinstance(sim, VectorCache) or self.encoder is None or sim.encoder.name != self.encoder.name:
            return
        dense = self.index.dense_embeddings()
        if dense is not None:
            sim.prime([passage_text(p) for p in self.index.passages], dense)
        kg = self.index.kg
        if kg is not None and kg.triplet_embeddings is not None and kg.entity_embeddings is not None:
            sim.prime([t.text for t in kg.triplets], kg.triplet_embeddings)
            sim.prime(list(kg.entity_names), kg.entity_embeddings)

    # -- validation -------------------------------------------------------------------------------------------
    def _check(self, query: str, mode: RetrievalMode | str, k: int, offset: int) -> RetrievalMode:
        if not isinstance(query, str) or not query.strip():
            raise ConfigError("retrieve", "query", query, "the query is empty")
        m = parse_mode(mode)
        if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
            raise ConfigError("retrieve", "k", k, "must be a positive integer")
        if k > self.max_k:
            raise ConfigError(
                "retrieve", "k", k, f"too large: the index holds {self.n_passages} passages, max k is {self.max_k}"
            )
        if offset < 0:
            raise ConfigError("retrieve", "offset", offset, "must be >= 0")
        needs_dense = m in (
            RetrievalMode.PASSAGE,
            RetrievalMode.HYBRID,
            RetrievalMode.KAG,
            RetrievalMode.CHUNKS_TRIPLETS,
        )
        if needs_dense and (self.index.dense is None or self.encoder is None):
            raise IndexMismatchError(f"mode {m.value!r} needs a dense index; {self.index.folder} was built without one")
        if m is RetrievalMode.SPARSE and self.index.sparse is None:
            raise IndexMismatchError(f"mode 'sparse' needs a BM25 index; {self.index.folder} was built without one")
        if m in GRAPH_MODES and self.index.kg is None:
            raise IndexMismatchError(
                f"mode {m.value!r} needs a knowledge graph; build the index with --openie or --triplets "
                f"({self.index.folder} has none)"
            )
        return m

    # -- building blocks --------------------------------------------------------------------------------------
    def _chunk(self, row: int, score: float) -> RetrievedItem:
        p = self.index.passages[row]
        return RetrievedItem(ItemKind.CHUNK, p.id, p.text, float(score), title=p.title)

    def dense_search(self, query: str, k: int) -> list[RetrievedItem]:
        assert self.index.dense is not None and self.encoder is not None
        q = np.asarray(self.encoder.encode_queries([query]), dtype=np.float32)  # (1, dim)
        rows, scores = self.index.dense.search(q, k)
        return [self._chunk(int(r), float(s)) for r, s in zip(rows[0], scores[0], strict=True) if r >= 0]

    def sparse_search(self, query: str, k: int) -> list[RetrievedItem]:
        assert self.index.sparse is not None
        rows, scores = self.index.sparse.search(query, k)
        return [self._chunk(int(r), float(s)) for r, s in zip(rows, scores, strict=True)]

    def _hippo(self) -> HippoGraphRetriever:
        """retrieval-B's HippoRAG-style retriever over the loaded KG, built once; it reuses the index's passage
        embeddings when the KG holds the index's passages in the same order (same texts, same encoder)."""
        if self._graph is None:
            emb = None
            kg, dense = self._kg(), self.index.dense_embeddings()
            if dense is not None and [p.id for p in kg.passages] == [p.id for p in self.index.passages]:
                emb = np.asarray(dense, dtype=np.float32)
            self._graph = HippoGraphRetriever(kg, self._encoder(), self.config.graph, passage_embeddings=emb)
        return self._graph

    def _triplets(self) -> TwoStageTripletRetriever:
        if self._two_stage is None:
            rerank = None if isinstance(self.similarity, BiEncoderSimilarity) else self.similarity
            self._two_stage = TwoStageTripletRetriever(self._kg(), self._encoder(), reranker=rerank)
        return self._two_stage

    def _kg(self) -> KnowledgeGraph:
        assert self.index.kg is not None  # _check refused graph modes without one
        return self.index.kg

    def _encoder(self) -> Encoder:
        assert self.encoder is not None
        return self.encoder

    def _tokens(self, it: RetrievedItem) -> int:
        """Token count of what the agent inserts for ``it``, cached per item (the corpus does not change)."""
        key = (it.kind.value, it.id)
        n = self._token_cache.get(key)
        if n is None:
            n = self._token_cache[key] = count_tokens(self.tokenizer, _rendered(it))
        return n

    # -- the facade -------------------------------------------------------------------------------------------
    def retrieve(
        self,
        query: str,
        mode: RetrievalMode | str = RetrievalMode.PASSAGE,
        k: int = 5,
        entities: Sequence[str] | None = None,
        offset: int = 0,
    ) -> RetrievalResult:
        m = self._check(query, mode, k, offset)
        depth = min(offset + k, self.max_k)
        timings: dict[str, float] = {}
        extras: dict[str, Any] = {"mode": m.value}
        t_all = time.perf_counter()
        if m is RetrievalMode.PASSAGE:
            items = _timed(timings, "semantic", self.dense_search, query, depth)
        elif m is RetrievalMode.SPARSE:
            items = _timed(timings, "sparse", self.sparse_search, query, depth)
        elif m is RetrievalMode.GRAPH:
            items = list(_timed(timings, "graph", self._hippo().retrieve, query, depth))
        elif m is RetrievalMode.HYBRID:
            items = self._hybrid(query, depth, timings)
        elif m is RetrievalMode.KAG:
            items = self._kag(query, list(entities or []), depth, timings, extras)
        else:
            items = self._chunks_triplets(query, list(entities or []), depth, timings)
        if m is not RetrievalMode.CHUNKS_TRIPLETS:
            items = items[offset : offset + k]
        t0 = time.perf_counter()
        items = [replace(it, tokens=self._tokens(it)) for it in items]
        timings["tokens"] = time.perf_counter() - t0
        timings["total"] = time.perf_counter() - t_all
        extras["tokenizer"] = getattr(self.tokenizer, "name", type(self.tokenizer).__name__)
        extras["offset"] = offset
        return RetrievalResult(items, timings, extras)

    def _hybrid(self, query: str, depth: int, timings: dict[str, float]) -> list[RetrievedItem]:
        from effirag.retrieval.fusion import rrf

        n = min(max(depth, self.config.fusion_depth), self.max_k)
        dense = _timed(timings, "semantic", self.dense_search, query, n)
        graph = list(_timed(timings, "graph", self._hippo().retrieve, query, n))
        t0 = time.perf_counter()
        by_id = {it.id: it for it in (*graph, *dense)}
        fused = rrf([[it.id for it in dense], [it.id for it in graph]], k=self.config.rrf_k)
        timings["fusion"] = time.perf_counter() - t0
        return [replace(by_id[i], score=s) for i, s in fused[:depth]]

    def _chunks_triplets(
        self, query: str, entities: list[str], k: int, timings: dict[str, float]
    ) -> list[RetrievedItem]:
        chunks = _timed(timings, "semantic", self.dense_search, query, k)
        triplets = _timed(timings, "triplets", self._triplets().retrieve, entities, query, k)
        return [*chunks, *list(triplets)[:k]]

    def _kag(
        self, query: str, entities: list[str], k: int, timings: dict[str, float], extras: dict[str, Any]
    ) -> list[RetrievedItem]:
        """TeaRAG §4.2: dense top-``semantic_top`` chunks reranked to k_d, two-stage triplets to k_t, KAG + PPR → k."""
        c = self.config.kag
        assert self.similarity is not None
        chunks = _timed(timings, "semantic", self.dense_search, query, min(max(c.semantic_top, k), self.max_k))
        # With the index's own bi-encoder as the similarity, sim(query, chunk) and sim(query, triplet) are exactly the
        # inner products the dense and triplet searches already returned as item scores (same encoder, same texts:
        # `title\ntext` as indexed, the triplet text as embedded in the KG); scoring again would re-encode ~30 texts
        # per query (≈1.5 s with MiniLM on 2 CPU cores, BENCHMARKS.md).
        reuse = isinstance(self.similarity, BiEncoderSimilarity) and self.similarity.encoder is self.encoder
        t0 = time.perf_counter()
        if reuse:
            sims = [it.score for it in chunks]
        else:
            sims = self.similarity.score(query, [_rendered(it) for it in chunks])
        order = sorted(range(len(chunks)), key=lambda i: (-sims[i], i))[: max(c.k_d, k)]
        chunks = [replace(chunks[i], score=float(sims[i])) for i in order]
        timings["rerank"] = time.perf_counter() - t0
        triplets = _timed(
            timings,
            "triplets",
            self._triplets().retrieve_with_triplets,
            entities,
            query,
            c.k_t,
            c.k_e,
            c.n_entities,
            c.n_triplets,
        )
        t0 = time.perf_counter()
        kag = KAGFilter(replace(c, k_f=k))
        if reuse:
            result = kag.filter_scored(
                entities, chunks, triplets, [it.score for it in chunks], [it.score for it, _ in triplets]
            )
        else:
            result = kag.filter(query, entities, chunks, triplets, self.similarity)
        timings["kag_ppr"] = time.perf_counter() - t0
        for name, secs in result.timings.items():
            timings[f"kag_{name}"] = secs
        extras["kag"] = {"graph": result.graph.to_dict(), "scores": result.scores}
        return list(result.items)


def _rendered(it: RetrievedItem) -> str:
    return f"{it.title}\n{it.text}" if it.kind is ItemKind.CHUNK and it.title else it.text


def _timed(timings: dict[str, float], name: str, fn: Any, *args: Any) -> Any:
    t0 = time.perf_counter()
    out = fn(*args)
    timings[name] = timings.get(name, 0.0) + time.perf_counter() - t0
    return out


def load_retriever(
    index_dir: str | Path,
    tokenizer: TextTokenizer | None = None,
    *,
    encoder: Encoder | None = None,
    config: RetrieverConfig | None = None,
    similarity: Similarity | None = None,
    device: str = "cpu",
    torch_threads: int = 0,
    reranker: str | Path | None = None,
) -> EffiRetriever:
    """Open ``index_dir`` (verifying the manifest) and wrap it. The query encoder defaults to the one the index was
    built with (same model and prefixes); passing another encoder whose name differs is refused. ``reranker``: a
    folder of trained bilinear parameters (:mod:`effirag.retrieval.bilinear`, ``effirag train reranker``), the
    similarity of KAG mode's reranking and relevance edges; not together with ``similarity``."""
    config = config or RetrieverConfig()
    index = load_index(index_dir, verify=config.verify_checksums, encoder_name=encoder.name if encoder else None)
    if encoder is None and index.manifest.dense is not None:
        d = index.manifest.dense
        encoder = SentenceTransformerEncoder(
            EncoderConfig(
                model=d["encoder"],
                query_prefix=d["query_prefix"],
                passage_prefix=d["passage_prefix"],
                device=device,
                torch_threads=torch_threads,
            )
        )
    if reranker is not None:
        if similarity is not None:
            raise ConfigError("load_retriever", "reranker", str(reranker), "give a reranker or a similarity, not both")
        if encoder is None:
            raise IndexMismatchError(f"a reranker scores dense embeddings; {index.folder} was built without them")
        from effirag.retrieval.bilinear import BilinearSimilarity

        similarity = BilinearSimilarity(reranker, encoder)
    return EffiRetriever(index, encoder, config=config, tokenizer=tokenizer, similarity=similarity)
