"""A deterministic bag-of-words hashing encoder for tests (implements effirag.retrieval.base.Encoder).

Tokens of the entity-normalised text are hashed into ``dim`` buckets and the counts L2-normalised, so cosine
similarity ≈ token overlap — enough to exercise dense code paths with hand-predictable rankings.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from effirag.retrieval.kg import normalize_entity


class HashEncoder:
    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hash-{dim}"

    def _enc(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), np.float32)  # (n_texts, dim)
        for i, t in enumerate(texts):
            for tok in normalize_entity(t).split():
                out[i, int(hashlib.md5(tok.encode()).hexdigest(), 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._enc(texts)

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._enc(texts)
