"""recipes/demo_policy/re_searches.py: the repeated-query count docs/demo_policy.md's RouteRAG tables report."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from effirag.types import Action, Step, Trajectory

SCRIPT = Path(__file__).resolve().parents[1] / "recipes" / "demo_policy" / "re_searches.py"


def test_counts_repeated_queries_route_case_and_spacing_ignored(tmp_path: Path) -> None:
    """Two hand-made episodes. q0 searches "Where was A born?" by [graph], then "[graph][passage] where was  A
    born?" (the same query: route, case and spacing differ), then "Who is B?" → 1 repeat; q1 searches two different
    queries → 0. So 1 episode of 2 re-searches, 1 repeat, 5 / 2 = 2.5 searches a question, modes graph 2, hybrid 1,
    passage 2."""
    spec = importlib.util.spec_from_file_location("re_searches", SCRIPT)
    recipe = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(recipe)  # type: ignore[union-attr]

    def search(query: str, mode: str) -> Step:
        return Step(Action.SEARCH, query=query, mode=mode)

    q0 = [search("Where was A born?", "graph"), search("[graph][passage] where was  A born?", "hybrid")]
    q0 += [search("Who is B?", "passage"), Step(Action.ANSWER, answer="x")]
    q1 = [search("[graph] Who is C?", "graph"), search("Who is D?", "passage")]
    trajs = [Trajectory("q0", "Q?", "routerag", q0), Trajectory("q1", "Q?", "routerag", q1)]
    (tmp_path / "trajectories.jsonl").write_text("".join(json.dumps(t.to_dict()) + "\n" for t in trajs))
    got = recipe.counts(tmp_path)
    assert (got["trajectories"], got["episodes_re_searching"], got["re_searches"]) == (2, 1, 1)
    assert got["searches_per_q"] == 2.5
    assert got["modes"] == {"graph": 2, "hybrid": 1, "passage": 2}
