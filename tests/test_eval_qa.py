"""QA evaluation runner: hand-worked report, JSONL trajectories, and resume equal to an uninterrupted run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from effirag.agent import EngineConfig, get_protocol
from effirag.errors import ConfigError
from effirag.eval.qa import TRAJECTORIES, evaluate_qa
from effirag.llm.base import Completion, GenerationConfig
from effirag.llm.scripted import ScriptedGenerator
from effirag.types import QAExample
from test_engine_support import LexicalRetriever

EXAMPLES = [
    QAExample("qa", "Who directed Blue River?", ("Ana Lopez",), hops=2),
    QAExample("qb", "Which river flows through Lyon?", ("Rhone",), hops=2, qtype="comparison"),
    QAExample("qc", "What is the capital of Spain?", ("Madrid",), hops=3),
]
SCRIPT = {
    "Blue River?": ["<search> who directed Blue River </search>", "<answer> Ana Lopez </answer>"],
    "through Lyon?": ["<think>Rhone.</think><answer> the Rhone river </answer>"],
    "of Spain?": ["I do not know", "still nothing"],
}
CFG = EngineConfig(max_steps=2, k=1)


def _strip_latency(report: dict) -> dict:  # type: ignore[type-arg]
    return {k: v for k, v in report.items() if k != "latency_s"}


def test_report_is_hand_worked(tmp_path: Path) -> None:
    """qa: search then "Ana Lopez" (EM 1, F1 1, cover 1); qb: "the Rhone river" vs "Rhone" → normalised
    "rhone river": EM 0, F1 = 2·(1/2·1)/(1/2+1) = 2/3, cover 1; qc: no answer in 2 turns → 0, 0, 0.
    Format (Search-R1's <think> before every action): qa's turns have no <think>, qb's has, qc never answers → 1/3.
    EM 1/3, F1 (1 + 2/3)/3 = 5/9 = 0.555556, cover 2/3, steps (2 + 1 + 2)/3 = 5/3, searches 1/3; qa and qb end on
    their answer, qc at the 2-step limit.
    Tokens (whitespace-split): qa generates 6 + 4 = 10 and inserts 14 (``<information>Doc``, ``1``, ``(Title:``,
    ``Ana``, ``Lopez)``, the 8 words of the text, ``1999.</information>``); qb generates 5 (its
    ``<think>Rhone.</think><answer>`` is one word); qc generates 4 + 2 = 6
    → generated 21/3 = 7, inserted 14/3 = 4.666667, total 35/3 = 11.666667, per retrieval 14 / 1 = 14.
    Token split: the answers "Ana Lopez" (2) and "the Rhone river" (3) are answer tokens, 5/3 = 1.666667; the rest,
    21 − 5 = 16, is reasoning, 16/3 = 5.333333; Search-R1 writes no summary.
    By hops: "2" → EM 1/2, F1 (1 + 2/3)/2 = 0.833333, cover 1, format 1/2; "3" → all 0. By type, qb (comparison)
    alone: EM 0, F1 2/3, cover 1, format 1, one step; qa ("2-hop unknown"): all 1 but format 0, two steps; qc
    ("3-hop unknown"): all 0.
    """
    report, trajs = evaluate_qa(
        EXAMPLES, ScriptedGenerator(SCRIPT), LexicalRetriever(), get_protocol("searchr1"), CFG, out_dir=tmp_path
    )
    assert _strip_latency(report) == {
        "n": 3,
        "em": 0.333333,
        "f1": 0.555556,
        "cover_em": 0.666667,
        "format_rate": 0.333333,
        "mean_steps": 1.666667,
        "steps_hist": {"1": 1, "2": 2},
        "ends": {"answer": 2, "max_steps": 1},
        "tokens": {
            "generated": 7.0,
            "inserted": 4.666667,
            "total": 11.666667,
            "per_retrieval": 14.0,
            "reasoning": 5.333333,
            "answer": 1.666667,
            "summary": 0.0,
        },
        "retrieval_turns": 0.333333,
        "by_hops": {
            "2": {"n": 2, "em": 0.5, "f1": 0.833333, "cover_em": 1.0, "format_rate": 0.5, "mean_steps": 1.5},
            "3": {"n": 1, "em": 0.0, "f1": 0.0, "cover_em": 0.0, "format_rate": 0.0, "mean_steps": 2.0},
        },
        "by_type": {
            "2-hop comparison": {
                "n": 1,
                "em": 0.0,
                "f1": 0.666667,
                "cover_em": 1.0,
                "format_rate": 1.0,
                "mean_steps": 1.0,
            },
            "2-hop unknown": {"n": 1, "em": 1.0, "f1": 1.0, "cover_em": 1.0, "format_rate": 0.0, "mean_steps": 2.0},
            "3-hop unknown": {"n": 1, "em": 0.0, "f1": 0.0, "cover_em": 0.0, "format_rate": 0.0, "mean_steps": 2.0},
        },
    }
    assert set(report["latency_s"]) == {"retrieval", "kag_ppr", "generation"}
    lines = (tmp_path / TRAJECTORIES).read_text().splitlines()
    assert [json.loads(x)["question_id"] for x in lines] == ["qa", "qb", "qc"]
    assert [t.prediction for t in trajs] == ["Ana Lopez", "the Rhone river", None]
    assert [s.extras["token_split"] for s in trajs[0].steps] == [
        {"reasoning": 6, "answer": 0, "summary": 0},
        {"reasoning": 2, "answer": 2, "summary": 0},
    ]
    assert json.loads((tmp_path / "report.json").read_text()) == report
    assert [json.loads(x)["golden_answers"] for x in (tmp_path / "questions.jsonl").read_text().splitlines()] == [
        ["Ana Lopez"],
        ["Rhone"],
        ["Madrid"],
    ]


class Crashing(ScriptedGenerator):
    """Dies on its ``crash_at``-th generate call, like a run killed mid-way."""

    def __init__(self, completions, crash_at: int) -> None:  # type: ignore[no-untyped-def]
        super().__init__(completions)
        self.crash_at = crash_at

    def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[list[Completion]]:
        if self.calls + 1 == self.crash_at:
            raise KeyboardInterrupt
        return super().generate(prompts, config)


def test_resume_equals_uninterrupted_run(tmp_path: Path) -> None:
    proto, cfg = get_protocol("searchr1"), EngineConfig(max_steps=2, k=1, n=2, temperature=0.7)
    full, full_t = evaluate_qa(
        EXAMPLES, ScriptedGenerator(_doubled()), LexicalRetriever(), proto, cfg, out_dir=tmp_path / "a", chunk_size=1
    )
    out = tmp_path / "b"
    with pytest.raises(KeyboardInterrupt):  # chunk 1 (qa) takes calls 1-2; the run dies inside chunk 2 (qb)
        evaluate_qa(EXAMPLES, Crashing(_doubled(), 3), LexicalRetriever(), proto, cfg, out_dir=out, chunk_size=1)
    assert [json.loads(x)["question_id"] for x in (out / TRAJECTORIES).read_text().splitlines()] == ["qa", "qa"]
    with (out / TRAJECTORIES).open("a") as f:
        f.write('{"question_id": "qb", "quest')  # a torn line from the dying writer
    gen = ScriptedGenerator({k: v for k, v in _doubled().items() if k != "Blue River?"})  # qa must not be re-run
    resumed, res_t = evaluate_qa(EXAMPLES, gen, LexicalRetriever(), proto, cfg, out_dir=out, chunk_size=1)
    assert _strip_latency(resumed) == _strip_latency(full)
    assert [(t.question_id, t.sample_index, t.prediction, t.prompt) for t in res_t] == [
        (t.question_id, t.sample_index, t.prediction, t.prompt) for t in full_t
    ]
    assert len((out / TRAJECTORIES).read_text().splitlines()) == 6
    again, _ = evaluate_qa(EXAMPLES, ScriptedGenerator([]), LexicalRetriever(), proto, cfg, out_dir=out)
    assert _strip_latency(again) == _strip_latency(full)  # everything on disk: nothing is generated


def test_resume_refuses_other_settings(tmp_path: Path) -> None:
    evaluate_qa(
        EXAMPLES[:1], ScriptedGenerator(SCRIPT), LexicalRetriever(), get_protocol("searchr1"), CFG, out_dir=tmp_path
    )
    with pytest.raises(ConfigError, match=r"engine.k"):
        evaluate_qa(
            EXAMPLES[:1], ScriptedGenerator(SCRIPT), LexicalRetriever(), get_protocol("searchr1"),
            EngineConfig(max_steps=2, k=3), out_dir=tmp_path,
        )  # fmt: skip


def _doubled() -> dict[str, list[str]]:
    """Each question's script twice over (n = 2 samples consume one entry each per round)."""
    return {k: [x for x in v for _ in (0, 1)] for k, v in SCRIPT.items()}
