"""Length-bucketed encoder batches: the planner's worked examples, and the ONNX engine's passes and vectors."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from effirag.errors import ConfigError
from effirag.retrieval.encoders import EncoderConfig, SentenceTransformerEncoder
from effirag.retrieval.length_batches import plan_length_batches
from test_onnx_encoder import TEXTS, tiny_st_model


def test_docstring_example() -> None:
    """Sorted 0 (10), 4 (10), 2 (9), 1 (4), 3 (3). With waste 0.25: 3×10 = 30 ≤ 1.25×29 keeps 2 with the tens;
    [1, 3]: 2×4 = 8 ≤ 1.25×7 = 8.75 stays together. With waste 0.1: 8 > 7.7 splits it."""
    assert plan_length_batches([10, 4, 9, 3, 10], 3, 0.25, 1) == [[0, 4, 2], [1, 3]]
    assert plan_length_batches([10, 4, 9, 3, 10], 3, 0.1, 1) == [[0, 4, 2], [1], [3]]


def test_min_batch_holds_off_the_padding_cut() -> None:
    """Lengths [40, 10, 10, 10]: with min_batch 1 the 40 goes alone (2×40 = 80 > 1.2×50 = 60), then the tens fit
    (3×10 ≤ 1.2×30). With min_batch 2 the 10 joins the 40 unconditionally; the next 10: 3×40 = 120 > 1.2×60 = 72
    cuts, leaving [2, 3]."""
    assert plan_length_batches([40, 10, 10, 10], 8, 0.2, 1) == [[0], [1, 2, 3]]
    assert plan_length_batches([40, 10, 10, 10], 8, 0.2, 2) == [[0, 1], [2, 3]]


def test_infinite_waste_gives_fixed_chunks_of_the_sorted_order() -> None:
    """Lengths [1, 5, 3, 4, 2] sorted by decreasing length: 1 (5), 3 (4), 2 (3), 4 (2), 0 (1); chunks of 2."""
    assert plan_length_batches([1, 5, 3, 4, 2], 2, math.inf) == [[1, 3], [2, 4], [0]]


def test_every_index_once_and_caps_hold() -> None:
    rng = np.random.default_rng(0)
    lengths = [int(x) for x in rng.integers(3, 60, size=200)]
    batches = plan_length_batches(lengths, 16, 0.2, 4)
    assert sorted(i for b in batches for i in b) == list(range(200))
    for b in batches:
        assert len(b) <= 16
        padded, real = len(b) * lengths[b[0]], sum(lengths[i] for i in b)
        assert len(b) <= 4 or padded <= 1.2 * real  # past min_batch the padding bound holds
        assert lengths[b[0]] == max(lengths[i] for i in b)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="max_batch 0"):
        plan_length_batches([1], 0)
    with pytest.raises(ValueError, match="max_waste -1"):
        plan_length_batches([1], 4, -1)
    with pytest.raises(ConfigError, match="max_padding"):
        EncoderConfig(max_padding=-0.5)


def test_onnx_engine_pads_each_pass_to_its_own_longest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TEXTS are 1, 2, 7 and 18 words (3, 4, 9, 16 tokens with [CLS]/[SEP], truncated at 16): one padded pass of
    4 × 16 = 64 tokens with fixed batches; with max_padding 0.2 and MIN_BATCH 4 still one pass (min_batch not
    reached), so MIN_BATCH is lowered to 1 here: passes [16], [9], [4, 3] = 16 + 9 + 8 = 33 tokens. Vectors agree."""
    pytest.importorskip("onnxruntime")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    model = str(tiny_st_model(tmp_path / "m"))
    texts = [TEXTS[2], TEXTS[0], TEXTS[3], TEXTS[1]]
    out = {}
    shapes: dict[float, list[tuple[int, ...]]] = {}
    for waste in (math.inf, 0.2):
        enc = SentenceTransformerEncoder(EncoderConfig(model=model, backend="onnx", max_padding=waste)).load()
        runner = enc.model
        runner.MIN_BATCH = 1
        inner, seen = runner.run, shapes.setdefault(waste, [])
        runner.run = lambda feeds, inner=inner, seen=seen: seen.append(feeds["input_ids"].shape) or inner(feeds)
        out[waste] = enc.encode_passages(texts)
    assert shapes[math.inf] == [(4, 16)]
    assert shapes[0.2] == [(1, 16), (1, 9), (2, 4)]
    assert np.abs(out[0.2] - out[math.inf]).max() < 1e-5
