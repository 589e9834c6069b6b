"""``effirag reproduce``'s retrieval-only comparison (TeaRAG: chunk-only vs KAG+PPR on gold sub-questions): its
stages in the plan, the summary row's sign on hand-built per-sub-question figures, and the real stages on a tiny
MuSiQue-layout slice (its own corpus, questions and triplets; no shared data)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from effirag.errors import DataError
from effirag.reproduce.config import ReproduceConfig
from effirag.reproduce.markdown import render, render_summary
from effirag.reproduce.plan import Plan, make_plan
from effirag.reproduce.report import build_report
from effirag.reproduce.runner import run_stages, stage_env, write_json_atomic

ROOT = Path(__file__).resolve().parents[1]
CHUNKS = "chunks only (dense), MuSiQue gold sub-queries"
KAG = "KAG+PPR, MuSiQue gold sub-queries"
QA_VARIANTS = ("start, KAG+PPR", "start, chunks only", "IP-DPO")
PASSAGES = [
    ("p0", "Hello Love", "Hello Love is a song by Hank Snow, released in 1974 on RCA Victor."),
    ("p1", "Hank Snow", "Hank Snow was a country singer. Hank Snow lived in Tennessee for most of his life."),
    ("p2", "Tennessee", "Tennessee is a state of the United States whose capital is Nashville."),
    ("p3", "Rembrandt", "Rembrandt was a Dutch painter born in Leiden in 1606."),
    ("p4", "Leiden", "Leiden is a city in the province of South Holland with the oldest university of the country."),
    ("p5", "Rotterdam", "Rotterdam has the largest port in Europe and a long history of trade with the East Indies."),
]
TRIPLETS = [
    ("Hello Love", "performer", "Hank Snow", "p0"),
    ("Hank Snow", "lived in", "Tennessee", "p1"),
    ("Tennessee", "capital", "Nashville", "p2"),
    ("Rembrandt", "born in", "Leiden", "p3"),
    ("Leiden", "located in", "South Holland", "p4"),
    ("Rotterdam", "has", "largest port in Europe", "p5"),
]
QUESTIONS = [
    ("q1", "Where did the performer of Hello Love live?", "Tennessee", (0, 1),
     ("Who performed Hello Love?", "Hank Snow"), ("Where did #1 live?", "Tennessee")),
    ("q2", "In which province was Rembrandt born?", "South Holland", (3, 4),
     ("Where was Rembrandt born?", "Leiden"), ("In which province is #1?", "South Holland")),
]  # fmt: skip


def write_slice(folder: Path) -> Path:
    """A two-question MuSiQue-layout slice: questions.json (two hops each), corpus.json and triplets.jsonl."""
    folder.mkdir(parents=True)
    corpus = [{"id": pid, "title": t, "text": x} for pid, t, x in PASSAGES]
    (folder / "corpus.json").write_text(json.dumps(corpus), encoding="utf-8")
    rows = [{"head": h, "relation": r, "tail": t, "source_id": s} for h, r, t, s in TRIPLETS]
    (folder / "triplets.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    questions = []
    for qid, question, answer, support, *hops in QUESTIONS:
        paragraphs = [
            {"idx": i, "title": t, "paragraph_text": x, "is_supporting": i in support}
            for i, (_, t, x) in enumerate(PASSAGES)
        ]
        decomposition = [
            {"id": j, "question": q, "answer": a, "paragraph_support_idx": support[j]} for j, (q, a) in enumerate(hops)
        ]
        questions.append(
            {"id": qid, "question": question, "answer": answer, "answer_aliases": [], "answerable": True,
             "paragraphs": paragraphs, "question_decomposition": decomposition}
        )  # fmt: skip
    (folder / "questions.json").write_text(json.dumps(questions), encoding="utf-8")
    return folder


def _cfg(musique: str, **kw: Any) -> ReproduceConfig:
    base = {"start": "/m", "world": "/w", "index": "/i", "recipes": str(ROOT / "configs"), "methods": ("tearag",)}
    return ReproduceConfig(**{**base, "musique": musique, "musique_kg": "triplets.jsonl", **kw})


def _plan(tmp_path: Path, cfg: ReproduceConfig) -> Plan:
    (tmp_path / "i").mkdir(exist_ok=True)
    (tmp_path / "i" / "manifest.json").write_text("{}")
    return make_plan(cfg, tmp_path / "out", lambda words: words in {("eval", "qa"), ("eval", "retrieval")})


def test_the_plan_indexes_the_slice_once_and_retrieves_with_both_retrievers(tmp_path: Path) -> None:
    mus = write_slice(tmp_path / "mus")
    plan = _plan(tmp_path, _cfg(str(mus), index=str(tmp_path / "i"), retrieval_k=3))
    by_key = {s.key: s for s in plan.stages}
    index = by_key["index-musique"]
    assert index.argv[:2] == ("index", "build") and index.fresh == str(tmp_path / "out" / "musique-index")
    assert ("--triplets", str(mus / "triplets.jsonl")) == index.argv[4:6]
    dense, kag = by_key["retrieval-musique-dense"].argv, by_key["retrieval-musique-kag"].argv
    for argv, r in ((dense, "dense"), (kag, "kag")):
        words = " ".join(argv)
        assert f"-r {r} " in words and "--subqueries gold --k 3 --tokenizer encoder" in words
        assert f"--index {tmp_path / 'out' / 'musique-index'}" in words and argv[-2:] == ("--per-question", "--json")
    assert plan.retrievals == {("tearag", CHUNKS): "retrieval-musique-dense", ("tearag", KAG): "retrieval-musique-kag"}
    skipped = _plan(tmp_path, _cfg("", index=str(tmp_path / "i")))
    assert not [s for s in skipped.stages if "musique" in s.key]
    assert "musique=''" in skipped.unavailable[("tearag", KAG)]
    with pytest.raises(DataError, match=str(tmp_path / "nowhere" / "questions.json")):
        _plan(tmp_path, _cfg(str(tmp_path / "nowhere"), index=str(tmp_path / "i")))


def _done(out: Path, key: str, tokens: list[int], recalled: list[int]) -> None:
    rows = [{"id": f"q{i // 2}", "hop": i % 2 + 1, "tokens": t, "recalled": r, "items": 3}
            for i, (t, r) in enumerate(zip(tokens, recalled, strict=True))]  # fmt: skip
    result = {"n_questions": 2, "n_subqueries": 4, "k": 3, "tokenizer": "encoder", "items_per_retrieval": 3.0,
              "answer_recall": 100.0 * sum(recalled) / 4, "tokens_per_retrieval": sum(tokens) / 4,
              "per_subquery": rows}  # fmt: skip
    (out / "stages" / key).mkdir(parents=True)
    write_json_atomic(out / "stages" / key / "done.json", {"argv": [], "seconds": 1.0, "result": result})


def _report(cfg: ReproduceConfig, plan: Plan, out: Path) -> dict[str, Any]:
    """The report of a plan whose policy evaluations did not run (its QA claims: not measured)."""
    plan.evals.clear()
    plan.unavailable.update({("tearag", v): "not run in this test" for v in QA_VARIANTS})
    report = build_report(cfg, plan, out, [])
    run = {"finished": "now", "machine": "here", "minutes": 0.0, "eval_questions": 0, "eval_file": "-"}
    report["run"], report["plots"] = {**run, "train_file": "-", **asdict(cfg)}, []
    return report


def test_the_summary_row_has_the_sign_of_the_hand_built_figures(tmp_path: Path) -> None:
    """Chunks: tokens (100, 120, 80, 100) → mean 100, recalled (1, 1, 1, 0). KAG: (60, 70, 90, 60) → mean 70,
    recalled (1, 1, 0, 0). Per sub-question B − A: (−40, −50, +10, −40), mean −30: the claimed sign (lower), but four
    pairs cannot make Wilcoxon's p fall below 0.05 → "direction only (not significant)".
    Answer recall 0.75 → 0.5 (B − A = −0.25): reported. Swapping the sides gives +30 → "not reproduced"."""
    mus = write_slice(tmp_path / "mus")
    cfg = _cfg(str(mus), index=str(tmp_path / "i"), resamples=500)
    plan, out = _plan(tmp_path, cfg), tmp_path / "out"
    _done(out, "retrieval-musique-dense", [100, 120, 80, 100], [1, 1, 1, 0])
    _done(out, "retrieval-musique-kag", [60, 70, 90, 60], [1, 1, 0, 0])
    report = _report(cfg, plan, out)
    claim = report["methods"]["tearag"]["claims"][-1]
    assert (claim["a"], claim["b"], claim["status"], claim["pairing"]) == (CHUNKS, KAG, "measured", "gold sub-question")
    tokens, recall = claim["rows"]
    assert (tokens["metric"], tokens["a"], tokens["b"], tokens["n"]) == ("tokens_per_retrieval", 100.0, 70.0, 4)
    assert tokens["diff"]["mean"] == -30.0 and tokens["verdict"] == "direction only (not significant)"
    assert tokens["test"]["name"].startswith("wilcoxon") and recall["test"]["name"] == "mcnemar_exact"
    assert (recall["a"], recall["b"], recall["verdict"]) == (0.75, 0.5, "reported")
    lines = [ln for ln in render_summary(report).splitlines() if f"| TeaRAG | {KAG} against {CHUNKS} |" in ln]
    assert len(lines) == 2 and "| tokens_per_retrieval (lower) | 100 | 70 | -30 [" in lines[0]
    # 4 pairs: Wilcoxon's p cannot fall below 0.05, so the right sign is not significant
    assert lines[0].endswith("| direction only (not significant) |")
    md = render(report)
    assert f"| {KAG} | 2 | 4 | 3 | 50 | 70 | encoder |" in md and "Paired by gold sub-question." in md
    swapped = tmp_path / "swapped"
    _done(swapped, "retrieval-musique-dense", [60, 70, 90, 60], [1, 1, 0, 0])
    _done(swapped, "retrieval-musique-kag", [100, 120, 80, 100], [1, 1, 1, 0])
    row = _report(cfg, _plan(tmp_path, cfg), swapped)["methods"]["tearag"]["claims"][-1]["rows"][0]
    assert row["diff"]["mean"] == 30.0 and row["verdict"] == "not reproduced"
    off = _report(_cfg(""), _plan(tmp_path, _cfg("", index=str(tmp_path / "i"))), tmp_path / "none")
    assert off["methods"]["tearag"]["claims"][-1]["status"].startswith("not measured: no MuSiQue slice configured")


@pytest.mark.slow
def test_the_real_stages_on_a_tiny_slice_are_paired_and_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The three stages run the real commands (bundled MiniLM, its WordPiece counts) and the claim's means are the
    commands' own tokens per retrieval; a second run reuses every stage."""
    from effirag.cli.reproduce import EFFIRAG

    monkeypatch.setenv("PYTHONPATH", str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    mus = write_slice(tmp_path / "mus")
    cfg = _cfg(str(mus), index=str(tmp_path / "i"), retrieval_k=2, resamples=200)
    plan, out = _plan(tmp_path, cfg), tmp_path / "out"
    stages = [s for s in plan.stages if "musique" in s.key]
    assert [s.key for s in stages] == ["index-musique", "retrieval-musique-dense", "retrieval-musique-kag"]
    records = run_stages(stages, out, EFFIRAG, env=stage_env(1))
    dense, kag = (records[k]["result"] for k in ("retrieval-musique-dense", "retrieval-musique-kag"))
    assert dense["n_subqueries"] == kag["n_subqueries"] == 4 and len(dense["per_subquery"]) == 4
    assert dense["tokenizer"] == kag["tokenizer"] == "encoder"
    report = _report(cfg, plan, out)
    runs = report["methods"]["tearag"]["retrieval"]
    assert runs[CHUNKS]["summary"]["tokens_per_retrieval"] == dense["tokens_per_retrieval"]
    tokens, recall = report["methods"]["tearag"]["claims"][-1]["rows"]
    assert tokens["a"] == pytest.approx(dense["tokens_per_retrieval"]) and tokens["n"] == 4
    assert tokens["b"] == pytest.approx(kag["tokens_per_retrieval"])
    assert recall["a"] == pytest.approx(dense["answer_recall"] / 100)
    assert recall["b"] == pytest.approx(kag["answer_recall"] / 100)
    again = run_stages(stages, out, ("false",), env=stage_env(1))  # a command that would fail: never run
    assert all(r["reused"] for r in again.values())
