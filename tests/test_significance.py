"""Paired significance tests: hand-worked cases, then parity with scipy.stats where scipy has the test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from effirag.errors import DataError
from effirag.eval.significance import mcnemar_exact, paired_bootstrap, wilcoxon_signed_rank


def test_bootstrap_two_pairs_by_hand() -> None:
    """a = [1, 0], b = [1, 1]: differences [0, 1], mean 0.5. A resample mean is 0 (both draws the first pair), 1 (both
    the second) or 0.5, with probabilities 1/4, 1/4, 1/2; with 4000 resamples both tails hold ~1000 draws, far more
    than the 2.5% (100) each quantile cuts off, so the interval is exactly [0, 1]."""
    iv = paired_bootstrap([1, 0], [1, 1], np.random.default_rng(0), n_resamples=4000)
    assert (iv.mean, iv.low, iv.high, iv.level) == (0.5, 0.0, 1.0, 0.95)


def test_bootstrap_constant_differences_collapse_and_seed_repeats() -> None:
    """Every difference 0.25 → every resample mean 0.25: the interval is the point [0.25, 0.25]."""
    iv = paired_bootstrap([0.5, 0.25, 0.0], [0.75, 0.5, 0.25], np.random.default_rng(1), n_resamples=50)
    assert (iv.mean, iv.low, iv.high) == (0.25, 0.25, 0.25)
    a = np.random.default_rng(7).random(30)
    b = np.random.default_rng(8).random(30)
    one = paired_bootstrap(a, b, np.random.default_rng(3), n_resamples=500)
    assert one == paired_bootstrap(a, b, np.random.default_rng(3), n_resamples=500)
    assert one != paired_bootstrap(a, b, np.random.default_rng(4), n_resamples=500)
    assert one.low < one.mean < one.high


def test_bootstrap_rejects_bad_input() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(DataError, match="equal length"):
        paired_bootstrap([1, 0], [1], rng)
    with pytest.raises(DataError, match="empty"):
        paired_bootstrap([], [], rng)
    with pytest.raises(DataError, match="level"):
        paired_bootstrap([1], [1], rng, level=1.0)


def test_mcnemar_by_hand() -> None:
    """A alone right once, B alone right 6 times, 3 concordant: n = 7, P(X ≤ 1) = (1 + 7)/2⁷ = 1/16 → p = 0.125.
    1 vs 1 discordant: P(X ≤ 1) for Bin(2, 1/2) = 3/4 → 2·3/4 capped at 1. No discordant pair: p = 1."""
    a = [1, 0, 0, 0, 0, 0, 0, 1, 1, 0]
    b = [0, 1, 1, 1, 1, 1, 1, 1, 1, 0]
    r = mcnemar_exact(a, b)
    assert (r.a_only, r.b_only, r.p_value) == (1, 6, 0.125)
    assert mcnemar_exact([1, 0], [0, 1]).p_value == 1.0
    assert mcnemar_exact([1, 0, 1], [1, 0, 1]).p_value == 1.0
    with pytest.raises(DataError, match="0 or 1"):
        mcnemar_exact([0.5], [1])


def test_wilcoxon_exact_by_hand() -> None:
    """Differences [1, 2, 3, −4]: W+ = 6, W− = 4; 11 of 16 sign patterns give W+ ≤ 6, 7 give W+ ≥ 6 → p = 14/16."""
    r = wilcoxon_signed_rank([0, 0, 0, 4], [1, 2, 3, 0])
    assert (r.statistic, r.n, r.method) == (4.0, 4, "exact")
    assert r.p_value == pytest.approx(0.875, abs=1e-12)


def test_wilcoxon_normal_by_hand() -> None:
    """Differences [1, 1, −1, 0]: zero dropped, n = 3, tied ranks 2, 2, 2, W+ = 4, W− = 2; mean 3, variance
    3.5 − (27 − 3)/48 = 3, z = 1/√3, p = erfc(z/√2) = 0.563703."""
    r = wilcoxon_signed_rank([5, 5, 5, 5], [6, 6, 4, 5])
    assert (r.statistic, r.n, r.method) == (2.0, 3, "normal")
    assert r.p_value == pytest.approx(math.erfc(1 / math.sqrt(6)), abs=1e-12)
    assert r.p_value == pytest.approx(0.563703, abs=1e-6)
    same = wilcoxon_signed_rank([3, 4], [3, 4])
    assert (same.n, same.p_value) == (0, 1.0)


# --- parity with scipy.stats ------------------------------------------------------------------------------------------
scipy_stats = pytest.importorskip("scipy.stats")

binary = st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1)), min_size=1, max_size=60)


@settings(max_examples=150, deadline=None)
@given(binary)
def test_mcnemar_matches_scipy_binomtest(pairs: list[tuple[int, int]]) -> None:
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    r = mcnemar_exact(a, b)
    n = r.a_only + r.b_only
    expected = 1.0 if n == 0 else scipy_stats.binomtest(r.b_only, n, 0.5).pvalue
    assert r.p_value == pytest.approx(expected, rel=1e-9, abs=1e-12)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 200)), min_size=1, max_size=80))
def test_wilcoxon_matches_scipy(pairs: list[tuple[int, int]]) -> None:
    """Counts with many ties and zeros: exact where scipy's auto is exact, else scipy's asymptotic (no correction)."""
    a = np.array([p[0] for p in pairs], dtype=float)
    b = np.array([p[1] for p in pairs], dtype=float)
    r = wilcoxon_signed_rank(a, b)
    if r.n == 0:
        assert r.p_value == 1.0
        return
    method = "exact" if r.method == "exact" else "asymptotic"
    ref = scipy_stats.wilcoxon(b, a, zero_method="wilcox", method=method)
    assert r.statistic == pytest.approx(float(ref.statistic))
    assert r.p_value == pytest.approx(float(ref.pvalue), rel=1e-7, abs=1e-12)
    if r.n == a.size <= 50 and np.unique(np.abs(b - a)).size == a.size:  # no zero, no tie: scipy's default is exact
        assert r.method == "exact"
        assert r.p_value == pytest.approx(float(scipy_stats.wilcoxon(b, a).pvalue), rel=1e-7)
