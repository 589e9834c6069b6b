"""Property tests: arbitrary model output never crashes a parser or the engine, and every episode ends in budget.

Per protocol: 1,000 arbitrary turns through the parser (in every parser state), plus 300 engine episodes of up to
4 arbitrary turns each (about 750 more turns): more than 1,000 outputs per protocol in total.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from effirag.agent import PROTOCOLS, EngineConfig, get_protocol, run_episodes
from effirag.agent.protocols import EpisodeState
from effirag.llm.scripted import ScriptedGenerator
from effirag.types import Action, Step
from test_engine_support import LexicalRetriever

PIECES = [
    "<think>", "</think>", "<search>", "</search>", "<answer>", "</answer>", "<information>", "</information>",
    "<more info>", "</more info>", "<step>", "</step>", "<reasoning>", "</reasoning>", "<context>", "</context>",
    "<conclusion>", "</conclusion>", "<entities>", "</entities>", "<subquery>", "</subquery>", "<summary>",
    "</summary>", "<Reference>", "</Reference>", "Final answer:", "<query>", "</query>", "<evidence>", "</evidence>",
    "None", "[graph]", "[passage]", "[web]", " 3 ", " 0 ", " 99 ", "\n", " Blue River ", " x ", ";",
]  # fmt: skip
OUTPUT = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=6)), max_size=14).map("".join)


PARSERS = [get_protocol(name) for name in PROTOCOLS]


# One drawn output is fed to every protocol's parser: 1,000 outputs per protocol at the generation cost of 1,000.
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OUTPUT, st.booleans(), st.booleans())
def test_parsers_never_crash(text: str, pending: bool, started: bool) -> None:
    for p in PARSERS:
        steps = [Step(Action.SEARCH, query="q", observation="<documents>\nDoc 1 x\n</documents>\n")] if pending else []
        state = EpisodeState(question="q?", prompt="P", transcript="t" if started else "", steps=steps)
        state.pending = 0 if pending else None
        r = p.parse_turn(text, state)
        assert isinstance(r.action, Action)
        assert (r.action is Action.INVALID) == (r.error is not None)
        assert text.startswith(r.text)
        closers = [c for c in p.stop if c in r.text]
        assert all(r.text.count(c) <= 1 and r.text.endswith(c) for c in closers), p.name  # nothing after the first
        if r.action is Action.SEARCH:
            assert r.query and r.query.strip()
        if r.action is Action.ANSWER:
            assert r.answer and r.answer.strip()
        if r.action is Action.MORE_INFO:
            assert r.k is not None and 1 <= r.k <= 10


RETRIEVER = LexicalRetriever()


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OUTPUT, min_size=1, max_size=4), st.integers(min_value=60, max_value=400))
def test_engine_episodes_end_within_budget(outputs: list[str], total: int) -> None:
    cfg = EngineConfig(max_steps=len(outputs), max_new_tokens=40, max_total_tokens=total, max_inserted_tokens=30)
    for protocol in PARSERS:
        [t] = run_episodes(ScriptedGenerator(outputs), RETRIEVER, protocol, ["Who directed Blue River?"], cfg)
        end = t.end
        assert end in ("answer", "max_steps", "max_total_tokens", "single_turn")
        assert t.turns <= cfg.max_steps
        assert t.extras["used_tokens"] <= cfg.max_total_tokens or end == "max_total_tokens"
        assert (t.prediction is not None) == (end == "answer")
        assert not t.format_ok or t.prediction is not None
        assert all(s.inserted_tokens <= cfg.max_inserted_tokens for s in t.steps)
        assert end != "max_steps" or all(s.action is not Action.ANSWER for s in t.steps)
