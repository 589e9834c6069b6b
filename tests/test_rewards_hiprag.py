"""HiPRAG: the hierarchical reward (hand-worked), and the over/under-search detectors end to end — with the exact world
oracle on scripted trajectories, with an LLM judge through the scripted backend, and with the lexical fallback."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from effirag.agent.engine import run_episodes
from effirag.agent.protocols import get_protocol
from effirag.llm.scripted import ScriptedGenerator
from effirag.retrieval.base import RetrievalResult
from effirag.rewards.hiprag import (
    audit_steps,
    hierarchical_reward,
    hierarchical_rewards,
    over_search_rate,
    under_search_rate,
)
from effirag.rewards.judges import Judge, LexicalJudge, LLMJudge, LLMJudgeConfig, StepView, WorldJudge
from effirag.types import Action, ItemKind, RetrievedItem, Step, Trajectory
from effirag.world import World, WorldConfig, generate_world
from effirag.world.world import Entity, Fact


def test_hierarchical_reward_hand_worked() -> None:
    """λf = 0.2, λp = 0.4.
    A = 1, F = 1, N_corr = 2 of N = 4: 1·0.8 + 0.2·1 + 0.4·1·1·2/4 = 0.8 + 0.2 + 0.2 = 1.2.
    A = 1, F = 0 (format broken): 0.8 + 0 + 0 = 0.8 — no process bonus without format.
    A = 0, F = 1: 0 + 0.2 + 0 = 0.2 — no process bonus without a correct answer.
    A = 1, F = 1, N = 0 (answered with zero steps): 0.8 + 0.2 + 0 = 1.0.
    λf = 0.5, λp = 1, A = F = 1, 3 of 3 optimal: 0.5 + 0.5 + 1·3/3 = 2.0."""
    assert hierarchical_reward(1, 1, 2, 4) == pytest.approx(1.2)
    assert hierarchical_reward(True, False, 2, 4) == pytest.approx(0.8)
    assert hierarchical_reward(0, 1, 4, 4) == pytest.approx(0.2)
    assert hierarchical_reward(1, 1, 0, 0) == pytest.approx(1.0)
    assert hierarchical_reward(1, 1, 3, 3, lambda_f=0.5, lambda_p=1.0) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="n_optimal_steps"):
        hierarchical_reward(1, 1, 5, 4)
    with pytest.raises(ValueError, match="must be 0 or 1"):
        hierarchical_reward(0.5, 1, 0, 0)


# --- a hand-built world: who knows what ------------------------------------------------------------------------
def _world() -> World:
    ents = [
        Entity("p1", "person", "Mira Talvenor", "Mira Talvenor", ()),
        Entity("p2", "person", "Oren Velk", "Oren Velk", ()),
        Entity("c1", "city", "Arvel", "Arvel", ()),
        Entity("c2", "city", "Dunmore", "Dunmore", ()),
        Entity("f1", "film", "Glass Harbor", "Glass Harbor", ()),
    ]
    by = {e.id: e for e in ents}

    def fact(s: str, rel: str, obj: str) -> Fact:
        return Fact(f"{s}.{rel}", s, by[s].display, by[s].type, rel, by[obj].display, obj, ())

    facts = [fact("p1", "born_in", "c1"), fact("p2", "born_in", "c2"), fact("f1", "directed_by", "p1")]
    # The policy knows only where Mira Talvenor was born.
    return World(by, {f.id: f for f in facts}, frozenset({"p1.born_in"}), {}, 0)


def _search(query: str, conclusion: str) -> Step:
    return Step(Action.SEARCH, query=query, reasoning="I must look this up.", conclusion=conclusion)


def _reason(reasoning: str, conclusion: str) -> Step:
    return Step(Action.REASON, reasoning=reasoning, conclusion=conclusion)


def _answer(a: str) -> Step:
    return Step(Action.ANSWER, answer=a)


def _scripted() -> list[Trajectory]:
    t1 = Trajectory("q1", "Where was the director of Glass Harbor born?", "hiprag", format_ok=True, prediction="Arvel")
    t1.steps = [
        _search("Who directed Glass Harbor?", "Glass Harbor was directed by Mira Talvenor."),  # unknown fact: fine
        _search("Where was Mira Talvenor born?", "Mira Talvenor was born in Arvel."),  # known fact: OVER-SEARCH
        _answer("Arvel"),
    ]
    t2 = Trajectory("q2", "Where was Oren Velk born?", "hiprag", format_ok=True, prediction="Dunmore")
    t2.steps = [
        _reason("I recall where Oren Velk was born.", "Dunmore"),  # unknown fact asserted: UNDER-SEARCH (lucky)
        _answer("Dunmore"),
    ]
    t3 = Trajectory("q3", "Were Mira Talvenor and Oren Velk born in the same city?", "hiprag", prediction="no")
    t3.steps = [
        _reason("I know where Mira Talvenor was born.", "Arvel"),  # known and right: optimal
        _reason("I know where Mira Talvenor was born.", "Dunmore"),  # known but wrong: UNDER-SEARCH
        _reason("Combining the two findings.", "They differ."),  # asks no fact: undecided, not flagged
        _search("Where was Oren Velk born?", "Dunmore"),  # unknown fact: fine
        _answer("no"),
    ]
    t4 = Trajectory("q4", "Anything?", "hiprag")  # the empty trajectory: no steps at all
    return [t1, t2, t3, t4]


def test_world_oracle_rates_on_scripted_trajectories() -> None:
    """Search steps: t1 ×2, t3 ×1 = 3; over-searches: t1's second (Mira's birthplace is known) = 1 → OSR = 1/3.
    Non-search steps: t2 ×1, t3 ×3 = 4; under-searches: t2's (Oren's birthplace is unknown) and t3's second (known
    fact, wrong city) = 2 → USR = 2/4 = 0.5. t3's third step maps to no fact: undecided (1), not flagged."""
    judge = WorldJudge(_world())
    trajs = _scripted()
    assert over_search_rate(trajs, judge) == pytest.approx(1 / 3)
    assert under_search_rate(trajs, judge) == pytest.approx(0.5)
    assert judge.undecided == 1
    audits = audit_steps(trajs, judge)
    assert [(a.over, a.under) for a in audits] == [
        ((False, True), ()),
        ((), (True,)),
        ((False,), (False, True, False)),
        ((), ()),
    ]


def test_world_oracle_hierarchical_rewards() -> None:
    """λf = 0.2, λp = 0.4, cover-EM against the golds.
    t1: A = 1 ('Arvel'), F = 1, 1 of 2 steps optimal: 0.8 + 0.2 + 0.4·1/2 = 1.2.
    t2: A = 1, F = 1, 0 of 1 optimal: 0.8 + 0.2 + 0 = 1.0.
    t3: A = 1 ('no'), F = 0 (format_ok False): 0.8 + 0 + 0 = 0.8.
    t4: no prediction → A = 0, F = 0, N = 0: 0.0."""
    out = hierarchical_rewards(_scripted(), ["Arvel", "Dunmore", "no", "x"], WorldJudge(_world()))
    assert out == pytest.approx([1.2, 1.0, 0.8, 0.0])


def test_rates_edges() -> None:
    """No trajectories, or only empty ones: no steps to judge → both rates 0.0 (no NaN), and the judge is not
    called with anything."""
    judge = WorldJudge(_world())
    assert over_search_rate([], judge) == 0.0
    assert under_search_rate([Trajectory("e", "q", "hiprag")], judge) == 0.0
    assert audit_steps([], judge) == []


def test_generated_world_exact_rates(tmp_path: Path) -> None:
    """On a generated world, script three policies over the gold decompositions of its test questions and compare
    with rates counted from the question metadata (fact ids) and the known set, independently of ``fact_for``:
    - search-always: every hop searched → OSR = known hops / all hops; USR = 0 (no non-search step);
    - oracle: search exactly the unknown hops, answer known hops from memory correctly → OSR = 0, USR = 0;
    - never-search: every hop from memory with the gold answer → USR = unknown hops / all hops."""
    generate_world(WorldConfig(passages=200, train_questions=10, dev_questions=5, test_questions=30), tmp_path)
    world = World.load(tmp_path)
    records = [json.loads(line) for line in (tmp_path / "questions_test.jsonl").read_text().splitlines()]
    hops = [
        (r["question"], h["question"], h["answer"], fid)
        for r in records
        for h, fid in zip(r["metadata"]["decomposition"], r["metadata"]["facts"], strict=True)
    ]
    n_known = sum(fid in world.known for *_, fid in hops)
    assert 0 < n_known < len(hops)  # both kinds present, so the rates below are informative

    def traj(steps: list[Step]) -> Trajectory:
        return Trajectory("q", "question", "hiprag", steps=steps)

    def search(sub: str, ans: str) -> Step:
        return Step(Action.SEARCH, query=sub, reasoning="look up", conclusion=ans)

    def recall(sub: str, ans: str) -> Step:
        return Step(Action.REASON, reasoning=f"I know this: {sub}", conclusion=ans)

    judge = WorldJudge(world)
    always = [traj([search(s, a)]) for _, s, a, _ in hops]
    oracle = [traj([recall(s, a) if fid in world.known else search(s, a)]) for _, s, a, fid in hops]
    never = [traj([recall(s, a)]) for _, s, a, _ in hops]
    assert over_search_rate(always, judge) == pytest.approx(n_known / len(hops))
    assert under_search_rate(always, judge) == 0.0
    assert over_search_rate(oracle, judge) == 0.0
    assert under_search_rate(oracle, judge) == 0.0
    assert under_search_rate(never, judge) == pytest.approx((len(hops) - n_known) / len(hops))
    assert judge.undecided == 0


# --- LLM judge through the scripted backend ----------------------------------------------------------------------
def test_llm_judge_through_scripted_backend() -> None:
    """The policy re-answers each search query without retrieval; the judge compares and checks.
    Search steps (3): Glass Harbor → re-answer 'I am not sure', verdict 'No' → not over;
    Mira's birthplace → 'Arvel', verdict 'Yes, same fact.' → OVER; Oren's birthplace → 'Dunmore', verdict 'yes' → OVER.
    OSR = 2/3.
    Non-search steps (4): t2 'Dunmore' → 'Yes.'; t3 'Arvel' → 'yes'; t3 'Dunmore' → 'No, she was born in Arvel.' →
    UNDER; t3 'They differ.' → 'Maybe' (no verdict: undecided, not flagged). USR = 1/4."""
    policy = ScriptedGenerator(
        {"Glass Harbor": "I am not sure\n", "Mira Talvenor": "Arvel\nextra", "Oren Velk": "Dunmore\n"}
    )
    judge_llm = ScriptedGenerator(
        {
            "Who directed Glass Harbor?": "No",
            "Where was Mira Talvenor born?": "Yes, same fact.",
            "Where was Oren Velk born?\nAnswer after": "yes",
            "I recall where Oren Velk was born.": "Yes.",
            "Step conclusion: Arvel": "yes",
            "Step conclusion: Dunmore": "No, she was born in Arvel.",
            "They differ.": "Maybe",
        }
    )
    judge = LLMJudge(judge_llm, policy)
    assert isinstance(judge, Judge)
    trajs = _scripted()
    assert over_search_rate(trajs, judge) == pytest.approx(2 / 3)
    assert under_search_rate(trajs, judge) == pytest.approx(1 / 4)
    assert judge.undecided == 1
    # What the models were shown: the query without any retrieved context, then both answers side by side.
    assert policy.prompts[0] == LLMJudgeConfig().reanswer_prompt.format(query="Who directed Glass Harbor?")
    assert (
        "Answer after searching: Mira Talvenor was born in Arvel.\nAnswer from memory: Arvel\n" in judge_llm.prompts[1]
    )
    assert "Step reasoning: I recall where Oren Velk was born.\nStep conclusion: Dunmore\n" in judge_llm.prompts[3]
    assert policy.calls == 1 and judge_llm.calls == 2  # one batched call per detector


def test_llm_judge_config_validation() -> None:
    """A prompt template without its placeholders is refused, naming the field."""
    with pytest.raises(ValueError, match=r"equivalence_prompt.*\{reanswer\}"):
        LLMJudgeConfig(equivalence_prompt="Same? {query} {conclusion}")


def test_lexical_judge() -> None:
    """threshold 0.5. Over-search: re-answer 'Mira Talvenor' vs conclusion 'Mira Talvenor' → F1 1 → over;
    'Lyon' vs 'Arvel' → F1 0 → not. Under-search with references: conclusion 'Arvel city' vs 'Arvel' → precision 1/2,
    recall 1 → F1 2/3 ≥ 0.5 → correct; 'Dunmore' vs 'Arvel' → 0 → under; a step without references → undecided."""
    policy = ScriptedGenerator(["Mira Talvenor", "Lyon"])
    refs = {"born Mira": ["Arvel"], "born Mira again": ["Arvel"]}
    judge = LexicalJudge(policy, threshold=0.5, references=lambda s: refs.get(s.reasoning, []))
    searches = [StepView("q", "r", "Mira Talvenor", "Who directed X?"), StepView("q", "r", "Arvel", "Where born?")]
    assert judge.over_search(searches) == [True, False]
    steps = [
        StepView("q", "born Mira", "Arvel city"),
        StepView("q", "born Mira again", "Dunmore"),
        StepView("q", "?", "x"),
    ]
    assert judge.under_search(steps) == [False, True, False]
    assert judge.undecided == 1
    with pytest.raises(ValueError, match="not a search step"):
        judge.over_search([StepView("q", "r", "c")])
    with pytest.raises(ValueError, match="needs a policy"):
        LexicalJudge().over_search(searches)


# --- the engine's own HiPRAG trajectories feed the detectors -------------------------------------------------------
class _OneDoc:
    """A retriever double: every query returns one fixed passage."""

    def retrieve(
        self, query: str, mode: str = "passage", k: int = 5, entities: Sequence[str] | None = None, offset: int = 0
    ) -> RetrievalResult:
        return RetrievalResult(
            [RetrievedItem(ItemKind.CHUNK, "d1", "Glass Harbor was directed by Mira Talvenor.", 1.0)]
        )


def test_engine_trajectory_through_world_oracle() -> None:
    """A scripted HiPRAG episode run by the rollout engine: one search step (Glass Harbor's director: unknown → fine)
    and one non-search step (Mira's birthplace: known and right → fine), then one search for a known fact
    (Mira's birthplace again → over-search). OSR = 1/2, USR = 0/1 = 0."""
    p = get_protocol("hiprag")
    turns = [
        p.render_turn(first=True, search=("I need the director.", "Who directed Glass Harbor?")),
        p.render_turn(
            conclusion="Mira Talvenor directed it.",
            steps=[("I know where Mira Talvenor was born.", "Arvel")],
            search=("Let me check where Mira Talvenor was born.", "Where was Mira Talvenor born?"),
        ),
        p.render_turn(conclusion="Arvel", answer="Arvel"),
    ]
    [traj] = run_episodes(ScriptedGenerator(turns), _OneDoc(), p, ["Where was the director of Glass Harbor born?"])
    assert [s.action for s in traj.steps] == [Action.SEARCH, Action.REASON, Action.SEARCH, Action.ANSWER]
    judge = WorldJudge(_world())
    assert over_search_rate([traj], judge) == 0.5
    assert under_search_rate([traj], judge) == 0.0
    # 2 of 3 steps optimal, A = F = 1: 0.8 + 0.2 + 0.4·2/3 = 1.266667
    assert traj.format_ok
    assert hierarchical_rewards([traj], ["Arvel"], judge) == pytest.approx([1.266667], abs=1e-6)
