"""Runs `effirag demo` twice on a small world, the policy on vLLM (``--backend vllm``) and then on HF, and writes what
tests/on_vllm/test_vllm_demo.py compares, as JSON.

A script, run in a subprocess by the test (vllm_support.py says why); each demo runs in a process of its own, as a
user runs it, the vLLM one first so that it builds the index (the BM25 library then imported, before vLLM starts,
would break vLLM's start: effirag/cli/demo.py says how).

    python demo_driver.py WORK_DIR OUT.json

The world is the demo's own (preset demo, seed 0: the one the policy was trained on), and the index's encoder a
hashing one of MiniLM's width (building the knowledge-graph index with MiniLM takes minutes on a shared CPU): both
runs retrieve the same items, so the policy's backend is the only difference between them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from effirag.retrieval.encoders import HashingEncoder

LIMIT = 3
RUNS = (("vllm", ["--backend", "vllm"]), ("hf", []))


class _Hashing384(HashingEncoder):
    """Stand-in for the demo's MiniLM encoder class: a hashing encoder of MiniLM's width, no model to load."""

    backend = "hashing"

    def __init__(self, *_args: object, **_kw: object) -> None:
        super().__init__(384)


def demo(work: Path, name: str, extra: list[str]) -> None:
    """`effirag demo` with the hashing encoder, its output in WORK/NAME."""
    import effirag.retrieval.encoders
    import effirag.retrieval.facade
    from effirag.cli.main import app

    effirag.retrieval.encoders.SentenceTransformerEncoder = _Hashing384  # type: ignore[misc]
    effirag.retrieval.facade.SentenceTransformerEncoder = _Hashing384  # type: ignore[attr-defined]
    args = ["demo", "--work", str(work), "--out", str(work / name), "--limit", str(LIMIT), "--show", "0"]
    app([*args, "--skip-stats", "--reranker", "none", *extra], prog_name="effirag")


def main() -> None:
    from effirag.world import generate_world, load_world_config

    work, out = Path(sys.argv[1]), Path(sys.argv[2])
    generate_world(load_world_config("demo", seed=0), work / "world")
    runs: dict[str, Any] = {}
    for name, extra in RUNS:
        proc = subprocess.run(
            [sys.executable, __file__, "--demo", str(work), name, *extra], capture_output=True, text=True, check=False,
            env={**os.environ, "COLUMNS": "300"},
        )  # fmt: skip
        report = work / name / "demo_report.json"
        runs[name] = {
            "exit_code": proc.returncode,
            "output": proc.stdout + proc.stderr[-6000:],
            "report": json.loads(report.read_text()) if report.is_file() else None,
            "predictions": {
                p: [json.loads(line)["prediction"] for line in (work / name / p / "trajectories.jsonl").open()]
                for p in ("tearag", "searchr1")
                if (work / name / p / "trajectories.jsonl").is_file()
            },
        }
    out.write_text(json.dumps(runs))


if __name__ == "__main__":
    if sys.argv[1] == "--demo":
        demo(Path(sys.argv[2]), sys.argv[3], sys.argv[4:])
    else:
        main()
