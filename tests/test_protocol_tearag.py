"""TeaRAG: entities → subquery → <Reference> (mode kag, seeded with the entities) → summary → Final answer."""

from __future__ import annotations

from effirag.agent import get_protocol
from effirag.agent.protocols import EpisodeState
from effirag.types import Action
from test_engine_support import DOC_P3, Q, run

REFERENCE = f"\n<Reference>\n{DOC_P3}\nDoc 2 (Triplet) (Blue River, directed by, Ana Lopez)\n</Reference>\n"


def test_tearag_round_trip() -> None:
    p = get_protocol("tearag")
    t1 = p.render_turn(entities=["Blue River"], subquery="who directed Blue River")
    assert t1 == "<entities> Blue River </entities>\n<subquery> who directed Blue River </subquery>"
    t2 = p.render_turn(summary="Ana Lopez directed Blue River.", answer="Ana Lopez")
    assert t2 == "<summary> Ana Lopez directed Blue River. </summary>\nFinal answer: Ana Lopez"
    traj, gen, ret = run("tearag", [t1, t2 + "\nmore text the parser must drop"])
    p0 = p.build_prompt(Q)
    assert "TeaRAG" in p0 and "at most 5 steps" in p0
    assert gen.prompts == [p0, p0 + t1 + REFERENCE]
    assert traj.prompt == p0 + t1 + REFERENCE + t2
    assert ret.calls == [("who directed Blue River", "kag", 2, ("Blue River",), 0)]
    s0, s1 = traj.steps
    assert (s0.action, s0.mode, s0.entities) == (Action.SEARCH, "kag", ["Blue River"])
    assert [(i.kind.value, i.id) for i in s0.items] == [("chunk", "p3"), ("triplet", "t1")]
    assert s0.timings == {"kag_ppr": 0.001}
    assert s0.summary == "Ana Lopez directed Blue River."
    assert s1.action is Action.ANSWER and traj.prediction == "Ana Lopez" and traj.format_ok


def test_tearag_step_limit_is_five() -> None:
    p = get_protocol("tearag")
    first = p.render_turn(entities=["Lyon"], subquery="Lyon river")
    later = p.render_turn(summary="s", entities=["Lyon"], subquery="Lyon river")
    turns = [first] + [later] * 5 + [p.render_turn(answer="Rhone")]
    traj, gen, ret = run("tearag", turns, max_steps=10)
    assert len(ret.calls) == 5
    assert [s.action for s in traj.steps] == [Action.SEARCH] * 5 + [Action.INVALID, Action.ANSWER]
    assert traj.steps[5].error == "retrieval limit 5 reached"
    assert gen.prompts[6].endswith("That was more than 5 steps. Give the final answer now.\n")
    assert traj.prediction == "Rhone" and not traj.format_ok


def test_tearag_parser_cases() -> None:
    p = get_protocol("tearag")
    fresh = EpisodeState(question=Q, prompt="")
    pending = EpisodeState(question=Q, prompt="", pending=0)
    assert p.parse_turn("<subquery> q </subquery>", fresh).error == "<entities>: missing"
    assert p.parse_turn("<entities></entities><subquery> q </subquery>", fresh).action is Action.SEARCH
    assert p.parse_turn("<subquery> q </subquery><entities> A </entities>", fresh).error == "<entities>: missing"
    assert p.parse_turn("Final answer:  ", fresh).error == "Final answer: empty"
    stray = p.parse_turn("Final answer: Stuia </entities>", fresh)
    assert stray.error == "Final answer: contains the tag '</entities>'"
    assert p.parse_turn("Final answer: a < b > c", fresh).answer == "a < b > c"  # not a tag
    assert p.parse_turn("Final answer: x", pending).error == (
        "<summary>: missing (the previous <Reference> needs a summary)"
    )
    r = p.parse_turn("<entities> A; B </entities><subquery> q </subquery>", fresh)
    assert (r.entities, r.query, r.mode) == (("A", "B"), "q", "kag")
