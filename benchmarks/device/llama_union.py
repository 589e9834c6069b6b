"""Union of several llama_job.sh runs' shard folders (``DATA/RUN/shard-I-of-N/``, as ``bench_gemma.py --shard``
writes them) into one folder of the same layout, so that ``bench_gemma.py --merge OUT`` scores every setting over
all the questions any run finished, and ``bench_gemma.py --shard I/N --out OUT`` resumes the rest.

Decoding is greedy, so a question answered by two runs must give the same trajectory: every overlap is compared
(the trajectory's JSON without its wall-clock fields) and counted; the first run given wins where they differ.
Prints one JSON line per setting: questions per run, union, overlap, differing ids, and the device seconds per
question of each run (its shards' seconds over the questions they finished, server-seconds on one thread).
The union's ``shard.json`` keeps the first run's ``elapsed_s`` scaled to the union, and no ``run.json`` (it names
the server's port, which a resumed run would not share; the engine settings are checked equal across runs here).

    python benchmarks/device/llama_union.py --out DIR RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

TIMING_KEYS = {"generation_s", "retrieval_s", "timings", "latency_s"}


def _strip(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k not in TIMING_KEYS}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def _read(shard: Path) -> dict[str, dict[str, Any]]:
    f = shard / "trajectories.jsonl"
    lines = f.read_text(encoding="utf-8").splitlines() if f.is_file() else []
    return {d["question_id"]: d for d in (json.loads(x) for x in lines if x.strip())}


def _engine(shard: Path) -> dict[str, Any]:
    run = json.loads((shard / "run.json").read_text(encoding="utf-8"))
    return {k: v for k, v in run.items() if k != "backend"}


def union(runs: list[Path], out: Path) -> list[dict[str, Any]]:
    rels = sorted({p.parent.relative_to(r) for r in runs for p in r.glob("*/*/shard-*/shard.json")})
    settings: dict[Path, list[Path]] = {}
    for rel in rels:
        settings.setdefault(rel.parent, []).append(rel)
    report = []
    for setting, shards in settings.items():
        row: dict[str, Any] = {"setting": str(setting), "per_run": [], "union": 0, "overlap": 0, "differ": []}
        engines = {json.dumps(_engine(r / s), sort_keys=True) for r in runs for s in shards if (r / s).is_dir()}
        if len(engines) != 1:
            sys.exit(f"{setting}: the runs' engine settings differ: {engines}")
        seconds = {str(r): [0.0, 0] for r in runs}
        for rel in shards:
            merged: dict[str, dict[str, Any]] = {}
            info: dict[str, Any] | None = None
            for r in runs:
                if not (r / rel / "shard.json").is_file():
                    continue
                rinfo = json.loads((r / rel / "shard.json").read_text(encoding="utf-8"))
                trajs = _read(r / rel)
                seconds[str(r)][0] += rinfo["elapsed_s"]
                seconds[str(r)][1] += len(trajs)
                info = info or rinfo
                for qid, t in trajs.items():
                    if qid in merged:
                        row["overlap"] += 1
                        if _strip(merged[qid]) != _strip(t):
                            row["differ"].append(qid)
                    else:
                        merged[qid] = t
            assert info is not None
            order = list(info["prompt_tokens"])  # the shard's questions in evaluation order
            (out / rel).mkdir(parents=True, exist_ok=True)
            body = "".join(json.dumps(merged[q]) + "\n" for q in order if q in merged)
            (out / rel / "trajectories.jsonl").write_text(body, encoding="utf-8")
            first_done = max(1, info["done"])
            info = info | {"done": len(merged), "elapsed_s": info["elapsed_s"] * len(merged) / first_done}
            (out / rel / "shard.json").write_text(json.dumps(info), encoding="utf-8")
            row["union"] += len(merged)
        row["per_run"] = [
            {"run": k, "questions": n, "device_s_per_q": round(s / n, 2) if n else None}
            for k, (s, n) in seconds.items()
        ]
        report.append(row)
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", type=Path, nargs="+", help="unpacked llama.tar.gz + llama_traj.tar.gz folders")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    for row in union(args.runs, args.out):
        print(json.dumps(row))


if __name__ == "__main__":
    main()
