"""Count the long-winded trajectories of `effirag eval qa --out` runs: those whose generated text holds any of the
long-winded start's five sentences (``effirag.train.behaviour.long_winded``), beside the episodes' ends (a loop that
never answers ends at ``max_steps``), as docs/demo_policy.md's TeaRAG IP-DPO tables report them.

    python recipes/demo_policy/long_winded.py runs/eval/verbose_start/tearag-test runs/eval/ipdpo_r4/tearag-test
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from effirag.eval.compare import read_trajectories
from effirag.eval.qa import TRAJECTORIES, end_counts
from effirag.train.behaviour import long_winded


def counts(run: Path) -> dict[str, Any]:
    """The run's trajectory count, its long-winded ones and its ends (each step's generated text, not the
    observations inserted into it)."""
    trajs = read_trajectories(run / TRAJECTORIES)
    return {
        "run": str(run),
        "trajectories": len(trajs),
        "long_winded": sum(long_winded("".join(s.text for s in t.steps)) for t in trajs),
        "ends": end_counts(trajs),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="`effirag eval qa --out` folders")
    for run in ap.parse_args().runs:
        print(json.dumps(counts(run)))


if __name__ == "__main__":
    main()
