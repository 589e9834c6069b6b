"""Reciprocal Rank Fusion, RouteRAG eq. 1: RRF(d) = Σ_m 1/(k + rank_m(d)), ranks 1-based."""

from __future__ import annotations

import pytest

from effirag.retrieval.fusion import rrf


def test_rrf_by_hand() -> None:
    """Rankings [a, b, c] and [b, c, d], k = 60:
    a = 1/61 = 0.016393; b = 1/62 + 1/61 = 0.032522; c = 1/63 + 1/62 = 0.032002; d = 1/63 = 0.015873.
    Order b, c, a, d.
    """
    out = rrf([["a", "b", "c"], ["b", "c", "d"]], k=60)
    assert [d for d, _ in out] == ["b", "c", "a", "d"]
    expect = {"a": 1 / 61, "b": 1 / 62 + 1 / 61, "c": 1 / 63 + 1 / 62, "d": 1 / 63}
    for d, s in out:
        assert s == pytest.approx(expect[d], abs=1e-15)


def test_k_zero_is_reciprocal_rank() -> None:
    """k = 0: x at ranks 1 and 3 → 1 + 1/3; y at 2 and 1 → 1/2 + 1 = 1.5 > 4/3; z at 3 and 2 → 1/3 + 1/2."""
    out = dict(rrf([["x", "y", "z"], ["y", "z", "x"]], k=0))
    assert out == pytest.approx({"x": 1 + 1 / 3, "y": 1.5, "z": 1 / 3 + 1 / 2})


def test_ties_are_deterministic() -> None:
    """a and b both score 1/61; a's best rank comes from the earlier ranking, so a first. d and c both score 1/62
    (rank 2): d's comes from ranking 0, c's from ranking 1, so d before c although "c" < "d"."""
    assert [d for d, _ in rrf([["a"], ["b"]])] == ["a", "b"]
    assert [d for d, _ in rrf([["b"], ["a"]])] == ["b", "a"]
    assert [d for d, _ in rrf([["x", "d"], ["x", "c"]])][1:] == ["d", "c"]


def test_empty_and_bad() -> None:
    assert rrf([]) == []
    assert rrf([[], []]) == []
    with pytest.raises(ValueError, match="twice"):
        rrf([["a", "a"]])
    with pytest.raises(ValueError, match="k=-1"):
        rrf([["a"]], k=-1)
