"""CLI: ``effirag ask`` and ``effirag eval qa`` end to end over a real BM25 index and the scripted backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from effirag.cli.main import app

runner = CliRunner()
CORPUS = [
    {"title": "Lyon", "text": "Lyon is a city in France on the Rhone river."},
    {"title": "Ana Lopez", "text": "Ana Lopez directed the film Blue River in 1999."},
    {"title": "Blue River", "text": "Blue River is a film shot in Lyon."},
]
Q = "Who directed Blue River?"
SPARSE = ["--set", "passage_mode=sparse", "--set", "k=1"]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("idx")
    (d / "corpus.json").write_text(json.dumps(CORPUS))
    r = runner.invoke(
        app, ["index", "build", "--corpus", str(d / "corpus.json"), "--out", str(d / "index"), "--no-dense"]
    )
    assert r.exit_code == 0, r.output
    return d / "index"


def _script(tmp: Path, items: list[str]) -> str:
    p = tmp / "script.json"
    p.write_text(json.dumps(items))
    return f"scripted:{p}"


def test_ask_json_over_real_index(index: Path, tmp_path: Path) -> None:
    turns = [
        "<think> t </think><search> who directed Blue River </search>",
        "<think> t </think><answer> Ana Lopez </answer>",
    ]
    backend = _script(tmp_path, turns)
    r = runner.invoke(
        app, ["ask", "Who directed Blue River?", "--backend", backend, "--index", str(index), *SPARSE, "--json"]
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert list(doc) == ["question", "prediction", "format_ok", "steps", "totals"]
    assert (doc["question"], doc["prediction"], doc["format_ok"]) == (Q, "Ana Lopez", True)
    search, answer = doc["steps"]
    assert list(search) == ["action", "query", "mode", "items", "generated_tokens", "inserted_tokens"]
    assert (search["action"], search["query"], search["mode"]) == ("search", "who directed Blue River", "sparse")
    [item] = search["items"]
    assert list(item) == ["id", "kind", "text", "score"] and item["text"].startswith("Ana Lopez directed")
    assert answer["action"] == "answer" and answer["items"] == []
    assert list(doc["totals"]) == [
        "steps",
        "searches",
        "generated_tokens",
        "inserted_tokens",
        "retrieval_s",
        "generation_s",
    ]
    # generated tokens (the scripted backend's whitespace words): 2 ("<think>", "t") + 6 and 2 + 4 → 14
    assert (doc["totals"]["steps"], doc["totals"]["searches"], doc["totals"]["generated_tokens"]) == (2, 1, 14)


def test_ask_readable_output_keeps_brackets(index: Path, tmp_path: Path) -> None:
    backend = _script(tmp_path, ["<search> [graph] Blue River </search>", "<answer> Ana Lopez </answer>"])
    r = runner.invoke(app, ["ask", "Who?", "-p", "searchr1", "--backend", backend, "--index", str(index), *SPARSE])
    assert r.exit_code == 0, r.output
    assert "[graph] Blue River" in r.stdout and "[chunk]" in r.stdout and "'Ana Lopez'" in r.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--protocol", "nope", "--backend", "scripted:x.json"], "unknown protocol 'nope'"),
        (["--backend", "gpt:thing"], "unknown backend spec 'gpt:thing'"),
        (["--backend", "scripted:/no/such/file.json"], "scripted completions file not found"),
        (["--backend", "scripted:x.json", "--index", "/no/such/index"], "index folder not found: /no/such/index"),
        (["--backend", "scripted:x.json", "--set", "max_steps=0"], "EngineConfig.max_steps=0"),
    ],
)
def test_bad_input_is_one_line(index: Path, args: list[str], message: str) -> None:
    if "--index" not in args:
        args = [*args, "--index", str(index)]
    r = runner.invoke(app, ["ask", "Who?", *args])
    assert r.exit_code != 0
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_unreachable_server_is_one_line(index: Path) -> None:
    backend = "openai:http://127.0.0.1:9/v1#demo?max_retries=0&timeout=2"
    r = runner.invoke(app, ["ask", "Who?", "--backend", backend, "--index", str(index), *SPARSE])
    assert r.exit_code != 0
    assert "127.0.0.1:9" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_eval_qa_json_and_resume(index: Path, tmp_path: Path) -> None:
    qs = tmp_path / "questions.jsonl"
    qs.write_text(
        "\n".join(
            json.dumps(q)
            for q in [
                {"id": "a", "question": "Who directed Blue River?", "answer": "Ana Lopez"},
                {"id": "b", "question": "Where is Lyon?", "answer": "France"},
            ]
        )
    )
    script = {
        "Blue River?": [
            "<think> t </think><search> Blue River </search>",
            "<think> t </think><answer> Ana Lopez </answer>",
        ],
        "Lyon?": ["<think> t </think><answer> Spain </answer>"],
    }
    backend = _script(tmp_path, script)  # type: ignore[arg-type]
    out = tmp_path / "run"
    base = ["eval", "qa", "--questions", str(qs), "--index", str(index), "--backend", backend, "--out", str(out)]
    r = runner.invoke(app, [*base, *SPARSE, "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert set(rep) == {
        "n", "em", "f1", "cover_em", "format_rate", "mean_steps", "steps_hist", "ends", "tokens", "retrieval_turns",
        "latency_s", "by_hops", "by_type",
    }  # fmt: skip
    assert (rep["n"], rep["em"], rep["format_rate"], rep["retrieval_turns"]) == (2, 0.5, 1.0, 0.5)
    assert rep["ends"] == {"answer": 2}
    assert len((out / "trajectories.jsonl").read_text().splitlines()) == 2
    again = runner.invoke(app, [*base, *SPARSE, "--json"])  # everything on disk: the script is not consumed again
    assert again.exit_code == 0, again.output
    rep2 = json.loads(again.stdout)
    assert {k: v for k, v in rep2.items() if k != "latency_s"} == {k: v for k, v in rep.items() if k != "latency_s"}
    other = runner.invoke(app, [*base, "--set", "passage_mode=sparse", "--set", "k=2", "--json"])
    assert other.exit_code != 0 and "engine.k" in other.stderr


def test_ask_mode_pairs_any_protocol_with_the_run_mode(index: Path, tmp_path: Path) -> None:
    backend = _script(
        tmp_path,
        [
            "<think>\n<step>\n<reasoning> Who made it? </reasoning>\n<search> who directed Blue River </search>",
            "<conclusion> Ana Lopez did. </conclusion>\n</step>\n</think>\n<answer> Ana Lopez </answer>",
        ],
    )
    args = ["ask", Q, "-p", "hiprag", "--backend", backend, "--index", str(index), "--set", "k=1"]
    r = runner.invoke(app, [*args, "--mode", "sparse", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert (doc["prediction"], doc["format_ok"]) == ("Ana Lopez", True)
    assert [(s["action"], s["mode"]) for s in doc["steps"]] == [("search", "sparse"), ("answer", None)]
    assert doc["steps"][0]["items"][0]["text"].startswith("Ana Lopez directed")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-p", "single-ppr", "--mode", "passage"], "EngineConfig.mode='passage': protocol 'single-ppr' cannot run"),
        (["-p", "routerag", "--mode", "hybrid"], "protocol 'routerag' cannot run over it: its model picks"),
        (["-p", "zeroshot", "--mode", "sparse"], "protocol 'zeroshot' cannot run over it: it never retrieves"),
        (["--mode", "telepathy"], "EngineConfig.mode='telepathy': must be one of passage, sparse"),
        (["-p", "hiprag", "--mode", "kag"], "mode 'kag' needs a dense index"),
    ],
)
def test_impossible_mode_is_one_line(index: Path, tmp_path: Path, args: list[str], message: str) -> None:
    backend = _script(tmp_path, ["<answer> x </answer>"])
    r = runner.invoke(app, ["ask", "Who?", "--backend", backend, "--index", str(index), *args])
    assert r.exit_code != 0
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = runner.invoke(app, ["eval", "qa", "-q", "/no/such.jsonl", "--backend", backend, "-i", str(index), *args])
    assert r.exit_code != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_eval_qa_mode_is_part_of_the_run(index: Path, tmp_path: Path) -> None:
    qs = tmp_path / "questions.jsonl"
    qs.write_text(json.dumps({"id": "a", "question": Q, "answer": "Ana Lopez"}))
    backend = _script(tmp_path, ["<search> Blue River </search>", "<answer> Ana Lopez </answer>"])
    out = tmp_path / "run"
    base = ["eval", "qa", "-q", str(qs), "-i", str(index), "--backend", backend, "--out", str(out), "--json"]
    r = runner.invoke(app, [*base, "-p", "dsr1", "--mode", "sparse"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["em"] == 1.0
    assert json.loads((out / "run.json").read_text())["engine.mode"] == "sparse"
    [line] = (out / "trajectories.jsonl").read_text().splitlines()
    assert [s["mode"] for s in json.loads(line)["steps"]] == ["sparse", None]
    other = runner.invoke(app, [*base, "-p", "dsr1", "--set", "passage_mode=sparse"])  # same searches, no run mode
    assert other.exit_code != 0 and "engine.mode" in other.stderr
