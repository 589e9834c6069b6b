"""Recall@2/5 of bm25 and dense (all-MiniLM-L6-v2) on musique_mini (70 q) and popqa (500 q), via the real CLI.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_retrieval_recall.py [--index-root DIR] [--retrievers bm25 dense]

Indexes are built once under --index-root (embeddings cached there, so a second run encodes nothing). Recall is
deterministic, so one run per cell; the wall time of each evaluation is printed too.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
REFERENCE = {  # independent implementation, same encoder (issue 4)
    ("musique_mini", "bm25"): (44.8, 52.0),
    ("musique_mini", "dense"): (49.2, 63.7),
    ("popqa", "bm25"): (50.2, 50.6),
    ("popqa", "dense"): (48.0, 50.1),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--index-root", type=Path, default=Path("/tmp/effirag_idx"))
    ap.add_argument("--datasets", nargs="+", default=["musique_mini", "popqa"])
    ap.add_argument("--retrievers", nargs="+", default=["bm25", "dense"])
    ap.add_argument("--openie", action="store_true", help="pass the musique OpenIE file (graph/hybrid)")
    args = ap.parse_args()
    effirag = str(Path(sys.executable).parent / "effirag")
    rows = []
    for ds in args.datasets:
        for ret in args.retrievers:
            cmd = [
                effirag, "eval", "retrieval",
                "--questions", str(DATA / ds / "questions.json"),
                "--corpus", str(DATA / ds / "corpus.json"),
                "--retriever", ret, "--k", "2", "5", "--json", "--threads", "1",
                "--index", str(args.index_root / ds),
            ]  # fmt: skip
            if ret in ("graph", "hybrid"):
                cmd += ["--openie", str(DATA / ds / "openie_gpt-3.5-turbo-1106.json")]
            t0 = time.perf_counter()
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            rep = json.loads(out)
            ref = REFERENCE.get((ds, ret))
            rows.append((ds, ret, rep, ref, time.perf_counter() - t0))
    print("| dataset | retriever | R@2 | R@5 | reference R@2 / R@5 | answer recall @2 / @5 | tokens @5 | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for ds, ret, rep, ref, secs in rows:
        r, a = rep["recall"], rep["answer_recall"]
        refs = f"{ref[0]} / {ref[1]}" if ref else "-"
        print(
            f"| {ds} ({rep['n_questions']} q) | {ret} | {r['2']:.1f} | {r['5']:.1f} | {refs} | "
            f"{a['2']:.1f} / {a['5']:.1f} | {rep['tokens_per_retrieval']['5']:.0f} | {secs:.0f} |"
        )


if __name__ == "__main__":
    main()
