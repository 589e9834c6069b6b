"""Round trips of the Search-R1 family (Search-R1, RouteRAG, Dynamic Search-R1): actions, records and every prompt."""

from __future__ import annotations

from effirag.agent import get_protocol
from effirag.agent.protocols import RETHINK, EpisodeState
from effirag.types import Action
from test_engine_support import DOC_P3, DOC_P4, Q, run

INFO = f"\n\n<information>{DOC_P3}\n{DOC_P4}</information>\n\n"


def test_searchr1_round_trip_with_invalid_turn() -> None:
    p = get_protocol("searchr1")
    t1 = p.render_search("I need the director.", "who directed Blue River")
    assert t1 == "<think> I need the director. </think>\n<search> who directed Blue River </search>"
    bad = "<think> hmm </think> <search></search>"
    t3 = p.render_answer("Ana Lopez directed it.", "Ana Lopez")
    # The backend cuts at the stop string: the trailing "<answer> x </answer>" never reaches the engine.
    traj, gen, ret = run("searchr1", [t1 + " <answer> x </answer>", bad, t3])
    p0 = p.build_prompt(Q)
    assert "Search-R1" in p0 and p0.endswith(f"Question: {Q}\n")
    assert gen.prompts == [p0, p0 + t1 + INFO, p0 + t1 + INFO + bad + f"\n{RETHINK}\n"]
    assert traj.prompt == gen.prompts[-1] + t3
    assert [s.action for s in traj.steps] == [Action.SEARCH, Action.INVALID, Action.ANSWER]
    s0 = traj.steps[0]
    assert (s0.query, s0.mode, [it.id for it in s0.items]) == ("who directed Blue River", "passage", ["p3", "p4"])
    assert s0.observation == INFO and s0.generated_tokens == 12 and s0.inserted_tokens == gen.count_tokens(INFO)
    assert traj.steps[1].error == "<search>: empty"
    assert (s0.think, traj.steps[1].think, traj.steps[2].think) == (
        "I need the director.",
        "hmm",
        "Ana Lopez directed it.",
    )
    assert traj.steps[2].answer == "Ana Lopez" and s0.answer is None
    assert traj.steps[1].inserted_tokens == 0 and traj.steps[1].extras["feedback_tokens"] == 8
    assert traj.prediction == "Ana Lopez" and traj.format_ok is False  # an invalid turn breaks the format
    assert ret.calls == [("who directed Blue River", "passage", 2, (), 0)]


def test_searchr1_clean_episode_is_format_ok() -> None:
    p = get_protocol("searchr1")
    traj, _, _ = run("searchr1", [p.render_search("a", "Blue River director"), p.render_answer("b", "Ana Lopez")])
    assert traj.format_ok and traj.prediction == "Ana Lopez" and traj.n_searches == 1


def test_routerag_routes_become_modes() -> None:
    p = get_protocol("routerag")
    assert "RouteRAG" in p.build_prompt(Q)
    turns = [
        p.render_search("a", "Blue River director", "graph"),
        p.render_search("b", "Blue River director", "hybrid"),
        "<search> Blue River director </search>",
        "<search> [web] Blue River </search>",
        p.render_answer("c", "Ana Lopez"),
    ]
    assert turns[1].endswith("<search> [graph][passage] Blue River director </search>")
    traj, gen, ret = run("routerag", turns)
    assert [s.action for s in traj.steps] == [Action.SEARCH] * 3 + [Action.INVALID, Action.ANSWER]
    assert [s.mode for s in traj.steps[:3]] == ["graph", "hybrid", "passage"]
    assert {s.query for s in traj.steps[:3]} == {"Blue River director"}
    assert "malformed route" in traj.steps[3].error
    assert [c[1] for c in ret.calls] == ["graph", "hybrid", "passage"]
    assert gen.prompts[1] == p.build_prompt(Q) + turns[0] + INFO


def test_dsr1_more_info_pages_the_last_query() -> None:
    p = get_protocol("dsr1")
    assert "Dynamic Search-R1" in p.build_prompt(Q)
    t1 = p.render_search("a", "who directed Blue River")
    t2 = p.render_more_info("need more", 2)
    t3 = "<more info> 99 </more info>"
    t4 = p.render_answer("b", "Ana Lopez")
    traj, gen, ret = run("dsr1", [t1, t2, t3, t4])
    more = "\n\n<information>Doc 3 (Title: Lyon) Lyon is a city in France on the Rhone river.\n" + (
        "Doc 4 (Title: Rhone) The Rhone river flows from Switzerland to the Mediterranean Sea.</information>\n\n"
    )
    p0 = p.build_prompt(Q)
    assert gen.prompts[2] == p0 + t1 + INFO + t2 + more
    assert gen.prompts[3] == p0 + t1 + INFO + t2 + more + t3 + f"\n{RETHINK}\n"
    assert [s.action for s in traj.steps] == [Action.SEARCH, Action.MORE_INFO, Action.INVALID, Action.ANSWER]
    assert ret.calls[1] == ("who directed Blue River", "passage", 2, (), 2)
    assert [it.id for it in traj.steps[1].items] == ["p1", "p2"]
    assert traj.steps[1].query == "who directed Blue River"
    assert "outside 1..10" in traj.steps[2].error
    assert traj.n_searches == 2


def test_dsr1_more_info_before_search_is_invalid() -> None:
    p = get_protocol("dsr1")
    traj, _, ret = run("dsr1", [p.render_more_info("x", 3), p.render_answer("y", "z")])
    assert [s.action for s in traj.steps] == [Action.INVALID, Action.ANSWER]
    assert traj.steps[0].error == "<more info> before any search" and ret.calls == []


def test_searchr1_parser_statuses() -> None:
    p = get_protocol("searchr1")
    st = EpisodeState(question=Q, prompt="")
    cases = {
        "<search> a </search>": (Action.SEARCH, None),
        "<answer> a </answer> <search> b </search>": (Action.ANSWER, None),  # text after the first closer is cut
        "<search> a <search> b </search>": (Action.INVALID, "<search>: malformed"),
        "<answer></answer>": (Action.INVALID, "<answer>: empty"),
        "<answer> open": (Action.INVALID, "no action tag closed (<answer>: malformed)"),
        "plain text": (Action.INVALID, "no action tag closed"),
        "<answer> a <search> b </search>": (Action.INVALID, "more than one action: <answer>: malformed"),
        "<more info> 2 </more info>": (Action.INVALID, "no action tag closed"),  # not a Search-R1 action
    }
    for text, (action, error) in cases.items():
        r = p.parse_turn(text, st)
        assert (r.action, r.error) == (action, error), text
    assert p.parse_turn("<answer> a </answer> tail", st).text == "<answer> a </answer>"
