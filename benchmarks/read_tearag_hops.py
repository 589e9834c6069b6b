"""Where TeaRAG trajectories on the demo world go wrong, hop by hop, against the world's gold decompositions.

    .venv/bin/python benchmarks/read_tearag_hops.py runs/eval/<name>/tearag/trajectories.jsonl [--world runs/demo/world]
        [--split dev]

For every compositional multi-hop test question (comparisons have no single chain), walking the trajectory's searches
in order against the gold hops (a hop the policy knows may be searched or skipped), the funnel counts the questions
still on track after each of, per hop i:

- ``subquery``: the hop's ``<entities>`` / ``<subquery>`` name its entity (the earlier hop's answer, or the
  question's entity);
- ``summary``: the answer the summary after that search states ("… implies the answer: X.") is the hop's; a miss says
  whether the summary's evidence held the answer, or the reference did, or neither;
- ``decision``: what follows that summary is right: another search when a hop the policy does not know is left,
  ``Final answer:`` otherwise.

A question leaves the funnel at its first miss, which is reported by kind. Questions that stay on track to the end are
split by whether hops the policy knows were left after its last search (so the final answer itself is a recall), with
their exact matches. A second table takes every search that names a gold hop's entity (all of them, not only the
first miss) and splits the summary after it by where the `<Reference>` shows the hop's answer: in a triplet, in
passage text only, or nowhere, with the share of summaries that state it. A third takes the misses where the passage
alone shows the answer and says what the summary quoted instead (another sentence of the passage, a sentence the
passage does not hold, ...). Reads only the trajectory file and the world; no model is loaded.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
from pathlib import Path

from effirag.metrics import normalize_answer
from effirag.train.gold_paths import GoldHop, world_paths

# The answer a summary states, in each of the SFT templates (effirag.train.trajectories.SUMMARY_TRIPLET / _TEXT).
_STATED = (
    re.compile(r"the answer(?: to this step)?(?: is|:) (.+?)\.(?:\s|$)"),
    re.compile(r"states that (.+?) answers it"),
)


def _stated(summary: str) -> str:
    for pattern in _STATED:
        m = pattern.search(summary)
        if m is not None:
            return m.group(1)
    return ""


def _summary(text: str) -> str:
    m = re.search(r"<summary>(.*?)</summary>", text, flags=re.S)
    return m.group(1) if m else ""


def _entity(hop: GoldHop) -> str:
    return hop.entities[0] if hop.entities else ""


def _names(step: dict, entity: str) -> bool:
    said = " ".join(step.get("entities") or []) + " " + (step.get("query") or "")
    return bool(entity) and normalize_answer(entity) in normalize_answer(said)


def walk(traj: dict, hops: list[GoldHop]) -> tuple[str, int]:
    """The first miss of a trajectory against its gold hops: (kind, 0-based hop) or ("on track", searches).

    A hop the policy knows may be searched (over-search, not a miss) or skipped: a search that names the next hop's
    entity instead moves on past it."""
    steps = traj["steps"]
    searches = [i for i, s in enumerate(steps) if s.get("action") == "search"]
    j = 0
    for n, si in enumerate(searches):
        if j >= len(hops):
            return "searched again after the last hop", len(hops) - 1
        step = steps[si]
        while (
            hops[j].known
            and j + 1 < len(hops)
            and not _names(step, _entity(hops[j]))
            and _names(step, _entity(hops[j + 1]))
        ):
            j += 1
        hop = hops[j]
        if not _names(step, _entity(hop)):
            return "subquery", j
        if si + 1 >= len(steps):
            return "no turn after the search (step limit)", j
        nxt = steps[si + 1]
        summary = _summary(nxt.get("text", ""))
        if normalize_answer(_stated(summary)) != normalize_answer(hop.answer):
            if normalize_answer(hop.answer) in normalize_answer(summary):
                return "summary: evidence has the answer, the stated answer is wrong", j
            if normalize_answer(hop.answer) in normalize_answer(step.get("observation") or ""):
                return "summary: answer in the reference, not copied", j
            return "summary: answer not retrieved", j
        j += 1
        if nxt.get("action") != "search":
            left = [h for h in hops[j:] if not h.known]
            if left:
                return "stopped with a hop left", j - 1
            return ("on track, the rest known (recalled in the answer)" if hops[j:] else "on track"), n + 1
    return "no search left (step limit or parse failure)", j


def evidence_kind(observation: str, answer: str) -> str:
    """Where ``observation`` shows ``answer``: a triplet line, passage text only, or nowhere; and whether the
    observation holds any triplet at all."""
    a = normalize_answer(answer)
    triplets = [line for line in observation.split("\n") if "(Triplet)" in line]
    if any(a in normalize_answer(line) for line in triplets):
        where = "in a triplet"
    elif a in normalize_answer(observation):
        where = "in passage text only"
    else:
        where = "not shown"
    return f"{where} ({'with' if triplets else 'no'} triplets)"


def summaries_by_evidence(traj: dict, hops: list[GoldHop]) -> list[tuple[str, bool]]:
    """(evidence kind, summary states the hop's answer) for each search naming a gold hop's entity."""
    steps = traj["steps"]
    out = []
    for i, step in enumerate(steps[:-1]):
        if step.get("action") != "search":
            continue
        hop = next((h for h in hops if _names(step, _entity(h))), None)
        if hop is None:
            continue
        stated = normalize_answer(_stated(_summary(steps[i + 1].get("text", ""))))
        out.append((evidence_kind(step.get("observation") or "", hop.answer), stated == normalize_answer(hop.answer)))
    return out


def misread_kind(summary: str, observation: str, answer: str) -> str:
    """What a summary that does not state the hop's answer quoted, when the passage shows that answer: another
    sentence of the passage, a sentence the passage does not hold, the answer's own sentence (with another answer
    named), or nothing."""
    m = re.search(r'"(.+?)"', summary)
    if m is None:
        return "quotes nothing"
    quote = m.group(1).strip()
    if quote not in observation:
        return "quotes a sentence the passage does not hold"
    if normalize_answer(answer) in normalize_answer(quote):
        return "quotes the answer's sentence, names another answer"
    return "quotes another sentence of the passage"


def misreads(traj: dict, hops: list[GoldHop]) -> list[str]:
    """:func:`misread_kind` of each search naming a gold hop's entity whose observation shows the hop's answer in
    passage text only (no triplet) and whose summary does not state it."""
    steps = traj["steps"]
    out = []
    for i, step in enumerate(steps[:-1]):
        if step.get("action") != "search":
            continue
        hop = next((h for h in hops if _names(step, _entity(h))), None)
        obs = step.get("observation") or ""
        if hop is None or evidence_kind(obs, hop.answer) != "in passage text only (no triplets)":
            continue
        summary = _summary(steps[i + 1].get("text", ""))
        if normalize_answer(_stated(summary)) != normalize_answer(hop.answer):
            out.append(misread_kind(summary, obs, hop.answer))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trajectories", type=Path)
    ap.add_argument("--world", type=Path, default=Path("runs/demo/world"))
    ap.add_argument("--split", default="test", choices=["train", "dev", "test"], help="the trajectories' split")
    args = ap.parse_args()
    paths, _, _ = world_paths(args.world, args.split)
    gold = {p.id: p for p in paths}
    trajs = [json.loads(line) for line in args.trajectories.open()]
    misses: collections.Counter[tuple[str, int]] = collections.Counter()
    em: collections.Counter[tuple[str, int]] = collections.Counter()
    by_ev: collections.Counter[str] = collections.Counter()
    right_ev: collections.Counter[str] = collections.Counter()
    missed: collections.Counter[str] = collections.Counter()
    n = 0
    for t in trajs:
        path = gold.get(t["question_id"])
        if path is None or path.qtype == "comparison" or len(path.hops) < 2:
            continue
        n += 1
        for ev, right in summaries_by_evidence(t, list(path.hops)):
            by_ev[ev] += 1
            right_ev[ev] += right
        missed.update(misreads(t, list(path.hops)))
        kind, i = walk(t, list(path.hops))
        misses[(kind, i)] += 1
        if kind.startswith("on track"):
            em[(kind, i)] += normalize_answer(t.get("prediction") or "") in {normalize_answer(a) for a in path.answers}
    print(f"{args.trajectories}: {n} compositional multi-hop questions")
    print("| hop | first miss | questions | EM |")
    print("|---|---|---|---|")
    for (kind, i), c in sorted(misses.items(), key=lambda kv: (kv[0][0].startswith("on track"), kv[0][1], kv[0][0])):
        on = kind.startswith("on track")
        print(f"| {f'end ({i} searches)' if on else i + 1} | {kind} | {c} | {em[(kind, i)] if on else ''} |")
    print("\n| the `<Reference>` shows the hop's answer | searches | summary states it |")
    print("|---|---|---|")
    for ev, c in sorted(by_ev.items()):
        print(f"| {ev} | {c} | {right_ev[ev]} ({100 * right_ev[ev] / c:.0f}%) |")
    print("\n| passage text only, the summary misses the answer: it | searches |")
    print("|---|---|")
    for kind, c in missed.most_common():
        print(f"| {kind} | {c} |")


if __name__ == "__main__":
    main()
