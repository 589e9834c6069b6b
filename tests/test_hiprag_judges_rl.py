"""HiPRAG's step judges in RL without a world: ``env.judge: closed-book | llm:BACKEND`` (besides ``world:DIR``), built
once by :func:`effirag.env.make_judge`; the LLM judge's re-answers batched per distinct sub-question and its verdicts
cached; two GRPO steps with each judge whose verdicts reach the reward; the MuSiQue recipe (recipes/hiprag_musique)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from effirag.env import EnvConfig, load_run_config, make_judge
from effirag.errors import ConfigError
from effirag.llm.live import LivePolicy
from effirag.llm.scripted import ScriptedGenerator
from effirag.rewards.hiprag import audit_steps, hierarchical_rewards, search_views
from effirag.rewards.judges import LexicalJudge, LLMJudge, LLMJudgeConfig
from effirag.types import Action, Step, Trajectory

RECIPE = Path("recipes/hiprag_musique/hiprag_grpo.yaml")
MUSIQUE = Path("../shared/data/musique_mini/questions.json")
RL_QUESTIONS_N = (
    2  # conftest's `setup`: q1 "Who directed Blue River?" (Ana Lopez), q2 "Which river flows through Lyon?"
)


def _traj(qid: str, query: str, conclusion: str, answer: str) -> Trajectory:
    t = Trajectory(qid, f"Question {qid}?", "hiprag", format_ok=True, prediction=answer)
    t.steps = [
        Step(Action.SEARCH, query=query, reasoning="I must look this up.", conclusion=conclusion),
        Step(Action.REASON, reasoning="So the answer follows.", conclusion=answer),
        Step(Action.ANSWER, answer=answer),
    ]
    return t


def test_closed_book_judge_flags_what_the_policy_knows_and_lowers_the_reward() -> None:
    """Two rollouts, both correct (A = 1) and well formed (F = 1), each one search step + one reasoning step (N = 2).
    The policy, asked without retrieval, answers 'Mira Talvenor' to the first query (the step concluded 'Mira
    Talvenor': F1 1 ≥ 0.5 → over-search) and 'no idea' to the second (F1 0 → fine). The closed-book judge reaches no
    under-search verdict (2 undecided). λf 0.2, λp 0.4:
    r1 = 0.8 + 0.2 + 0.4·1/2 = 1.2; r2 = 0.8 + 0.2 + 0.4·2/2 = 1.4."""
    policy = ScriptedGenerator({"Glass Harbor": ["Mira Talvenor\n"] * 2, "Arvel": ["no idea\n"] * 2})
    judge = make_judge(EnvConfig(judge="closed-book"), policy)
    assert isinstance(judge, LexicalJudge)
    trajs = [
        _traj("a", "Who directed Glass Harbor?", "Mira Talvenor", "Mira Talvenor"),
        _traj("b", "Where is Arvel?", "in Norland", "Norland"),
    ]
    assert [(a.over, a.under) for a in audit_steps(trajs, judge)] == [((True,), (False,)), ((False,), (False,))]
    assert hierarchical_rewards(trajs, [["Mira Talvenor"], ["Norland"]], judge) == pytest.approx([1.2, 1.4])
    assert judge.undecided == 4  # two audits × two reasoning steps, none decidable without a verifier
    assert policy.prompts[0] == LLMJudgeConfig().reanswer_prompt.format(query="Who directed Glass Harbor?")


def test_llm_judge_reanswers_each_sub_question_once_and_caches_verdicts() -> None:
    """A GRPO group of three rollouts searching the same sub-question twice and another once: one batched policy
    call with 2 prompts (not 3); 2 equivalence prompts to the judge model. A second reward step with the same
    re-answers asks the judge model nothing (cache), while the policy is asked again (its weights may have moved)."""
    policy = ScriptedGenerator({"Glass Harbor": ["Mira Talvenor\n"] * 2, "Arvel": ["Norland\n"] * 2})
    judge_llm = ScriptedGenerator({"Who directed Glass Harbor?": "yes", "Where is Arvel?": "no"})
    judge = LLMJudge(judge_llm, policy)
    trajs = [
        _traj("q", "Who directed Glass Harbor?", "Mira Talvenor", "Mira Talvenor"),
        _traj("q", "Where is Arvel?", "in Norland", "Norland"),
        _traj("q", "Who directed Glass Harbor?", "Mira Talvenor", "Mira Talvenor"),
    ]
    steps = [v for t in trajs for v in search_views(t)]
    assert judge.over_search(steps) == [True, False, True]
    assert policy.calls == 1 and len(policy.prompts) == 2
    assert judge_llm.calls == 1 and judge.judged == 2
    assert judge.over_search(steps) == [True, False, True]
    assert policy.calls == 2 and judge_llm.calls == 1 and judge.judged == 2  # verdicts from the cache


def test_judge_specs_and_live_policy() -> None:
    """closed-book is accepted and needs a policy; an unknown name is refused naming the field; a live policy
    forwards to what it is bound to and refuses calls before."""
    assert EnvConfig(judge="closed-book").judge == "closed-book"
    for bad in ("oracle", "closed_book", "llm:"):
        with pytest.raises(ConfigError, match=r"EnvConfig\.judge=.*expected world:DIR, llm:BACKEND, closed-book"):
            EnvConfig(judge=bad)
    with pytest.raises(ConfigError, match="closed-book judge needs the policy"):
        make_judge(EnvConfig(judge="closed-book"), None)
    live = LivePolicy()
    judge = make_judge(EnvConfig(judge="closed-book"), live)
    traj = _traj("a", "Who directed Glass Harbor?", "Mira Talvenor", "x")
    with pytest.raises(RuntimeError, match="before the trainer bound it"):
        audit_steps([traj], judge)  # type: ignore[arg-type]
    live.bind(lambda: ScriptedGenerator(["Mira Talvenor\n"]))
    assert audit_steps([traj], judge)[0].over == (True,)  # type: ignore[arg-type]


def test_eval_qa_judge_option_takes_closed_book(tmp_path: Path) -> None:
    """`eval qa --judge closed-book` fills env.judge; the environment's judge re-answers with the evaluated policy."""
    from effirag.cli.agent import env_config

    cfg = env_config("hiprag", "scripted:x.json", None, [], inference="none", judge="closed-book")
    assert cfg.judge == "closed-book"
    policy = ScriptedGenerator(["x"])
    judge = make_judge(cfg, policy)
    assert isinstance(judge, LexicalJudge) and judge.policy is policy


# --- two GRPO steps with each judge -------------------------------------------------------------------------------
T1 = {  # first turn of each question's episodes: one search step
    "Who directed Blue River?": "<think>\n<step>\n<reasoning> I need the director. </reasoning>\n"
    "<search> who directed Blue River </search>",
    "Which river flows through Lyon?": "<think>\n<step>\n<reasoning> I need the river. </reasoning>\n"
    "<search> river through Lyon </search>",
}
T2 = {  # second turn: the search's conclusion, one reasoning step, the answer
    "Who directed Blue River?": "<conclusion> Ana Lopez </conclusion>\n</step>\n<step>\n<reasoning> So it is her. "
    "</reasoning>\n<conclusion> Ana Lopez </conclusion>\n</step>\n</think>\n<answer> Ana Lopez </answer>",
    "Which river flows through Lyon?": "<conclusion> Rhone </conclusion>\n</step>\n<step>\n<reasoning> So it is the "
    "Rhone. </reasoning>\n<conclusion> Rhone </conclusion>\n</step>\n</think>\n<answer> Rhone </answer>",
}
REANSWER_KEY = "Question: {query}\nAnswer:"  # how the re-answer prompt (LLMJudgeConfig) ends


class AsciiTokenizer:
    """One token per character, ids below the tiny model's vocabulary (384): a non-ASCII character becomes '?'."""

    def encode(self, text: str) -> list[int]:
        return [ord(c) if ord(c) < 128 else ord("?") for c in text]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(chr(i) for i in ids)


def _scripted_policy(reanswers: dict[str, str]) -> ScriptedGenerator:
    """Samples every episode as T1 then T2 (2 steps × 2 episodes per question), and re-answers the judge's
    sub-questions from ``reanswers`` (query → answer); the re-answer keys come first, so they match first."""
    script: dict[str, list[str]] = {REANSWER_KEY.format(query=q): [a + "\n"] * 8 for q, a in reanswers.items()}
    for question in T1:
        script[question] = [T1[question], T1[question], T2[question], T2[question]] * 2
    return ScriptedGenerator(script, AsciiTokenizer())


def _two_steps(setup: dict[str, str], tmp: Path, judge: str, gen: ScriptedGenerator) -> tuple[list[dict], Any]:
    """Two GRPO steps of HiPRAG's reward alone, rollouts from ``gen``, through the run's own wiring
    (:func:`judged_grpo_trainer`: env → make_judge → the live policy bound to the rollout's sampler); the step log."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from effirag.train.rl.grpo import GRPORunConfig
    from effirag.train.rl.log import StepLog, instrument, read_steps
    from effirag.train.rl.run import judged_grpo_trainer

    env = [f"env.{k}={v}" for k, v in setup.items()] + [f"env.judge={judge}", "env.protocol=hiprag"]
    small = [
        "env.engine.max_steps=3",
        "env.engine.max_new_tokens=200",
        "env.engine.k=1",
        "env.engine.passage_mode=sparse",
    ]
    run = ["max_steps=2", "save_steps=10", "num_generations=2", "questions_per_step=2", f"output_dir={tmp}"]
    reward = ["objective.outcome_weight=0", "objective.hiprag_weight=1", "scale_rewards=none"]
    cfg = load_run_config(GRPORunConfig, None, [*env, *small, *run, *reward])
    model = AutoModelForCausalLM.from_pretrained(setup["model"])
    tok = AutoTokenizer.from_pretrained(setup["model"])
    parts = judged_grpo_trainer(cfg, model, tok, generator=lambda _p: gen, use_cpu=True)
    parts.trainer.add_callback(StepLog(tmp / "steps.jsonl", parts.rollout, instrument(parts.trainer)))
    parts.trainer.train()
    return read_steps(tmp / "steps.jsonl"), parts


@pytest.mark.slow
def test_grpo_two_steps_closed_book_judge_reaches_the_reward(setup: dict[str, str], tmp_path: Path) -> None:
    """Each step: 2 episodes per question, each a search step then a reasoning step (N = 2), correct (A = 1) and well
    formed (F = 1). The policy (the rollout's sampler) re-answers 'who directed Blue River' with 'Ana Lopez', its
    step's conclusion (F1 1: over-search, N_corr = 1) and 'river through Lyon' with 'no idea' (F1 0: N_corr = 2).
    HiPRAG reward (λf 0.2, λp 0.4): q1 0.8 + 0.2 + 0.4·1/2 = 1.2, q2 0.8 + 0.2 + 0.4 = 1.4; step mean 1.3 (1.4 if
    the judge's verdicts did not reach the reward)."""
    gen = _scripted_policy({"who directed Blue River": "Ana Lopez", "river through Lyon": "no idea"})
    steps, parts = _two_steps(setup, tmp_path, "closed-book", gen)
    assert [r["step"] for r in steps] == [1, 2]
    assert [r["reward/hiprag"] for r in steps] == pytest.approx([1.3, 1.3])
    per_episode = sorted(zip(parts.rollout.last.trajectories, parts.reward.last["hiprag"], strict=True),
                         key=lambda pair: pair[0].question_id)  # fmt: skip
    assert [t.question_id for t, _r in per_episode] == ["q1", "q1", "q2", "q2"]
    assert [r for _t, r in per_episode] == pytest.approx([1.2, 1.2, 1.4, 1.4])
    reanswers = [p for p in gen.prompts if p.endswith("\nAnswer:")]
    assert len(reanswers) == 4  # one prompt per distinct sub-question per step, from the policy's own sampler


@pytest.mark.slow
def test_grpo_two_steps_llm_judge_reaches_the_reward(setup: dict[str, str], tmp_path: Path) -> None:
    """The same episodes, ``env.judge=llm:scripted:FILE`` (a scripted judge model). Its verdicts, unlike the
    closed-book judge's: q1's search 'no' (not equivalent: no over-search) and q1's reasoning step 'no' (incorrect:
    under-search) → N_corr = 1; q2's search 'yes' (equivalent though the policy said 'no idea': over-search) and its
    reasoning 'yes' → N_corr = 1. Rewards 1.2 and 1.2, step mean 1.2. The re-answers come from the policy's sampler,
    never from the judge model; the 4 distinct verdict prompts are asked once over both steps (cache)."""
    judge_file = tmp_path / "judge.json"
    verdicts = {
        "Question: who directed Blue River\nAnswer after searching": ["no"],
        "Overall question: Who directed Blue River?": ["no"],
        "Question: river through Lyon\nAnswer after searching": ["yes"],
        "Overall question: Which river flows through Lyon?": ["yes"],
    }
    judge_file.write_text(json.dumps(verdicts), encoding="utf-8")
    gen = _scripted_policy({"who directed Blue River": "Ana Lopez", "river through Lyon": "no idea"})
    steps, parts = _two_steps(setup, tmp_path / "run", f"llm:scripted:{judge_file}", gen)
    assert [r["reward/hiprag"] for r in steps] == pytest.approx([1.2, 1.2])
    judge = parts.reward.objective.judge
    assert isinstance(judge, LLMJudge) and judge.judged == 4 and judge.judge.calls == 2  # step 2: all from the cache
    assert not any(p.endswith("\nAnswer:") for p in judge.judge.prompts)
    assert len([p for p in gen.prompts if p.endswith("\nAnswer:")]) == 4


# --- the MuSiQue recipe -------------------------------------------------------------------------------------------
def test_musique_recipe_loads_with_the_closed_book_judge() -> None:
    from effirag.train.rl.grpo import GRPORunConfig

    cfg = load_run_config(GRPORunConfig, RECIPE, ["env.inference=none"])
    assert cfg.env.judge == "closed-book" and cfg.env.protocol == "hiprag"
    assert cfg.objective.hiprag_weight == 1.0 and cfg.objective.outcome_weight == 0.0
    assert cfg.env.questions.endswith("musique_mini/questions.json")


@pytest.mark.slow
@pytest.mark.skipif(not MUSIQUE.is_file(), reason="needs ../shared/data/musique_mini")
def test_musique_recipe_one_grpo_step_and_refusal_without_a_judge(tmp_path: Path) -> None:
    """The recipe on the real MuSiQue slice (2 questions, BM25 over the file's paragraphs), a tiny random policy: one
    step logs the HiPRAG term; the same run without a judge stops before training, naming the setting."""
    from effirag.data.questions import load_questions
    from effirag.retrieval.index import IndexConfig, build_index
    from effirag.train.rl.grpo import GRPORunConfig
    from effirag.train.rl.log import read_steps
    from effirag.train.rl.run import run_grpo
    from tiny_models import make_tiny_model

    passages = list({p.id: p for p in load_questions(MUSIQUE).passages}.values())
    build_index(passages, tmp_path / "index", config=IndexConfig(dense=False), corpus_path="mem")
    model = make_tiny_model(tmp_path / "model", seed=3)
    small = [
        f"env.model={model}", f"env.index={tmp_path / 'index'}", "env.max_questions=2", "max_steps=1", "save_steps=1",
        "num_generations=2", "questions_per_step=1", "env.engine.max_steps=2", "env.engine.max_new_tokens=8",
        "env.engine.max_inserted_tokens=48", "env.engine.max_total_tokens=512", f"env.questions={MUSIQUE}",
    ]  # fmt: skip
    cfg = load_run_config(GRPORunConfig, RECIPE, [*small, f"output_dir={tmp_path / 'run'}"])
    res = run_grpo(cfg)
    steps = read_steps(tmp_path / "run" / "steps.jsonl")
    assert res.steps == 1 and "reward/hiprag" in steps[0]
    no_judge = load_run_config(GRPORunConfig, RECIPE, [*small, f"output_dir={tmp_path / 'run2'}", "env.judge="])
    with pytest.raises(ConfigError, match=r"\['hiprag'\] need a step judge"):
        run_grpo(no_judge)


@pytest.mark.slow
def test_ppo_binds_the_judge_to_the_policy_it_trains(setup: dict[str, str], tmp_path: Path) -> None:
    """PPO builds the closed-book judge once, with the run's live policy: its re-answers are the trained network's
    own greedy answers (the same text as an HF generator over ``parts.policy``)."""
    from effirag.llm.base import GenerationConfig
    from effirag.llm.hf import HFGenerator
    from effirag.train.rl.ppo_config import PPORunConfig
    from effirag.train.rl.ppo_run import load_parts

    sets = [f"env.{k}={v}" for k, v in setup.items()] + ["env.judge=closed-book", "env.protocol=hiprag"]
    sets += ["objective.outcome_weight=0", "objective.hiprag_weight=1", f"output_dir={tmp_path}"]
    cfg = load_run_config(PPORunConfig, None, sets)
    parts, _start = load_parts(cfg, tmp_path, False)
    judge = parts.objective.judge
    assert isinstance(judge, LexicalJudge) and isinstance(judge.policy, LivePolicy) and judge.policy.bound
    greedy = GenerationConfig(max_new_tokens=6, temperature=0.0)
    own = HFGenerator.from_loaded(parts.policy, parts.tokenizer).generate(["Who directed Blue River?"], greedy)
    assert judge.policy.generate(["Who directed Blue River?"], greedy)[0][0].text == own[0][0].text
