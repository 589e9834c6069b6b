"""Count redundant retrieval in `effirag eval qa --out` runs: searches whose query (its route prefix stripped, case and
spacing ignored) repeats an earlier search of the same episode, beside the searches a question and the routes taken,
as docs/demo_policy.md's RouteRAG tables report them.

    python recipes/demo_policy/re_searches.py runs/eval/research_start/routerag-test runs/eval/routerag_s2/routerag-test
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from effirag.eval.compare import read_trajectories
from effirag.eval.qa import TRAJECTORIES
from effirag.types import Action, Trajectory


def _key(query: str) -> str:
    return " ".join(re.sub(r"^(\s*\[[^\]]*\])+", "", query).lower().split())


def repeated(traj: Trajectory) -> int:
    """The episode's searches whose query an earlier search of it already asked."""
    seen: set[str] = set()
    n = 0
    for s in traj.steps:
        if s.action is Action.SEARCH and s.query is not None:
            k = _key(s.query)
            n += k in seen
            seen.add(k)
    return n


def counts(run: Path) -> dict[str, Any]:
    trajs = read_trajectories(run / TRAJECTORIES)
    reps = [repeated(t) for t in trajs]
    modes = Counter(s.mode for t in trajs for s in t.steps if s.action is Action.SEARCH)
    return {
        "run": str(run),
        "trajectories": len(trajs),
        "searches_per_q": sum(t.n_searches for t in trajs) / max(len(trajs), 1),
        "episodes_re_searching": sum(r > 0 for r in reps),
        "re_searches": sum(reps),
        "modes": dict(modes),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="`effirag eval qa --out` folders")
    for run in ap.parse_args().runs:
        print(json.dumps(counts(run)))


if __name__ == "__main__":
    main()
