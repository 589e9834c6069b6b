"""A trained bilinear relevance scorer over a frozen bi-encoder: a reranker for TeaRAG's KAG when no cross-encoder is
at hand.

TeaRAG (arXiv 2511.05385) reranks chunks and triplets with a cross-encoder (§4.2.2-4.2.3) and weights the KAG's
relevance edges by sigmoid(score) (§4.2.4, eqs. 1-2). A bi-encoder's cosines are a poor stand-in on the demo world:
they all lie within about 0.6-0.85, so sigmoid(cos) − τ barely separates candidates, and MiniLM ranks the triplet that
answers a sub-question first for only ~40% of hops (measured on the demo world). This scorer keeps the bi-encoder's
embeddings (no text is re-encoded) and learns what the encoder does not separate, the relation a question asks::

    s(q, x) = α · (W e_q)ᵀ e_x + β          e_q, e_x: L2-normalised embeddings of query and text; W: (dim, dim)

trained as a relevance logit (:mod:`effirag.train.reranker`), so sigmoid(s) is a probability of relevance and enters
eqs. 1-2 like a cross-encoder's logit would. W = I, α = 1, β = 0 gives back the cosine.

:class:`BilinearSimilarity` implements the :class:`~effirag.retrieval.base.Similarity` protocol. ``__init__`` is
cheap; :meth:`~BilinearSimilarity.load` reads ``bilinear.safetensors`` and ``bilinear.json`` from a folder.
:meth:`~BilinearSimilarity.prime` hands it the index's stored embeddings (the retriever does this on load), so
scoring a retrieved chunk or triplet costs one matrix product instead of an encoder call.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from effirag.errors import ConfigError
from effirag.retrieval.base import Encoder

WEIGHTS = "bilinear.safetensors"
META = "bilinear.json"


def bilinear_scores(queries: np.ndarray, items: np.ndarray, weight: np.ndarray, scale: float, bias: float) -> Any:
    """Relevance logits s = α · (W e_q)ᵀ e_x + β for every (query, item) pair.

    ``queries`` (m, dim), ``items`` (n, dim), ``weight`` W (dim, dim); returns (m, n) float32. Pure.
    """
    q = np.asarray(queries, np.float32)
    x = np.asarray(items, np.float32)
    w = np.asarray(weight, np.float32)
    if q.ndim != 2 or x.ndim != 2 or w.shape != (q.shape[1], q.shape[1]) or x.shape[1] != q.shape[1]:
        raise ValueError(f"shapes: queries {q.shape}, items {x.shape}, weight {w.shape}; want (m, d), (n, d), (d, d)")
    projected = q @ w.T  # (m, dim): row i is W e_q_i
    return (scale * (projected @ x.T) + bias).astype(np.float32)  # (m, n)


@dataclass(frozen=True)
class BilinearParams:
    """W (dim, dim), α, β and the name of the encoder whose embeddings they were trained on."""

    weight: np.ndarray
    scale: float
    bias: float
    encoder: str

    def __post_init__(self) -> None:
        w = self.weight
        if w.ndim != 2 or w.shape[0] != w.shape[1] or w.shape[0] == 0:
            raise ConfigError("BilinearParams", "weight", f"shape {w.shape}", "must be a square (dim, dim) matrix")
        if not np.isfinite(w).all() or not np.isfinite([self.scale, self.bias]).all():
            raise ConfigError("BilinearParams", "weight", "non-finite values", "W, α and β must be finite")

    @property
    def dim(self) -> int:
        return int(self.weight.shape[0])

    @staticmethod
    def identity(dim: int, encoder: str, scale: float = 1.0, bias: float = 0.0) -> BilinearParams:
        """W = I: scores are α · cosine + β."""
        return BilinearParams(np.eye(dim, dtype=np.float32), scale, bias, encoder)

    def save(self, folder: str | Path, extra: dict[str, Any] | None = None) -> Path:
        """Write ``bilinear.safetensors`` (W) and ``bilinear.json`` (α, β, encoder, ``extra``) into ``folder``."""
        from safetensors.numpy import save_file

        d = Path(folder)
        d.mkdir(parents=True, exist_ok=True)
        save_file({"weight": np.ascontiguousarray(self.weight, np.float32)}, str(d / WEIGHTS))
        meta = {"scale": self.scale, "bias": self.bias, "encoder": self.encoder, "dim": self.dim, **(extra or {})}
        (d / META).write_text(json.dumps(meta, indent=1), "utf-8")
        return d

    @staticmethod
    def load(folder: str | Path) -> BilinearParams:
        from safetensors.numpy import load_file

        d = Path(folder)
        for name in (WEIGHTS, META):
            if not (d / name).is_file():
                raise ConfigError("BilinearSimilarity", "path", str(d), f"no {name} there (train one: effirag train "
                                  "reranker)")  # fmt: skip
        meta = json.loads((d / META).read_text("utf-8"))
        for key in ("scale", "bias", "encoder"):
            if key not in meta:
                raise ConfigError("BilinearSimilarity", key, None, f"missing from {d / META}")
        weight = load_file(str(d / WEIGHTS)).get("weight")
        if weight is None:
            raise ConfigError("BilinearSimilarity", "weight", None, f"no tensor 'weight' in {d / WEIGHTS}")
        scale, bias = float(meta["scale"]), float(meta["bias"])
        return BilinearParams(weight.astype(np.float32), scale, bias, str(meta["encoder"]))


class BilinearSimilarity:
    """:class:`Similarity` s(q, x) = α · (W e_q)ᵀ e_x + β over ``encoder``'s embeddings, read from ``path``.

    Texts given to :meth:`prime` are never re-encoded; any other text is encoded once and cached. The encoder must be
    the one the parameters were trained on (its ``name`` is checked on :meth:`load`).
    """

    def __init__(self, path: str | Path | None, encoder: Encoder, params: BilinearParams | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.encoder = encoder
        self._params = params
        self._vectors: dict[str, np.ndarray] = {}
        self._queries: dict[str, np.ndarray] = {}

    @property
    def params(self) -> BilinearParams:
        return self.load()._params  # type: ignore[return-value]

    def load(self) -> BilinearSimilarity:
        if self._params is None:
            if self.path is None:
                raise ConfigError("BilinearSimilarity", "path", None, "give a folder or parameters")
            self._params = BilinearParams.load(self.path)
        p = self._params
        if p.encoder != self.encoder.name:
            where = str(self.path / META) if self.path else "BilinearParams"
            raise ConfigError(
                "BilinearSimilarity", "encoder", self.encoder.name, f"{where} was trained on {p.encoder!r} embeddings"
            )
        return self

    def prime(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Cache ``vectors`` (len(texts), dim), the encoder's embeddings of ``texts``, e.g. an index's stored ones."""
        v = np.asarray(vectors, np.float32)
        if v.shape[0] != len(texts):
            raise ValueError(f"{len(texts)} texts, {v.shape[0]} vectors")
        self._vectors.update(zip(texts, v, strict=True))

    def _item_vectors(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            self.prime(missing, np.asarray(self.encoder.encode_passages(missing), np.float32))
        return np.stack([self._vectors[t] for t in texts])  # (n, dim)

    def _query_vector(self, query: str) -> np.ndarray:
        v = self._queries.get(query)
        if v is None:
            if len(self._queries) >= 4096:  # a bounded cache: queries repeat within a question, rarely across
                self._queries.clear()
            v = self._queries[query] = np.asarray(self.encoder.encode_queries([query]), np.float32)[0]
        return v

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        p = self.params
        s = bilinear_scores(self._query_vector(query)[None], self._item_vectors(texts), p.weight, p.scale, p.bias)
        return [float(x) for x in s[0]]


__all__ = ["META", "WEIGHTS", "BilinearParams", "BilinearSimilarity", "bilinear_scores"]
