"""Retrieval: BM25, dense (sentence-transformers + FAISS), knowledge graph, HippoRAG-style PPR, RRF, TeaRAG's KAG.

The agent's entry point is :func:`load_retriever` → :class:`EffiRetriever` (``retrieve(query, mode, k, entities,
offset)``), which hands each call to its mode's component (:mod:`effirag.retrieval.modes`, registered by name);
:class:`DeepPager` serves ``<more info> k``. Names are imported lazily so that importing one submodule
(e.g. ``effirag.retrieval.base``) does not load FAISS, torch or the graph code.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "EffiRetriever": "effirag.retrieval.facade",
    "RetrieverConfig": "effirag.retrieval.facade",
    "load_retriever": "effirag.retrieval.facade",
    "DeepPager": "effirag.retrieval.paging",
    "ModeComponent": "effirag.retrieval.modes.base",
    "mode_names": "effirag.retrieval.modes",
    "TripletStage": "effirag.retrieval.triplets",
    "IndexConfig": "effirag.retrieval.index",
    "build_index": "effirag.retrieval.index",
    "load_index": "effirag.retrieval.index",
    "BM25Index": "effirag.retrieval.sparse",
    "BM25Config": "effirag.retrieval.sparse",
    "DenseIndex": "effirag.retrieval.dense",
    "DenseConfig": "effirag.retrieval.dense",
    "EncoderConfig": "effirag.retrieval.encoders",
    "SentenceTransformerEncoder": "effirag.retrieval.encoders",
    "HashingEncoder": "effirag.retrieval.encoders",
    "BiEncoderSimilarity": "effirag.retrieval.similarity",
    "BilinearParams": "effirag.retrieval.bilinear",
    "BilinearSimilarity": "effirag.retrieval.bilinear",
    "CrossEncoderSimilarity": "effirag.retrieval.similarity",
    "LexicalF1Similarity": "effirag.retrieval.similarity",
    "sigmoid": "effirag.retrieval.similarity",
    "RetrievalMode": "effirag.retrieval.base",
    "RetrievalResult": "effirag.retrieval.base",
    "Retriever": "effirag.retrieval.base",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'effirag.retrieval' has no attribute {name!r}")
