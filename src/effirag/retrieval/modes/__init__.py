"""Retrieval modes by name: each mode is one component (a :class:`~effirag.retrieval.modes.base.ModeComponent`) in
its own module of this package, registered here with one line. Adding a mode is a new module plus one line in
:data:`REGISTRY`; no other mode changes. Classes are imported on first use, so reading the names stays cheap.

- ``passage``: dense FAISS search over passages; ``sparse``: BM25; ``graph``: HippoRAG-style PPR over the KG;
- ``hybrid``: RouteRAG eq. 1, RRF of the passage and graph components;
- ``kag``: TeaRAG, the passage component's chunks reranked plus two-stage triplets, filtered by PPR on the KAG;
- ``chunks_triplets``: the Single-Con baseline, top chunks followed by top triplets.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from effirag.errors import ConfigError

if TYPE_CHECKING:
    from effirag.retrieval.modes.base import ModeComponent

REGISTRY: dict[str, str] = {
    "passage": "effirag.retrieval.modes.passage:PassageMode",
    "sparse": "effirag.retrieval.modes.sparse:SparseMode",
    "graph": "effirag.retrieval.modes.graph:GraphMode",
    "hybrid": "effirag.retrieval.modes.hybrid:HybridMode",
    "kag": "effirag.retrieval.modes.kag:KAGMode",
    "chunks_triplets": "effirag.retrieval.modes.chunks_triplets:ChunksTripletsMode",
}


def mode_names() -> tuple[str, ...]:
    """Every registered mode, in registration order."""
    return tuple(REGISTRY)


def parse_mode(mode: str) -> str:
    """The registered name ``mode`` (a str or ``RetrievalMode``); an unknown name is a ConfigError listing the known."""
    name = str(mode)
    if name not in REGISTRY:
        raise ConfigError("retrieve", "mode", mode, f"unknown retrieval mode; known: {', '.join(REGISTRY)}")
    return name


def mode_class(mode: str) -> type[ModeComponent]:
    """The component class of ``mode`` (imported on first use)."""
    module, _, cls = REGISTRY[parse_mode(mode)].partition(":")
    found: type[ModeComponent] = getattr(importlib.import_module(module), cls)
    return found
