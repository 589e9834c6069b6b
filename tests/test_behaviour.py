"""The start policy's behaviour mixture: TeaRAG's memory step (parser, renderer, writer, format check), every
protocol's memory and long-winded writing through the engine, and the mixture's rates on a fixed seed."""

from __future__ import annotations

import importlib.util
import json
import random
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from effirag.agent.protocols import EpisodeState, Move, ScriptHop, TrajectoryScript, get_protocol
from effirag.errors import ConfigError
from effirag.rewards.format import check_turns
from effirag.train.behaviour import BehaviourConfig, behaviour_plan, elaborator, long_winded
from effirag.train.gold_paths import GoldHop, GoldPath
from effirag.types import Action, Step, Trajectory
from test_engine_support import run

QUESTION = "Where was the director of Blue River born?"
HOPS = (
    ScriptHop("Who directed Blue River?", "Ana Lopez", ("Blue River",)),
    ScriptHop("Where was Ana Lopez born?", "Lyon", ("Ana Lopez",), known_text="Ana Lopez was born in Lyon."),
)
LONG_WINDED = Path(__file__).resolve().parents[1] / "recipes" / "demo_policy" / "long_winded.py"
AGENTS = ("searchr1", "routerag", "dsr1", "hiprag", "tearag", "reasonrag")


def script(moves: tuple[Move, ...], *, memory_steps: bool = False, verbose: bool = False) -> TrajectoryScript:
    def elaborate(slot: str, hop: int | None) -> str:
        return {"opening": "Let me restate it.", "after_evidence": f"Maybe {hop}.", "before_answer": "Review."}[slot]

    return TrajectoryScript(
        question=QUESTION,
        answer="Lyon",
        hops=HOPS,
        moves=moves,
        reason="So the final answer is Lyon.",
        observe=lambda hop, mode: f"\n[obs {hop}]\n",
        evidence=lambda hop, obs: f"The reference names {HOPS[hop].answer}.",
        memory_steps=memory_steps,
        **({"elaborate": elaborate} if verbose else {}),  # type: ignore[arg-type]
    )


# --- TeaRAG's memory step ---------------------------------------------------------------------------------------
MEMORY = "<entities> Ana Lopez </entities>\n<memory> Where was Ana Lopez born? </memory>\n<summary> I already know that Ana Lopez was born in Lyon. </summary>\n"  # noqa: E501


def test_tearag_memory_step_parses_after_a_summary_and_before_the_answer() -> None:
    p = get_protocol("tearag")
    state = EpisodeState(question=QUESTION, prompt="")
    state.pending = 0
    r = p.parse_turn("<summary> Ana Lopez directed it. </summary>\n" + MEMORY + "Final answer: Lyon", state)
    assert r.action is Action.ANSWER and r.answer == "Lyon"
    assert r.followup is not None and r.followup.summary == "Ana Lopez directed it."
    [sub] = r.substeps
    assert (sub.reasoning, sub.conclusion) == (
        "Where was Ana Lopez born?",
        "I already know that Ana Lopez was born in Lyon.",
    )
    assert sub.text.strip() == MEMORY.strip()


def test_tearag_memory_steps_before_a_search_step() -> None:
    p = get_protocol("tearag")
    two = MEMORY + MEMORY.replace("Ana Lopez", "Bo Rinn")
    r = p.parse_turn(
        two + "<entities> Lyon </entities>\n<subquery> Where is Lyon? </subquery>", EpisodeState(QUESTION, "")
    )
    assert r.action is Action.SEARCH and r.query == "Where is Lyon?" and r.entities == ("Lyon",)
    assert [s.reasoning for s in r.substeps] == ["Where was Ana Lopez born?", "Where was Bo Rinn born?"]


@pytest.mark.parametrize(
    ("text", "pending", "why"),
    [
        ("<entities> A </entities>\n<memory> </memory>\n<summary> x </summary>\nFinal answer: y", False, "blank"),
        ("<memory> q </memory>\n<summary> x </summary>\nFinal answer: y", False, "not a memory step"),
        (MEMORY + "Final answer: y", True, "<summary>: missing"),
        (MEMORY + "I think so.", False, "expected a search step or 'Final answer:'"),
        (MEMORY + "<summary> again </summary>\n<entities> A </entities>\n<subquery> q </subquery>", False, "expected"),
        (MEMORY + "Final answer: y </summary>", False, "contains the tag"),
    ],
)
def test_tearag_malformed_memory_steps_are_invalid(text: str, pending: bool, why: str) -> None:
    state = EpisodeState(QUESTION, "")
    state.pending = 0 if pending else None
    r = get_protocol("tearag").parse_turn(text, state)
    assert r.action is Action.INVALID and why in (r.error or "")


def test_tearag_renders_and_writes_memory_steps() -> None:
    p = get_protocol("tearag")
    assert (
        p.render_memory_step(
            ("Ana Lopez",), "Where was Ana Lopez born?", "I already know that Ana Lopez was born in Lyon."
        )
        == MEMORY
    )  # type: ignore[attr-defined]
    turns = p.write_turns(script((Move("search", 0), Move("known", 1)), memory_steps=True), random.Random(0))
    assert turns[1][0] == "<summary> The reference names Ana Lopez. </summary>\n" + MEMORY + "Final answer: Lyon"
    # without memory_steps the known hop stays unwritten (the gold-path chain's layout)
    plain = p.write_turns(script((Move("search", 0), Move("known", 1))), random.Random(0))
    assert plain[1][0] == "<summary> The reference names Ana Lopez. </summary>\nFinal answer: Lyon"
    # all hops from memory: one turn, no search
    [(only, obs)] = p.write_turns(script((Move("known", 1),), memory_steps=True), random.Random(0))
    assert only == MEMORY + "Final answer: Lyon" and obs is None


def test_tearag_format_check_accepts_memory_steps_and_refuses_a_broken_one() -> None:
    p = get_protocol("tearag")
    turns = [
        t for t, _ in p.write_turns(script((Move("search", 0), Move("known", 1)), memory_steps=True), random.Random(0))
    ]
    assert check_turns("tearag", turns).ok
    broken = [turns[0], turns[1].replace("</memory>", "")]
    assert not check_turns("tearag", broken).ok


# --- every protocol: memory and long-winded writing through the engine ------------------------------------------
@pytest.mark.parametrize("name", AGENTS)
def test_memory_and_verbose_trajectories_run_through_the_engine(name: str) -> None:
    """The known hop answered from memory, every elaboration slot filled: the turns run through the engine to the
    answer with the format kept, each elaboration appears once, and TeaRAG's and HiPRAG's memory steps are REASON
    steps whose reasoning names the hop's sub-question or its knowledge."""
    p = get_protocol(name)
    moves = (Move("search", 0), Move("known", 1))
    texts = [t for t, _ in p.write_turns(script(moves, memory_steps=True, verbose=True), random.Random(0))]
    joined = "".join(texts)
    for sentence in ("Let me restate it.", "Maybe 0.", "Review."):
        assert joined.count(sentence) == 1, (sentence, joined)
    traj, _, _ = run(name, texts, question=QUESTION)
    assert traj.prediction == "Lyon" and traj.format_ok, traj.steps[-1].error
    assert sum(s.action is Action.SEARCH for s in traj.steps) == 1
    reasons = [s for s in traj.steps if s.action is Action.REASON and s.within_turn]
    if name in ("tearag", "hiprag"):
        [memory] = reasons
        assert "Ana Lopez" in (memory.reasoning or "") and "Lyon" in (memory.conclusion or "")
    else:
        assert "Ana Lopez was born in Lyon" in joined


# --- the plan's rates -------------------------------------------------------------------------------------------
def _path(i: int, known: tuple[bool, ...]) -> GoldPath:
    hops = tuple(
        GoldHop(f"Q{i}.{j}?", f"a{j}", None, (), (f"E{j}",), known=k, known_text=f"E{j} is a{j}." if k else "")
        for j, k in enumerate(known)
    )
    return GoldPath(f"p{i}", f"Question {i}?", ("a",), hops)


def test_plan_rates_are_honoured_on_a_fixed_seed() -> None:
    """4,000 three-hop paths (hops known, unknown, known) under known_search 0.8, more_info 0.35, repeat 0.15, with a
    seed fixed: each observed share is within 0.02 of its rate (the binomial standard errors are 0.0045 for the 8,000
    known hops, 0.005 for the ~10,400 searches and 0.0056 for the 4,000 repeat draws, so 0.02 is about 4 of them)."""
    cfg = BehaviourConfig(known_search={"dsr1": 0.8}, repeat_rate={"dsr1": 0.15}, more_info_rate=0.35)
    rng = random.Random(7)
    known_searched = searches = paged = repeats = 0
    for i in range(4000):
        moves, waste = behaviour_plan(_path(i, (True, False, True)), rng, cfg, "dsr1")
        firsts = [m for m in moves if m.kind == "search" and not m.repeat]
        known_searched += sum(m.hop in (0, 2) for m in firsts)
        searches += len(firsts) + sum(m.kind == "search" and m.repeat for m in moves)
        paged += sum(m.kind == "more" for m in moves)
        repeats += "repeat" in waste
        assert sum(m.kind == "known" for m in moves) + len(firsts) == 3  # every hop once, searched or remembered
    assert abs(known_searched / 8000 - 0.8) < 0.02
    assert abs(paged / (searches - repeats) - 0.35) < 0.02
    assert abs(repeats / 4000 - 0.15) < 0.02


def test_plan_follows_the_format_and_the_old_rule() -> None:
    cfg = BehaviourConfig(more_info_rate=1.0, repeat_rate={"searchr1": 1.0, "dsr1": 1.0})
    path = _path(0, (True, False))
    moves, waste = behaviour_plan(path, random.Random(0), cfg, "searchr1", search_known=True)
    assert [m.kind for m in moves] == ["search", "search", "search"] and waste == "known_search,repeat"
    moves, _ = behaviour_plan(path, random.Random(0), cfg, "dsr1")  # known hop from memory (no rate: the old rule)
    assert [m.kind for m in moves][:1] == ["known"] and "more" in [m.kind for m in moves]
    # the repeat follows its search's paging, never splits it
    kinds = [m.kind for m in moves]
    assert kinds[kinds.index("more") - 1] == "search"


def test_repeat_rate_applies_to_its_protocols_only() -> None:
    """repeat_rate {routerag: 1.0}: every RouteRAG plan repeats one search (waste 'repeat'); Search-R1's never does."""
    cfg = BehaviourConfig(repeat_rate={"routerag": 1.0})
    path = _path(0, (False, False))
    rng = random.Random(0)
    for _ in range(20):
        moves, waste = behaviour_plan(path, rng, cfg, "routerag")
        assert sum(m.repeat for m in moves) == 1 and waste == "repeat"
        moves, waste = behaviour_plan(path, rng, cfg, "searchr1")
        assert [m.kind for m in moves] == ["search", "search"] and waste == ""


def test_repeat_position_last_repeats_the_last_search() -> None:
    """repeat_position 'last' on a path of hops (unknown, known, unknown) with the known hop from memory: the repeat
    always follows hop 2's search, the last one, so after hop 0's search no trajectory searches again."""
    cfg = BehaviourConfig(known_search={"routerag": 0.0}, repeat_rate={"routerag": 1.0}, repeat_position="last")
    rng = random.Random(0)
    for _ in range(20):
        moves, waste = behaviour_plan(_path(0, (False, True, False)), rng, cfg, "routerag")
        assert [(m.kind, m.hop, m.repeat) for m in moves] == [
            ("search", 0, False),
            ("known", 1, False),
            ("search", 2, False),
            ("search", 2, True),
        ]
        assert waste == "repeat"
    with pytest.raises(ConfigError, match=r"repeat_position.*first"):
        BehaviourConfig(repeat_position="first")


def test_elaborator_plans_hedges_and_reviews() -> None:
    path = _path(0, (False, False))
    say = elaborator(path, random.Random(0))
    opening = say("opening", None)
    assert "Q0.0?" in opening and "one more step" in opening
    assert "Question 0?" not in opening + say("before_answer", None)  # no whole question to copy
    assert "Q0.1?" not in opening  # a later sub-question names an answer the plan cannot know yet
    assert "a0" in say("after_evidence", 0) and "a0; a1" in say("after_evidence", 1)
    assert "once more" in say("before_answer", None)


@pytest.mark.parametrize("name", AGENTS)
def test_long_winded_recognises_each_sentence_in_every_format(name: str) -> None:
    """A trajectory written with the elaborator is long-winded; the same moves written short are not; and each
    slot's sentence alone (the opening, a hedge, the review) is enough, in the format's own turns."""
    gold = _path(0, (False, False))
    p, moves = get_protocol(name), (Move("search", 0), Move("search", 1))

    def turns(elaborate: object) -> str:
        sc = replace(script(moves), elaborate=elaborate) if elaborate else script(moves)
        return "".join(t for t, _ in p.write_turns(sc, random.Random(0)))

    assert long_winded(turns(elaborator(gold, random.Random(0))))
    assert not long_winded(turns(None))
    for slot in ("opening", "after_evidence", "before_answer"):
        say = elaborator(gold, random.Random(0))
        assert long_winded(turns(lambda s, hop, slot=slot, say=say: say(s, hop) if s == slot else "")), slot


def test_config_names_the_bad_value() -> None:
    with pytest.raises(ConfigError, match="known_search"):
        BehaviourConfig(known_search={"tearag": 1.5})
    with pytest.raises(ConfigError):
        BehaviourConfig(known_search={"nope": 0.5})
    with pytest.raises(ConfigError, match="verbose_rate"):
        BehaviourConfig(verbose_rate={"tearag": -0.1})
    with pytest.raises(ConfigError, match=r"repeat_rate.*routerag: 2"):
        BehaviourConfig(repeat_rate={"routerag": 2.0})
    with pytest.raises(ConfigError, match="more_info_rate"):
        BehaviourConfig(more_info_rate=1.5)
    assert not BehaviourConfig().active and BehaviourConfig(repeat_rate={"routerag": 0.1}).active


def test_builder_writes_the_behaviour_mixture_at_its_rates() -> None:
    """The builder on the Mira Talvenor path (hop 1 known, hop 2 not) with known_search 0.5 and verbose_rate 0.6, 600
    TeaRAG examples from one seed: the known hop is a memory step in about half (within 0.07: 4 standard errors of
    0.02) and searched in the rest, about 60% are long-winded (the opening's step-by-step sentence), and every example
    replays through the parser (the builder would raise otherwise)."""
    from effirag.train.sft_data import SFTDataBuilder, SFTDataConfig
    from test_sft_data import _known_path, words

    cfg = SFTDataConfig(
        protocols=("tearag",), behaviour=BehaviourConfig(known_search={"tearag": 0.5}, verbose_rate={"tearag": 0.6})
    )
    b = SFTDataBuilder([], [], words, cfg)
    rng = random.Random(3)
    path = _known_path()
    counts: Counter[str] = Counter()
    for _ in range(600):
        ex = b.build_one(path, b.protocols["tearag"], rng)
        assert ex is not None
        text = "".join(s.text for s in ex.pairs[0] if s.trained)
        counts["memory"] += "<memory> Where was Mira Talvenor born? </memory>" in text
        counts["searched"] += "<subquery> Where was Mira Talvenor born? </subquery>" in text
        verbose = "step by step, one fact at a time" in text
        counts["verbose"] += verbose
        assert ("verbose" in ex.waste) == verbose
    assert counts["memory"] + counts["searched"] == 600
    assert abs(counts["memory"] / 600 - 0.5) < 0.07 and abs(counts["verbose"] / 600 - 0.6) < 0.07


def test_memory_pairs_add_a_contrast_row_of_the_same_path() -> None:
    """``memory_pairs`` 0.4 beside ``known_search`` 1.0 on the Mira Talvenor path (hop 1 known), 500 builds of one
    TeaRAG path from one seed: every drawn row searches the known hop, and about 40% are followed by a twin (id ending
    in '~memory', within 0.08: 4 standard errors of 0.022) in which the known hop is a memory step and the unknown hop
    is still searched. A path without a known hop gets no twin."""
    from effirag.train.sft_data import SFTDataBuilder, SFTDataConfig
    from test_sft_data import _known_path, words

    cfg = SFTDataConfig(
        protocols=("tearag",),
        single_hop_rate=0.0,
        behaviour=BehaviourConfig(known_search={"tearag": 1.0}, memory_pairs={"tearag": 0.4}),
    )
    b = SFTDataBuilder([], [], words, cfg)
    path = _known_path()
    rows = b.build([path] * 500)
    twins = [ex for ex in rows if ex.id.endswith("~memory")]
    drawn = [ex for ex in rows if not ex.id.endswith("~memory")]
    assert len(drawn) == 500 and abs(len(twins) / 500 - 0.4) < 0.08
    for ex in drawn:
        assert "<subquery> Where was Mira Talvenor born? </subquery>" in "".join(s.text for s in ex.pairs[0])
    for ex in twins:
        text = "".join(s.text for s in ex.pairs[0])
        assert "<memory> Where was Mira Talvenor born? </memory>" in text and "<subquery>" in text
    unknown = replace(path, hops=tuple(replace(h, known=False) for h in path.hops))
    assert not [ex for ex in b.build([unknown] * 50) if ex.id.endswith("~memory")]
    with pytest.raises(ConfigError, match="memory_pairs"):
        BehaviourConfig(memory_pairs={"tearag": 2.0})


# --- HiPRAG's step reasoning with the sub-question before the choice --------------------------------------------
def test_hiprag_question_first_writes_the_choice_after_the_sub_question() -> None:
    """``question_first`` on the two-hop script (hop 0 searched, hop 1 known): the search step's reasoning is
    'Who directed Blue River? I need to search for it.' and the memory step's 'Where was Ana Lopez born? I know the
    answer.' (the lead-first wording, 'I need to search for: Who directed Blue River?', is the default); the turns run
    through the engine to the answer with the memory step a REASON step."""
    p = get_protocol("hiprag")
    moves = (Move("search", 0), Move("known", 1))
    first = replace(script(moves), question_first=True)
    texts = [t for t, _ in p.write_turns(first, random.Random(0))]
    joined = "".join(texts)
    assert "<reasoning> Who directed Blue River? I need to search for it. </reasoning>" in joined
    assert "<reasoning> Where was Ana Lopez born? I know the answer. </reasoning>" in joined
    assert "I need to search for:" not in joined and "I know the answer to:" not in joined
    default = "".join(t for t, _ in p.write_turns(script(moves), random.Random(0)))
    assert "<reasoning> I need to search for: Who directed Blue River? </reasoning>" in default
    traj, _, _ = run("hiprag", texts, question=QUESTION)
    assert traj.prediction == "Lyon" and traj.format_ok, traj.steps[-1].error
    [memory] = [s for s in traj.steps if s.action is Action.REASON and s.within_turn]
    assert memory.reasoning == "Where was Ana Lopez born? I know the answer."
    with pytest.raises(ValueError, match="kind 'recall'"):
        p.step_reasoning("Q?", "recall")  # type: ignore[attr-defined]


def test_builder_passes_question_first_to_the_writer() -> None:
    """``BehaviourConfig.question_first`` reaches the HiPRAG writer through the SFT builder: with known_search 1.0 on
    the Mira Talvenor path every row's search step states the sub-question first."""
    from effirag.train.sft_data import SFTDataBuilder, SFTDataConfig
    from test_sft_data import _known_path, words

    behaviour = BehaviourConfig(known_search={"hiprag": 1.0}, question_first=True)
    cfg = SFTDataConfig(protocols=("hiprag",), single_hop_rate=0.0, behaviour=behaviour)
    [ex] = SFTDataBuilder([], [], words, cfg).build([_known_path()])
    text = "".join(s.text for s in ex.pairs[0])
    assert "<reasoning> Where was Mira Talvenor born? I need to search for it. </reasoning>" in text, text


def test_long_winded_recipe_counts_generated_text_only(tmp_path: Path) -> None:
    """recipes/demo_policy/long_winded.py on three hand-made trajectories: one writes the hedge (long-winded), one
    is short and ends at the step limit, one is short but shown the hedge in an observation (retrieved text, not
    the policy's) → 1 long-winded of 3; ends answer 2, max_steps 1."""
    spec = importlib.util.spec_from_file_location("long_winded", LONG_WINDED)
    recipe = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(recipe)  # type: ignore[union-attr]
    hedge = elaborator(_path(0, (False,)), random.Random(0))("after_evidence", 0)
    steps = (
        Step(Action.SEARCH, text=f"<summary> {hedge} </summary>"),
        Step(Action.SEARCH, text="<subquery> Q? </subquery>"),
        Step(Action.SEARCH, text="short", observation=hedge),
    )
    ends = ("answer", "max_steps", "answer")
    trajs = [Trajectory(f"q{i}", "Q?", "tearag", [steps[i]], None, end=e) for i, e in enumerate(ends)]
    (tmp_path / "trajectories.jsonl").write_text("".join(json.dumps(t.to_dict()) + "\n" for t in trajs))
    got = recipe.counts(tmp_path)
    assert (got["trajectories"], got["long_winded"], got["ends"]) == (3, 1, {"answer": 2, "max_steps": 1})
