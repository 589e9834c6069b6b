"""A persisted retrieval index: one folder, a manifest, safe formats only.

Layout of ``DIR``::

    manifest.json        what was built: corpus checksum and counts, encoder, prefixes, dim, settings, file checksums
    passages.jsonl       {"id", "title", "text"} per row, in index row order
    sparse/              bm25s arrays (.npy, allow_pickle=False) and json
    dense/               embeddings.npy (+ embeddings.json cache key) and faiss.index (FAISS's write_index format)
    kg/                  the knowledge graph, written by :class:`effirag.retrieval.kg.KnowledgeGraph`

Loading refuses a stale, corrupt or altered index with :class:`~effirag.errors.IndexMismatchError` naming the file and
what differs: the manifest must list every file the index format has for its parts (:func:`expected_files`, so a file
cannot escape checking by being dropped from the list), only paths inside the folder, and a ``settings_sha256`` over
every setting that changes results (corpus checksum, BM25 k1/b, encoder and prefixes, FAISS and graph settings, the
file checksums); each file must have its recorded size and SHA-256, and the BM25 settings file must agree with the
manifest.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from effirag import __version__
from effirag.config import option
from effirag.data.io import iter_jsonl
from effirag.errors import DataError, IndexMismatchError
from effirag.retrieval.base import Encoder
from effirag.retrieval.dense import EMBEDDINGS_FILE, DenseConfig, DenseIndex, texts_checksum
from effirag.retrieval.kg import KnowledgeGraph
from effirag.retrieval.sparse import BM25Config, BM25Index
from effirag.types import Passage, Triplet

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
PASSAGES = "passages.jsonl"
FORMAT_VERSION = 2


@dataclass(frozen=True)
class IndexConfig:
    sparse: bool = option(True, help="Build the BM25 index.")
    dense: bool = option(True, help="Encode passages and build the FAISS index.")
    bm25: BM25Config = option(help="BM25 settings.", factory=BM25Config)
    faiss: DenseConfig = option(help="FAISS and streaming settings.", factory=DenseConfig)


def passage_text(p: Passage) -> str:
    """What is indexed for a passage: HippoRAG's key, ``title + "\\n" + text`` (just the text when untitled)."""
    return p.key if p.title else p.text


def corpus_checksum(passages: Sequence[Passage]) -> str:
    """SHA-256 over (id, title, text) of every passage in order."""
    return texts_checksum([f"{p.id}\t{p.title}\n{p.text}" for p in passages])


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


_UNSIGNED = frozenset({"effirag_version", "created", "corpus_path", "settings_sha256"})


@dataclass
class IndexManifest:
    """The contents of ``manifest.json``."""

    n_passages: int
    corpus_sha256: str
    sparse: dict[str, Any] | None
    dense: dict[str, Any] | None
    kg: dict[str, Any] | None
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    corpus_path: str = ""
    effirag_version: str = __version__
    created: str = ""
    format: int = FORMAT_VERSION
    settings_sha256: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def settings_digest(self) -> str:
        """SHA-256 of everything that changes what the index returns (all fields but the version, date, corpus path
        and this digest itself), as canonical JSON."""
        keep = {k: v for k, v in self.to_dict().items() if k not in _UNSIGNED}
        return hashlib.sha256(json.dumps(keep, sort_keys=True, ensure_ascii=True).encode("utf-8")).hexdigest()

    @classmethod
    def read(cls, folder: Path) -> IndexManifest:
        path = folder / MANIFEST
        if not folder.is_dir():
            raise IndexMismatchError(f"index folder {folder} does not exist (build it with `effirag index build`)")
        if not path.is_file():
            raise IndexMismatchError(
                f"{path} is missing: {folder} is not an EffiRAG index (or its build did not finish)"
            )
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT_VERSION:
                raise IndexMismatchError(
                    f"{path}: index format {data.get('format')!r}, this EffiRAG reads format {FORMAT_VERSION}: "
                    "rebuild it"
                )
            manifest = cls(**data)
        except (json.JSONDecodeError, TypeError, AttributeError) as e:
            raise IndexMismatchError(f"{path} is corrupt: {e}") from e
        if manifest.settings_sha256 != manifest.settings_digest():
            raise IndexMismatchError(
                f"{path}: its settings or file list were edited after the build (settings_sha256 differs): rebuild it"
            )
        return manifest


@dataclass
class LoadedIndex:
    """Everything a retriever needs from an index folder."""

    folder: Path
    manifest: IndexManifest
    passages: list[Passage]
    sparse: BM25Index | None
    dense: DenseIndex | None
    kg: KnowledgeGraph | None = None

    def dense_embeddings(self) -> np.ndarray | None:
        """Passage embeddings (n_passages, dim) as a read-only memmap, or None without a dense index."""
        if self.dense is None:
            return None
        return np.load(self.folder / "dense" / EMBEDDINGS_FILE, mmap_mode="r", allow_pickle=False)


def _write_passages(path: Path, passages: Sequence[Passage]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for p in passages:
            f.write(json.dumps({"id": p.id, "title": p.title, "text": p.text}, ensure_ascii=False) + "\n")


def _read_passages(path: Path) -> list[Passage]:
    out = []
    try:
        for _line, r in iter_jsonl(path):
            out.append(Passage(str(r["id"]), str(r["title"]), str(r["text"])))
    except (DataError, KeyError, TypeError) as e:
        raise IndexMismatchError(f"{path} is corrupt: {e}") from e
    return out


def vectors_id(encoder: Encoder | None) -> str | None:
    """What embeddings made by ``encoder`` depend on: its name, plus "+int8" for quantised engines (whose vectors
    differ from the fp32 ones; fp32 engines of one model agree to float rounding and share the name)."""
    return None if encoder is None else str(getattr(encoder, "vectors_id", encoder.name))


def _build_kg(
    folder: Path,
    passages: Sequence[Passage],
    triplets: Sequence[Triplet],
    encoder: Encoder | None,
    show_progress: bool = False,
) -> KnowledgeGraph:
    """The knowledge graph for ``triplets``; an existing ``folder`` graph over the same passages, triplets and
    encoder is reused (entity and triplet embeddings are not recomputed)."""
    if (folder / "manifest.json").is_file():
        try:
            old = KnowledgeGraph.load(folder)
        except IndexMismatchError:
            old = None
        if (
            old is not None
            and old.encoder_name == vectors_id(encoder)
            and [p.id for p in old.passages] == [p.id for p in passages]
            and old.triplets == [t for t in triplets if t in set(old.triplets)]
            and len(old.triplets) + old.dropped == len(triplets)
        ):
            log.info("knowledge graph in %s is up to date: reusing its embeddings", folder)
            return old
    kg = KnowledgeGraph.build(passages, triplets, encoder=encoder, show_progress=show_progress)
    kg.encoder_name = vectors_id(encoder)
    return kg


def build_index(
    passages: Sequence[Passage],
    out: str | Path,
    *,
    config: IndexConfig | None = None,
    encoder: Encoder | None = None,
    triplets: Sequence[Triplet] | None = None,
    kg: KnowledgeGraph | None = None,
    corpus_path: str = "",
    show_progress: bool = False,
    replace: bool = False,
) -> IndexManifest:
    """Build every requested part into ``out`` and write the manifest last (a folder without one is unfinished).

    An index already in ``out`` that fails its checks or holds another corpus is refused (:func:`refuse_overwrite`)
    unless ``replace`` (the CLI's ``--rebuild``): a mistyped folder must not cost the user an index.

    Cached passage embeddings already in ``out/dense`` are reused when encoder, prefix and passages match. The
    knowledge graph is ``kg`` when given (built by the caller, e.g. :meth:`KnowledgeGraph.from_openie`), else built from
    ``triplets`` (embedded with ``encoder``), else absent.
    """
    config = config or IndexConfig()
    if not passages:
        raise DataError("the corpus has no passages", path=corpus_path or None)
    if config.dense and encoder is None:
        raise ValueError("a dense index needs an encoder (or IndexConfig(dense=False))")
    folder = Path(out)
    if not replace:
        refuse_overwrite(folder, passages)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MANIFEST).unlink(missing_ok=True)  # an index being rebuilt is not valid until the new manifest lands
    texts = [passage_text(p) for p in passages]
    _write_passages(folder / PASSAGES, passages)
    files = [folder / PASSAGES]
    sparse_meta = dense_meta = kg_meta = None
    if config.sparse:
        files += BM25Index(config.bm25).build(texts, show_progress).save(folder / "sparse")
        sparse_meta = asdict(config.bm25)
    if config.dense:
        assert encoder is not None
        dense = DenseIndex.build(encoder, texts, folder / "dense", config.faiss, show_progress)
        files += [dense.save(folder / "dense"), folder / "dense" / "embeddings.npy"]
        dense_meta = {
            "encoder": encoder.name,
            "backend": getattr(encoder, "backend", None),
            "dim": encoder.dim,
            "query_prefix": getattr(encoder, "query_prefix", ""),
            "passage_prefix": getattr(encoder, "passage_prefix", ""),
            **asdict(config.faiss),
        }
    if kg is None and triplets is not None:
        kg = _build_kg(folder / "kg", passages, triplets, encoder, show_progress)
    if kg is not None:
        if [p.id for p in kg.passages] != [p.id for p in passages]:
            raise IndexMismatchError("the knowledge graph was built over other passages than the index's corpus")
        kg.save(folder / "kg")
        files += sorted(p for p in (folder / "kg").rglob("*") if p.is_file())
        kg_meta = {
            "n_entities": len(kg.entity_names),
            "n_triplets": len(kg.triplets),
            "dropped": kg.dropped,
            "encoder": kg.encoder_name,
        }
    manifest = IndexManifest(
        n_passages=len(passages),
        corpus_sha256=corpus_checksum(passages),
        sparse=sparse_meta,
        dense=dense_meta,
        kg=kg_meta,
        files={str(f.relative_to(folder)): {"bytes": f.stat().st_size, "sha256": file_sha256(f)} for f in files},
        corpus_path=corpus_path,
        created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    )
    manifest.settings_sha256 = manifest.settings_digest()
    (folder / MANIFEST).write_text(json.dumps(manifest.to_dict(), indent=1), encoding="utf-8")
    log.info("index written to %s (%d passages)", folder, len(passages))
    return manifest


def refuse_overwrite(folder: Path, passages: Sequence[Passage] | None = None) -> None:
    """Raise :class:`IndexMismatchError` when ``folder`` holds an index (a manifest) that fails its checks or was built
    from other passages than ``passages``; a folder without a manifest (empty, or an unfinished build) passes."""
    if not (folder / MANIFEST).is_file():
        return
    try:
        load_index(folder, corpus=passages)
    except IndexMismatchError as e:
        raise IndexMismatchError(
            f"{e}. Refusing to build over the index in {folder}: pass --rebuild (build_index(replace=True)) to replace "
            "it, or choose another folder"
        ) from e


def expected_files(manifest: IndexManifest) -> list[str]:
    """The files the index format has for the parts the manifest records (each must be listed, and so checked)."""
    from effirag.retrieval.dense import FAISS_FILE
    from effirag.retrieval.sparse import BM25_FILES, CONFIG_FILE

    files = [PASSAGES]
    if manifest.sparse is not None:
        files += [f"sparse/{f}" for f in (*BM25_FILES, CONFIG_FILE)]
    if manifest.dense is not None:
        files += [f"dense/{FAISS_FILE}", f"dense/{EMBEDDINGS_FILE}"]
    if manifest.kg is not None:
        files += [f"kg/{f}" for f in ("manifest.json", "passages.jsonl", "entities.jsonl", "triplets.jsonl")]
    return files


def _inside(folder: Path, rel: str) -> Path:
    """``folder / rel`` for a relative path that stays inside ``folder``; anything else is refused."""
    parts = Path(rel).parts
    if not rel or Path(rel).is_absolute() or ".." in parts or "\\" in rel:
        raise IndexMismatchError(f"{folder / MANIFEST}: file path {rel!r} is not a plain path inside the index")
    return folder / rel


def verify_files(folder: Path, manifest: IndexManifest, checksums: bool = True) -> None:
    """Every file the format expects is listed; every listed file is inside the folder, present, with its recorded
    size (and SHA-256 when ``checksums``); the BM25 settings file agrees with the manifest."""
    unlisted = [f for f in expected_files(manifest) if f not in manifest.files]
    if unlisted:
        raise IndexMismatchError(
            f"{folder / MANIFEST}: does not list {', '.join(unlisted)}, which the index format requires: rebuild it"
        )
    for rel, meta in manifest.files.items():
        path = _inside(folder, rel)
        if not path.is_file():
            raise IndexMismatchError(f"{path} is missing (listed in {folder / MANIFEST})")
        size = path.stat().st_size
        if size != meta["bytes"]:
            raise IndexMismatchError(f"{path} has {size} bytes, the manifest says {meta['bytes']}: stale or corrupt")
        if checksums and file_sha256(path) != meta["sha256"]:
            raise IndexMismatchError(f"{path}: SHA-256 differs from the manifest: the file changed after the build")
    _check_bm25_settings(folder, manifest)


def _check_bm25_settings(folder: Path, manifest: IndexManifest) -> None:
    from effirag.retrieval.sparse import CONFIG_FILE

    if manifest.sparse is None:
        return
    path = folder / "sparse" / CONFIG_FILE
    try:
        on_disk = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise IndexMismatchError(f"{path}: unreadable BM25 settings ({e})") from e
    if on_disk != manifest.sparse:
        raise IndexMismatchError(f"{path}: BM25 settings {on_disk} differ from the manifest's {manifest.sparse}")


def load_index(
    folder: str | Path, *, verify: bool = True, encoder_name: str | None = None, corpus: Sequence[Passage] | None = None
) -> LoadedIndex:
    """Open an index folder, refusing a stale, corrupt or mismatched one with :class:`IndexMismatchError`.

    ``encoder_name``: the encoder the caller will embed queries with; must equal the index's. ``corpus``: passages
    the caller expects the index to hold; must match the recorded checksum.
    """
    d = Path(folder)
    manifest = IndexManifest.read(d)
    verify_files(d, manifest, checksums=verify)
    if corpus is not None and corpus_checksum(corpus) != manifest.corpus_sha256:
        raise IndexMismatchError(
            f"{d / MANIFEST}: the index was built from another corpus ({manifest.n_passages} passages from "
            f"{manifest.corpus_path or 'an unnamed file'}; given {len(corpus)} passages): rebuild it"
        )
    if encoder_name is not None and manifest.dense is not None and manifest.dense["encoder"] != encoder_name:
        raise IndexMismatchError(
            f"{d / MANIFEST}: dense index built with encoder {manifest.dense['encoder']!r}, "
            f"but queries would be encoded with {encoder_name!r}"
        )
    passages = _read_passages(d / PASSAGES)
    if len(passages) != manifest.n_passages or corpus_checksum(passages) != manifest.corpus_sha256:
        raise IndexMismatchError(f"{d / PASSAGES}: passages differ from the manifest's corpus checksum")
    sparse = BM25Index.load(d / "sparse") if manifest.sparse is not None else None
    dense = None
    if manifest.dense is not None:
        dcfg = DenseConfig(**{k: v for k, v in manifest.dense.items() if k in DenseConfig.__dataclass_fields__})
        dense = DenseIndex.load(d / "dense", dcfg)
        if dense.n_docs != manifest.n_passages or dense.dim != manifest.dense["dim"]:
            raise IndexMismatchError(
                f"{d / 'dense' / 'faiss.index'}: {dense.n_docs} vectors of dim {dense.dim}, manifest says "
                f"{manifest.n_passages} of dim {manifest.dense['dim']}"
            )
    for part, idx in (("sparse", sparse),):
        if idx is not None and idx.n_docs != manifest.n_passages:
            raise IndexMismatchError(f"{d / part}: {idx.n_docs} documents, manifest says {manifest.n_passages}")
    kg = KnowledgeGraph.load(d / "kg") if manifest.kg is not None else None
    return LoadedIndex(d, manifest, passages, sparse, dense, kg)
