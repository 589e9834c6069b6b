"""The passage embeddings shipped for the demo world (``checkpoints/demo-embeddings``): they are the demo world's, made
by the default encoder, and the demo's index build reuses them only when their key matches."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from effirag.cli.demo import SHIPPED_EMBEDDINGS, _seed_embeddings
from effirag.data import load_corpus
from effirag.retrieval.dense import EMBEDDINGS_FILE, EMBEDDINGS_META, cache_key, encode_to_memmap
from effirag.retrieval.encoders import EncoderConfig, HashingEncoder, SentenceTransformerEncoder
from effirag.retrieval.index import build_index, passage_text
from effirag.types import Passage

SHIPPED = Path(__file__).resolve().parents[1] / SHIPPED_EMBEDDINGS


def test_shipped_embeddings_are_the_demo_worlds_minilm_vectors(tmp_path: Path) -> None:
    """The key names the demo world's passage texts (checksum of all 3,000) and the bundled MiniLM; sampled rows are
    MiniLM's vectors of those passages (torch engine: the ONNX build agrees with it to ~2e-7)."""
    from effirag.world import generate_world, load_world_config

    generate_world(load_world_config("demo", seed=0), tmp_path / "world")
    texts = [passage_text(p) for p in load_corpus(tmp_path / "world" / "corpus.jsonl").passages]
    enc = SentenceTransformerEncoder(EncoderConfig(backend="torch")).load()
    key = json.loads((SHIPPED / EMBEDDINGS_META).read_text("utf-8"))
    assert key == {"key": cache_key(enc, texts), "rows_done": len(texts)}
    shipped = np.load(SHIPPED / EMBEDDINGS_FILE, allow_pickle=False)
    assert shipped.dtype == np.float32 and shipped.shape == (3000, 384)
    rows = [0, 1, 1499, 2999]
    np.testing.assert_allclose(shipped[rows], enc.encode_passages([texts[i] for i in rows]), atol=1e-5)


def _passages(n: int, word: str) -> list[Passage]:
    return [Passage(f"p{i}", f"T{i}", f"{word} number {i} of the corpus") for i in range(n)]


def test_the_build_reuses_matching_embeddings_and_encodes_otherwise(tmp_path: Path) -> None:
    passages = _passages(5, "river")
    enc = HashingEncoder()
    encode_to_memmap(enc, [passage_text(p) for p in passages], tmp_path / "shipped")
    made = np.load(tmp_path / "shipped" / EMBEDDINGS_FILE)

    _seed_embeddings(tmp_path / "shipped", tmp_path / "a" / "dense", enc, passages)
    calls = enc.calls
    build_index(passages, tmp_path / "a", encoder=enc)
    assert enc.calls == calls  # nothing encoded: the shipped rows were reused
    np.testing.assert_array_equal(np.load(tmp_path / "a" / "dense" / EMBEDDINGS_FILE), made)

    other = _passages(5, "mill")  # another world: not copied, the build encodes
    _seed_embeddings(tmp_path / "shipped", tmp_path / "b" / "dense", enc, other)
    assert not (tmp_path / "b" / "dense").exists()
    build_index(other, tmp_path / "b", encoder=enc)
    assert enc.calls > calls
