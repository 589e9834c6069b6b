"""verl without verl: ``effirag export verl`` rows read back with pyarrow and checked field by field against verl's
RL row schema, and ``compute_score`` on hand-written responses of every protocol against hand-worked scores."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from effirag.agent import get_protocol
from effirag.data import load_questions
from effirag.errors import ConfigError, DataError
from effirag.integrations.verl import compute_score, split_response
from effirag.rewards.judges import StepView


@pytest.mark.parametrize("protocol", ["searchr1", "tearag", "hiprag", "dsr1", "routerag", "zeroshot"])
def test_export_rows_read_back_match_verls_schema(shared_data: Path, tmp_path: Path, protocol: str) -> None:
    import pyarrow.parquet as pq

    from effirag.cli.main import app

    qfile = shared_data / "musique_mini" / "questions.json"
    args = ["export", "verl", "--questions", str(qfile), "--protocol", protocol, "--out", str(tmp_path)]
    res = CliRunner().invoke(app, [*args, "--split", "dev", "--dataset", "musique", "--limit", "12"])
    assert res.exit_code == 0, res.output
    table = pq.read_table(tmp_path / "dev.parquet")
    assert table.column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    rows = table.to_pylist()
    examples = load_questions(qfile).examples[:12]
    assert len(rows) == len(examples) == 12
    proto = get_protocol(protocol)
    source = f"effirag/{protocol}/musique"
    for i, (row, e) in enumerate(zip(rows, examples, strict=True)):
        truth = {"target": list(e.answers)}
        assert row["data_source"] == source
        assert row["prompt"] == [{"role": "user", "content": proto.build_prompt(e.question)}]
        assert e.question in row["prompt"][0]["content"]
        assert row["ability"] == "fact-reasoning"
        assert row["reward_model"] == {"style": "rule", "ground_truth": truth}
        assert truth["target"] and all(isinstance(a, str) and a for a in truth["target"])
        create = {"ground_truth": truth, "question": e.question, "data_source": source}
        assert row["extra_info"] == {
            "index": i,
            "split": "dev",
            "question": e.question,
            "question_id": e.id,
            "protocol": protocol,
            "need_tools_kwargs": True,
            "tools_kwargs": {"search": {"create_kwargs": create}},
        }


@pytest.mark.parametrize(("protocol", "why"), [("naive", "retrieves before"), ("reasonrag", "rebuilt")])
def test_export_refuses_a_protocol_without_one_fixed_prompt(tmp_path: Path, protocol: str, why: str) -> None:
    from effirag.cli.main import app

    q = tmp_path / "q.jsonl"
    q.write_text('{"id": "a", "question": "Who?", "answer": "X"}\n')
    res = CliRunner().invoke(app, ["export", "verl", "-q", str(q), "-p", protocol, "-o", str(tmp_path / "out")])
    assert res.exit_code == 2 and why in res.output
    assert not (tmp_path / "out").exists()


T = "<think> I need the director. </think>\n"
INFO = "\n\n<information>Doc 1 (Title: Glass Harbor) Glass Harbor was directed by Mira Talvenor.</information>\n\n"
SR1 = T + "<search> who directed Glass Harbor </search>" + INFO + "<think> Found it. </think>\n<answer> Mira </answer>"
HIPRAG = (
    "<think>\n<step>\n<reasoning> I need the director. </reasoning>\n<search> who directed Glass Harbor </search>\n"
    "<context>\nDoc 1 Glass Harbor was directed by Mira.\n</context>\n<conclusion> Mira directed it. </conclusion>\n"
    "</step>\n<step>\n<reasoning> I know her town. </reasoning>\n<conclusion> Mira lives in Arvel. </conclusion>\n"
    "</step>\n</think>\n<answer> Mira Talvenor </answer>"
)
TEARAG = (
    "<entities> Glass Harbor </entities>\n<subquery> Who directed Glass Harbor? </subquery>\n<Reference>\n"
    "Glass Harbor was directed by Mira.\n</Reference>\n<summary> Mira directed it. </summary>\nFinal answer: Mira"
)
DSR1 = (
    T + "<search> q </search>\n\n<information>a b c</information>\n\n"
    "<think> t </think>\n<more info> 3 </more info>\n\n<information>d e</information>\n\n<think> t </think>\n"
    "<answer> Mira </answer>"
)
REASONRAG = (
    "I need the director.\n<query> who directed Glass Harbor </query>\n<documents>\nGlass Harbor was directed by "
    "Mira.\n</documents>\n<evidence> Mira directed it. </evidence>\nThe evidence names her.\n<answer> Mira </answer>"
)
FMT = {"format_weight": 0.5}

CASES: list[tuple[str, str, Any, dict[str, Any], dict[str, float]]] = [
    # Search-R1, one search then the right answer, default reward (EM alone): r = EM = 1
    ("searchr1", SR1, {"target": ["Mira", "M. Talvenor"]}, {}, {"score": 1.0, "em": 1.0, "outcome": 1.0}),
    # the same response against another gold with F1 + 0.5·format: "mira" vs "mira talvenor": P = 1, R = 1/2,
    # F1 = 2·(1·1/2)/(3/2) = 2/3; format 1 → r = 2/3 + 0.5 = 1.166667; EM 0
    (
        "searchr1",
        SR1,
        ["Mira Talvenor"],
        {"outcome": "f1", **FMT},
        {"score": 2 / 3 + 0.5, "em": 0.0, "outcome": 2 / 3, "format": 1.0},
    ),
    # the answer turn has no <think>: the answer still counts (EM 1), the format does not: r = 1 + 0.5·0 = 1
    ("searchr1", SR1.replace("<think> Found it. </think>\n", ""), "Mira", FMT, {"score": 1.0, "format": 0.0}),
    # RouteRAG routes a search to the graph; outcome off, its stage-2 term on: alone in its batch, t = t_avg, so the
    # term is o + (t_avg − t)/T = EM = 1
    (
        "routerag",
        T + "<search> [graph] who directed Glass Harbor </search>" + INFO + T + "<answer> Mira </answer>",
        "Mira",
        {"outcome_weight": 0.0, "routerag_weight": 1.0},
        {"score": 1.0, "em": 1.0, "routerag": 1.0},
    ),
    # Dynamic Search-R1 with the memory cost: generated words 9 ("<think>", "I", "need", "the", "director.",
    # "</think>", "<search>", "q", "</search>") + 8 ("<think>", "t", "</think>", "<more", "info>", "3", "</more",
    # "info>") + 6 = 23, inserted 3 + 2 = 5 → c = 28; r = EM + 0.5·format = 1.5
    ("dsr1", DSR1, "Mira", {**FMT, "cost": "memory"}, {"score": 1.5, "em": 1.0, "format": 1.0, "cost": 28.0}),
    # TeaRAG, cover-EM + 0.5·format: "mira" covers "mira" → 1; r = 1.5
    ("tearag", TEARAG, "Mira", {"outcome": "cover_em", **FMT}, {"score": 1.5, "em": 1.0, "outcome": 1.0}),
    # TeaRAG without the summary of its reference: the parser refuses the turn (a rollout would have asked again),
    # so there is no answer and no format: r = 0
    (
        "tearag",
        TEARAG.replace("<summary> Mira directed it. </summary>\n", ""),
        "Mira",
        FMT,
        {"score": 0.0, "em": 0.0, "format": 0.0},
    ),
    # HiPRAG, cover-EM: "mira talvenor" covers gold "Mira" → 1, EM 0 ("mira talvenor" ≠ "mira"); format 1 → 1.5
    ("hiprag", HIPRAG, "Mira", {"outcome": "cover_em", **FMT}, {"score": 1.5, "em": 0.0, "outcome": 1.0}),
    # ReasonRAG: reasoning → query, grounding → evidence, reasoning → answer (cut after each stop string): EM 1,
    # format 1 → 1.5
    ("reasonrag", REASONRAG, "Mira", FMT, {"score": 1.5, "em": 1.0, "format": 1.0}),
    # zero-shot: one answering turn, wrong: EM 0, format 1 → 0.5
    ("zeroshot", "<answer> Arvel </answer>", "Mira", FMT, {"score": 0.5, "em": 0.0, "format": 1.0}),
    # naive RAG (its documents were in the prompt): the one turn answers right → 1 + 0.5 = 1.5
    ("naive", "<answer> Mira </answer>", "Mira", FMT, {"score": 1.5, "em": 1.0}),
    # single-con: no <answer> tag: no prediction, format 0 → 0
    ("single-con", "Mira", "Mira", FMT, {"score": 0.0, "em": 0.0, "format": 0.0}),
    # single-ppr: right answer → 1.5
    ("single-ppr", "<answer> Mira </answer>", ["Mira"], FMT, {"score": 1.5, "em": 1.0}),
]


@pytest.mark.parametrize(("protocol", "response", "truth", "kwargs", "want"), CASES)
def test_compute_score_is_hand_worked(
    protocol: str, response: str, truth: Any, kwargs: dict[str, Any], want: dict[str, float]
) -> None:
    got = compute_score(f"effirag/{protocol}/musique", response, truth, None, **kwargs)
    for key, value in want.items():
        assert got[key] == pytest.approx(value), key
    assert set(got) >= {"score", "em", "format_ok", "searches"}
    # the protocol can come from extra_info instead of data_source (verl's own data sources)
    assert compute_score("searchR1_nq", response, truth, {"protocol": protocol}, **kwargs) == got


def test_split_and_search_counts() -> None:
    turns, bodies = split_response(get_protocol("dsr1"), DSR1)
    assert len(turns) == 3 and bodies == ["a b c", "d e"]
    assert compute_score("effirag/dsr1/x", DSR1, "Mira")["searches"] == 2.0
    assert compute_score("effirag/hiprag/x", HIPRAG, "Mira")["searches"] == 1.0


class _Verdicts:
    """A judge with fixed verdicts: the search step is an over-search, the non-search step is optimal."""

    def over_search(self, steps: Sequence[StepView]) -> list[bool]:
        return [True for _ in steps]

    def under_search(self, steps: Sequence[StepView]) -> list[bool]:
        return [False for _ in steps]


def test_hiprag_term_with_a_judge() -> None:
    """HiPRAG's R = A(1 − λf) + λf·F + λp·A·F·N_corr/N with A = cover-EM 1, F = 1, N = 2 steps (one search, one
    not), N_corr = 1 (the search is an over-search): 0.8 + 0.2 + 0.4·1/2 = 1.2; with the outcome off, r = 1.2."""
    got = compute_score(
        "effirag/hiprag/x", HIPRAG, "Mira", {"question": "Who directed Glass Harbor?"},
        outcome_weight=0.0, hiprag_weight=1.0, judge=_Verdicts(),
    )  # fmt: skip
    assert got["score"] == pytest.approx(1.2) and got["hiprag"] == pytest.approx(1.2)
    with pytest.raises(ConfigError, match=r"\['hiprag'\] need a step judge: set world"):
        compute_score("effirag/hiprag/x", HIPRAG, "Mira", hiprag_weight=1.0)


def test_bad_calls_fail_with_the_field() -> None:
    with pytest.raises(ConfigError, match="outcome_wieght"):
        compute_score("effirag/searchr1/x", SR1, "Mira", outcome_wieght=1.0)
    with pytest.raises(DataError, match="data_source"):
        compute_score("searchR1_nq", SR1, "Mira")
    with pytest.raises(DataError, match="target"):
        compute_score("effirag/searchr1/x", SR1, {"answers": ["Mira"]})


def test_the_example_search_tool_config_points_at_retrieve_and_names_the_rows_tool(tmp_path: Path) -> None:
    from effirag.integrations.verl import SEARCH_TOOL, check_search_tool_config

    src = Path("configs/verl/search_tool_config.yaml").read_text(encoding="utf-8")
    doc = check_search_tool_config(Path("configs/verl/search_tool_config.yaml"))
    assert doc["tools"][0]["config"]["retrieval_service_url"] == "http://127.0.0.1:8000/retrieve"
    assert doc["tools"][0]["tool_schema"]["function"]["name"] == SEARCH_TOOL
    for old, new, field in [
        ("name: search", "name: retrieve", "function.name"),
        ("8000/retrieve", "8000/search", "retrieval_service_url"),
        ("required: [query_list]", "required: []", "parameters"),
    ]:
        bad = tmp_path / f"{field}.yaml"
        bad.write_text(src.replace(old, new), encoding="utf-8")
        with pytest.raises(DataError, match=field):
            check_search_tool_config(bad)
