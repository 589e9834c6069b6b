"""The persisted index: round trip, manifest, and refusal of stale, corrupt or mismatched folders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from effirag.errors import IndexMismatchError
from effirag.retrieval.encoders import HashingEncoder
from effirag.retrieval.facade import EffiRetriever
from effirag.retrieval.index import IndexConfig, build_index, load_index
from effirag.types import Passage, Triplet

PASSAGES = [
    Passage("p0", "Amsterdam", "Amsterdam is the capital of the Netherlands."),
    Passage("p1", "Rotterdam", "Rotterdam has the largest port in Europe."),
    Passage("p2", "Dutch East India Company", "The company was founded in 1602 in Amsterdam."),
    Passage("p3", "Tulip", "Tulips bloom in spring across the Netherlands."),
]
TRIPLETS = [
    Triplet("Amsterdam", "capital of", "Netherlands", "p0"),
    Triplet("Dutch East India Company", "founded in", "1602", "p2"),
    Triplet("Dutch East India Company", "based in", "Amsterdam", "p2"),
]


def _build(folder: Path, **kw: object) -> None:
    build_index(PASSAGES, folder, encoder=HashingEncoder(128), corpus_path="mem", **kw)  # type: ignore[arg-type]


def test_round_trip_same_results(tmp_path: Path) -> None:
    enc = HashingEncoder(128)
    build_index(PASSAGES, tmp_path, encoder=enc, triplets=TRIPLETS, corpus_path="mem")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["n_passages"] == 4
    assert manifest["dense"]["encoder"] == "hashing-128" and manifest["dense"]["dim"] == 128
    assert manifest["kg"]["n_triplets"] == 3
    assert {"passages.jsonl", "dense/faiss.index", "dense/embeddings.npy", "sparse/vocab.index.json"} <= set(
        manifest["files"]
    )
    assert all(len(m["sha256"]) == 64 for m in manifest["files"].values())
    loaded = load_index(tmp_path)
    assert [p.id for p in loaded.passages] == [p.id for p in PASSAGES]
    assert loaded.kg is not None and len(loaded.kg.triplets) == 3
    r = EffiRetriever(loaded, enc)
    for mode in ("passage", "sparse"):
        first = [(it.id, round(it.score, 5)) for it in r.retrieve("capital of the Netherlands", mode, 3).items]
        again = EffiRetriever(load_index(tmp_path), enc).retrieve("capital of the Netherlands", mode, 3).items
        assert first == [(it.id, round(it.score, 5)) for it in again]
        assert first[0][0] == "p0"
    np.testing.assert_array_equal(loaded.dense_embeddings(), enc.encode_passages([p.key for p in PASSAGES]))


def test_rebuild_reuses_embeddings(tmp_path: Path) -> None:
    enc = HashingEncoder(128)
    build_index(PASSAGES, tmp_path, encoder=enc, triplets=TRIPLETS)
    calls = enc.calls
    build_index(PASSAGES, tmp_path, encoder=enc, triplets=TRIPLETS)
    assert enc.calls == calls  # passages, entity names and triplets: nothing re-encoded
    load_index(tmp_path)


def test_missing_folder_and_manifest(tmp_path: Path) -> None:
    with pytest.raises(IndexMismatchError, match="does not exist"):
        load_index(tmp_path / "nope")
    with pytest.raises(IndexMismatchError, match=r"manifest\.json is missing"):
        load_index(tmp_path)


def test_tampered_file_is_named(tmp_path: Path) -> None:
    _build(tmp_path)
    emb = tmp_path / "dense" / "embeddings.npy"
    data = bytearray(emb.read_bytes())
    data[-1] ^= 0xFF  # same size, different content
    emb.write_bytes(bytes(data))
    with pytest.raises(IndexMismatchError, match=r"embeddings\.npy: SHA-256 differs"):
        load_index(tmp_path)
    (tmp_path / "passages.jsonl").write_text("")
    with pytest.raises(IndexMismatchError, match=r"passages\.jsonl has 0 bytes"):
        load_index(tmp_path, verify=False)


def test_missing_file_and_corrupt_manifest(tmp_path: Path) -> None:
    _build(tmp_path)
    (tmp_path / "sparse" / "params.index.json").unlink()
    with pytest.raises(IndexMismatchError, match=r"params\.index\.json is missing"):
        load_index(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(IndexMismatchError, match="corrupt"):
        load_index(tmp_path)


def test_mismatched_encoder_and_corpus(tmp_path: Path) -> None:
    _build(tmp_path)
    with pytest.raises(IndexMismatchError, match=r"'hashing-128'.*'all-MiniLM-L6-v2'"):
        load_index(tmp_path, encoder_name="all-MiniLM-L6-v2")
    with pytest.raises(IndexMismatchError, match="another corpus"):
        load_index(tmp_path, corpus=PASSAGES[:3])


def test_sparse_only_index_needs_no_encoder(tmp_path: Path) -> None:
    build_index(PASSAGES, tmp_path, config=IndexConfig(dense=False))
    loaded = load_index(tmp_path)
    assert loaded.dense is None and loaded.sparse is not None
    assert not (tmp_path / "dense").exists()


def test_no_pickle_anywhere(tmp_path: Path) -> None:
    build_index(PASSAGES, tmp_path, encoder=HashingEncoder(128), triplets=TRIPLETS)
    for f in tmp_path.rglob("*.npy"):
        np.load(f, allow_pickle=False)
    for f in tmp_path.rglob("*.json"):
        json.loads(f.read_text())


def test_every_build_stage_shows_progress_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """BM25, passage encoding, graph linking and entity/triplet encoding each draw a bar on stderr; stdout stays
    clean, and bm25s's own DEBUG logger is quieted."""
    import logging

    build_index(PASSAGES, tmp_path, encoder=HashingEncoder(64), triplets=TRIPLETS, show_progress=True)
    out, err = capsys.readouterr()
    assert out == ""
    for stage in ("Split strings", "encode passages", "graph: link triplets", "encode entities", "encode triplets"):
        assert stage in err, stage
    assert logging.getLogger("bm25s").getEffectiveLevel() >= logging.WARNING


def test_quantised_vectors_are_cached_apart(tmp_path: Path) -> None:
    """An int8 engine's embeddings differ from the fp32 ones: neither cache (passages, graph) is reused across them."""

    class Int8Hashing(HashingEncoder):
        vectors_id = "hashing-64+int8"

    build_index(PASSAGES, tmp_path, encoder=HashingEncoder(64), triplets=TRIPLETS)
    q8 = Int8Hashing(64)
    build_index(PASSAGES, tmp_path, encoder=q8, triplets=TRIPLETS)
    assert q8.calls == 3  # passages, entities and triplets were all encoded again
    assert json.loads((tmp_path / "manifest.json").read_text())["kg"]["encoder"] == "hashing-64+int8"
