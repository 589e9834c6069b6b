"""KAG retrieval per query on the demo world: index scores reused (default) vs re-encoding chunks and triplets with a
separate bi-encoder similarity (the peer: what the facade did before), on the same gold sub-queries, same run.

    .venv/bin/python benchmarks/bench_kag_rescoring.py --n 40

Needs the demo index of `effirag demo` (runs/demo/index). Prints median seconds per query for both paths and how many
queries returned the same items in the same order.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from pathlib import Path

from effirag.retrieval.encoders import EncoderConfig, SentenceTransformerEncoder
from effirag.retrieval.facade import load_retriever
from effirag.retrieval.similarity import BiEncoderSimilarity
from effirag.train.gold_paths import world_paths


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", type=Path, default=Path("runs/demo"))
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--k", type=int, default=3)
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    paths, _, _ = world_paths(args.work / "world", "test")
    hops = [h for p in paths for h in p.hops][: args.n]
    fast = load_retriever(args.work / "index").load()
    other = SentenceTransformerEncoder(EncoderConfig()).load()
    slow = load_retriever(args.work / "index", similarity=BiEncoderSimilarity(other)).load()
    times: dict[str, list[float]] = {"reuse": [], "re-encode": []}
    same = 0
    for h in hops:
        items = {}
        for name, r in (("reuse", fast), ("re-encode", slow)):
            t0 = time.perf_counter()
            res = r.retrieve(h.question, "kag", args.k, entities=list(h.entities))
            times[name].append(time.perf_counter() - t0)
            items[name] = [it.id for it in res.items]
        same += items["reuse"] == items["re-encode"]
    out = {name: round(statistics.median(v), 4) for name, v in times.items()}
    print(json.dumps({"queries": len(hops), "median_s": out, "same_items": same}, indent=1))


if __name__ == "__main__":
    main()
