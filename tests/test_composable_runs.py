"""A run's protocol and its retrieval mode are chosen apart: scripted episodes over a real index, every pairing's steps
searched in the run's mode, the answer parsed, and the trajectory read back from JSON unchanged; impossible pairings
fail at run start with one error naming protocol and mode."""

from __future__ import annotations

import json
import logging

import pytest

from effirag.agent import EngineConfig, get_protocol, run_episodes
from effirag.errors import ConfigError
from effirag.llm.scripted import ScriptedGenerator
from effirag.retrieval.facade import EffiRetriever
from effirag.types import Action, ItemKind, Trajectory

Q = "When was the Dutch East India Company founded?"
SUBQUERY = "When was the Dutch East India Company founded?"
SCRIPTS = {
    "hiprag": [
        "<think>\n<step>\n<reasoning> I need the founding year. </reasoning>\n<search> " + SUBQUERY + " </search>",
        "<conclusion> It was founded in 1602. </conclusion>\n</step>\n</think>\n<answer> 1602 </answer>",
    ],
    "searchr1": [
        "<think> I need the founding year. </think>\n<search> " + SUBQUERY + " </search>",
        "<think> The company was founded in 1602. </think>\n<answer> 1602 </answer>",
    ],
    "tearag": [
        "<entities> Dutch East India Company </entities>\n<subquery> " + SUBQUERY + " </subquery>",
        "<summary> It was founded in 1602. </summary>\nFinal answer: 1602",
    ],
}
# the stage timings only each mode's component records: proof the search ran in that mode
MODE_TIMING = {"kag": "kag_ppr", "hybrid": "fusion", "passage": "semantic"}


@pytest.fixture(scope="module")
def retriever(small_retriever: EffiRetriever) -> EffiRetriever:
    return small_retriever


@pytest.mark.parametrize(("protocol", "mode"), [("hiprag", "kag"), ("searchr1", "hybrid"), ("tearag", "passage")])
def test_protocol_over_another_mode_round_trips(retriever: EffiRetriever, protocol: str, mode: str) -> None:
    gen = ScriptedGenerator(SCRIPTS[protocol])
    [t] = run_episodes(gen, retriever, get_protocol(protocol), [Q], EngineConfig(k=2, mode=mode))
    assert t.end == "answer" and t.extras["tool_errors"] == 0
    assert (t.prediction, t.format_ok) == ("1602", True)
    searches = [s for s in t.steps if s.action is Action.SEARCH]
    assert len(searches) == 1 and t.steps[-1].action is Action.ANSWER
    [s] = searches
    assert (s.query, s.mode) == (SUBQUERY, mode)
    assert MODE_TIMING[mode] in s.timings
    assert all(other not in s.timings for m, other in MODE_TIMING.items() if m != mode and other != "semantic")
    assert s.items and len(s.items) <= 2 and "p2" in {it.id for it in s.items}  # the founding passage
    if mode != "kag":
        assert {it.kind for it in s.items} == {ItemKind.CHUNK}
    if protocol == "tearag":
        assert s.entities == ["Dutch East India Company"]  # named by the format, recorded, unused by passage mode
    back = Trajectory.from_dict(json.loads(json.dumps(t.to_dict())))
    assert back.to_dict() == t.to_dict()
    assert [(b.action, b.mode, [i.id for i in b.items]) for b in back.steps] == [
        (a.action, a.mode, [i.id for i in a.items]) for a in t.steps
    ]


def test_default_mode_is_the_protocols_own(retriever: EffiRetriever) -> None:
    [t] = run_episodes(ScriptedGenerator(SCRIPTS["tearag"]), retriever, get_protocol("tearag"), [Q], EngineConfig(k=2))
    assert [s.mode for s in t.steps if s.action is Action.SEARCH] == ["kag"]
    [t] = run_episodes(ScriptedGenerator(SCRIPTS["searchr1"]), retriever, get_protocol("searchr1"), [Q])
    assert [s.mode for s in t.steps if s.action is Action.SEARCH] == ["passage"]


def test_single_round_baseline_retrieves_in_the_run_mode(retriever: EffiRetriever) -> None:
    gen = ScriptedGenerator(["<answer> 1602 </answer>"])
    [t] = run_episodes(gen, retriever, get_protocol("naive"), [Q], EngineConfig(k=2, mode="hybrid"))
    assert t.steps[0].mode == "hybrid" and "fusion" in t.steps[0].timings and t.prediction == "1602"


@pytest.mark.parametrize(
    ("protocol", "mode", "why"),
    [
        ("routerag", "hybrid", "its model picks the retrieval mode of each search"),
        ("zeroshot", "passage", "it never retrieves"),
        ("single-ppr", "passage", "defined by its own retrieval mode 'kag'"),
        ("single-con", "kag", "defined by its own retrieval mode 'chunks_triplets'"),
    ],
)
def test_impossible_pairing_fails_at_run_start(retriever: EffiRetriever, protocol: str, mode: str, why: str) -> None:
    gen = ScriptedGenerator(["<answer> x </answer>"])
    with pytest.raises(ConfigError) as err:
        run_episodes(gen, retriever, get_protocol(protocol), [Q], EngineConfig(mode=mode))
    msg = str(err.value)
    assert f"mode={mode!r}" in msg and f"protocol {protocol!r}" in msg and why in msg and "\n" not in msg
    assert gen.calls == 0  # refused before the first turn


def test_bound_baseline_accepts_its_own_mode(retriever: EffiRetriever) -> None:
    gen = ScriptedGenerator(["<answer> 1602 </answer>"])
    [t] = run_episodes(gen, retriever, get_protocol("single-ppr"), [Q], EngineConfig(k=2, mode="kag"))
    assert t.steps[0].mode == "kag" and t.prediction == "1602"


def test_entity_mismatch_is_said_once(retriever: EffiRetriever, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="effirag.agent.engine"):
        run_episodes(
            ScriptedGenerator(SCRIPTS["tearag"]), retriever, get_protocol("tearag"), [Q], EngineConfig(mode="passage")
        )
        run_episodes(
            ScriptedGenerator(SCRIPTS["hiprag"]), retriever, get_protocol("hiprag"), [Q], EngineConfig(mode="kag")
        )
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "protocol 'tearag' names key entities that mode 'passage' does not use",
        "mode 'kag' seeds with key entities that protocol 'hiprag' does not name: the query alone",
    ]


def test_unknown_mode_names_the_known() -> None:
    with pytest.raises(ConfigError, match=r"EngineConfig.mode='telepathy'.*passage, sparse, graph, hybrid, kag"):
        EngineConfig(mode="telepathy")
