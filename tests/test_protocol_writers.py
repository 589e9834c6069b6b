"""Each protocol's trajectory writer (write_turns) and the masked training segments of gold and sampled trajectories.

A written trajectory is run through the engine with the scripted backend: the segments cut from the engine's
trajectory (AgentProtocol.trajectory_segments) must be exactly the text the generator saw before each turn, plus the
turn, and concatenate to the episode's prompt + transcript; only the policy's turns are trained.
"""

from __future__ import annotations

import random

import pytest

from effirag.agent.protocols import PROTOCOLS, Move, ScriptHop, TrajectoryScript, get_protocol, protocol_class
from effirag.types import Action, Segment, Step, Trajectory
from test_engine_support import run

HOPS = (
    ScriptHop("Who directed Blue River?", "Ana Lopez", ("Blue River",)),
    ScriptHop("Where was Ana Lopez born?", "Lyon", ("Ana Lopez",), known_text="Ana Lopez was born in Lyon."),
)
SEARCH_REPEAT_KNOWN = (Move("search", 0), Move("search", 0, repeat=True), Move("known", 1))
SEARCH_MORE_KNOWN = (Move("search", 0), Move("more", 0, repeat=True), Move("known", 1))
AGENTS = ("searchr1", "routerag", "dsr1", "hiprag", "tearag", "reasonrag")


def script(moves: tuple[Move, ...], calls: list[tuple[object, ...]], **kw: object) -> TrajectoryScript:
    """A two-hop script whose callbacks record their calls; observation i is ``[obs i]``."""

    def observe(hop: int, mode: str) -> str:
        calls.append(("observe", hop, mode))
        return f"\n[obs {len(calls)}]\n"

    def evidence(hop: int, obs: str) -> str:
        calls.append(("evidence", hop, obs.strip()))
        return f"The reference names {HOPS[hop].answer}."

    return TrajectoryScript(
        question="Where was the director of Blue River born?",
        answer="Lyon",
        hops=HOPS,
        moves=moves,
        reason="So the final answer is Lyon.",
        observe=observe,
        evidence=evidence,
        **kw,  # type: ignore[arg-type]
    )


def test_tearag_writer_lays_out_summaries_from_the_scripts_content() -> None:
    calls: list[tuple[object, ...]] = []
    tails: list[int | None] = []

    def tail(next_hop: int | None) -> list[str]:
        tails.append(next_hop)
        return ["Next I need more."] if next_hop is not None else ["That answers the question."]

    moves = (Move("search", 0), Move("known", 1), Move("search", 1))
    turns = get_protocol("tearag").write_turns(
        script(moves, calls, summary_tail=tail, known_in_summary=True), random.Random(0)
    )
    assert [obs for _, obs in turns] == ["\n[obs 1]\n", "\n[obs 3]\n", None]
    assert turns[0][0] == "<entities> Blue River </entities>\n<subquery> Who directed Blue River? </subquery>"
    assert turns[1][0] == (
        "<summary> The reference names Ana Lopez. I already know that Ana Lopez was born in Lyon. Next I need more. "
        "</summary>\n<entities> Ana Lopez </entities>\n<subquery> Where was Ana Lopez born? </subquery>"
    )
    assert (
        turns[2][0] == "<summary> The reference names Lyon. That answers the question. </summary>\nFinal answer: Lyon"
    )
    # callbacks in the order the turns are written: observe, evidence, then the summary's tail (next hop, then None)
    assert calls == [
        ("observe", 0, "kag"),
        ("evidence", 0, "[obs 1]"),
        ("observe", 1, "kag"),
        ("evidence", 1, "[obs 3]"),
    ]
    assert tails == [1, None]


def test_searchr1_family_writers() -> None:
    calls: list[tuple[object, ...]] = []
    turns = get_protocol("searchr1").write_turns(script(SEARCH_REPEAT_KNOWN, calls), random.Random(0))
    assert [t for t, _ in turns] == [
        "<think> I need to find out: Who directed Blue River? </think>\n<search> Who directed Blue River? </search>",
        "<think> The reference names Ana Lopez. Let me check it again: Who directed Blue River? </think>\n"
        "<search> Who directed Blue River? </search>",
        "<think> The reference names Ana Lopez. I already know that Ana Lopez was born in Lyon. So the final answer is "
        "Lyon. </think>\n<answer> Lyon </answer>",
    ]
    more = get_protocol("dsr1").write_turns(script(SEARCH_MORE_KNOWN, []), random.Random(0))
    assert more[1][0] == (
        "<think> The reference names Ana Lopez. These results are not enough; I want more of them. </think>\n"
        "<more info> 3 </more info>"
    )
    with pytest.raises(ValueError, match="no <more info>"):
        get_protocol("searchr1").write_turns(script(SEARCH_MORE_KNOWN, []), random.Random(0))
    # RouteRAG draws one route per search from rng, in order; Search-R1 draws nothing.
    rng = random.Random(3)
    routed = get_protocol("routerag").write_turns(script(SEARCH_REPEAT_KNOWN, []), rng)
    expected = random.Random(3)
    routes = [expected.choice(("passage", "graph", "hybrid")) for _ in range(2)]
    prefix = {"passage": "[passage] ", "graph": "[graph] ", "hybrid": "[graph][passage] "}
    assert [f"<search> {prefix[r]}Who" in t for (t, _), r in zip(routed, routes, strict=False)] == [True, True]
    assert rng.random() == expected.random()
    quiet = random.Random(5)
    get_protocol("searchr1").write_turns(script(SEARCH_REPEAT_KNOWN, []), quiet)
    assert quiet.random() == random.Random(5).random()


def test_plan_capabilities_are_class_attributes() -> None:
    """Which waste an SFT plan may hold is a property of the format, read by make_plan instead of a name list."""
    waste = {n: (protocol_class(n).known_search_waste, protocol_class(n).more_info_waste) for n in AGENTS}
    assert waste == {
        "searchr1": (True, False),
        "routerag": (True, False),
        "dsr1": (True, True),
        "hiprag": (True, False),
        "tearag": (False, False),
        "reasonrag": (True, False),
    }


@pytest.mark.parametrize("name", AGENTS)
def test_written_trajectory_through_the_engine_gives_masked_segments(name: str) -> None:
    """The turns a writer writes run through the engine (scripted backend) to an answer; the sampled trajectory's
    segments are, before each trained turn, exactly the text the generator was given; append-only protocols give one
    list that is the episode's prompt + transcript; nothing but the turns is trained."""
    p = get_protocol(name)
    moves = SEARCH_MORE_KNOWN if name == "dsr1" else SEARCH_REPEAT_KNOWN
    turns = p.write_turns(script(moves, []), random.Random(0))
    texts = [t for t, _ in turns]
    traj, gen, _ = run(name, texts, question="Where was the director of Blue River born?")
    assert traj.prediction == "Lyon" and traj.format_ok, traj.steps[-1].error
    pairs = p.trajectory_segments(traj)
    assert [s.text for pair in pairs for s in pair if s.trained] == texts
    seen = []
    for pair in pairs:
        assert not pair[0].trained
        for j, seg in enumerate(pair):
            if seg.trained:
                seen.append("".join(s.text for s in pair[:j]))
    assert seen == gen.prompts
    if name != "reasonrag":
        assert len(pairs) == 1 and "".join(s.text for s in pairs[0]) == traj.prompt
    else:
        assert len(pairs) == len(texts)  # the prompt is rebuilt before every stage
    # The gold replay of the same turns with the engine's observations gives the same segments.
    observed = [(s.text, s.observation or None) for s in traj.steps if not s.within_turn]
    assert p.training_segments(traj.question, observed) == pairs


def test_sampled_invalid_turns_stay_with_their_feedback_untrained() -> None:
    bad = "<search></search>"
    p = get_protocol("searchr1")
    good = p.write_turns(script((Move("search", 0),), []), random.Random(0))
    traj, _, _ = run("searchr1", [bad, *(t for t, _ in good)])
    assert [s.action for s in traj.steps] == [Action.INVALID, Action.SEARCH, Action.ANSWER]
    [pair] = p.trajectory_segments(traj)
    assert [s.trained for s in pair] == [False, True, False, True, False, True]
    assert pair[1].text == bad and pair[2].text == traj.steps[0].observation  # the engine's feedback
    assert "".join(s.text for s in pair) == traj.prompt
    with pytest.raises(ValueError, match="turn 0 does not parse"):
        p.training_segments(traj.question, [(bad, None)])


def test_sampled_baseline_rebuilds_its_context_prompt() -> None:
    p = get_protocol("naive")
    traj, gen, _ = run("naive", ["<answer> Ana Lopez </answer>"])
    [pair] = p.trajectory_segments(traj)
    assert pair == [Segment(gen.prompts[0], False), Segment("<answer> Ana Lopez </answer>", True)]
    assert "Ana Lopez directed the film Blue River" in pair[0].text
    with pytest.raises(ValueError, match="is of protocol 'naive'"):
        get_protocol("zeroshot").trajectory_segments(traj)


def test_hiprag_steps_inside_a_turn_are_not_turns() -> None:
    p = get_protocol("hiprag")
    texts = [t for t, _ in p.write_turns(script(SEARCH_REPEAT_KNOWN, []), random.Random(0))]
    traj, _, _ = run("hiprag", texts, question="Where was the director of Blue River born?")
    assert [s.within_turn for s in traj.steps] == [False, False, True, False]
    [pair] = p.trajectory_segments(traj)
    assert [s.text for s in pair if s.trained] == texts


def test_every_registered_protocol_writes_a_trajectory() -> None:
    for name in PROTOCOLS:
        turns = get_protocol(name).write_turns(script((Move("search", 0),), []), random.Random(0))
        assert turns and turns[-1][1] is None and "Lyon" in turns[-1][0]


def test_script_rejects_unknown_moves() -> None:
    with pytest.raises(ValueError, match="move 0 has kind 'skip'"):
        script((Move("skip", 0),), [])
    with pytest.raises(ValueError, match="move 1 names hop 2 of 2"):
        script((Move("search", 0), Move("search", 2)), [])


def test_step_round_trip_keeps_within_turn_and_reads_old_records() -> None:
    step = Step(Action.REASON, text="<step> … </step>", within_turn=True)
    assert Step.from_dict(step.to_dict()) == step
    old = {k: v for k, v in step.to_dict().items() if k != "within_turn"}
    assert Step.from_dict(old).within_turn is False
    t = Trajectory("q", "Q?", "hiprag", steps=[step])
    assert Trajectory.from_dict(t.to_dict()).steps == [step]


def test_old_records_move_parsed_extras_to_typed_fields() -> None:
    """Trajectory JSONL written when the parsed fields were free ``extras`` keys still reads, into the typed fields;
    the engine's own bookkeeping stays in extras."""
    old = {
        "action": "search",
        "text": "<step> … </step>",
        "query": "who directed Blue River",
        "extras": {"reasoning": "I need the director.", "conclusion": "Ana Lopez", "feedback_tokens": 3},
    }
    step = Step.from_dict(old)
    assert (step.reasoning, step.conclusion, step.extras) == (
        "I need the director.",
        "Ana Lopez",
        {"feedback_tokens": 3},
    )
    answer = Step.from_dict({"action": "answer", "extras": {"answer": "Ana Lopez", "error": None}})
    assert (answer.answer, answer.error, answer.extras) == ("Ana Lopez", None, {})
    assert Step.from_dict(step.to_dict()) == step
