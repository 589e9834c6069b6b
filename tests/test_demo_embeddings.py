"""The passage embeddings shipped for the demo world (``checkpoints/demo-embeddings``): they are the demo world's, made
by the default encoder, and the demo's index build reuses them only when their key matches."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

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


class _Hashing384(HashingEncoder):
    """The demo's encoder in the CLI test: MiniLM's width, no model to load (the KAG build encodes 13,547 entity and
    triplet texts, minutes with MiniLM on this CPU)."""

    backend = "hashing"

    def __init__(self, *_args: object, **_kw: object) -> None:
        super().__init__(384)


@pytest.mark.slow
def test_cli_demo_show_prints_that_many_trajectories_and_embeddings_seed_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`effirag demo --show 2 --embeddings DIR` (DIR: the demo world's passage embeddings under the run's encoder)
    prints two questions' trajectories, and its index build copies DIR's rows instead of encoding the 3,000 passages:
    the index's embeddings are DIR's, byte for byte, and the build encoded no passage."""
    import re

    from typer.testing import CliRunner

    from effirag.cli.main import app
    from effirag.world import generate_world, load_world_config

    monkeypatch.setattr("effirag.retrieval.encoders.SentenceTransformerEncoder", _Hashing384)
    monkeypatch.setattr("effirag.retrieval.facade.SentenceTransformerEncoder", _Hashing384)
    work = tmp_path / "work"
    generate_world(load_world_config("demo", seed=0), work / "world")
    texts = [passage_text(p) for p in load_corpus(work / "world" / "corpus.jsonl").passages]
    made = encode_to_memmap(_Hashing384(), texts, tmp_path / "emb").copy()
    encoded: list[int] = []
    monkeypatch.setattr(_Hashing384, "encode_passages", lambda self, t: encoded.append(len(t)) or self._encode(t))
    args = ["demo", "--work", str(work), "--out", str(tmp_path / "out"), "--limit", "1", "--show", "2"]
    args += ["--skip-stats", "--reranker", "none", "--embeddings", str(tmp_path / "emb")]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    assert f"passage embeddings from {tmp_path / 'emb'} (key matches this world" in res.output
    np.testing.assert_array_equal(np.load(work / "index" / "dense" / EMBEDDINGS_FILE), made)
    assert 3000 not in encoded and sum(encoded) < 3000 + 13547  # entities and triplets only, never the passages
    assert "answering 2 questions" in res.output
    shown = re.findall(r"^test-[\w-]+ \((\d)-hop\) ", res.output, flags=re.MULTILINE)
    assert shown == ["1", "2"]  # one question per hop count, the first two
