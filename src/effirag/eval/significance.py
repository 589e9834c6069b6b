"""Significance of a difference between two systems evaluated on the same (paired) questions.

Three tests, one pure function each (numpy in, numbers out; randomness only through a ``numpy.random.Generator`` the
caller passes in):

- :func:`paired_bootstrap` — a percentile 95% interval for the mean of per-question differences (EM, F1): resample
  questions with replacement, keeping each question's pair together (Efron & Tibshirani 1993, ch. 13; Koehn 2004 for
  the paired use in NLP).
- :func:`mcnemar_exact` — McNemar's exact test for paired binary outcomes (EM hit or miss): under the null a
  discordant pair is equally likely to favour either system, so the number favouring B among the n discordant pairs is
  Binomial(n, 1/2); the two-sided p-value is 2·P(X ≤ min(b, c)), capped at 1 (McNemar 1947; the exact form as in
  ``scipy.stats.binomtest(b, b + c, 0.5)``).
- :func:`wilcoxon_signed_rank` — Wilcoxon's signed-rank test for paired counts (tokens, steps). Zero differences are
  dropped before ranking (Wilcoxon's convention, scipy's default ``zero_method="wilcox"``); tied absolute differences
  get their average rank. The p-value is exact (the null distribution of W+ by enumeration over signs) when no
  difference is zero or tied and at most 50 remain, as scipy's ``method="auto"`` does; otherwise the normal
  approximation with the tie-corrected variance and no continuity correction (scipy's ``method="asymptotic"``). For
  13 or fewer pairs with ties or zeros scipy's ``auto`` switches to a permutation test instead, so there the two differ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from effirag.errors import DataError

WILCOXON_EXACT_MAX_N = 50  # exact null distribution up to this many non-zero, untied differences (as scipy's auto)


@dataclass(frozen=True)
class Interval:
    """Mean of the paired differences (B − A) and its percentile bootstrap interval."""

    mean: float
    low: float
    high: float
    level: float


@dataclass(frozen=True)
class McNemar:
    """Discordant counts: ``a_only`` (A right, B wrong), ``b_only`` (B right, A wrong), and the two-sided p-value."""

    a_only: int
    b_only: int
    p_value: float


@dataclass(frozen=True)
class Wilcoxon:
    """W = min(W+, W−) over the non-zero differences (B − A), their count ``n``, the p-value and how it was got."""

    statistic: float
    n: int
    p_value: float
    method: str  # "exact" or "normal"


def _pair(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.ndim != 1 or x.shape != y.shape:
        raise DataError(f"paired samples must be two 1-D arrays of equal length, got {x.shape} and {y.shape}")
    if x.size == 0:
        raise DataError("paired samples are empty: nothing to compare")
    return x, y


def paired_bootstrap(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    rng: np.random.Generator,
    *,
    n_resamples: int = 10_000,
    level: float = 0.95,
) -> Interval:
    """Percentile bootstrap interval of mean(b − a) over paired questions.

    Each of ``n_resamples`` resamples draws n question indices with replacement (``rng.integers``, one (R, n) draw) and
    takes the mean of their differences; the interval is the (1 − level)/2 and (1 + level)/2 quantiles of those means
    (numpy's linear interpolation). Worked example: a = [1, 0], b = [1, 1] → differences [0, 1], mean 0.5; a resample
    mean is 0, 0.5 or 1 with probabilities 1/4, 1/2, 1/4, so with many resamples the 2.5% and 97.5% quantiles are 0
    and 1: the interval is [0, 1].
    """
    if n_resamples < 1 or not 0.0 < level < 1.0:
        raise DataError(f"paired_bootstrap: need n_resamples >= 1 and 0 < level < 1, got {n_resamples}, {level}")
    x, y = _pair(a, b)
    d = y - x
    idx = rng.integers(0, d.size, size=(n_resamples, d.size))  # (R, n) question indices
    means = d[idx].mean(axis=1)  # (R,)
    low, high = np.quantile(means, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return Interval(float(d.mean()), float(low), float(high), level)


def mcnemar_exact(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> McNemar:
    """McNemar's exact two-sided test on paired 0/1 outcomes.

    Worked example: 10 pairs, A alone right on 1, B alone right on 6, the rest concordant → n = 7 discordant,
    P(X ≤ 1) for X ~ Bin(7, 1/2) = (1 + 7)/128 = 1/16, p = 2/16 = 0.125. No discordant pair gives p = 1.
    """
    x, y = _pair(a, b)
    bad = [v for v in np.concatenate([x, y]) if v not in (0.0, 1.0)]
    if bad:
        raise DataError(f"mcnemar_exact: outcomes must be 0 or 1, got {bad[0]!r}")
    a_only = int(np.sum((x == 1) & (y == 0)))
    b_only = int(np.sum((x == 0) & (y == 1)))
    n, k = a_only + b_only, min(a_only, b_only)
    if n == 0:
        return McNemar(a_only, b_only, 1.0)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n
    return McNemar(a_only, b_only, min(1.0, 2.0 * tail))


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of ``values`` (ascending), ties sharing the mean of the ranks they span."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(values.size, dtype=float)
    sorted_v = values[order]
    i = 0
    while i < values.size:
        j = i
        while j + 1 < values.size and sorted_v[j + 1] == sorted_v[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def _exact_signed_rank_pmf(n: int) -> np.ndarray:
    """P(W+ = w) for w = 0 … n(n+1)/2 when each rank 1…n carries a fair random sign (counting subsets by sum)."""
    counts = np.zeros(n * (n + 1) // 2 + 1, dtype=float)
    counts[0] = 1.0
    for r in range(1, n + 1):
        counts[r:] = counts[r:] + counts[:-r].copy()
    return counts / 2.0**n


def wilcoxon_signed_rank(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> Wilcoxon:
    """Two-sided Wilcoxon signed-rank test of the paired differences b − a (see the module docstring for the rules).

    Worked example (exact): differences [1, 2, 3, −4] → ranks 1, 2, 3, 4; W+ = 6, W− = 4, W = 4. Under the null W+ is
    the sum of a random subset of {1, 2, 3, 4}; of the 16 subsets, 11 sum to ≤ 6 (sums 0, 1, 2, 3, 3, 4, 4, 5, 5, 6,
    6) and 7 to ≥ 6 (6, 6, 7, 7, 8, 9, 10), so p = 2·min(11/16, 7/16) = 0.875. Worked example (normal): differences
    [1, 1, −1, 0] → the zero dropped, n = 3, ranks 2, 2, 2, W+ = 4, W− = 2; mean n(n+1)/4 = 3, variance
    n(n+1)(2n+1)/24 − Σ(t³ − t)/48 = 3.5 − 24/48 = 3, z = 1/√3,
    p = 2·(1 − Φ(0.57735)) = 0.56370.
    """
    x, y = _pair(a, b)
    d_all = y - x
    d = d_all[d_all != 0.0]
    n = d.size
    if n == 0:
        return Wilcoxon(0.0, 0, 1.0, "exact")
    ranks = _average_ranks(np.abs(d))
    w_plus = float(ranks[d > 0].sum())
    w_minus = float(ranks[d < 0].sum())
    stat = min(w_plus, w_minus)
    tied = np.unique(np.abs(d)).size < n
    if not tied and n == d_all.size and n <= WILCOXON_EXACT_MAX_N:
        pmf = _exact_signed_rank_pmf(n)
        w = round(w_plus)
        p = 2.0 * min(float(pmf[: w + 1].sum()), float(pmf[w:].sum()))
        return Wilcoxon(stat, n, min(1.0, p), "exact")
    _, t = np.unique(np.abs(d), return_counts=True)
    var = n * (n + 1) * (2 * n + 1) / 24.0 - float(np.sum(t**3 - t)) / 48.0
    if var <= 0.0:
        return Wilcoxon(stat, n, 1.0, "normal")
    z = (w_plus - n * (n + 1) / 4.0) / math.sqrt(var)
    p = math.erfc(abs(z) / math.sqrt(2.0))  # = 2·(1 − Φ(|z|))
    return Wilcoxon(stat, n, min(1.0, p), "normal")
