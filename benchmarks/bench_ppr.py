"""PPR speed: the ≤60-node KAG kernel vs networkx, KAG build + PPR per subquery, and 1M-node graph PPR.

    .venv/bin/python benchmarks/bench_ppr.py [--data ../shared/data] [--nodes 1000000] [--repeats 5] [--json]

1. Kernel: ``personalized_pagerank`` on KAGs built from real MuSiQue data (5 chunks, 10 triplets of the real OpenIE
   KG, random sims) vs ``networkx.pagerank`` (default tol) on the same graph and personalization.
2. ``KAGFilter.filter_scored`` (KAG build + PPR + top-k_f; similarity scores precomputed) per subquery.
3. A synthetic 1M-node undirected graph (EffiRAG-World at this scale is not used here: the graph is random with a
   heavy-tailed degree distribution, mean degree ≈ 8) seeded at 5 nodes: scipy power iteration (our sparse path,
   tol 1e-10) vs igraph's PRPACK ``personalized_pagerank`` vs ``local_push_ppr`` (ε = 1e-7), with top-10 agreement.
Each figure is the median over ``--repeats`` repeats.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import networkx as nx
import numpy as np
import scipy.sparse as sp

from effirag.data import load_corpus
from effirag.retrieval.kag import KAGConfig, KAGFilter, kag_edges, kag_personalization, kag_weights
from effirag.retrieval.kg import KnowledgeGraph
from effirag.retrieval.ppr import column_stochastic, local_push_ppr, personalized_pagerank, ppr_from_transition
from effirag.retrieval.triplets import triplet_item
from effirag.types import ItemKind, RetrievedItem


def _med(xs: list[float]) -> float:
    return statistics.median(xs)


def kag_cases(data: Path, n_cases: int, seed: int = 0) -> list[tuple]:
    corpus = load_corpus(data / "musique_mini" / "corpus.json")
    kg = KnowledgeGraph.from_openie(data / "musique_mini" / "openie_gpt-3.5-turbo-1106.json", corpus)
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n_cases):
        pids = rng.choice(len(kg.passages), 5, replace=False)
        chunks = [
            RetrievedItem(ItemKind.CHUNK, kg.passages[i].id, kg.passages[i].text, 0.0, title=kg.passages[i].title)
            for i in pids
        ]
        # triplets: half from the retrieved chunks (co-occurrence edges), half from elsewhere
        own = [t for t in range(len(kg.triplets)) if kg.triplet_passage[t] in set(pids.tolist())]
        tids = list(rng.choice(own, min(5, len(own)), replace=False)) + list(rng.choice(len(kg.triplets), 5))
        trips = [(triplet_item(kg, int(t), 0.0), kg.triplets[int(t)]) for t in tids[:10]]
        keys = [kg.triplets[int(tids[0])].head]
        cases.append(
            (keys, chunks, trips, rng.normal(0, 1, len(chunks)).tolist(), rng.normal(0, 1, len(trips)).tolist())
        )
    return cases


def bench_kernel(cases: list[tuple], repeats: int) -> dict:
    cfg = KAGConfig()
    graphs = []
    for keys, chunks, trips, cs, ts in cases:
        g = kag_edges(keys, chunks, trips, cs, ts, cfg.tau)
        graphs.append((kag_weights(g), kag_personalization(g, keys, cfg)))
    nxg = [(nx.from_numpy_array(w), {i: float(x) for i, x in enumerate(p)}) for w, p in graphs]
    ours, ref, filt = [], [], []
    kag = KAGFilter(cfg)
    worst = 0.0
    for _ in range(repeats):
        t = time.perf_counter()
        for w, p in graphs:
            personalized_pagerank(w, p, 0.5, 200)
        ours.append((time.perf_counter() - t) / len(graphs))
        t = time.perf_counter()
        for g, p in nxg:
            nx.pagerank(g, alpha=0.5, personalization=p)
        ref.append((time.perf_counter() - t) / len(graphs))
        t = time.perf_counter()
        for keys, chunks, trips, cs, ts in cases:
            kag.filter_scored(keys, chunks, trips, cs, ts)
        filt.append((time.perf_counter() - t) / len(cases))
    for (w, p), (g, pd) in zip(graphs[:20], nxg[:20], strict=True):
        r = nx.pagerank(g, alpha=0.5, personalization=pd, tol=1e-14, max_iter=10_000)
        worst = max(worst, float(np.abs(personalized_pagerank(w, p) - np.array([r[i] for i in range(len(p))])).max()))
    sizes = [w.shape[0] for w, _ in graphs]
    return {
        "kag_nodes_median": _med(sizes),
        "kag_nodes_max": max(sizes),
        "ppr_kernel_us": _med(ours) * 1e6,
        "networkx_pagerank_us": _med(ref) * 1e6,
        "kag_build_plus_ppr_us": _med(filt) * 1e6,
        "max_abs_diff_vs_networkx_tol1e-14": worst,
    }


def big_graph(n: int, mean_degree: float, seed: int = 0) -> sp.csr_array:
    """Undirected random graph: one endpoint uniform, the other Zipf-like (heavy-tailed hubs), unit weights."""
    rng = np.random.default_rng(seed)
    m = int(n * mean_degree / 2)
    u = rng.integers(0, n, m)
    ranks = np.minimum((rng.pareto(1.2, m) * n / 50).astype(np.int64), n - 1)
    v = rng.permutation(n)[ranks]
    keep = u != v
    a = sp.coo_array((np.ones(int(keep.sum())), (u[keep], v[keep])), shape=(n, n))
    a = sp.csr_array(a + a.T)
    a.data[:] = 1.0  # collapse parallel edges
    return a


def bench_big(n: int, repeats: int) -> dict:
    import igraph as ig

    a = big_graph(n, 8.0)
    t = time.perf_counter()
    w = column_stochastic(a)
    prep = time.perf_counter() - t
    coo = sp.triu(a, 1).tocoo()
    g = ig.Graph(n=n, edges=np.column_stack([coo.row, coo.col]).tolist(), directed=False)
    rng = np.random.default_rng(1)
    queries = [rng.choice(n, 5, replace=False) for _ in range(repeats)]
    power, igr, push, agree, l1 = [], [], [], [], []
    for seeds in queries:
        p = np.zeros(n)
        p[seeds] = rng.random(5) + 0.1
        p /= p.sum()
        t = time.perf_counter()
        exact = ppr_from_transition(w, p, 0.5, 200, tol=1e-10)
        power.append(time.perf_counter() - t)
        t = time.perf_counter()
        ref = np.asarray(g.personalized_pagerank(damping=0.5, reset=p.tolist(), directed=False))
        igr.append(time.perf_counter() - t)
        t = time.perf_counter()
        res = local_push_ppr(w, {int(s): float(p[s]) for s in seeds}, 0.5, 1e-7)
        push.append(time.perf_counter() - t)
        top_exact = set(np.argsort(-exact)[:10].tolist())
        agree.append(len(top_exact & {i for i, _ in res.top(10)}) / 10)
        l1.append(float(np.abs(exact - ref).sum()))
        touched = res.nodes.size
    return {
        "nodes": n,
        "undirected_edges": int(coo.nnz),
        "normalise_once_s": prep,
        "scipy_power_iteration_s": _med(power),
        "igraph_prpack_s": _med(igr),
        "local_push_s": _med(push),
        "local_push_touched_nodes": int(touched),
        "local_push_residual_l1": float(res.residual),
        "local_push_top10_agreement": _med(agree),
        "power_vs_igraph_l1": _med(l1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out = {"kag": bench_kernel(kag_cases(args.data, args.cases), args.repeats)}
    if args.nodes:
        out["big"] = bench_big(args.nodes, args.repeats)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
