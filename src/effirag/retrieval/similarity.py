"""Relevance scorers behind the :class:`~effirag.retrieval.base.Similarity` protocol, and the sigmoid that maps them
into (0, 1).

- :class:`BiEncoderSimilarity` — cosine of the query and text embeddings (any :class:`Encoder`).
- :class:`CrossEncoderSimilarity` — a Hugging Face cross-encoder loaded from a local folder (raw logits).
- :class:`LexicalF1Similarity` — SQuAD token F1 between query and text, the model-free fallback.

Process rewards and TeaRAG's relevance edges (eq. 1–2) squash these scores with :func:`sigmoid`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from effirag.errors import ConfigError
from effirag.metrics import f1_score
from effirag.retrieval.base import Encoder


def sigmoid(x: float | np.ndarray) -> Any:
    """Logistic function σ(x) = 1 / (1 + e^(−x)), numerically stable for large |x|.

    TeaRAG (arXiv 2511.05385) §4.2.4 eq. 1–2 weight KAG relevance edges by σ(sim); its process reward normalises
    similarity the same way. Accepts a float (returns a float) or an array (element-wise).
    """
    if isinstance(x, np.ndarray):
        out = np.empty_like(x, dtype=np.float64)
        pos = x >= 0
        out[pos] = 1.0 / (1.0 + np.exp(-x[pos]))
        ex = np.exp(x[~pos])
        out[~pos] = ex / (1.0 + ex)
        return out
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    ex = math.exp(x)
    return ex / (1.0 + ex)


class BiEncoderSimilarity:
    """Cosine similarity of L2-normalised embeddings (the dot product), in [−1, 1]."""

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        q = np.asarray(self.encoder.encode_queries([query]), dtype=np.float32)  # (1, dim)
        t = np.asarray(self.encoder.encode_passages(list(texts)), dtype=np.float32)  # (n, dim)
        return [float(s) for s in (t @ q[0])]


class CrossEncoderSimilarity:
    """A cross-encoder reranker from a local Hugging Face folder: ``AutoModelForSequenceClassification`` with a single
    output (the relevance logit) and its tokenizer, e.g. ms-marco-MiniLM, BGE-reranker or ``effirag train
    cross-encoder``'s output. Scores are the raw logits (TeaRAG's eqs. 1-2 apply the sigmoid).

    ``__init__`` is cheap; :meth:`load` (or the first :meth:`score`) reads the weights. Nothing is downloaded: the path
    must be a directory holding the model. Pairs are scored ``batch_size`` at a time, truncated to ``max_length``
    tokens (the longer of query and text is cut first).
    """

    def __init__(self, path: str | Path, device: str = "cpu", batch_size: int = 32, max_length: int = 256) -> None:
        self.path = Path(path)
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length
        self._model: Any = None
        self._tokenizer: Any = None

    def load(self) -> CrossEncoderSimilarity:
        if self._model is not None:
            return self
        where = "CrossEncoderSimilarity"
        if not self.path.is_dir():
            raise ConfigError(where, "path", str(self.path), "not a directory holding a cross-encoder")
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(self.path))
            model = AutoModelForSequenceClassification.from_pretrained(str(self.path))
        except (OSError, ValueError) as e:
            raise ConfigError(where, "path", str(self.path), f"cannot load a cross-encoder: {e}") from e
        if model.config.num_labels != 1:
            raise ConfigError(
                where, "path", str(self.path), f"has {model.config.num_labels} outputs; a cross-encoder has 1 logit"
            )
        self._tokenizer, self._model = tokenizer, model.to(self.device).eval()
        return self

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        self.load()
        import torch

        out: list[float] = []
        with torch.inference_mode():
            for i in range(0, len(texts), self.batch_size):
                batch = list(texts[i : i + self.batch_size])
                enc = self._tokenizer(
                    [query] * len(batch),
                    batch,
                    padding=True,
                    truncation="longest_first",
                    max_length=self.max_length,
                    return_tensors="pt",
                ).to(self.device)
                logits = self._model(**enc).logits  # (batch, 1)
                out.extend(float(x) for x in logits[:, 0].float().cpu())
        return out


class LexicalF1Similarity:
    """SQuAD token F1 of query vs text (after :func:`effirag.metrics.normalize_answer`), in [0, 1]."""

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return [f1_score(t, query) for t in texts]
