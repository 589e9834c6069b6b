"""Format rewards per protocol — table-driven, one comment per case. Built on the protocols' own parsers."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from effirag.agent.engine import run_episodes
from effirag.agent.protocols import get_protocol
from effirag.integrations.verl import compute_score
from effirag.llm.scripted import ScriptedGenerator
from effirag.retrieval.base import RetrievalResult
from effirag.rewards.compose import RewardConfig
from effirag.rewards.format import (
    check_turns,
    format_reward,
    hiprag_format_reward,
    searchr1_format_reward,
    tearag_format_reward,
)
from effirag.train.objective import build_objective
from effirag.types import ItemKind, RetrievedItem

T = "<think> I need the director. </think>\n"
SEARCH = T + "<search> who directed Glass Harbor </search>"
ANSWER = "<think> Found it. </think>\n<answer> Mira Talvenor </answer>"

SEARCH_R1_CASES: list[tuple[str, list[str], float]] = [
    # answer at once, with its <think>: the shortest valid episode
    ("searchr1", [ANSWER], 1.0),
    # one search, then the answer
    ("searchr1", [SEARCH, ANSWER], 1.0),
    # two searches, then the answer
    ("searchr1", [SEARCH, SEARCH, ANSWER], 1.0),
    # no turns at all: an empty trajectory has no answer
    ("searchr1", [], 0.0),
    # the answer turn lacks <think>: the state machine needs think before every action
    ("searchr1", [SEARCH, "<answer> Mira Talvenor </answer>"], 0.0),
    # a search turn lacks <think>
    ("searchr1", ["<search> q </search>", ANSWER], 0.0),
    # two <think> blocks in one turn (MULTIPLE)
    ("searchr1", [T + T + "<answer> x </answer>"], 0.0),
    # empty <search>
    ("searchr1", [T + "<search>  </search>", ANSWER], 0.0),
    # empty <answer>
    ("searchr1", [T + "<answer> </answer>"], 0.0),
    # no action tag closed
    ("searchr1", [T + "I will now answer."], 0.0),
    # a second action after the first in one turn: text after the action tag
    ("searchr1", [SEARCH + "<answer> x </answer>"], 0.0),
    # ends with a search: no answer
    ("searchr1", [SEARCH], 0.0),
    # a turn after the answer
    ("searchr1", [ANSWER, ANSWER], 0.0),
    # <more info> is not Search-R1
    ("searchr1", [SEARCH, T + "<more info> 3 </more info>", ANSWER], 0.0),
    # RouteRAG: a [graph] route prefix is valid
    ("routerag", [T + "<search> [graph] who directed Glass Harbor </search>", ANSWER], 1.0),
    # RouteRAG: the hybrid route [graph][passage]
    ("routerag", [T + "<search> [graph][passage] q </search>", ANSWER], 1.0),
    # RouteRAG: an unknown route
    ("routerag", [T + "<search> [web] q </search>", ANSWER], 0.0),
    # Dynamic Search-R1: deep paging after a search
    ("dsr1", [SEARCH, T + "<more info> 3 </more info>", ANSWER], 1.0),
    # Dynamic Search-R1: <more info> before any search
    ("dsr1", [T + "<more info> 3 </more info>", ANSWER], 0.0),
    # Dynamic Search-R1: k is not a number
    ("dsr1", [SEARCH, T + "<more info> many </more info>", ANSWER], 0.0),
]


@pytest.mark.parametrize(("protocol", "turns", "expected"), SEARCH_R1_CASES)
def test_searchr1_family_format(protocol: str, turns: list[str], expected: float) -> None:
    assert searchr1_format_reward(turns, protocol) == expected
    assert format_reward(protocol, turns) == expected


def _step(entities: str, subquery: str, summary: str | None = None) -> str:
    head = f"<summary> {summary} </summary>\n" if summary else ""
    return head + f"<entities> {entities} </entities>\n<subquery> {subquery} </subquery>"


TEARAG_CASES: list[tuple[list[str], float]] = [
    # one step, then the summary and the final answer
    (
        [
            _step("Glass Harbor", "Who directed Glass Harbor?"),
            "<summary> Mira directed it. </summary>\nFinal answer: Mira",
        ],
        1.0,
    ),
    # two steps, each reference summarised
    (
        [
            _step("Glass Harbor", "Who directed Glass Harbor?"),
            _step("Mira Talvenor", "Where was Mira Talvenor born?", summary="Mira directed it."),
            "<summary> She was born in Arvel. </summary>\nFinal answer: Arvel",
        ],
        1.0,
    ),
    # the answer with no step (known fact, nothing to retrieve): the parser accepts it
    (["Final answer: Arvel"], 1.0),
    # an empty entity list is allowed by the step grammar (EMPTY, not MISSING)
    ([_step("", "Who directed Glass Harbor?"), "<summary> s </summary>\nFinal answer: Mira"], 1.0),
    # no turns
    ([], 0.0),
    # the reference is not summarised before the answer
    ([_step("Glass Harbor", "Who directed Glass Harbor?"), "Final answer: Mira"], 0.0),
    # entities after the subquery's opening tag
    (["<subquery> <entities> A </entities> Who is A? </subquery>", "<summary> s </summary>\nFinal answer: x"], 0.0),
    # no <entities> tag at all
    (["<subquery> Who directed Glass Harbor? </subquery>", "<summary> s </summary>\nFinal answer: Mira"], 0.0),
    # empty final answer
    ([_step("A", "Who is A?"), "<summary> s </summary>\nFinal answer: "], 0.0),
    # ends with a subquery: no answer
    ([_step("A", "Who is A?")], 0.0),
    # six steps: more than TeaRAG's 5
    ([_step("A", "q?")] + [_step("A", "q?", summary="s")] * 5 + ["<summary> s </summary>\nFinal answer: x"], 0.0),
    # exactly five steps is allowed
    ([_step("A", "q?")] + [_step("A", "q?", summary="s")] * 4 + ["<summary> s </summary>\nFinal answer: x"], 1.0),
]


@pytest.mark.parametrize(("turns", "expected"), TEARAG_CASES)
def test_tearag_format(turns: list[str], expected: float) -> None:
    assert tearag_format_reward(turns) == expected


NS = "<step>\n<reasoning> I know this. </reasoning>\n<conclusion> Arvel is in Norland. </conclusion>\n</step>\n"
SS = (
    "<step>\n<reasoning> I need the director. </reasoning>\n<search> who directed Glass Harbor </search>\n"
    "<context>\nDoc 1 Glass Harbor was directed by Mira.\n</context>\n<conclusion> Mira directed it. </conclusion>\n"
    "</step>\n"
)
END = "</think>\n<answer> Mira </answer>"

HIPRAG_CASES: list[tuple[str, float]] = [
    # one non-search step, then the answer
    ("<think>\n" + NS + END, 1.0),
    # a search step and a non-search step
    ("<think>\n" + SS + NS + END, 1.0),
    # a search step whose context came back empty is still well-formed
    ("<think>\n" + SS.replace("Doc 1 Glass Harbor was directed by Mira.", "") + END, 1.0),
    # empty transcript
    ("", 0.0),
    # no <think>
    (NS + END, 0.0),
    # <think> with no step
    ("<think>\n" + END, 0.0),
    # a step without conclusion
    ("<think>\n<step><reasoning> r </reasoning></step>\n" + END, 0.0),
    # a blank conclusion
    ("<think>\n" + NS.replace("Arvel is in Norland.", " ") + END, 0.0),
    # search before reasoning: tags out of order
    ("<think>\n<step><search> q </search><reasoning> r </reasoning><conclusion> c </conclusion></step>" + END, 0.0),
    # two answers
    ("<think>\n" + NS + END + "<answer> x </answer>", 0.0),
    # text after the answer
    ("<think>\n" + NS + END + " trailing", 0.0),
    # empty answer
    ("<think>\n" + NS + "</think>\n<answer> </answer>", 0.0),
]


@pytest.mark.parametrize(("transcript", "expected"), HIPRAG_CASES)
def test_hiprag_format(transcript: str, expected: float) -> None:
    assert hiprag_format_reward(transcript) == expected


def test_hiprag_turn_replay() -> None:
    """The same rule through the turn replay: turn 1 opens <think> and a search step; turn 2 closes it with its
    conclusion, adds a non-search step and answers."""
    turn1 = "<think>\n<step>\n<reasoning> I need the director. </reasoning>\n<search> who directed X </search>"
    turn2 = "<conclusion> Mira directed it. </conclusion>\n</step>\n" + NS + END
    assert format_reward("hiprag", [turn1, turn2]) == 1.0
    # the conclusion of the search step is missing
    assert format_reward("hiprag", [turn1, NS + END]) == 0.0


def test_check_turns_names_the_violation() -> None:
    """The verdict says which turn broke the format and why; the Search-R1 reward refuses other protocols."""
    v = check_turns("searchr1", [SEARCH, T + "<search> </search>"])
    assert not v.ok and v.turn == 1 and "empty" in v.reason
    v = check_turns("searchr1", [SEARCH, "<answer> Mira </answer>"])
    assert not v.ok and v.turn == 1 and "<think>" in v.reason
    with pytest.raises(ValueError, match="Search-R1 family"):
        searchr1_format_reward([ANSWER], "tearag")


class _OneDoc:
    """A retriever double: every query returns one fixed passage."""

    def retrieve(
        self, query: str, mode: str = "passage", k: int = 5, entities: Sequence[str] | None = None, offset: int = 0
    ) -> RetrievalResult:
        return RetrievalResult([RetrievedItem(ItemKind.CHUNK, "d1", "Glass Harbor was directed by Mira.", 1.0)])


ENGINE_CASES: list[tuple[str, list[str], bool]] = [
    # Search-R1: search then answer (valid)
    ("searchr1", [SEARCH, ANSWER], True),
    # Search-R1: an empty search is answered with "rethink", then the answer (invalid episode)
    ("searchr1", [T + "<search> </search>", ANSWER], False),
    # Search-R1 (issue #58's episode): the answer turn has no <think>; the parser accepts the answer, the paper's
    # state machine does not
    ("searchr1", [SEARCH, "<answer> Mira Talvenor </answer>"], False),
    # RouteRAG: a routed search without <think>
    ("routerag", ["<search> [graph] who directed Glass Harbor </search>", ANSWER], False),
    # Dynamic Search-R1: search, <more info>, answer, each with its <think> (valid)
    ("dsr1", [SEARCH, T + "<more info> 3 </more info>", ANSWER], True),
    # TeaRAG: one step, summary, answer (valid)
    ("tearag", [_step("Glass Harbor", "Who directed it?"), "<summary> Mira. </summary>\nFinal answer: Mira"], True),
    # TeaRAG: the summary is missing, then a corrected turn (invalid episode)
    (
        "tearag",
        [_step("Glass Harbor", "Who directed it?"), "Final answer: Mira", "<summary> s </summary>\nFinal answer: Mira"],
        False,
    ),
    # HiPRAG: one search step and its conclusion (valid)
    (
        "hiprag",
        [
            "<think>\n<step><reasoning> r </reasoning><search> q </search>",
            "<conclusion> c </conclusion></step>\n" + END,
        ],
        True,
    ),
    # ReasonRAG: query, evidence, answer (valid)
    ("reasonrag", ["r\n<query> who </query>", "<evidence> Mira </evidence>", "r\n<answer> Mira </answer>"], True),
    # ReasonRAG: a reasoning turn with no action, then the answer (invalid episode)
    ("reasonrag", ["I am not sure.", "r\n<answer> Mira </answer>"], False),
    # naive RAG (retrieves before its one turn): the answer (valid)
    ("naive", ["<answer> Mira </answer>"], True),
    # zero-shot: no <answer> tag (invalid)
    ("zeroshot", ["Mira"], False),
]


@pytest.mark.parametrize(("protocol", "completions", "ok"), ENGINE_CASES)
def test_format_reward_agrees_with_engine(protocol: str, completions: list[str], ok: bool) -> None:
    """The engine's format_ok is the protocol's format_check; the reward on the recorded turns agrees."""
    p = get_protocol(protocol)
    [traj] = run_episodes(ScriptedGenerator(completions), _OneDoc(), p, ["Who directed it?"])
    turns = [s.text for s in traj.steps if not s.within_turn and (s.text or p.pre_retrieval_mode is None)]
    assert traj.format_ok is ok
    assert p.format_check(traj).ok is ok
    assert format_reward(protocol, turns) == float(ok)


def test_issue_58_episode_scores_the_same_everywhere() -> None:
    """Search-R1, search then an answer turn without <think>: the engine's format_ok, the format reward on its turns,
    the ``format`` reward term of a run and verl's compute_score all give 0 (the engine used to say True)."""
    completions = [SEARCH, "<answer> Mira Talvenor </answer>"]
    [traj] = run_episodes(ScriptedGenerator(completions), _OneDoc(), get_protocol("searchr1"), ["Who directed it?"])
    assert traj.prediction == "Mira Talvenor" and traj.format_ok is False
    assert searchr1_format_reward(completions) == 0.0
    objective = build_objective(RewardConfig(format_weight=1.0), "grpo", None)
    assert objective.components([traj], [["Mira Talvenor"]], 1)["format"] == [0.0]
    info = "\n\n<information>Doc 1 Glass Harbor was directed by Mira.</information>\n\n"
    got = compute_score(
        "effirag/searchr1/musique", completions[0] + info + completions[1], "Mira Talvenor", None, format_weight=1.0
    )
    assert got["format"] == 0.0 and got["format_ok"] == 0.0 and got["em"] == 1.0
