"""A comparison drill: many compare-two-values lines per row, only the compared-out answer trained.

Why: the demo policy reads both sides of a comparison question but does not compare them. With the pairs line of
``writing.comparison_pairs`` ("Ada Vell: 3 May 1901; Bo Rinn: 9 June 1880. So the answer is Bo Rinn.") its answer
does not follow the dates: a whole trajectory carries one compare among hundreds
of trained tokens, so ~1,000 comparison trajectories give the compare ~1,000 signals. A drill row holds
``lines`` such pairs lines of comparison paths drawn from the world's facts (comparisons.world_comparison_paths),
each written exactly as the pairs line of a trajectory, and trains only the answer after "So the answer is": every
line is one compare, and the values, which the trajectory copies from its earlier summaries, are context here too.
The lines ask the world's comparison kinds ("which first": the earlier year; nationality: yes when equal).

Inside its own trajectories a policy drilled this way still answers whatever the values
(``benchmarks/probe_compare.py swap``): there the pairs line follows the last summary's evidence, which has just
named one entity and its value. ``with_evidence=True`` (``extra.drill.evidence``) starts each line with that
evidence (the last hop's, as :func:`~effirag.train.trajectories.evidence` writes it in the summary), so that the
compare is drilled right where the trajectory makes it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from effirag.train.gold_paths import GoldPath
from effirag.train.masking import Segment
from effirag.train.sft_data import SFTExample
from effirag.train.trajectories import evidence, pair_decision, pair_reason

ANSWER_CUE = " So the answer is "


def drill_line(path: GoldPath, lead: str = "", *, decide: bool = False) -> list[Segment]:
    """One comparison path as its pairs line, cut so that only the answer and its full stop are trained.

    ``pair_reason`` gives "A: v; B: w. So the answer is X."; the segments are "A: v; B: w. So the answer is"
    (context), " X." (trained). With ``decide`` the line carries the decision word (``pair_reason(decide=True)``) and
    is cut before it: "A: v; B: w. The earlier is the" (context), " second. So the answer is X." (trained). ``lead``
    (context) goes before the line, with a space."""
    line = pair_reason(path, decide=decide)
    if line is None:
        raise ValueError(f"comparison drill: path {path.id!r} has no pairs line (not a two-hop comparison naming both)")
    cue = " " + pair_decision(path)[0] if decide else ANSWER_CUE.rstrip(" ")
    head, sep, answer = line.rpartition(cue)
    if not sep:
        raise ValueError(f"comparison drill: the pairs line of {path.id!r} lacks {cue!r}: {line!r}")
    head, answer = head + cue, answer.removeprefix(" ")
    head = f"{lead} {head}" if lead else head
    return [Segment(head, False), Segment(" " + answer, True)]


def comparison_drill(
    paths: Sequence[GoldPath],
    lines: int,
    *,
    with_evidence: bool = False,
    evidence_first: bool = False,
    decide: bool = False,
    seed: int = 0,
) -> list[SFTExample]:
    """Rows of ``lines`` consecutive paths' drill lines, one per text line (a last, shorter row keeps the rest).

    ``with_evidence`` leads each line with its last hop's evidence (templates drawn from ``seed``; ``evidence_first``
    as in the trajectories; ``decide`` as in :func:`drill_line`). Rows are cut pieces of text, not trajectories: no
    EOS is trained after them (``complete=False``)."""
    if lines < 1:
        raise ValueError(f"comparison drill: lines per row must be >= 1, got {lines}")
    rng = random.Random(seed)
    out = []
    for start in range(0, len(paths), lines):
        chunk = paths[start : start + lines]
        segments: list[Segment] = []
        for i, path in enumerate(chunk):
            lead = evidence(path.hops[-1], rng, evidence_first=evidence_first) if with_evidence else ""
            line = drill_line(path, lead, decide=decide)
            if i:  # the newline goes with the next line's context, never into a trained segment
                line[0] = Segment("\n" + line[0].text, False)
            segments += line
        out.append(SFTExample(f"drill~{start // lines}", "drill", [segments], complete=False))
    return out
