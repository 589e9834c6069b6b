"""Baselines: zero-shot, Single-S (naive), Single-Con (chunks + triplets), Single-PPR (kag): one retrieval, one turn."""

from __future__ import annotations

import pytest

from effirag.agent import EngineConfig, get_protocol, run_episodes
from effirag.llm.scripted import ScriptedGenerator
from effirag.types import Action
from test_engine_support import DOC_P3, DOC_P4, LexicalRetriever, Q

ANSWER = "<answer> Ana Lopez </answer>"


def test_zeroshot_has_no_retrieval() -> None:
    gen = ScriptedGenerator([ANSWER])
    [t] = run_episodes(gen, None, get_protocol("zeroshot"), [Q])
    p0 = get_protocol("zeroshot").build_prompt(Q)
    assert "zero-shot" in p0 and gen.prompts == [p0] and t.prompt == p0 + ANSWER
    assert [s.action for s in t.steps] == [Action.ANSWER] and t.prediction == "Ana Lopez" and t.format_ok


@pytest.mark.parametrize(
    ("name", "mode", "docs"),
    [
        ("naive", "passage", f"{DOC_P3}\n{DOC_P4}"),
        (
            "single-con",
            "chunks_triplets",
            f"{DOC_P3}\n{DOC_P4}\nDoc 3 (Triplet) (Blue River, directed by, Ana Lopez)\n"
            "Doc 4 (Triplet) (Lyon, located in, France)",
        ),
        ("single-ppr", "kag", f"{DOC_P3}\nDoc 2 (Triplet) (Blue River, directed by, Ana Lopez)"),
    ],
)
def test_single_round_baselines(name: str, mode: str, docs: str) -> None:
    p = get_protocol(name)
    gen, ret = ScriptedGenerator([ANSWER]), LexicalRetriever()
    [t] = run_episodes(gen, ret, p, [Q], EngineConfig(k=2))
    context = f"<documents>\n{docs}\n</documents>\n"
    p0 = p.build_prompt(Q, context)
    assert p0.endswith(f"Use these documents:\n{context}Question: {Q}\n")
    assert gen.prompts == [p0] and t.prompt == p0 + ANSWER
    assert ret.calls == [(Q, mode, 2, (), 0)]
    assert [s.action for s in t.steps] == [Action.SEARCH, Action.ANSWER]
    assert t.steps[0].inserted_tokens == gen.count_tokens(context) and t.prediction == "Ana Lopez" and t.format_ok


def test_baseline_without_answer_tag_fails_after_one_turn() -> None:
    [t] = run_episodes(ScriptedGenerator(["Ana Lopez"]), None, get_protocol("zeroshot"), [Q])
    assert [s.action for s in t.steps] == [Action.INVALID] and t.prediction is None and not t.format_ok
    assert t.end == "single_turn"
