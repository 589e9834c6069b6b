"""Rerankers by name, and the second stage that reorders a retrieval mode's top candidates.

A reranker is named by a spec string, the one form every command, config and ``inference.yaml`` accepts:

- ``cross-encoder:DIR`` — any Hugging Face cross-encoder folder (``AutoModelForSequenceClassification`` with a single
  relevance logit, plus its tokenizer; :class:`~effirag.retrieval.similarity.CrossEncoderSimilarity`). It reranks the
  top ``rerank_depth`` candidates of the passage, sparse, graph and hybrid modes, and is KAG mode's similarity (chunk
  and triplet reranking and the relevance edges of TeaRAG eqs. 1-2), as TeaRAG reranks with a cross-encoder (§4.2.2-3).
- ``bilinear:DIR`` or a bare ``DIR`` — the bilinear scorer of ``effirag train reranker``
  (:mod:`effirag.retrieval.bilinear`), trained on KAG's chunks and triplets: KAG mode's similarity only, so a
  checkpoint that names one keeps the rankings of its other modes.
- ``none`` (or empty) — no reranker.

A relative ``DIR`` is resolved by :meth:`RerankerSpec.resolved` against the folder that names it (a checkpoint's
``inference.yaml`` names its reranker relative to the checkpoint).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from effirag.errors import ConfigError
from effirag.retrieval.base import Encoder, Similarity
from effirag.retrieval.context import rendered
from effirag.types import RetrievedItem

KINDS = ("cross-encoder", "bilinear")
SPEC_HELP = "cross-encoder:DIR (any HF cross-encoder folder), bilinear:DIR or a bare DIR (KAG only), or none"


@dataclass(frozen=True)
class RerankerSpec:
    """A parsed reranker spec: its kind (one of :data:`KINDS`) and folder."""

    kind: str
    path: Path

    def __str__(self) -> str:
        """The spec as a user would type it (a bilinear folder as a bare path, the historical form)."""
        return str(self.path) if self.kind == "bilinear" else f"{self.kind}:{self.path}"

    @property
    def reranks_modes(self) -> bool:
        """Whether it reorders the passage, sparse, graph and hybrid modes (not only KAG's similarity)."""
        return self.kind == "cross-encoder"

    def resolved(self, base: Path) -> RerankerSpec:
        """The spec with a relative folder taken relative to ``base`` (normalised, so it prints as typed)."""
        if self.path.is_absolute():
            return self
        return replace(self, path=Path(os.path.normpath(base / self.path)))

    def absolute(self) -> RerankerSpec:
        """The spec with its folder made absolute (for work that runs in another directory)."""
        return replace(self, path=self.path.resolve())


def parse_reranker(value: str | Path | RerankerSpec | None, where: str = "reranker") -> RerankerSpec | None:
    """The :class:`RerankerSpec` of ``value``; None for None, ``''`` and ``none`` (any case). An empty folder after
    a kind prefix is a ConfigError naming ``where`` and the value."""
    if value is None or isinstance(value, RerankerSpec):
        return value
    text = str(value).strip()
    if not text or text.lower() == "none":
        return None
    kind, sep, rest = text.partition(":")
    if sep and kind in KINDS:
        if not rest.strip():
            raise ConfigError(where, "reranker", text, f"names no folder after '{kind}:'; give {SPEC_HELP}")
        return RerankerSpec(kind, Path(rest.strip()))
    return RerankerSpec("bilinear", Path(text))


def build_similarity(spec: RerankerSpec, encoder: Encoder | None, index_folder: Path | str = "") -> Similarity:
    """The scorer a spec names (cheap: weights load on ``load()`` or the first score). A bilinear scorer needs the
    index's bi-encoder (it scores its embeddings)."""
    if spec.kind == "cross-encoder":
        from effirag.retrieval.similarity import CrossEncoderSimilarity

        return CrossEncoderSimilarity(spec.path)
    if encoder is None:
        from effirag.errors import IndexMismatchError

        raise IndexMismatchError(f"a bilinear reranker scores dense embeddings; {index_folder} was built without them")
    from effirag.retrieval.bilinear import BilinearSimilarity

    return BilinearSimilarity(spec.path, encoder)


def rerank_top(
    scorer: Similarity, query: str, items: Sequence[RetrievedItem], depth: int
) -> tuple[list[RetrievedItem], float]:
    """The first ``depth`` of ``items`` reordered by ``scorer``'s score (which becomes their score), ties kept in the
    first stage's order, followed by the rest unchanged; and the seconds scoring took.

    Only a fixed prefix is reordered, so the ranking does not depend on how deep a caller pages: items beyond
    ``depth`` keep the first stage's order and score.
    """
    head, tail = list(items[:depth]), list(items[depth:])
    if not head:
        return list(items), 0.0
    t0 = time.perf_counter()
    scores = scorer.score(query, [rendered(it) for it in head])
    secs = time.perf_counter() - t0
    order = sorted(range(len(head)), key=lambda i: (-scores[i], i))
    return [replace(head[i], score=float(scores[i])) for i in order] + tail, secs
