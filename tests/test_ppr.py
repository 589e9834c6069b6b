"""Personalized PageRank kernel: hand-worked cases, the closed form, networkx parity, isolated nodes, local push."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from effirag.retrieval.ppr import column_stochastic, local_push_ppr, personalized_pagerank, ppr_from_transition


def _closed_form(a: np.ndarray, p: np.ndarray, alpha: float) -> np.ndarray:
    """(1 − α)(I − αW)⁻¹ p with W built independently: columns divided by their sums, zero columns → e_j."""
    n = a.shape[0]
    w = np.zeros((n, n))
    for j in range(n):
        s = a[:, j].sum()
        if s > 0:
            w[:, j] = a[:, j] / s
        else:
            w[j, j] = 1.0
    return (1 - alpha) * np.linalg.inv(np.eye(n) - alpha * w) @ (p / p.sum())


def _random_graph(n: int, seed: int, isolated: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = np.triu((rng.random((n, n)) < 0.3) * rng.uniform(0.1, 2.0, (n, n)), 1)
    a = a + a.T
    for i in range(n - 1):  # a path keeps every node connected
        if a[i].sum() == 0:
            a[i, i + 1] = a[i + 1, i] = 1.0
    if isolated:
        a[n - 1, :] = 0.0
        a[:, n - 1] = 0.0
    return a


def test_two_node_hand_worked() -> None:
    """Edge 0–1, p = e₀, α = 0.5: W = [[0,1],[1,0]]; π₀ = ½π₁ + ½, π₁ = ½π₀ ⇒ π₀ = ¼π₀ + ½ ⇒ π = (2/3, 1/3).

    One update from π₀ = p: π₁ = ½·W·e₀ + ½·e₀ = (½, ½).
    """
    a = np.array([[0.0, 1.0], [1.0, 0.0]])
    assert np.allclose(personalized_pagerank(a, [1.0, 0.0]), [2 / 3, 1 / 3], atol=1e-15)
    assert np.allclose(personalized_pagerank(a, [1.0, 0.0], iterations=1), [0.5, 0.5], atol=1e-15)
    assert np.allclose(personalized_pagerank(a, [1.0, 0.0], iterations=0), [1.0, 0.0])


def test_isolated_node_keeps_its_mass() -> None:
    """Edge 0–1, node 2 isolated, p = (1, 0, 1)/2, α = ½. Node 2's column is e₂, so π₂ = ½π₂ + ¼ ⇒ π₂ = ½.
    Nodes 0, 1: π₀ = ½π₁ + ¼, π₁ = ½π₀ ⇒ π₀ = ¼π₀ + ¼ ⇒ π₀ = 1/3, π₁ = 1/6. Total 1/3 + 1/6 + 1/2 = 1.
    """
    a = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    expect = [1 / 3, 1 / 6, 1 / 2]
    assert np.allclose(personalized_pagerank(a, [1.0, 0.0, 1.0]), expect, atol=1e-15)
    assert np.allclose(personalized_pagerank(sp.csr_array(a), [1.0, 0.0, 1.0]), expect, atol=1e-12)
    assert np.allclose(
        personalized_pagerank(a, [1.0, 0.0, 1.0], alpha=0.9, iterations=2000),
        _closed_form(a, np.array([1.0, 0, 1]), 0.9),
    )


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("alpha", [0.5, 0.85])
@pytest.mark.parametrize("isolated", [False, True])
def test_closed_form(seed: int, alpha: float, isolated: bool) -> None:
    n = 12 + seed
    a = _random_graph(n, seed, isolated)
    p = np.random.default_rng(100 + seed).random(n)
    expect = _closed_form(a, p, alpha)
    for weights in (a, sp.csr_array(a)):
        got = personalized_pagerank(weights, p, alpha=alpha, iterations=400)
        assert np.abs(got - expect).max() < 1e-9
        assert got.sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("alpha", [0.5, 0.85])
def test_networkx_parity(seed: int, alpha: float) -> None:
    """No isolated nodes (networkx spreads dangling mass over p instead), so both solve the same system."""
    n = 10 + 3 * seed
    a = _random_graph(n, seed, isolated=False)
    p = np.random.default_rng(seed).random(n)
    g = nx.from_numpy_array(a)
    ref = nx.pagerank(g, alpha=alpha, personalization={i: float(p[i]) for i in range(n)}, tol=1e-15, max_iter=10_000)
    got = personalized_pagerank(a, p, alpha=alpha, iterations=400)
    assert np.abs(got - np.array([ref[i] for i in range(n)])).max() < 1e-9


def test_iterations_are_counted_exactly() -> None:
    """Without convergence (α = 0.9, N = 3) the result is the third iterate, computed here step by step."""
    a = _random_graph(8, 3, isolated=True)
    p = np.arange(1.0, 9.0)
    w = column_stochastic(a)
    pn = p / p.sum()
    pi = pn.copy()
    for _ in range(3):
        pi = 0.9 * w @ pi + 0.1 * pn
    assert np.allclose(personalized_pagerank(a, p, alpha=0.9, iterations=3), pi, atol=1e-15)
    assert np.allclose(ppr_from_transition(column_stochastic(sp.csr_array(a)), pn, 0.9, 3), pi, atol=1e-15)


def test_local_push_matches_exact_within_residual() -> None:
    rng = np.random.default_rng(7)
    n = 3000
    m = 12000
    rows, cols = rng.integers(0, n, m), rng.integers(0, n, m)
    a = sp.coo_array((np.ones(m), (rows, cols)), shape=(n, n))
    a = sp.csr_array(a + a.T)
    w = column_stochastic(a)
    seeds = {5: 1.0, 17: 0.5, 2999: 0.25}
    p = np.zeros(n)
    for k, v in seeds.items():
        p[k] = v
    exact = personalized_pagerank(a, p, iterations=200)
    res = local_push_ppr(w, seeds, alpha=0.5, epsilon=1e-11)
    est = res.dense(n)
    assert np.all(est <= exact + 1e-12)  # push never overshoots
    assert np.abs(exact - est).sum() == pytest.approx(res.residual, abs=1e-9)
    assert res.residual < 1e-5
    top_exact = list(np.lexsort((np.arange(n), -exact))[:10])
    assert [i for i, _ in res.top(10)] == top_exact
    assert local_push_ppr(w, p, epsilon=1e-11).residual == pytest.approx(res.residual)


@pytest.mark.parametrize(
    ("weights", "p", "kw", "msg"),
    [
        (np.array([[0.0, -1.0], [-1.0, 0.0]]), [1.0, 0.0], {}, "non-negative"),
        (np.ones((2, 3)), [1.0, 0.0], {}, "square"),
        (np.ones((2, 2)), [0.0, 0.0], {}, "sums to 0"),
        (np.ones((2, 2)), [1.0, -1.0], {}, "personalization\\[1\\]"),
        (np.ones((2, 2)), [1.0], {}, "1 entries"),
        (np.ones((2, 2)), [1.0, 0.0], {"alpha": 1.0}, "alpha"),
        (np.array([[0.0, np.nan], [np.nan, 0.0]]), [1.0, 0.0], {}, "finite"),
    ],
)
def test_bad_input(weights: np.ndarray, p: list[float], kw: dict[str, float], msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        personalized_pagerank(weights, p, **kw)
