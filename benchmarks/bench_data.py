"""Load the real shared data with EffiRAG's loaders vs plain json.load of the same files (the peer), 5 runs, median."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from effirag.data import load_corpus, load_openie, load_questions

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "musique_mini"


def _time(fn: object, runs: int = 5) -> float:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def effirag_load() -> None:
    corpus = load_corpus(DATA / "corpus.json")
    load_questions(DATA / "questions.json", corpus)
    load_openie(DATA / "openie_gpt-3.5-turbo-1106.json", corpus)


def raw_load() -> None:
    for name in ("corpus.json", "questions.json", "openie_gpt-3.5-turbo-1106.json"):
        with (DATA / name).open(encoding="utf-8") as f:
            json.load(f)


if __name__ == "__main__":
    ours, peer = _time(effirag_load), _time(raw_load)
    print(
        f"musique_mini corpus+questions+openie: effirag {ours * 1000:.1f} ms, raw json.load {peer * 1000:.1f} ms, "
        f"overhead {ours / peer:.2f}x"
    )
