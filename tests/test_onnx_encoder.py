"""The ONNX Runtime / OpenVINO encoder engines against sentence-transformers on torch, on a tiny BERT built here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from effirag.errors import ConfigError
from effirag.retrieval.encoders import EncoderConfig, SentenceTransformerEncoder
from effirag.retrieval.onnx_encoder import require_runtime

TEXTS = [
    "the river flows past the old mill",
    "a",
    "who directed the film about the mill by the river and when did it premiere in the city",
    "mill river",
]


def tiny_st_model(folder: Path, pooling: str = "mean") -> Path:
    """A 2-layer BERT with a word-level vocabulary, laid out as a sentence-transformers folder (random weights)."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    words = sorted({w for t in TEXTS for w in t.split()})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(str(folder))
    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64
    )
    BertModel(cfg).save_pretrained(str(folder))
    (folder / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            ]
        )
    )
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 16, "do_lower_case": False}))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": 32,
                "pooling_mode_cls_token": pooling == "cls",
                "pooling_mode_mean_tokens": pooling == "mean",
                "pooling_mode_max_tokens": False,
            }
        )
    )
    return folder


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize("pooling", ["mean", "cls"])
@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_fp32_engines_give_torchs_vectors(tmp_path: Path, cache: Path, backend: str, pooling: str) -> None:
    """Same tokenizer, pooling and normalisation as sentence-transformers: vectors agree to float rounding, also with
    batches of 2 (length-sorted batching must put every row back in its place)."""
    pytest.importorskip("onnxruntime" if backend == "onnx" else "openvino")
    model = str(tiny_st_model(tmp_path / "m", pooling))
    ref = SentenceTransformerEncoder(EncoderConfig(model=model, backend="torch")).encode_passages(TEXTS)
    enc = SentenceTransformerEncoder(EncoderConfig(model=model, backend=backend, batch_size=2))
    got = enc.encode_passages(TEXTS)
    assert got.shape == ref.shape == (4, 32) and got.dtype == np.float32
    assert np.abs(got - ref).max() < 1e-5
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert enc.dim == 32 and enc.vectors_id == model
    assert list(cache.rglob("model.onnx")), "the export is cached under $XDG_CACHE_HOME/effirag/onnx"


def test_int8_engine_is_close_and_keyed_apart(tmp_path: Path, cache: Path) -> None:
    pytest.importorskip("onnxruntime")
    model = str(tiny_st_model(tmp_path / "m"))
    ref = SentenceTransformerEncoder(EncoderConfig(model=model, backend="torch")).encode_passages(TEXTS)
    enc = SentenceTransformerEncoder(EncoderConfig(model=model, backend="onnx-int8"))
    got = enc.encode_passages(TEXTS)
    cos = (got * ref).sum(axis=1)
    assert cos.min() > 0.95 and np.abs(got - ref).max() > 1e-6  # quantised: close, not identical
    assert enc.name == model and enc.vectors_id == model + "+int8"


def test_missing_runtime_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import now raises ImportError
    with pytest.raises(ConfigError) as e:
        require_runtime("onnx-int8")
    msg = str(e.value)
    assert "pip install onnxruntime" in msg and "extra 'onnx'" in msg and "\n" not in msg
    assert "[" not in msg  # the CLI prints errors through rich, which would eat a bracketed extra as markup


def test_backend_is_validated() -> None:
    with pytest.raises(ConfigError, match="tensorrt"):
        EncoderConfig(backend="tensorrt")
    with pytest.raises(ConfigError, match="cuda"):
        EncoderConfig(backend="onnx", device="cuda")
