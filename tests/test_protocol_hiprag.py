"""HiPRAG: round trip through the engine (sub-steps, conclusions carried back) and the format rule."""

from __future__ import annotations

from effirag.agent import get_protocol
from effirag.agent.protocols import RETHINK, hiprag_format_ok
from effirag.types import Action
from test_engine_support import DOC_P3, DOC_P4, Q, run

CONTEXT = f"\n<context>\n{DOC_P3}\n{DOC_P4}\n</context>\n"


def test_hiprag_round_trip() -> None:
    p = get_protocol("hiprag")
    t1 = p.render_turn(first=True, search=("I need the director.", "who directed Blue River"))
    assert (
        t1
        == "<think>\n<step>\n<reasoning> I need the director. </reasoning>\n<search> who directed Blue River </search>"
    )
    t2 = p.render_turn(
        conclusion="Ana Lopez directed it.", steps=[("Nothing else is needed.", "Ana Lopez")], answer="Ana Lopez"
    )
    assert t2 == (
        "<conclusion> Ana Lopez directed it. </conclusion>\n</step>\n"
        "<step>\n<reasoning> Nothing else is needed. </reasoning>\n<conclusion> Ana Lopez </conclusion>\n</step>\n"
        "</think>\n<answer> Ana Lopez </answer>"
    )
    traj, gen, _ = run("hiprag", [t1, t2])
    p0 = p.build_prompt(Q)
    assert "HiPRAG" in p0 and p0.endswith(f"Question: {Q}\n")
    assert gen.prompts == [p0, p0 + t1 + CONTEXT]
    assert traj.prompt == p0 + t1 + CONTEXT + t2
    assert [s.action for s in traj.steps] == [Action.SEARCH, Action.REASON, Action.ANSWER]
    search, reason, answer = traj.steps
    assert (search.reasoning, search.conclusion) == ("I need the director.", "Ana Lopez directed it.")
    assert (reason.reasoning, reason.conclusion) == ("Nothing else is needed.", "Ana Lopez")
    assert search.extras == {} and reason.extras == {}  # the parsed fields are typed, not free keys
    assert search.query == "who directed Blue River" and [i.id for i in search.items] == ["p3", "p4"]
    # The turn's tokens are split between the sub-step and the answer step, summing to the turn's count.
    assert reason.generated_tokens + answer.generated_tokens == gen.count_tokens(t2)
    assert traj.prediction == "Ana Lopez" and traj.format_ok
    check = hiprag_format_ok(t1 + CONTEXT + t2)
    assert check.ok and (check.n_steps, check.n_search_steps, check.answer) == (2, 1, "Ana Lopez")


def test_hiprag_missing_conclusion_is_invalid_and_format_fails() -> None:
    p = get_protocol("hiprag")
    t1 = p.render_turn(first=True, search=("r", "Blue River director"))
    bad = "<step>\n<reasoning> skip </reasoning>\n<search> Lyon </search>"  # the pending step was never concluded
    fin = p.render_turn(conclusion="done", answer="Ana Lopez")
    traj, gen, _ = run("hiprag", [t1, bad, fin])
    assert [s.action for s in traj.steps] == [Action.SEARCH, Action.INVALID, Action.ANSWER]
    assert traj.steps[1].error == "<conclusion>: missing or empty after <context>"
    assert gen.prompts[2].endswith(bad + f"\n{RETHINK}\n")
    assert traj.steps[0].conclusion == "done"
    assert traj.prediction == "Ana Lopez" and not traj.format_ok


def test_hiprag_format_rule_cases() -> None:
    step_s = (
        "<step><reasoning> r </reasoning><search> q </search><context> c </context><conclusion> x </conclusion></step>"
    )
    step_r = "<step><reasoning> r </reasoning><conclusion> x </conclusion></step>"
    end = "</think><answer> a </answer>"
    ok = f"<think>{step_s}{step_r}{end}"
    assert hiprag_format_ok(ok).ok
    bad = {
        "no think": f"{step_s}<answer> a </answer>",
        "no steps": "<think></think><answer> a </answer>",
        "two answers": f"<think>{step_r}</think><answer> a </answer><answer> b </answer>",
        "wrong order": f"<think><step><conclusion> x </conclusion><reasoning> r </reasoning></step>{end}",
        "search without context": "<think><step><reasoning> r </reasoning><search> q </search>"
        f"<conclusion> x </conclusion></step>{end}",
        "blank reasoning": f"<think><step><reasoning> </reasoning><conclusion> x </conclusion></step>{end}",
        "empty answer": f"<think>{step_r}</think><answer> </answer>",
        "text after answer": f"<think>{step_r}</think><answer> a </answer> more",
        "nested tag": "<think><step><reasoning> <search> r </reasoning><conclusion> x </conclusion></step></think>"
        "<answer> a </answer>",
    }
    for name, text in bad.items():
        assert not hiprag_format_ok(text).ok, name
    assert hiprag_format_ok(bad["no think"]).reason == "does not start with <think>"


def test_hiprag_answer_without_any_step_is_invalid() -> None:
    traj, _, _ = run("hiprag", ["<think>\n</think>\n<answer> x </answer>"], max_steps=1)
    assert traj.steps[0].action is Action.INVALID and traj.prediction is None and not traj.format_ok
