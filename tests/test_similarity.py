"""Similarity scorers and the sigmoid used by process rewards and KAG relevance edges."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from effirag.errors import ConfigError
from effirag.retrieval.base import Similarity
from effirag.retrieval.encoders import HashingEncoder
from effirag.retrieval.similarity import (
    BiEncoderSimilarity,
    CrossEncoderSimilarity,
    LexicalF1Similarity,
    sigmoid,
)


def test_sigmoid_by_hand() -> None:
    """σ(0) = 1/2; σ(ln 3) = 1/(1 + 1/3) = 3/4; σ(−ln 3) = 1/(1 + 3) = 1/4; σ(±800) saturates without overflow."""
    assert sigmoid(0.0) == 0.5
    assert sigmoid(math.log(3)) == pytest.approx(0.75)
    assert sigmoid(-math.log(3)) == pytest.approx(0.25)
    assert sigmoid(800.0) == 1.0 and sigmoid(-800.0) == pytest.approx(0.0)
    arr = sigmoid(np.array([0.0, math.log(3), -math.log(3), -800.0]))
    np.testing.assert_allclose(arr, [0.5, 0.75, 0.25, 0.0], atol=1e-12)


def test_lexical_f1_by_hand() -> None:
    """query "who founded the company" → tokens {who, founded, company} ("the" is dropped by normalisation).

    text "the company was founded in 1602" → {company, was, founded, in, 1602}: overlap 2, precision 2/5,
    recall 2/3, F1 = 2·(2/5)(2/3)/(2/5 + 2/3) = (8/15)/(16/15) = 1/2. A text sharing nothing scores 0.
    """
    s = LexicalF1Similarity()
    assert isinstance(s, Similarity)
    assert s.score("who founded the company", ["the company was founded in 1602", "bananas"]) == [
        pytest.approx(0.5),
        0.0,
    ]
    assert s.score("q", []) == []


def test_bi_encoder_cosine() -> None:
    """Hashing encoder: identical bags → cosine 1; disjoint bags (no bucket collision here) → 0."""
    sim = BiEncoderSimilarity(HashingEncoder(dim=4096))
    scores = sim.score("red apple", ["apple red", "blue sky", "red sky"])
    assert scores[0] == pytest.approx(1.0)
    assert scores[1] == pytest.approx(0.0)
    assert scores[2] == pytest.approx(0.5)  # one shared token of two, both sides of norm √2: 1/(√2·√2)
    assert sim.score("x", []) == []


def test_cross_encoder_needs_a_local_folder(tmp_path: Path) -> None:
    ce = CrossEncoderSimilarity(tmp_path / "nowhere")  # cheap: nothing loads yet
    with pytest.raises(ConfigError, match="nowhere"):
        ce.score("q", ["t"])
