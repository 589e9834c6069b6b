"""``report.json`` of ``effirag reproduce``: every figure measured by the run, per method, variant and claim.

A claim row compares variant B with variant A on one metric over the paired evaluation questions (a retrieval-only
claim: over the paired gold sub-questions, :mod:`effirag.reproduce.retrieval`) (:func:`effirag.eval.compare.
paired_test`: B − A, bootstrap 95% interval, McNemar for EM and answer recall, Wilcoxon otherwise) and
says whether the paper's claim holds here (:func:`verdict`, :func:`claim_verdicts`). A difference is ``significant``
when its interval excludes 0 and its test's p-value is below 0.05. A ``lower`` / ``higher`` row is ``reproduced`` only
when its difference has the claimed sign *and* is significant *and* every guard of its claim holds; the right sign
without significance is "direction only (not significant)"; a significant right sign whose claim broke a guard is
"not reproduced (guard broken)". A ``not_lower`` row is a guard (e.g. accuracy kept): it holds when the interval's
upper end is ≥ 0 (no significant drop). ``report`` rows are shown without a claimed direction.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from effirag.config import read_yaml
from effirag.errors import DataError
from effirag.eval.compare import metric_gains, paired_test, read_trajectories
from effirag.eval.qa import TRAJECTORIES
from effirag.reproduce.config import ReproduceConfig
from effirag.reproduce.measure import finite, per_question, steps_histogram
from effirag.reproduce.methods import REGISTRY, Claim, Method
from effirag.reproduce.plan import Plan
from effirag.reproduce.retrieval import read_retrievals
from effirag.types import QAExample

NOT_AVAILABLE = "not available in this build"
ALPHA = 0.05
JUDGED = ("osr", "usr")  # metrics that need the world's oracle
BINARY = ("em", "answer_recall")  # 0/1 per pair: McNemar's exact test


REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
DIRECTION_ONLY = "direction only (not significant)"
GUARD_BROKEN = "not reproduced (guard broken)"
GUARD_HOLDS = "guard holds"
GUARD_FAILS = "guard broken"


def verdict(expect: str, row: dict[str, Any]) -> tuple[str, bool]:
    """(verdict, significant) of one claim row on its own: for ``lower`` / ``higher``, reproduced (claimed sign and
    significant), direction only (claimed sign, not significant) or not reproduced; for ``not_lower``, guard holds
    (interval's upper end ≥ 0) or guard broken; reported; no data."""
    d = row["diff"]
    if d is None:
        return "no data", False
    significant = (d["low"] > 0 or d["high"] < 0) and row["test"]["p_value"] < ALPHA
    if expect == "report":
        return "reported", significant
    if expect == "not_lower":
        return (GUARD_HOLDS if d["high"] >= 0 else GUARD_FAILS), significant
    right_sign = {"lower": d["mean"] < 0, "higher": d["mean"] > 0}[expect]
    if not right_sign:
        return NOT_REPRODUCED, significant
    return (REPRODUCED if significant else DIRECTION_ONLY), significant


def claim_verdicts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of one claim with each ``reproduced`` row turned into "not reproduced (guard broken)" when a guard
    row of the same claim is broken or has no data (the claim is the direction *and* the guards together)."""
    guards = [r["verdict"] for r in rows if r["expect"] == "not_lower"]
    broken = any(v != GUARD_HOLDS for v in guards)
    return [{**r, "verdict": GUARD_BROKEN} if broken and r["verdict"] == REPRODUCED else r for r in rows]


def _judge(cfg: ReproduceConfig) -> Any:
    from effirag.env import EnvConfig, make_judge

    return (
        make_judge(EnvConfig(judge=f"world:{cfg.world}"), None) if (Path(cfg.world) / "world.json").is_file() else None
    )


def _costs(cfg: ReproduceConfig, method: Method) -> tuple[float, float] | None:
    """(c_g, c_e) from the ``objective`` of the method's cost-model recipe; None when it names none or the recipe is
    not in this build (its variants are then "not available" too, see the plan)."""
    path = Path(cfg.recipes) / method.cost_model
    if not method.cost_model or not path.is_file():
        return None
    objective = read_yaml("cost model", path).get("objective") or {}
    try:
        return float(objective["c_g"]), float(objective["c_e"])
    except (KeyError, TypeError, ValueError) as e:
        raise DataError("needs numbers c_g and c_e", path=path, field="objective", value=objective) from e


def _reward_curve(folder: str) -> list[list[float]]:
    from effirag.train.rl.log import read_steps

    path = Path(folder) / "steps.jsonl"
    if not path.is_file():
        return []
    return [[float(r["step"]), float(r["reward"])] for r in read_steps(path) if "reward" in r and "step" in r]


def _claim(
    expects: tuple[tuple[str, str], ...],
    a: dict[str, dict[str, float]],
    b: dict[str, dict[str, float]],
    cfg: ReproduceConfig,
) -> list[dict[str, Any]]:
    """One row per claimed metric over the ids both sides measured (``a``, ``b``: id → metric → value). McNemar's test
    only where every value is 0 or 1 (not for gains, which take three values, nor EM averaged over samples)."""
    out = []
    ids = sorted(set(a) & set(b))
    for metric, expect in expects:
        xa = np.array([a[q][metric] for q in ids], dtype=float)
        xb = np.array([b[q][metric] for q in ids], dtype=float)
        binary = metric in BINARY and bool(np.isin(np.concatenate([xa, xb]), (0.0, 1.0)).all())
        row = paired_test(xa, xb, binary=binary, seed=cfg.seed, n_resamples=cfg.resamples)
        outcome, significant = verdict(expect, row)
        out.append({"metric": metric, "expect": expect, **row, "verdict": outcome, "significant": significant})
    return claim_verdicts(out)


def build_report(cfg: ReproduceConfig, plan: Plan, out: Path, examples: list[QAExample]) -> dict[str, Any]:
    """The report of a finished plan (reads each eval stage's trajectories)."""
    judge = None
    methods: dict[str, Any] = {}
    for name in cfg.methods:
        method = REGISTRY[name]
        judged = any(m in JUDGED for c in method.claims for m, _ in c.expect)
        if judged and judge is None:
            judge = _judge(cfg)
        rows: dict[str, dict[str, dict[str, float]]] = {}
        variants: dict[str, Any] = {}
        costs = _costs(cfg, method)
        for v in method.variants:
            key = plan.evals.get((name, v.label))
            if key is None:
                why = plan.unavailable.get((name, v.label))
                variants[v.label] = {"status": f"{NOT_AVAILABLE}: {why}" if why else "not needed by an available claim"}
                continue
            trajs = read_trajectories(out / "stages" / key / "run" / TRAJECTORIES)
            rows[v.label], summary = per_question(examples, trajs, judge if judged else None, costs)
            variants[v.label] = {
                "status": "measured",
                "eval_stage": key,
                "start": v.training is None,
                "protocol": v.protocol,
                "mode": v.mode or "protocol default",
                "summary": {k: finite(x) for k, x in summary.items()},
                "steps_hist": steps_histogram(trajs),
                "reward_curve": _reward_curve(plan.logs[(name, v.label)]) if (name, v.label) in plan.logs else [],
            }
        claims = [_claim_entry(c, rows, name, plan, cfg) for c in method.claims]
        retrieval, retrieval_claims = _retrieval_claims(method, plan, out, cfg)
        methods[name] = {
            "paper": method.paper,
            "note": method.note,
            "train_steps_per_run": plan.steps.get(name, 0),
            "variants": variants,
            "claims": claims + retrieval_claims,
            "retrieval": retrieval,
        }
    return {"methods": methods}


def _claim_entry(
    c: Claim, rows: dict[str, dict[str, dict[str, float]]], name: str, plan: Plan, cfg: ReproduceConfig
) -> dict[str, Any]:
    """A claim's report entry: its rows, or why it was not measured. A claim with ``starts`` compares each side's
    gain over its own start on every metric (:func:`~effirag.eval.compare.metric_gains`, as ``eval compare
    --start-a``); a question a start lacks is refused, naming it: every stage evaluates the same questions."""
    entry: dict[str, Any] = {"text": c.text, "a": c.a, "b": c.b}
    missing = [lbl for lbl in (c.a, c.b, *(c.starts or ())) if (name, lbl) in plan.unavailable]
    if missing:
        return entry | {"status": f"{NOT_AVAILABLE}: " + "; ".join(plan.unavailable[(name, m)] for m in missing)}
    a, b = rows[c.a], rows[c.b]
    if c.starts is not None:
        start = "the start's evaluation"
        a = metric_gains(a, rows[c.starts[0]], start_name=start)
        b = metric_gains(b, rows[c.starts[1]], start_name=start)
        entry["gains_over"] = {"a": c.starts[0], "b": c.starts[1]}
    found = _claim(c.expect, a, b, cfg)
    return entry | {"status": "measured", "rows": [{k: _clean(x) for k, x in r.items()} for r in found]}


def _retrieval_claims(
    method: Method, plan: Plan, out: Path, cfg: ReproduceConfig
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The method's retrieval-only runs and claim entries, paired per gold sub-question."""
    runs, rows = read_retrievals(method, plan.retrievals, out)
    claims = []
    for c in method.retrieval_claims:
        entry: dict[str, Any] = {"text": c.text, "a": c.a.label, "b": c.b.label, "pairing": "gold sub-question"}
        why = {plan.unavailable[(method.name, r.label)] for r in (c.a, c.b) if r.label not in runs}
        if why:
            entry["status"] = "not measured: " + "; ".join(sorted(why))
            runs.update({r.label: {"status": entry["status"], "retriever": r.retriever} for r in (c.a, c.b)})
        else:
            entry["status"] = "measured"
            rows_ab = _claim(c.expect, rows[c.a.label], rows[c.b.label], cfg)
            entry["rows"] = [{k: _clean(x) for k, x in r.items()} for r in rows_ab]
        claims.append(entry)
    return runs, claims


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
