"""Where TeaRAG (or Search-R1) trajectories go wrong on the demo world's comparison questions, against the gold
decompositions.

    .venv/bin/python benchmarks/read_comparisons.py runs/eval/<name>/tearag/trajectories.jsonl [--world runs/demo/world]
        [--split test]

Per comparison question (two hops, one per compared entity), it counts the questions whose trajectory:

- ``searched``: names each side's entity in some ``<entities>`` / ``<subquery>``; else how many sides it searched;
- ``read``: after searching both, has a summary (Search-R1: a ``<think>``) stating each side's value (date, year or
  country);
- ``pairs``: writes the pairs line of ``sft_data.comparison_pairs`` ("A: v; B: w. So the answer is …");
- ``right``: the prediction is an exact match (every question, then split by the stages above),

and what wrong final answers were: one of the two names, yes / no, or something else (a third name, a date). By
comparison kind (which first, or the same nationality) too. Reads only the trajectory file and the world.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
from dataclasses import dataclass
from pathlib import Path

from effirag.metrics import exact_match, normalize_answer
from effirag.train.gold_paths import GoldPath, world_paths

_SUMMARY = re.compile(r"<(?:summary|think)>(.*?)</(?:summary|think)>", flags=re.S)  # TeaRAG's or Search-R1's
_PAIRS = re.compile(r": [^;]+; [^.]+: .+?\. So the answer is ")


def _norm(text: str) -> str:
    return normalize_answer(text)


def _asked(step_texts: list[str], entity: str) -> bool:
    e = _norm(entity)
    # the search itself: what follows the step's summary or thought
    return any(e and e in _norm(re.split(r"</summary>|</think>", t)[-1]) for t in step_texts)


def _stated(step_texts: list[str], value: str) -> bool:
    v = _norm(value)
    return any(v and v in _norm(s) for t in step_texts for s in _SUMMARY.findall(t))


@dataclass(frozen=True)
class Reached:
    kind: str  # "which first" or "same nationality"
    searched: int  # sides whose entity a search names
    read: bool  # both searched, and each side's value stated in a summary
    pairs: bool  # the comparison_pairs line was written
    right: bool
    wrong: str  # what a wrong final answer was ("" when right)


def classify(record: dict, path: GoldPath) -> Reached:
    """The stages one comparison trajectory reached (see the module docstring)."""
    texts = [s["text"] for s in record["steps"]]
    sides = [h.entities[0] if h.entities else "" for h in path.hops]
    searched = sum(_asked(texts, e) for e in sides)
    read = searched == 2 and all(_stated(texts, h.answer) for h in path.hops)
    pred = record.get("prediction") or ""
    right = bool(exact_match(pred, path.answers))
    if right:
        wrong = ""
    elif _norm(pred) in {_norm(s) for s in sides}:
        wrong = "the other name"
    elif _norm(pred) in {"yes", "no"}:
        wrong = "yes/no flipped" if path.answer in ("yes", "no") else "yes/no"
    elif not pred:
        wrong = "no answer"
    else:
        wrong = "a third answer"
    kind = "same nationality" if path.answer in ("yes", "no") else "which first"
    pairs = any(_PAIRS.search(t) for t in texts)
    return Reached(kind, searched, read, pairs, right, wrong)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trajectories", type=Path)
    ap.add_argument("--world", type=Path, default=Path("runs/demo/world"))
    ap.add_argument("--split", default="test")
    args = ap.parse_args()
    paths = {p.id: p for p in world_paths(args.world, args.split)[0] if p.qtype == "comparison"}
    rows = []
    with args.trajectories.open(encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r["question_id"] in paths:
                rows.append(classify(r, paths[r["question_id"]]))
    if not rows:
        raise SystemExit(f"{args.trajectories}: no comparison question of split {args.split!r} of {args.world}")
    out: dict[str, object] = {"n": len(rows), "right": sum(r.right for r in rows)}
    for kind in ("which first", "same nationality"):
        sub = [r for r in rows if r.kind == kind]
        out[kind] = {"n": len(sub), "right": sum(r.right for r in sub)}
    out["sides searched"] = dict(sorted(collections.Counter(r.searched for r in rows).items()))
    both = [r for r in rows if r.searched == 2]
    read = [r for r in both if r.read]
    out["both searched"] = {"n": len(both), "right": sum(r.right for r in both)}
    out["both read"] = {"n": len(read), "right": sum(r.right for r in read)}
    out["pairs line"] = {
        "n": sum(r.pairs for r in rows),
        "right": sum(r.right for r in rows if r.pairs),
    }
    out["wrong answers"] = dict(collections.Counter(r.wrong for r in rows if not r.right).most_common())
    out["wrong after both read"] = dict(collections.Counter(r.wrong for r in read if not r.right).most_common())
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
