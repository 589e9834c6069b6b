"""Dense retrieval: passage embeddings streamed to an ``.npy`` memmap, searched with FAISS.

Encoding writes chunk by chunk into ``embeddings.npy`` (plain file writes at row offsets), so memory stays
at one batch plus the FAISS index whatever the corpus size. A sidecar ``embeddings.json`` records the cache key (encoder
name, passage prefix, dimension, checksum of the passage texts) and how many rows are done: a rebuild with the same key
re-encodes nothing, and an interrupted encode resumes where it stopped.

FAISS: ``IndexFlatIP`` (exact inner product = cosine on unit vectors) by default, ``IndexHNSWFlat`` with the inner
product metric as the approximate option. The index is saved with FAISS's own ``write_index`` format.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from effirag.config import check, option
from effirag.errors import IndexMismatchError
from effirag.retrieval.base import Encoder

log = logging.getLogger(__name__)

EMBEDDINGS_FILE = "embeddings.npy"
EMBEDDINGS_META = "embeddings.json"
FAISS_FILE = "faiss.index"
FAISS_TYPES = ("flat", "hnsw")


@dataclass(frozen=True)
class DenseConfig:
    index_type: str = option("flat", help="FAISS index: flat (exact inner product) or hnsw (approximate).")
    hnsw_m: int = option(32, help="HNSW: neighbours per node.")
    hnsw_ef_construction: int = option(200, help="HNSW: candidate list size while building.")
    hnsw_ef_search: int = option(128, help="HNSW: candidate list size while searching (recall/speed trade-off).")
    chunk_rows: int = option(512, help="Rows encoded (and added to FAISS) per chunk while streaming.")

    def __post_init__(self) -> None:
        check(self.index_type in FAISS_TYPES, self, "index_type", f"known: {', '.join(FAISS_TYPES)}")
        check(self.hnsw_m > 1, self, "hnsw_m", "must be > 1")
        check(self.hnsw_ef_construction > 0, self, "hnsw_ef_construction", "must be > 0")
        check(self.hnsw_ef_search > 0, self, "hnsw_ef_search", "must be > 0")
        check(self.chunk_rows > 0, self, "chunk_rows", "must be > 0")


def texts_checksum(texts: Sequence[str]) -> str:
    """SHA-256 over the texts in order (length-prefixed, so ``["ab", "c"]`` and ``["a", "bc"]`` differ)."""
    h = hashlib.sha256()
    for t in texts:
        b = t.encode("utf-8")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def cache_key(encoder: Encoder, texts: Sequence[str]) -> dict[str, Any]:
    """What the cached embeddings depend on: the encoder (quantised engines apart), its passage prefix, the dimension
    and the passages."""
    return {
        "encoder": str(getattr(encoder, "vectors_id", encoder.name)),
        "passage_prefix": getattr(encoder, "passage_prefix", ""),
        "dim": int(encoder.dim),
        "n": len(texts),
        "texts_sha256": texts_checksum(texts),
    }


def encode_to_memmap(
    encoder: Encoder, texts: Sequence[str], folder: str | Path, chunk_rows: int = 512, show_progress: bool = False
) -> np.ndarray:
    """Embeddings of ``texts`` in ``folder/embeddings.npy`` (read-only memmap, shape (len(texts), dim), float32).

    Reuses the file when its key matches (nothing is encoded) and resumes a partial one; otherwise starts afresh.
    """
    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    key = cache_key(encoder, texts)
    meta_path, emb_path = d / EMBEDDINGS_META, d / EMBEDDINGS_FILE
    done = 0
    if meta_path.is_file() and emb_path.is_file():
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            meta = {}
        if meta.get("key") == key:
            done = int(meta.get("rows_done", 0))
        else:
            log.info("embedding cache %s was made for other passages or another encoder: re-encoding", emb_path)
    n, dim = len(texts), key["dim"]
    if done == 0 or not emb_path.is_file():
        done = 0
        with emb_path.open("wb") as f:  # header, then a sparse file of n x dim zeros filled in below
            np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (n, dim)})
            f.truncate(f.tell() + n * dim * 4)
    shape, offset = npy_layout(emb_path)
    if shape != (n, dim):
        raise IndexMismatchError(f"{emb_path}: shape {shape}, expected ({n}, {dim}) float32")
    if done < n:
        log.info("encoding %d passages (%d cached) with %s", n - done, done, encoder.name)
        bar = _progress(n, done, show_progress)
        # Plain file writes, not a memmap: written pages are not mapped into this process, so RSS stays one chunk.
        with emb_path.open("r+b") as f:
            for start in range(done, n, chunk_rows):
                stop = min(start + chunk_rows, n)
                block = np.ascontiguousarray(encoder.encode_passages(list(texts[start:stop])), dtype=np.float32)
                if block.shape != (stop - start, dim):
                    why = f"encoder {encoder.name} returned shape {block.shape}, expected {(stop - start, dim)}"
                    raise ValueError(why)
                f.seek(offset + start * dim * 4)
                f.write(block.tobytes())
                f.flush()
                meta_path.write_text(json.dumps({"key": key, "rows_done": stop}), encoding="utf-8")
                bar(stop - start)
        bar(0, close=True)
    else:
        log.info("all %d passage embeddings found in %s: nothing to encode", n, emb_path)
    meta_path.write_text(json.dumps({"key": key, "rows_done": n}), encoding="utf-8")
    return np.load(emb_path, mmap_mode="r")


def npy_layout(path: Path) -> tuple[tuple[int, ...], int]:
    """(shape, byte offset of the data) of a C-ordered float32 ``.npy`` file; anything else is refused."""
    with path.open("rb") as f:
        try:
            version = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read(f)
        except ValueError as e:
            raise IndexMismatchError(f"{path}: not a valid .npy file ({e})") from e
        if fortran or dtype != np.float32:
            raise IndexMismatchError(f"{path}: expected C-ordered float32, found {dtype} (fortran={fortran})")
        return tuple(shape), f.tell()


def iter_rows(path: Path, chunk_rows: int) -> Any:
    """Yield consecutive row blocks (≤ chunk_rows, dim) of a float32 ``.npy`` file read with plain file reads."""
    shape, offset = npy_layout(path)
    n, dim = shape
    with path.open("rb") as f:
        f.seek(offset)
        for start in range(0, n, chunk_rows):
            rows = min(chunk_rows, n - start)
            yield np.fromfile(f, dtype=np.float32, count=rows * dim).reshape(rows, dim)


def _progress(total: int, initial: int, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    bar = tqdm(total=total, initial=initial, desc="encode passages", unit="psg", disable=not enabled)

    def step(n: int, close: bool = False) -> None:
        bar.update(n)
        if close:
            bar.close()

    return step


def build_faiss(path: Path, config: DenseConfig) -> Any:
    """A FAISS inner-product index over the embeddings file, added chunk by chunk (only one chunk in RAM besides it)."""
    import faiss

    (n, dim), _ = npy_layout(path)
    index: Any
    if config.index_type == "hnsw":
        index = faiss.IndexHNSWFlat(dim, config.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = config.hnsw_ef_construction
        index.hnsw.efSearch = config.hnsw_ef_search
        for block in iter_rows(path, config.chunk_rows):
            index.add(block)
        return index
    # Flat: size the code buffer once and fill it in place. Chunked ``add`` would grow a std::vector by doubling,
    # holding up to ~3x the payload at a reallocation; here peak memory is the payload plus one chunk.
    index = faiss.IndexFlatIP(dim)
    index.codes.resize(n * dim * 4)
    codes = faiss.rev_swig_ptr(index.codes.data(), n * dim * 4).view(np.float32).reshape(n, dim)  # (n, dim) view
    start = 0
    for block in iter_rows(path, config.chunk_rows):
        codes[start : start + len(block)] = block
        start += len(block)
    index.ntotal = n
    return index


class DenseIndex:
    """FAISS over passage embeddings; :meth:`search` takes query embeddings and returns (rows, scores)."""

    def __init__(self, index: Any, config: DenseConfig) -> None:
        self.index = index
        self.config = config

    @property
    def n_docs(self) -> int:
        return int(self.index.ntotal)

    @property
    def dim(self) -> int:
        return int(self.index.d)

    @classmethod
    def build(
        cls,
        encoder: Encoder,
        texts: Sequence[str],
        folder: str | Path,
        config: DenseConfig | None = None,
        show_progress: bool = False,
    ) -> DenseIndex:
        """Encode (or reuse cached embeddings of) ``texts`` into ``folder`` and index them."""
        config = config or DenseConfig()
        if not texts:
            raise ValueError("cannot build a dense index over an empty corpus")
        encode_to_memmap(encoder, texts, folder, config.chunk_rows, show_progress)
        return cls(build_faiss(Path(folder) / EMBEDDINGS_FILE, config), config)

    def save(self, folder: str | Path) -> Path:
        import faiss

        path = Path(folder) / FAISS_FILE
        faiss.write_index(self.index, str(path))
        return path

    @classmethod
    def load(cls, folder: str | Path, config: DenseConfig | None = None) -> DenseIndex:
        import faiss

        path = Path(folder) / FAISS_FILE
        if not path.is_file():
            raise IndexMismatchError(f"dense index file {path} is missing")
        try:
            index = faiss.read_index(str(path))
        except RuntimeError as e:
            raise IndexMismatchError(f"{path}: FAISS cannot read it ({str(e).splitlines()[0]})") from e
        config = config or DenseConfig()
        if hasattr(index, "hnsw"):
            index.hnsw.efSearch = config.hnsw_ef_search
        return cls(index, config)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` rows for each query embedding: (rows (q, k) int64, scores (q, k) float32), best first.

        ``k`` is capped at the corpus size; HNSW may return fewer than k (padded with row −1, dropped by callers).
        """
        q = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)  # (q, dim)
        if q.shape[1] != self.dim:
            raise IndexMismatchError(f"query embeddings have dim {q.shape[1]}, the dense index has {self.dim}")
        scores, rows = self.index.search(q, min(k, self.n_docs))
        return rows.astype(np.int64), scores.astype(np.float32)
