"""Throughput of EffiRAG-World generation (``effirag.world.generate_world``) at 100k and 1M passages.

    .venv/bin/python benchmarks/bench_world.py --sizes 100000 1000000 --repeats 3 --out /tmp/bench_world

Each run is a fresh subprocess (so peak RSS is the run's own). Reported per size: median wall seconds of the whole
generation (every file of the output folder), passages/s, the run's CPU seconds (user + sys, robust to other jobs
sharing the machine), per-stage seconds, peak RSS, output bytes, and two peers
measured in the same invocation on the same machine:
- ``copy``: streaming the generated folder's bytes into new files (shutil.copyfileobj) — the I/O floor;
- ``dumps``: ``json.dumps`` of as many FlashRAG passage records (100-word text) as the run wrote passages — the cost
  of serialising the corpus alone with the standard library.
Questions per run: 5% of passages for train (capped at 50k), 1% dev, 2% test (capped at 2k / 5k).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def one_run(n: int, out: Path) -> dict[str, object]:
    import resource

    from effirag.world import generate_world, load_world_config

    overrides = [
        f"passages={n}",
        f"train_questions={min(50000, n // 20)}",
        f"dev_questions={min(2000, n // 100)}",
        f"test_questions={min(5000, n // 50)}",
    ]
    cfg = load_world_config("demo", overrides=overrides)
    t0 = time.perf_counter()
    summary = generate_world(cfg, out)
    wall = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    rss = usage.ru_maxrss / 1024  # KiB → MiB on Linux
    size = sum(p.stat().st_size for p in out.iterdir())
    cpu = usage.ru_utime + usage.ru_stime  # includes interpreter start-up and imports (~1 s)
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": rss, "bytes": size, **summary}


def peer_copy(src: Path, dst: Path) -> float:
    dst.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    for p in sorted(src.iterdir()):
        with p.open("rb") as fi, (dst / p.name).open("wb") as fo:
            shutil.copyfileobj(fi, fo, 1 << 20)
    return time.perf_counter() - t0


def peer_dumps(n: int) -> float:
    text = " ".join(["word"] * 100)
    t0 = time.perf_counter()
    for i in range(n):
        json.dumps({"id": f"w{i:07d}", "title": "Title", "text": text, "contents": f'"Title"\n{text}'})
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100000, 1000000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench_world"))
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one is not None:
        print(json.dumps(one_run(args.one, args.out)))
        return
    results = []
    for n in args.sizes:
        runs, copies, dumps = [], [], []
        for r in range(args.repeats):
            out = args.out / f"n{n}"
            shutil.rmtree(out, ignore_errors=True)
            cmd = [sys.executable, __file__, "--one", str(n), "--out", str(out)]
            proc = subprocess.run(cmd, check=True, capture_output=True, text=True)
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            copies.append(peer_copy(out, args.out / f"copy{n}"))
            shutil.rmtree(args.out / f"copy{n}", ignore_errors=True)
            dumps.append(peer_dumps(n))
            last = runs[-1]
            msg = f"n={n} run {r + 1}: {last['wall_s']:.1f} s (cpu {last['cpu_s']:.1f} s), copy {copies[-1]:.1f} s"
            print(f"{msg}, dumps {dumps[-1]:.1f} s", file=sys.stderr, flush=True)
        wall = statistics.median(x["wall_s"] for x in runs)  # type: ignore[misc]
        row = {
            "passages": n,
            "runs_s": [round(x["wall_s"], 2) for x in runs],  # type: ignore[call-overload]
            "median_s": round(wall, 2),
            "passages_per_s": round(n / wall),
            "cpu_runs_s": [round(x["cpu_s"], 2) for x in runs],  # type: ignore[call-overload]
            "cpu_median_s": round(statistics.median(x["cpu_s"] for x in runs), 2),  # type: ignore[misc]
            "stages_median_s": {
                k: round(statistics.median(x[k] for x in runs), 2)  # type: ignore[misc]
                for k in ("entities_s", "questions_s", "corpus_s", "facts_s")
            },
            "peak_rss_mib": round(max(x["peak_rss_mib"] for x in runs)),  # type: ignore[type-var]
            "output_mib": round(runs[0]["bytes"] / 2**20),  # type: ignore[operator]
            "triplets": runs[0]["triplets"],
            "facts": runs[0]["facts"],
            "peer_copy_median_s": round(statistics.median(copies), 2),
            "peer_dumps_median_s": round(statistics.median(dumps), 2),
        }
        results.append(row)
        shutil.rmtree(args.out / f"n{n}", ignore_errors=True)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
