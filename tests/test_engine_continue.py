"""Continuing an unfinished episode: ``run_episodes`` given a trajectory picks up where the engine stopped it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from effirag.agent import EngineConfig, get_protocol, run_episodes
from effirag.agent.protocols.replay import replay_state
from effirag.errors import BackendError
from effirag.llm.scripted import ScriptedGenerator
from effirag.types import Action
from test_engine_support import LexicalRetriever

Q = "What is the capital of Spain?"
TURNS = [
    "I need the capital.\n<query> capital of Spain </query>",
    "<evidence> Madrid is the capital of Spain. </evidence>",
    "The evidence is enough.\n<answer> Madrid </answer>",
]


def _run(cfg: EngineConfig, start: object, gen: ScriptedGenerator) -> list:
    return run_episodes(gen, LexicalRetriever(), get_protocol("reasonrag"), [start], cfg)  # type: ignore[list-item]


@pytest.mark.parametrize("cut", [1, 2])
def test_cut_then_continued_equals_one_run(cut: int) -> None:
    """A ReasonRAG episode stopped after ``cut`` turns (max_steps) and continued gives the same steps, prompts,
    prediction and token ledger as the episode run in one go: the rebuilt state (stage, pending evidence, memory) is
    the engine's."""
    cfg = EngineConfig(k=1, max_steps=6)
    whole_gen = ScriptedGenerator(TURNS)
    [whole] = _run(cfg, Q, whole_gen)
    gen = ScriptedGenerator(TURNS)
    [part] = _run(replace(cfg, max_steps=cut), Q, gen)
    assert part.end == "max_steps" and len(part.steps) == cut
    [cont] = _run(cfg, part, gen)
    assert gen.prompts == whole_gen.prompts  # the policy saw exactly the same prompts
    assert [s.text for s in cont.steps] == TURNS
    assert [s.action for s in cont.steps] == [Action.SEARCH, Action.REASON, Action.ANSWER]
    assert cont.steps[0].evidence == "Madrid is the capital of Spain."  # the follow-up completed the copied step
    if cut == 1:  # the evidence came after the cut: the follow-up wrote into the copy, never the prefix's record
        assert part.steps[0].evidence is None
    assert (cont.prediction, cont.format_ok, cont.prompt) == (whole.prediction, whole.format_ok, whole.prompt)
    assert (cont.turns, cont.end) == (whole.turns, whole.end)
    for key in ("used_tokens", "prompt_tokens"):
        assert cont.extras[key] == whole.extras[key], key


def test_continue_samples_n_and_refuses_bad_prefixes() -> None:
    """n continuations of one prefix each get the prefix's steps; a finished trajectory, another protocol's, or the
    token path are refused."""
    gen = ScriptedGenerator([TURNS[0], TURNS[1], "<evidence> None </evidence>"])
    [part] = _run(EngineConfig(k=1, max_steps=1), Q, gen)
    two = _run(EngineConfig(k=1, max_steps=2, n=2), part, gen)
    assert [t.sample_index for t in two] == [0, 1]
    assert [t.steps[-1].evidence for t in two] == ["Madrid is the capital of Spain.", None]
    assert all(t.steps[0].observation == part.steps[0].observation for t in two)
    state = replay_state(get_protocol("reasonrag"), part)
    assert state.pending == 0 and state.n_retrievals == 1 and state.last_query == "capital of Spain"
    [done] = _run(EngineConfig(k=1), Q, ScriptedGenerator(TURNS))
    with pytest.raises(ValueError, match="already ended with an answer"):
        _run(EngineConfig(k=1), done, gen)
    with pytest.raises(ValueError, match="is of protocol 'reasonrag'"):
        replay_state(get_protocol("searchr1"), part)
    with pytest.raises(BackendError, match="text path"):
        _run(EngineConfig(k=1, token_ids=True), part, gen)
