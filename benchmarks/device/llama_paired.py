"""Paired comparison of two backends on the same questions: for every (data, run) setting, the HF run's
trajectories (``HF/DATA/RUN/trajectories.jsonl``, as ``bench_gemma.py --out`` writes them) against the llama.cpp
shards (``LLAMA/DATA/RUN/shard-*/trajectories.jsonl``), both scored anew over the questions the llama.cpp side
finished (which the HF side has in full): n, EM, F1, format rate, generated tokens and steps per question, and
the share of questions whose final predictions are the same string.

    python benchmarks/device/llama_paired.py --hf DIR --llama DIR [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_gemma import dataset

from effirag.eval.qa import TRAJECTORIES, score
from effirag.types import Trajectory

RUNS = ["zeroshot", "naive-sparse", "naive-passage", "searchr1-sparse", "searchr1-passage"]


def _load(files: list[Path]) -> dict[str, Trajectory]:
    out = {}
    for f in files:
        for line in f.read_text(encoding="utf-8").splitlines():
            if line.strip():
                t = Trajectory.from_dict(json.loads(line))
                out[t.question_id] = t
    return out


def _metrics(report: dict[str, Any]) -> dict[str, float]:
    return {
        "em": report["em"], "f1": report["f1"], "format": report["format_rate"],
        "gen_tok": report["tokens"]["generated"], "steps": report["mean_steps"],
    }  # fmt: skip


def paired(hf: Path, llama: Path, shots: int = 3) -> list[dict[str, Any]]:
    rows = []
    for name in ("popqa", "musique_mini"):
        examples = dataset(name, 0, shots)[1]
        for run in RUNS:
            lfiles = sorted((llama / name / run).glob(f"shard-*/{TRAJECTORIES}"))
            hfile = hf / name / run / TRAJECTORIES
            if not lfiles or not hfile.is_file():
                continue
            lt, ht = _load(lfiles), _load([hfile])
            missing = set(lt) - set(ht)
            if missing:
                sys.exit(f"{hfile}: lacks {len(missing)} questions the llama.cpp run has, e.g. {sorted(missing)[0]}")
            exs = [ex for ex in examples if ex.id in lt]
            same = sum((lt[ex.id].prediction or "") == (ht[ex.id].prediction or "") for ex in exs)
            rows.append({
                "data": name, "run": run.replace("-", ":", 1), "n": len(exs), "of": len(examples),
                "hf": _metrics(score(exs, [ht[ex.id] for ex in exs])),
                "llamacpp": _metrics(score(exs, [lt[ex.id] for ex in exs])),
                "same_prediction": same / max(1, len(exs)),
            })  # fmt: skip
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| data | run | n | EM HF / Q4 | F1 HF / Q4 | format HF / Q4 | gen tok/q HF / Q4 | steps HF / Q4 | same pred |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        h, q = r["hf"], r["llamacpp"]
        n = str(r["n"]) if r["n"] == r["of"] else f"{r['n']}/{r['of']}"
        lines.append(
            f"| {r['data']} | {r['run']} | {n} | {100 * h['em']:.1f} / {100 * q['em']:.1f} | "
            f"{100 * h['f1']:.1f} / {100 * q['f1']:.1f} | {100 * h['format']:.0f} / {100 * q['format']:.0f}% | "
            f"{h['gen_tok']:.1f} / {q['gen_tok']:.1f} | {h['steps']:.2f} / {q['steps']:.2f} | "
            f"{100 * r['same_prediction']:.0f}% |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hf", type=Path, required=True, help="the HF run's --out folder (DATA/RUN/trajectories.jsonl)")
    ap.add_argument("--llama", type=Path, required=True, help="the llama.cpp shards' folder (DATA/RUN/shard-*/)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = paired(args.hf, args.llama)
    print(json.dumps(rows, indent=1) if args.json else table(rows))


if __name__ == "__main__":
    main()
