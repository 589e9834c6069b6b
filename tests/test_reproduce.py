"""``effirag reproduce``: the plan (stages, steps, availability), finished-stage reuse, and a dsr1 smoke run with a tiny
model that writes every report file and gives the same numbers from a fresh folder with the same seed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from effirag.cli.main import app
from effirag.errors import ConfigError
from effirag.reproduce.config import ReproduceConfig
from effirag.reproduce.plan import make_plan
from effirag.reproduce.report import claim_verdicts, verdict
from effirag.reproduce.runner import finished, run_stage, write_json_atomic

RL_QUESTIONS_N = 3
ROOT = Path(__file__).resolve().parents[1]
TRAINERS = {("train", "grpo"), ("train", "ppo"), ("eval", "qa")}  # a build without ipdpo, mcts or dpo


def _cfg(**kw: Any) -> ReproduceConfig:
    base = {"start": "/m", "world": "/w", "index": "/i", "recipes": str(ROOT / "configs"), "musique": ""}
    return ReproduceConfig(**{**base, **kw})


def test_plan_splits_the_budget_and_lists_unavailable_trainers(tmp_path: Path) -> None:
    """60 min over 5 methods = 12 min each × 0.5 steps/min = 6 steps: dsr1's 3 runs get 2 each, HiPRAG's 2 runs 3
    each, RouteRAG's 2 stages 3 each. IP-DPO and MCTS+DPO are not commands of this build: TeaRAG keeps only its
    retrieval claim (two start evals), ReasonRAG runs nothing."""
    (tmp_path / "i").mkdir()
    (tmp_path / "i" / "manifest.json").write_text("{}")
    cfg = _cfg(index=str(tmp_path / "i"), steps_per_minute=0.5)
    plan = make_plan(cfg, tmp_path / "out", lambda words: words in TRAINERS)
    assert plan.steps == {"tearag": 0, "hiprag": 3, "routerag": 3, "reasonrag": 0, "dsr1": 2}
    assert "`effirag train ipdpo` is not available" in plan.unavailable[("tearag", "IP-DPO")]
    assert "`effirag data mcts` is not available" in plan.unavailable[("reasonrag", "process-supervised MCTS+DPO")]
    keys = [s.key for s in plan.stages]
    assert not [k for k in keys if "reasonrag" in k or "ipdpo" in k]
    assert keys.count("train-routerag") == 1 and "world" not in keys and "index" not in keys
    routerag = next(s for s in plan.stages if s.key == "train-routerag")
    stages = yaml.safe_load(routerag.argv[-1].removeprefix("stages="))
    assert [(s["name"], s["max_steps"]) for s in stages] == [("outcome", 3), ("efficiency", 3)]
    assert stages[1]["objective"]["routerag_weight"] == 1.0  # the recipe's own rewards, only the length changed
    plain = next(s for s in plan.stages if s.key == "train-dsr1-plain").argv
    assert "max_steps=2" in plain and "env.model=/m" in plain and "objective.cost=none" in plain
    evals = {s.key for s in plan.stages if s.kind == "eval"}
    assert {"eval-start-tearag", "eval-start-tearag-passage", "eval-dsr1-memory-dsr1"} <= evals
    assert plan.evals[("routerag", "stage 2 (efficiency)")] == "eval-routerag-efficiency-routerag"
    everything = make_plan(cfg, tmp_path / "out", lambda words: True)
    by_key = {s.key: s.argv for s in everything.stages}  # every trainer and recipe of this build is there
    assert by_key["train-tearag-ipdpo"][:4] == (
        "train",
        "ipdpo",
        "--config",
        str(ROOT / "configs/dpo/tearag_ipdpo.yaml"),
    )
    assert by_key["train-reasonrag-prl-1"][:2] == ("data", "mcts") and "output_dir=" in " ".join(
        by_key["train-reasonrag-prl-1"]
    )
    assert by_key["train-reasonrag-prl-2"][:2] == ("train", "dpo")
    assert (ROOT / "configs/mcts/reasonrag.yaml").is_file() and (ROOT / "configs/dpo/reasonrag_step_dpo.yaml").is_file()
    no_index = make_plan(_cfg(methods=("dsr1",), index=str(tmp_path / "none")), tmp_path / "o", lambda w: True)
    assert [s.key for s in no_index.stages[:2]] == ["world", "index"]
    with pytest.raises(ConfigError, match="unknown method"):
        _cfg(methods=("nope",))


def test_verdicts() -> None:
    row = {"diff": {"mean": -2.0, "low": -3.0, "high": -1.0}, "test": {"p_value": 0.01}}
    assert verdict("lower", row) == ("reproduced", True)
    assert verdict("higher", row) == ("not reproduced", True)
    assert verdict("not_lower", row) == ("guard broken", True)
    # the right sign without significance (p ≥ 0.05, or an interval reaching 0) is direction only
    assert verdict("lower", {**row, "test": {"p_value": 0.08}}) == ("direction only (not significant)", False)
    wide = {**row, "diff": {"mean": -1.0, "low": -3.0, "high": 0.5}}
    assert verdict("lower", wide) == ("direction only (not significant)", False)
    assert verdict("not_lower", wide) == ("guard holds", False)
    assert verdict("report", row) == ("reported", True)
    assert verdict("lower", {"diff": None}) == ("no data", False)


def test_claim_verdicts_on_hand_made_rows() -> None:
    """Four hand-made claims of (tokens lower, EM not lower): significant right sign with the guard kept →
    reproduced; right sign, p 0.3 → direction only; wrong sign → not reproduced; significant right sign but EM fell
    significantly (−4 [−6, −2]) → not reproduced (guard broken)."""

    def rows(tokens: dict[str, float], p: float, em: dict[str, float]) -> list[dict[str, object]]:
        out = []
        for metric, expect, d, pv in (("tokens", "lower", tokens, p), ("em", "not_lower", em, 0.01)):
            r = {"diff": d, "test": {"p_value": pv}}
            out.append({"metric": metric, "expect": expect, **r, "verdict": verdict(expect, r)[0]})
        return out

    kept = {"mean": 1.0, "low": -1.0, "high": 3.0}
    fell = {"mean": -4.0, "low": -6.0, "high": -2.0}
    down = {"mean": -30.0, "low": -40.0, "high": -20.0}
    cases = {
        "reproduced": rows(down, 0.001, kept),
        "direction only (not significant)": rows({"mean": -5.0, "low": -12.0, "high": 2.0}, 0.3, kept),
        "not reproduced": rows({"mean": 8.0, "low": 2.0, "high": 14.0}, 0.01, kept),
        "not reproduced (guard broken)": rows(down, 0.001, fell),
    }
    for expected, claim in cases.items():
        assert claim_verdicts(claim)[0]["verdict"] == expected  # type: ignore[arg-type]


def test_a_claim_with_starts_compares_gains_over_each_side_s_own_start() -> None:
    """EM per question (q1, q2, q3): A's start 1, 0, 1 and A 1, 1, 0 → A's gains 0, +1, −1 (mean 0); B's start 0, 0, 0
    and B 1, 0, 1 → B's gains +1, 0, +1 (mean 2/3); B − A per question +1, −1, +2 (mean 2/3). Gains take three
    values, so the test is Wilcoxon's, not McNemar's. Without a start's figures the claim is "not available"."""
    from effirag.errors import DataError
    from effirag.reproduce.methods import Claim
    from effirag.reproduce.plan import Plan
    from effirag.reproduce.report import _claim_entry

    em = {"A0": (1, 0, 1), "A": (1, 1, 0), "B0": (0, 0, 0), "B": (1, 0, 1)}
    rows = {k: {f"q{i}": {"em": float(x)} for i, x in enumerate(v, 1)} for k, v in em.items()}
    claim = Claim("A", "B", "B gains more", (("em", "higher"),), starts=("A0", "B0"))
    entry = _claim_entry(claim, rows, "m", Plan(), _cfg(resamples=200))
    (row,) = entry["rows"]
    assert entry["gains_over"] == {"a": "A0", "b": "B0"} and row["n"] == 3
    assert (row["a"], row["b"], row["diff"]["mean"]) == pytest.approx((0.0, 2 / 3, 2 / 3))
    assert row["test"]["name"].startswith("wilcoxon")
    plain = _claim_entry(Claim("A", "B", "B higher", (("em", "higher"),)), rows, "m", Plan(), _cfg(resamples=200))
    assert plain["rows"][0]["test"]["name"] == "mcnemar_exact" and "gains_over" not in plain
    gone = Plan(unavailable={("m", "B0"): "no start"})
    assert _claim_entry(claim, rows, "m", gone, _cfg())["status"].endswith("no start")
    rows["B0"].pop("q3")  # a start evaluated on other questions is refused, naming the question
    with pytest.raises(DataError, match=r"lacks 1 of the run's questions.*q3"):
        _claim_entry(claim, rows, "m", Plan(), _cfg(resamples=200))


def test_a_finished_stage_is_reused_and_a_changed_one_reruns(tmp_path: Path) -> None:
    from effirag.reproduce.plan import Stage

    stage = Stage("s", "eval", ("eval", "x"))
    python = ("python3", "-c", "import sys, json; print(json.dumps({'argv': sys.argv[1:]}))")
    rec = run_stage(stage, tmp_path, python)
    assert (rec["result"], rec["reused"]) == ({"argv": ["eval", "x"]}, False)
    assert run_stage(stage, tmp_path, ("false",))["reused"] is True  # done-marker: the command is not run again
    assert finished(tmp_path / "stages" / "s", ("eval", "y")) is None
    with pytest.raises(Exception, match="stage s2 failed"):
        run_stage(Stage("s2", "eval", ("eval",)), tmp_path, ("false",))
    assert not (tmp_path / "stages" / "s2" / "done.json").exists()
    # a stage killed mid-run (no done-marker): its partial training folder is emptied and the command runs again
    partial = tmp_path / "trainings" / "t"
    partial.mkdir(parents=True)
    (partial / "checkpoint-1").mkdir()
    rec = run_stage(Stage("t", "train", ("train",), fresh=str(partial)), tmp_path, python)
    assert rec["reused"] is False and not partial.exists()
    write_json_atomic(tmp_path / "x.json", {"a": 1})
    assert json.loads((tmp_path / "x.json").read_text()) == {"a": 1} and not (tmp_path / "x.json.tmp").exists()


def _figures(report: dict[str, Any]) -> dict[str, Any]:
    """Everything but measured latency and the run's own bookkeeping (time, reuse)."""
    out: dict[str, Any] = {}
    for label, v in report["methods"]["dsr1"]["variants"].items():
        out[label] = {k: x for k, x in v["summary"].items() if k != "latency_s"} | {"hist": v["steps_hist"]}
    claims = report["methods"]["dsr1"]["claims"]
    out["claims"] = [[r for r in c["rows"] if r["metric"] != "latency_s"] for c in claims]
    return out


@pytest.mark.slow
def test_reproduce_dsr1_smoke_writes_every_file_and_repeats(
    setup: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cfg = {
        "start": setup["model"], "index": setup["index"], "world": str(tmp_path / "no-world"),
        "train_questions": setup["questions"], "eval_questions": setup["questions"], "eval_limit": 3,
        "train_limit": 3, "recipes": str(ROOT / "configs"), "resamples": 200,
        "train_overrides": ["learning_rate=0.001", "num_generations=2", "questions_per_step=1",
                            "env.engine.max_steps=2", "env.engine.max_new_tokens=8",
                            "env.engine.max_inserted_tokens=48", "env.engine.k=1", "env.engine.passage_mode=sparse",
                            "env.judge="],
        "eval_settings": ["k=1", "max_steps=2", "max_new_tokens=8", "max_inserted_tokens=48", "passage_mode=sparse"],
    }  # fmt: skip
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    runner = CliRunner()
    args = ["reproduce", "--methods", "dsr1", "--budget-minutes", "3", "--config", str(tmp_path / "cfg.yaml")]
    one = runner.invoke(app, [*args, "--out", str(tmp_path / "a")])
    assert one.exit_code == 0, one.output
    a = tmp_path / "a"
    for name in ("report.md", "summary.md", "report.json", "accuracy_vs_tokens.png", "steps_hist.png", "osr_usr.png"):
        assert (a / name).stat().st_size > 0, name
    assert (a / "reward_curves.png").stat().st_size > 0
    report = json.loads((a / "report.json").read_text())
    dsr1 = report["methods"]["dsr1"]
    assert dsr1["train_steps_per_run"] == 1  # 3 min × 1.5 steps/min over 3 runs → int(1.5) = 1
    assert set(dsr1["variants"]) == {"start", "plain GRPO (EM)", "cost-aware, memory", "cost-aware, latency"}
    assert all(v["status"] == "measured" and v["summary"]["n"] == 3 for v in dsr1["variants"].values())
    assert all(len(v["reward_curve"]) == 1 for k, v in dsr1["variants"].items() if k != "start")
    rows = dsr1["claims"][0]["rows"]
    assert [r["metric"] for r in rows] == ["tokens", "em"] and rows[1]["test"]["name"] == "mcnemar_exact"
    md = (a / "report.md").read_text()
    assert "## Dynamic Search-R1" in md and "the memory-bound cost cuts tokens at equal EM" in md
    assert f"{dsr1['variants']['cost-aware, memory']['summary']['tokens']:.3g}" in md
    summary = (a / "summary.md").read_text().splitlines()
    claimed = [r for c in dsr1["claims"] for r in c["rows"]]
    assert len([ln for ln in summary if ln.startswith("| Dynamic Search-R1 |")]) == len(claimed) == 5
    latency = dsr1["claims"][1]["rows"]
    assert [(r["metric"], r["expect"]) for r in latency] == [
        ("latency_model_s", "lower"), ("latency_s", "report"), ("em", "not_lower"),
    ]  # fmt: skip
    recipe = yaml.safe_load((ROOT / "configs" / "rl" / "dsr1_grpo_latency.yaml").read_text())["objective"]
    s = dsr1["variants"]["cost-aware, latency"]["summary"]
    modeled = recipe["c_g"] * s["generated"] + recipe["c_e"] * (s["tokens"] - s["generated"])
    assert s["latency_model_s"] == pytest.approx(modeled) and "modeled latency s/q" in md
    again = runner.invoke(app, [*args, "--out", str(a), "--json"])  # every stage finished: all reused
    assert again.exit_code == 0, again.output
    assert all(s["reused"] for s in json.loads(again.stdout)["stages"])
    fresh = runner.invoke(app, [*args, "--out", str(tmp_path / "b")])  # same seed, nothing reused
    assert fresh.exit_code == 0, fresh.output
    assert _figures(json.loads((tmp_path / "b" / "report.json").read_text())) == _figures(report)


class _EveryOtherJudge:
    """Flags the 1st, 3rd, … step of each batch it is shown (over-search) and no non-search step."""

    def over_search(self, steps: list[Any]) -> list[bool]:
        return [i % 2 == 0 for i in range(len(steps))]

    def under_search(self, steps: list[Any]) -> list[bool]:
        return [False] * len(steps)


def test_per_question_figures_by_hand() -> None:
    """q1: two searches (graph 30 tokens inserted, passage 10), a reasoning step and an answer 'Paris' (right):
    tokens 5·4 + 40 = 60, tokens per retrieval 40/2 = 20, graph share 1/2. q2: one answer step 'Rome' (wrong, gold
    'Lima'), no retrieval: its ratios are NaN. Pooled over the set: 40 inserted / 2 turns = 20; graph share 1/2. The
    judge sees q1's two searches in one batch and flags the first: OSR 1/2 (q2 has no search: NaN); USR 0/1."""
    import math

    from effirag.reproduce.measure import per_question
    from effirag.types import Action, QAExample, Step, Trajectory

    q1 = Trajectory("q1", "?", "hiprag", steps=[
        Step(Action.SEARCH, mode="graph", generated_tokens=5, inserted_tokens=30),
        Step(Action.SEARCH, mode="passage", generated_tokens=5, inserted_tokens=10),
        Step(Action.REASON, generated_tokens=5),
        Step(Action.ANSWER, generated_tokens=5),
    ], prediction="Paris")  # fmt: skip
    q2 = Trajectory("q2", "?", "hiprag", steps=[Step(Action.ANSWER, generated_tokens=7)], prediction="Rome")
    ex = [QAExample("q1", "?", ["Paris"]), QAExample("q2", "?", ["Lima"])]
    rows, summary = per_question(ex, [q1, q2], _EveryOtherJudge())
    assert (rows["q1"]["em"], rows["q1"]["tokens"], rows["q1"]["turns"], rows["q1"]["steps"]) == (1.0, 60.0, 2.0, 4.0)
    assert (rows["q1"]["tokens_per_retrieval"], rows["q1"]["graph_share"], rows["q1"]["osr"]) == (20.0, 0.5, 0.5)
    assert rows["q1"]["usr"] == 0.0 and math.isnan(rows["q2"]["osr"]) and math.isnan(rows["q2"]["usr"])
    assert math.isnan(rows["q2"]["tokens_per_retrieval"]) and rows["q2"]["tokens"] == 7.0
    assert (summary["em"], summary["tokens"], summary["steps"]) == (0.5, 33.5, 2.5)
    pooled = (summary["tokens_per_retrieval"], summary["graph_share"], summary["osr"], summary["usr"])
    assert pooled == (20.0, 0.5, 0.5, 0.0)
    _, unjudged = per_question(ex, [q1, q2])
    assert math.isnan(unjudged["osr"]) and math.isnan(unjudged["latency_model_s"])
    # modeled latency at c_g 0.01, c_e 0.001 s/token: q1 20·0.01 + 40·0.001 = 0.24 s, q2 7·0.01 = 0.07 s; mean 0.155
    priced, priced_summary = per_question(ex, [q1, q2], costs=(0.01, 0.001))
    assert (priced["q1"]["latency_model_s"], priced["q2"]["latency_model_s"]) == pytest.approx((0.24, 0.07))
    assert priced_summary["latency_model_s"] == pytest.approx(0.155)


def test_the_cost_model_is_read_from_the_recipe_and_a_bad_one_is_named(tmp_path: Path) -> None:
    from dataclasses import replace

    from effirag.errors import DataError
    from effirag.reproduce.methods import REGISTRY
    from effirag.reproduce.report import _costs

    dsr1 = REGISTRY["dsr1"]
    recipe = yaml.safe_load((ROOT / "configs" / dsr1.cost_model).read_text())["objective"]
    assert _costs(_cfg(recipes=str(ROOT / "configs")), dsr1) == (recipe["c_g"], recipe["c_e"])
    assert _costs(_cfg(recipes=str(ROOT / "configs")), replace(dsr1, cost_model="")) is None
    (tmp_path / "rl").mkdir()
    (tmp_path / "rl" / "dsr1_grpo_latency.yaml").write_text("objective: {c_g: fast}\n")
    with pytest.raises(DataError, match=r"dsr1_grpo_latency\.yaml.*objective"):
        _costs(_cfg(recipes=str(tmp_path)), dsr1)


def test_stages_run_with_the_configured_thread_count(tmp_path: Path) -> None:
    from effirag.reproduce.plan import Stage
    from effirag.reproduce.runner import stage_env

    python = ("python3", "-c", "import os, json; print(json.dumps({'omp': os.environ.get('OMP_NUM_THREADS')}))")
    rec = run_stage(Stage("t", "eval", ()), tmp_path, python, stage_env(1))
    assert rec["result"] == {"omp": "1"}
    assert stage_env(0).get("OMP_NUM_THREADS") == os.environ.get("OMP_NUM_THREADS")  # 0: left as it is


def test_trainings_sample_with_the_start_policy_settings_and_the_run_learning_rate(tmp_path: Path) -> None:
    """The start's inference.yaml (k 2, 6 turns, reranker ../rr relative to it) reaches every sampling trainer as
    engine.* and reranker= overrides, and the run's learning rate 3e-05 reaches GRPO (learning_rate=) and DPO
    (train.learning_rate=); MCTS merges the file itself and gets neither. learning_rate=0 and start_settings off
    leave the recipes as written."""
    start = tmp_path / "ckpt" / "policy"
    start.mkdir(parents=True)
    (start / "inference.yaml").write_text("k: 2\nmax_steps: 6\nreranker: ../rr\nfrequency_penalty: 0.3\n")
    (tmp_path / "i").mkdir()
    (tmp_path / "i" / "manifest.json").write_text("{}")
    cfg = _cfg(index=str(tmp_path / "i"), start=str(start))
    by_key = {s.key: s.argv for s in make_plan(cfg, tmp_path / "out", lambda words: True).stages}
    rr = f"env.reranker={tmp_path / 'ckpt' / 'rr'}"
    for key in ("train-hiprag-outcome", "train-dsr1-latency", "train-routerag", "train-tearag-ipdpo"):
        assert {"env.engine.k=2", "env.engine.max_steps=6", rr} <= set(by_key[key]), key
        assert not [a for a in by_key[key] if "penalty" in a], key  # sampling stays unpenalised
    assert "learning_rate=3e-05" in by_key["train-hiprag-outcome"]
    assert "train.learning_rate=3e-05" in by_key["train-tearag-ipdpo"]
    assert "train.learning_rate=3e-05" in by_key["train-reasonrag-prl-2"]
    assert not [
        a for a in by_key["train-reasonrag-prl-1"] if a.startswith(("env.engine.", "env.reranker=", "train.lr"))
    ]
    plain = _cfg(index=str(tmp_path / "i"), start=str(start), learning_rate=0.0, start_settings=False)
    argv = {s.key: s.argv for s in make_plan(plain, tmp_path / "out", lambda words: True).stages}[
        "train-hiprag-outcome"
    ]
    assert not [a for a in argv if a.startswith(("env.engine.", "env.reranker=", "learning_rate="))]
