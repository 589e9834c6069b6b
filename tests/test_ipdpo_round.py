"""One IP-DPO round from hand-built paths: a scripted policy samples five TeaRAG paths for a single-hop and for a
two-hop question through the engine (token path, lexical retriever, k = 1), the round scores them (format, F1 outcome,
process reward), pairs them by TeaRAG eq. 14 and trains DPO + η·SFT on the pairs of engine ids.

Worked by hand (similarity: 1 when the evidence triplet's tail occurs in the text, else 0):

Q1 "Who directed Blue River?" (single-hop: outcome / k, no process reward), gold "Ana Lopez":
  s0 search → "Ana Lopez"          format 1, outcome 1/1 = 1,   total 2
  s1 search, search → "Ana Lopez"  format 1, outcome 1/2 = 0.5, total 1.5
  s2 invalid turn → "Ana Lopez"    format 0, outcome 1/1 = 1,   total 1   (no search: k taken as 1)
  s3 search → "Madrid"             format 1, outcome 0,         total 1
  s4 = s0                          total 2
  ascending ranking (ties: lower index first): s2, s3, s1, s0, s4. Chosen (format 1 ∧ outcome 1): s0, s4.
  s0 takes s2 (format rejection), the cursor moves past it; s4 takes s3 (easy rejection: outcome 0 ≤ 0.3).
  s1 (outcome 0.5) is neither: single-hop questions have no hard rejection.  Pairs: (0, 2), (4, 3).

Q2 "Which river flows through the city where Blue River was shot?" (two hops), gold "Rhone", evidence
(Blue River, shot in, Lyon) and (Lyon, on river, Rhone), tails "lyon" and "rhone":
  m0 = m1: step 1 subquery "Where was Blue River shot?" retrieves p4 "Blue River is a film shot in Lyon."; step 2
  "Which river flows through Lyon?" retrieves p1 "Lyon is a city in France on the Rhone river."; summaries "Blue River
  was shot in Lyon." and "The Rhone flows through Lyon."; answer "Rhone". Consistency 1 (each entity is in its
  subquery); m_q = [1, 0], m_c = [1, 1], m_s = [1, 1]; process = 0.1·1 + 0.3·(1 + 2 + 2)/2 = 0.85; total 2.85.
  m2 invalid turn → "Lyon": format 0, outcome 0, process 0 (no step), total 0.
  m3 step 1 → "Lyon": format 1, outcome 0, consistency 1, m_q [0, 0], m_c [1, 0], m_s [1, 0] → process 0.7; total 1.7.
  m4 no search → "the Rhone river": F1 = 2·(1/2)·1/(1/2 + 1) = 2/3, process 0, total 5/3.
  ranking: m2, m4, m3, m0, m1. Chosen (outcome 1 ∧ process ≥ 0.7): m0, m1.
  m0 takes m2 (format rejection); m1 takes m4 (hard rejection: 0.3 < 2/3 ≤ 1 − 0.3 and 0 ≤ 0.85).
  Pairs: (0, 2), (1, 4).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from effirag.agent import EngineConfig, get_protocol
from effirag.env import EnvConfig
from effirag.errors import BackendError
from effirag.llm.base import GenerationConfig
from effirag.llm.scripted import ScriptedGenerator
from effirag.train.dpo.config import IPDPORunConfig
from effirag.train.dpo.ipdpo import run_round
from effirag.types import QAExample, Triplet
from test_engine_support import LexicalRetriever
from tiny_models import make_tiny_model

Q1 = "Who directed Blue River?"
Q2 = "Which river flows through the city where Blue River was shot?"
S1 = "<entities> Blue River </entities>\n<subquery> Who directed Blue River? </subquery>"
S2 = "<summary> Ana Lopez directed it. </summary>\n<entities> Ana Lopez </entities>\n<subquery> Is Ana Lopez the director? </subquery>"  # noqa: E501
A_OK = "<summary> Ana Lopez directed Blue River. </summary>\nFinal answer: Ana Lopez"
A_BAD = "<summary> It is a film. </summary>\nFinal answer: Madrid"
M1 = "<entities> Blue River </entities>\n<subquery> Where was Blue River shot? </subquery>"
M2 = "<summary> Blue River was shot in Lyon. </summary>\n<entities> Lyon </entities>\n<subquery> Which river flows through Lyon? </subquery>"  # noqa: E501
M3 = "<summary> The Rhone flows through Lyon. </summary>\nFinal answer: Rhone"
M_LYON = "<summary> Blue River was shot in Lyon. </summary>\nFinal answer: Lyon"

# Served per question in the engine's order: every live path's turn 1, then every live path's turn 2, ...
SCRIPT = {
    Q1: [S1, S1, "I do not know.", S1, S1, A_OK, S2, "Final answer: Ana Lopez", A_BAD, A_OK, A_OK],
    Q2: [M1, M1, "I do not know.", M1, "Final answer: the Rhone river", M2, M2, "Final answer: Lyon", M_LYON, M3, M3],
}
QUESTIONS = [
    QAExample("q1", Q1, ("Ana Lopez",), hops=1),
    QAExample(
        "q2",
        Q2,
        ("Rhone",),
        hops=2,
        evidence=(Triplet("Blue River", "shot in", "Lyon"), Triplet("Lyon", "on river", "Rhone")),
    ),
]


def tail_sim(evidence: str, texts: Sequence[str]) -> list[float]:
    """1 when the evidence triplet's tail occurs in the text (case-folded), else 0."""
    tail = evidence.strip("()").split(", ")[-1].lower()
    return [1.0 if tail in t.lower() else 0.0 for t in texts]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("ipdpo_tiny"), arch="qwen2", seed=7)


def _cfg(model: Path, out: Path) -> IPDPORunConfig:
    return IPDPORunConfig(
        env=EnvConfig(model=str(model), protocol="tearag", engine=EngineConfig(max_steps=4, max_new_tokens=200, k=1)),
        output_dir=str(out),
        rounds=1,
        samples_per_question=5,
        eta=(0.5,),
        epochs=(1.0,),
        train=IPDPORunConfig().train.__class__(learning_rate=1e-3, batch_size=2),
    )


def test_round_scores_pairs_and_trains_on_the_hand_worked_pairs(model_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    script = ScriptedGenerator(SCRIPT, tok)
    env: tuple[Any, ...] = (QUESTIONS, get_protocol("tearag"), LexicalRetriever(), tail_sim)
    rec = run_round(_cfg(model_dir, tmp_path), 1, model_dir, env, lambda model, tokenizer: script)

    pairs = [json.loads(x) for x in (tmp_path / "round-1" / "pairs.jsonl").read_text().splitlines()]
    assert [(p["question_id"], p["chosen"], p["rejected"]) for p in pairs] == [
        ("q1", 0, 2), ("q1", 4, 3), ("q2", 0, 2), ("q2", 1, 4)
    ]  # fmt: skip
    totals = [x for p in pairs for x in (p["chosen_scores"]["total"], p["rejected_scores"]["total"])]
    assert totals == pytest.approx([2.0, 1.0, 2.0, 1.0, 2.85, 0.0, 2.85, 5 / 3])
    assert pairs[2]["chosen_scores"]["process"] == pytest.approx(0.85)
    assert pairs[3]["rejected_scores"]["outcome"] == pytest.approx(2 / 3)
    # 10 paths; the mean total over them: (2 + 1.5 + 1 + 1 + 2 + 2.85 + 2.85 + 0 + 1.7 + 5/3) / 10.
    assert rec["paths"] == 10 and rec["pairs"] == 4 and rec["dropped_pairs"] == 0
    assert rec["reward/total"] == pytest.approx((2 + 1.5 + 1 + 1 + 2 + 2.85 + 2.85 + 0 + 1.7 + 5 / 3) / 10)
    assert rec["eta"] == 0.5 and rec["dpo_steps"] == 2  # 4 pairs, batch 2, one epoch
    assert rec["loss"] == rec["loss"] and rec["s_per_path"] > 0 and rec["s_per_dpo_step"] > 0
    assert (tmp_path / "round-1" / "policy" / "model.safetensors").is_file()
    paths = [json.loads(x) for x in (tmp_path / "round-1" / "paths.jsonl").read_text().splitlines()]
    assert [(p["question_id"], p["sample"], p["searches"]) for p in paths][:5] == [
        ("q1", i, s) for i, s in enumerate((1, 2, 0, 1, 1))
    ]
    assert [p["total"] for p in paths] == pytest.approx([2, 1.5, 1, 1, 2, 2.85, 2.85, 0, 1.7, 5 / 3])
    assert len((tmp_path / "round-1" / "steps.jsonl").read_text().splitlines()) == 2
    # The script served every turn it held: the engine sampled exactly the hand-built paths.
    for q in (Q1, Q2):
        with pytest.raises(BackendError, match="exhausted"):
            script.generate([q], GenerationConfig())


def test_round_pairs_are_engine_ids_with_the_reference_masked(model_dir: Path) -> None:
    """The first pair's chosen side decodes to s0's two turns with its <Reference> between them, the mask's zeros
    being exactly that reference; its rejected side (s2) is two turns with the engine's feedback masked between."""
    from transformers import AutoTokenizer

    from effirag.agent import run_episodes
    from effirag.train.dpo.scoring import round_pairs

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    cfg = _cfg(model_dir, Path("unused"))
    trajs = run_episodes(ScriptedGenerator(SCRIPT, tok), LexicalRetriever(), get_protocol("tearag"), QUESTIONS,
                         cfg.round_engine(1))  # fmt: skip
    scored = round_pairs(trajs, QUESTIONS, cfg.outcome, tail_sim)
    pair = scored.pairs[0]
    assert tok.decode(list(pair.prompt_ids)) == get_protocol("tearag").build_prompt(Q1)
    policy = [t for t, m in zip(pair.chosen_ids, pair.chosen_mask, strict=True) if m]
    inserted = [t for t, m in zip(pair.chosen_ids, pair.chosen_mask, strict=True) if not m]
    assert tok.decode(policy) == S1 + A_OK
    assert tok.decode(inserted).startswith("\n<Reference>\n") and tok.decode(inserted).endswith("\n</Reference>\n")
    rejected_inserted = [t for t, m in zip(pair.rejected_ids, pair.rejected_mask, strict=True) if not m]
    assert tok.decode(rejected_inserted) == "\nMy action is not correct. Let me rethink.\n"  # the engine's feedback
    assert tok.decode([t for t, m in zip(pair.rejected_ids, pair.rejected_mask, strict=True) if m]) == (
        "I do not know." + "Final answer: Ana Lopez"
    )
