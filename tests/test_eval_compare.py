"""``effirag eval compare``: per-question scores of two `eval qa` folders, paired by id, with intervals and p-values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from effirag.cli.main import app
from effirag.errors import DataError
from effirag.eval.compare import compare_scores, question_scores
from effirag.types import Action, QAExample, Step, Trajectory

runner = CliRunner()
GOLD = {"q1": "Paris", "q2": "Rome", "q3": "Oslo", "q4": "Lima"}


def _traj(qid: str, pred: str, gen: int, ins: int, steps: int, sample: int = 0) -> Trajectory:
    """``steps`` turns: the generated / inserted tokens sit in the first, the others are empty."""
    body = [Step(Action.SEARCH, generated_tokens=gen, inserted_tokens=ins)] + [Step(Action.ANSWER)] * (steps - 1)
    return Trajectory(qid, f"question {qid}", "searchr1", steps=body, prediction=pred, sample_index=sample)


def _run(folder: Path, rows: list[Trajectory], questions: Path | None) -> Path:
    folder.mkdir()
    (folder / "run.json").write_text("{}\n", encoding="utf-8")
    (folder / "trajectories.jsonl").write_text("".join(json.dumps(t.to_dict()) + "\n" for t in rows), encoding="utf-8")
    if questions is not None:  # what a finished `eval qa --out` run holds: its questions with their gold answers
        (folder / "questions.jsonl").write_text(questions.read_text(encoding="utf-8"), encoding="utf-8")
    return folder


def test_question_scores_average_samples() -> None:
    """q1 sampled twice: predictions 'Paris' (EM 1) and 'Paris France' (EM 0, F1 2·(1·1/2)/(1 + 1/2) = 2/3) → EM 0.5,
    F1 (1 + 2/3)/2 = 5/6; tokens (10 + 5 + 20 + 5)/2 = 20; generated (10 + 20)/2 = 15; steps (2 + 4)/2 = 3."""
    ex = [QAExample("q1", "?", ["Paris"])]
    s = question_scores(ex, [_traj("q1", "Paris", 10, 5, 2), _traj("q1", "Paris France", 20, 5, 4, sample=1)])["q1"]
    assert (s.em, s.tokens, s.generated, s.steps, s.samples) == (0.5, 20.0, 15.0, 3.0, 2)
    assert s.f1 == pytest.approx(5 / 6)
    with pytest.raises(DataError, match="question_id"):
        question_scores(ex, [_traj("q9", "x", 1, 1, 1)])


def test_compare_scores_by_hand() -> None:
    """A right on q1, q2; B right on q1, q2, q3, q4: EM 0.5 → 1.0, B alone right twice → McNemar p = 2·(1/4) = 0.5.
    Tokens B − A = −5 on every question: the interval is the point −5; for Wilcoxon the four differences tie (ranks
    2.5 each, W+ = 0, W− = 10), so the normal approximation: mean 4·5/4 = 5, variance 4·5·9/24 − (4³ − 4)/48 = 6.25,
    z = −5/2.5 = −2, p = 2·(1 − Φ(2)) = 0.0455. Generated tokens 20 → 15: the same −5 on every question, so the same
    interval and p; inserted tokens are 10 in both, so generated and total tokens differ alike."""
    ex = [QAExample(q, "?", [g]) for q, g in GOLD.items()]
    a = question_scores(ex, [_traj(q, GOLD[q] if q in ("q1", "q2") else "no", 20, 10, 3) for q in GOLD])
    b = question_scores(ex, [_traj(q, GOLD[q], 15, 10, 3) for q in GOLD])
    out = compare_scores(a, b, seed=0, n_resamples=200)
    em, tok, steps = out["metrics"]["em"], out["metrics"]["tokens"], out["metrics"]["steps"]
    assert (out["n"], em["a"], em["b"]) == (4, 0.5, 1.0)
    assert (em["test"]["name"], em["test"]["p_value"]) == ("mcnemar_exact", 0.5)
    assert (tok["diff"]["mean"], tok["diff"]["low"], tok["diff"]["high"]) == (-5.0, -5.0, -5.0)
    assert (tok["test"]["name"], tok["test"]["statistic"]) == ("wilcoxon_normal", 0.0)
    assert tok["test"]["p_value"] == pytest.approx(0.0455003, abs=1e-6)
    assert (steps["diff"]["mean"], steps["test"]["p_value"]) == (0.0, 1.0)
    gen = out["metrics"]["generated"]
    assert (gen["a"], gen["b"], gen["diff"]["mean"], gen["diff"]["low"]) == (20.0, 15.0, -5.0, -5.0)
    assert gen["test"]["p_value"] == pytest.approx(0.0455003, abs=1e-6)
    assert compare_scores(a, b, seed=0, n_resamples=200) == out
    with pytest.raises(DataError, match=r"1 only in A \(first: \['q4'\]\)"):
        compare_scores(a, {q: v for q, v in b.items() if q != "q4"})


def test_cli_compares_two_runs_and_refuses_different_question_sets(tmp_path: Path) -> None:
    qfile = tmp_path / "questions.jsonl"
    qfile.write_text("".join(json.dumps({"id": q, "question": "?", "answer": g}) + "\n" for q, g in GOLD.items()))
    run_a = _run(tmp_path / "a", [_traj(q, "no", 20, 10, 3) for q in GOLD], qfile)
    run_b = _run(tmp_path / "b", [_traj(q, GOLD[q], 15, 10, 2) for q in GOLD], None)
    r = runner.invoke(app, ["eval", "compare", str(run_a), str(run_b), "--json", "--resamples", "100"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert (out["metrics"]["em"]["diff"]["mean"], out["metrics"]["steps"]["diff"]["mean"]) == (1.0, -1.0)
    assert out["metrics"]["em"]["test"]["p_value"] == 0.125  # 4 discordant, all B: 2·(1/16)
    table = runner.invoke(app, ["eval", "compare", str(run_a), str(run_b)])
    assert table.exit_code == 0 and "McNemar" in table.output and "0.125" in table.output
    short = _run(tmp_path / "c", [_traj(q, GOLD[q], 15, 10, 2) for q in ("q1", "q2", "q3")], None)
    r = runner.invoke(app, ["eval", "compare", str(run_a), str(short)])
    assert r.exit_code != 0 and "different questions" in r.output and "q4" in r.output
    r = runner.invoke(app, ["eval", "compare", str(run_b), str(run_a)])  # B holds no questions.jsonl (unfinished)
    assert r.exit_code != 0 and "--questions" in r.output and "questions.jsonl" in r.output
    r = runner.invoke(app, ["eval", "compare", str(run_b), str(run_a), "-q", str(qfile), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["metrics"]["em"]["diff"]["mean"] == -1.0


def test_gains_compare_each_run_against_its_own_start(tmp_path: Path) -> None:
    """EM per question (q1-q4): A's start right on q1-q4, A on q1, q2 → A's gains 0, 0, −1, −1; B's start right on q1
    only, B on q1, q2 → B's gains 0, +1, 0, 0. B − A: 0, +1, +1, +1, mean 0.75; a gain is no 0/1 outcome, so its
    test is Wilcoxon's. Tokens: A's runs 30 → 30 (gain 0), B's 25 → 20 (gain −5): B − A −5 on every question. On
    absolute EM A and B tie (0.5 each)."""
    qfile = tmp_path / "questions.jsonl"
    qfile.write_text("".join(json.dumps({"id": q, "question": "?", "answer": g}) + "\n" for q, g in GOLD.items()))

    def run(name: str, right: tuple[str, ...], gen: int) -> Path:
        return _run(tmp_path / name, [_traj(q, GOLD[q] if q in right else "no", gen, 10, 2) for q in GOLD], qfile)

    a0, a = run("a0", tuple(GOLD), 20), run("a", ("q1", "q2"), 20)
    b0, b = run("b0", ("q1",), 15), run("b", ("q1", "q2"), 10)
    args = ["eval", "compare", str(a), str(b), "--json", "--resamples", "200"]
    plain = json.loads(runner.invoke(app, args).output)
    assert plain["metrics"]["em"]["diff"]["mean"] == 0.0 and "gains_over" not in plain
    r = runner.invoke(app, [*args, "--start-a", str(a0), "--start-b", str(b0)])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    em, tok = out["metrics"]["em"], out["metrics"]["tokens"]
    assert (em["a"], em["b"], em["diff"]["mean"]) == (-0.5, 0.25, 0.75)
    assert em["test"]["name"].startswith("wilcoxon") and tok["diff"]["mean"] == -5.0
    assert out["gains_over"] == {"a": str(a0), "b": str(b0)}
    one = runner.invoke(app, [*args, "--start-a", str(a0)])
    assert one.exit_code != 0 and "--start-b" in one.output
    short = _run(tmp_path / "s", [_traj(q, "no", 1, 1, 1) for q in ("q1", "q2")], qfile)
    with pytest.raises(DataError, match=r"lacks 2 of the run's questions \(first: \['q3', 'q4'\]\)"):
        from effirag.eval.compare import gains, load_run

        examples = [QAExample(q, "?", [g]) for q, g in GOLD.items()]
        gains(load_run(a, examples), load_run(short, examples))
