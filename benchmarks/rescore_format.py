"""Re-score saved engine trajectories with their protocol's format rule (``AgentProtocol.format_check``) and compare
with the ``format_ok`` they were saved with: which measured format rates the one format rule shifts, and why.

    .venv/bin/python benchmarks/rescore_format.py runs/eval/*/*/trajectories.jsonl
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

from effirag.agent.protocols import get_protocol
from effirag.types import Trajectory


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path, help="trajectories.jsonl files of `effirag eval qa` runs")
    args = ap.parse_args()
    for f in args.files:
        saved = now = 0
        trajs = [Trajectory.from_dict(json.loads(x)) for x in f.read_text(encoding="utf-8").splitlines() if x]
        newly: collections.Counter[str] = collections.Counter()
        for t in trajs:
            verdict = get_protocol(t.protocol).format_check(t)
            saved, now = saved + t.format_ok, now + verdict.ok
            if t.format_ok and not verdict.ok:
                newly[verdict.reason] += 1
        n = max(len(trajs), 1)
        protocols = sorted({t.protocol for t in trajs})
        print(f"{f}: {protocols} n={len(trajs)} format {100 * saved / n:.1f} -> {100 * now / n:.1f}; newly failing: "
              f"{dict(newly)}")  # fmt: skip


if __name__ == "__main__":
    main()
