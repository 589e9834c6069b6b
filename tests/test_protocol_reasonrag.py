"""ReasonRAG: reasoning and grounding stages with their own prompts; evidence carried back to the search step."""

from __future__ import annotations

from effirag.agent import get_protocol
from effirag.agent.protocols import RETHINK, ReasonRAGProtocol
from effirag.types import Action
from test_engine_support import DOC_P3, DOC_P4, Q, run

DOCS = f"<documents>\n{DOC_P3}\n{DOC_P4}\n</documents>\n"


def test_reasonrag_round_trip() -> None:
    p = get_protocol("reasonrag")
    assert isinstance(p, ReasonRAGProtocol)
    t1 = p.render_reasoning("I need the director of Blue River.", query="who directed Blue River")
    t2 = p.render_grounding("Ana Lopez directed Blue River.")
    t3 = p.render_reasoning("The evidence names the director.", answer="Ana Lopez")
    assert (t1, t2) == (
        "I need the director of Blue River.\n<query> who directed Blue River </query>",
        "<evidence> Ana Lopez directed Blue River. </evidence>",
    )
    traj, gen, _ = run("reasonrag", [t1, t2, t3])
    r0 = p.reasoning_prompt(Q, [])
    assert "ReasonRAG protocol (reasoning stage)" in r0 and r0.endswith("History:\nNothing has been searched yet.\n")
    g1 = p.grounding_prompt(Q, "who directed Blue River", DOCS)
    assert "(grounding stage)" in g1 and g1.endswith(f"Query: who directed Blue River\n{DOCS}")
    r2 = p.reasoning_prompt(
        Q,
        [
            "Reasoning: I need the director of Blue River.\nQuery: who directed Blue River",
            "Evidence: Ana Lopez directed Blue River.",
        ],
    )
    assert gen.prompts == [r0, g1, r2]
    assert traj.prompt == r2 + t3
    assert [s.action for s in traj.steps] == [Action.SEARCH, Action.REASON, Action.ANSWER]
    search, ground, answer = traj.steps
    assert (search.stage, search.reasoning, search.evidence) == (
        "reasoning",
        "I need the director of Blue River.",
        "Ana Lopez directed Blue River.",
    )
    assert (ground.stage, ground.evidence, ground.reasoning) == ("grounding", "Ana Lopez directed Blue River.", None)
    assert search.extras == {} and ground.extras == {}  # the parsed fields are typed, not free keys
    assert search.observation == DOCS and search.inserted_tokens == gen.count_tokens(DOCS)
    assert answer.reasoning == "The evidence names the director."
    assert traj.prediction == "Ana Lopez" and traj.format_ok


def test_reasonrag_none_evidence_and_bad_grounding() -> None:
    p = get_protocol("reasonrag")
    t1 = p.render_reasoning("r", query="capital of Spain")
    bad = "I think it is Madrid."  # no <evidence> tag: the grounding stage is retried
    t3 = p.render_grounding(None)
    t4 = p.render_reasoning("nothing found", answer="Madrid")
    traj, gen, _ = run("reasonrag", [t1, bad, t3, t4])
    assert [s.action for s in traj.steps] == [Action.SEARCH, Action.INVALID, Action.REASON, Action.ANSWER]
    assert gen.prompts[2] == gen.prompts[1] + bad + f"\n{RETHINK}\n"
    assert traj.steps[0].evidence is None  # the grounding stage found none ("None")
    assert (traj.steps[2].stage, traj.steps[2].evidence) == ("grounding", None)
    assert gen.prompts[3].endswith("Query: capital of Spain\nEvidence: None\n")
    assert traj.prediction == "Madrid" and not traj.format_ok
