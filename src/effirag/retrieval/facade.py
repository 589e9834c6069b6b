"""The one retrieval entry point of the agent: :class:`EffiRetriever` implements the ``Retriever`` protocol over a
persisted index (see :mod:`effirag.retrieval.index`), dispatching each call to the component of its mode.

Modes are components registered by name in :mod:`effirag.retrieval.modes` (passage, sparse, graph, hybrid, kag,
chunks_triplets; see there). The facade validates the call, checks the index holds what the mode needs, and counts
every item's tokens under the caller's tokenizer (counted on ``title + "\\n" + text`` for chunks, the text the agent
inserts). ``offset`` returns items offset…offset+k−1 of the same ranking (deep paging).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from effirag.errors import ConfigError, IndexMismatchError
from effirag.retrieval.base import Encoder, RetrievalMode, RetrievalResult, Similarity, VectorCache
from effirag.retrieval.context import MAX_K, ModeContext, RetrieverConfig, rendered
from effirag.retrieval.encoders import EncoderConfig, SentenceTransformerEncoder
from effirag.retrieval.index import LoadedIndex, load_index, passage_text
from effirag.retrieval.modes import mode_class, parse_mode
from effirag.retrieval.rerank import RerankerSpec, build_similarity, parse_reranker
from effirag.retrieval.similarity import BiEncoderSimilarity
from effirag.retrieval.tokens import TextTokenizer, WhitespaceTokenizer, count_tokens
from effirag.retrieval.triplets import TwoStageTripletRetriever
from effirag.types import RetrievedItem

__all__ = ["MAX_K", "EffiRetriever", "RetrieverConfig", "load_retriever", "parse_mode"]

_NEEDS = {
    "dense": "a dense index; {folder} was built without one",
    "sparse": "a BM25 index; {folder} was built without one",
    "kg": "a knowledge graph; build the index with --openie or --triplets ({folder} has none)",
}


class EffiRetriever:
    """``retrieve(query, mode, k, entities, offset)`` over a loaded index. Cheap to construct; the encoder loads on the
    first dense query (or :meth:`load`). ``similarity`` scores KAG mode's chunks, triplets and relevance edges;
    ``reranker`` reorders the top candidates of the passage, sparse, graph and hybrid modes
    (:mod:`effirag.retrieval.rerank`)."""

    def __init__(
        self,
        index: LoadedIndex,
        encoder: Encoder | None = None,
        *,
        config: RetrieverConfig | None = None,
        tokenizer: TextTokenizer | None = None,
        similarity: Similarity | None = None,
        reranker: Similarity | None = None,
    ) -> None:
        self.index = index
        self.encoder = encoder
        self.config = config or RetrieverConfig()
        self.tokenizer: TextTokenizer = tokenizer or WhitespaceTokenizer()
        self.similarity = similarity or (BiEncoderSimilarity(encoder) if encoder is not None else None)
        self.reranker = reranker
        self.modes = ModeContext(index, encoder, self.similarity, self.config, reranker=reranker)
        self._token_cache: dict[tuple[str, str], int] = {}

    @property
    def n_passages(self) -> int:
        return len(self.index.passages)

    @property
    def max_k(self) -> int:
        """The largest k a query may ask for: the corpus size, at most 10,000."""
        return self.modes.max_k

    def load(self) -> EffiRetriever:
        if self.encoder is not None and hasattr(self.encoder, "load"):
            self.encoder.load()
        for scorer in (self.similarity, self.reranker):
            load = getattr(scorer, "load", None)
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
    def require(self, mode: RetrievalMode | str) -> str:
        """The registered name of ``mode``, once the index (and encoder) hold what it needs; else a clear error."""
        m = parse_mode(mode)
        have = {
            "dense": self.index.dense is not None and self.encoder is not None,
            "sparse": self.index.sparse is not None,
            "kg": self.index.kg is not None,
        }
        for part in sorted(mode_class(m).needs, key=list(_NEEDS).index):
            if not have[part]:
                raise IndexMismatchError(f"mode {m!r} needs " + _NEEDS[part].format(folder=self.index.folder))
        return m

    def _check(self, query: str, mode: RetrievalMode | str, k: int, offset: int) -> str:
        if not isinstance(query, str) or not query.strip():
            raise ConfigError("retrieve", "query", query, "the query is empty")
        parse_mode(mode)
        if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
            raise ConfigError("retrieve", "k", k, "must be a positive integer")
        if k > self.max_k:
            raise ConfigError(
                "retrieve", "k", k, f"too large: the index holds {self.n_passages} passages, max k is {self.max_k}"
            )
        if offset < 0:
            raise ConfigError("retrieve", "offset", offset, "must be >= 0")
        return self.require(mode)

    # -- building blocks (kept for callers that search one way directly) -------------------------------------
    def dense_search(self, query: str, k: int) -> list[RetrievedItem]:
        return self.modes.dense_search(query, k)

    def sparse_search(self, query: str, k: int) -> list[RetrievedItem]:
        return self.modes.sparse_search(query, k)

    def _triplets(self) -> TwoStageTripletRetriever:
        return self.modes.two_stage()

    def _tokens(self, it: RetrievedItem) -> int:
        """Token count of what the agent inserts for ``it``, cached per item (the corpus does not change)."""
        key = (it.kind.value, it.id)
        n = self._token_cache.get(key)
        if n is None:
            n = self._token_cache[key] = count_tokens(self.tokenizer, rendered(it))
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
        t_all = time.perf_counter()
        res = self.modes.component(m).retrieve(query, m, k, entities=entities, offset=offset, rerank=True)
        t0 = time.perf_counter()
        items = [replace(it, tokens=self._tokens(it)) for it in res.items]
        res.timings["tokens"] = time.perf_counter() - t0
        res.timings["total"] = time.perf_counter() - t_all
        res.extras["tokenizer"] = getattr(self.tokenizer, "name", type(self.tokenizer).__name__)
        res.extras["offset"] = offset
        return RetrievalResult(items, res.timings, res.extras)

    def retrieve_batch(
        self, queries: Sequence[str], mode: RetrievalMode | str = RetrievalMode.PASSAGE, k: int = 5
    ) -> list[RetrievalResult]:
        """``retrieve(q, mode, k)`` for every query, equal item for item, with the searches batched where the index
        allows: ``passage`` encodes all queries in one encoder call and searches them in one FAISS call (what makes a
        server under concurrent load cheaper per query); other modes, and any mode with a reranker, run query by query.
        Timings are the batch's."""
        if not queries:
            return []
        m = self._check(queries[0], mode, k, 0)
        for q in queries[1:]:
            self._check(q, m, k, 0)
        if m != "passage" or self.reranker is not None:
            return [self.retrieve(q, m, k) for q in queries]
        t0 = time.perf_counter()
        vecs = np.asarray(self.modes.require_encoder().encode_queries(list(queries)), dtype=np.float32)  # (q, dim)
        t1 = time.perf_counter()
        assert self.index.dense is not None
        rows, scores = self.index.dense.search(vecs, k)  # (q, k) each
        t2 = time.perf_counter()
        timings = {"encode": t1 - t0, "semantic": t2 - t0}
        out = []
        for r_row, s_row in zip(rows, scores, strict=True):
            chunks = [self.modes.chunk(int(r), float(s)) for r, s in zip(r_row, s_row, strict=True) if r >= 0]
            t3 = time.perf_counter()
            items = [replace(it, tokens=self._tokens(it)) for it in chunks]
            t4 = time.perf_counter()
            extras = {"mode": m, "tokenizer": getattr(self.tokenizer, "name", type(self.tokenizer).__name__)}
            stage = {**timings, "tokens": t4 - t3, "total": t4 - t0}
            out.append(RetrievalResult(items, stage, {**extras, "offset": 0}))
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
    reranker: str | Path | RerankerSpec | None = None,
) -> EffiRetriever:
    """Open ``index_dir`` (verifying the manifest) and wrap it. The query encoder defaults to the one the index was
    built with (same model and prefixes), on ``device``: ONNX Runtime on the CPU, sentence-transformers on torch on
    any other device (ONNX Runtime runs on CPU only here; the vectors agree to float rounding); passing another
    encoder whose name differs is refused. ``reranker``: a spec (:mod:`effirag.retrieval.rerank`):
    ``cross-encoder:DIR`` reranks every mode but chunks_triplets and is KAG's similarity; a bilinear folder
    (``effirag train reranker``) is KAG's similarity only; ``none`` is none. Not together with ``similarity``."""
    config = config or RetrieverConfig()
    index = load_index(index_dir, verify=config.verify_checksums, encoder_name=encoder.name if encoder else None)
    if encoder is None and index.manifest.dense is not None:
        d = index.manifest.dense
        encoder = SentenceTransformerEncoder(
            EncoderConfig(
                model=d["encoder"],
                query_prefix=d["query_prefix"],
                passage_prefix=d["passage_prefix"],
                backend="onnx" if device == "cpu" else "torch",
                device=device,
                torch_threads=torch_threads,
            )
        )
    spec = parse_reranker(reranker, "load_retriever")
    second: Similarity | None = None
    if spec is not None:
        if similarity is not None:
            raise ConfigError("load_retriever", "reranker", str(reranker), "give a reranker or a similarity, not both")
        similarity = build_similarity(spec, encoder, index.folder)
        second = similarity if spec.reranks_modes else None
    return EffiRetriever(index, encoder, config=config, tokenizer=tokenizer, similarity=similarity, reranker=second)
