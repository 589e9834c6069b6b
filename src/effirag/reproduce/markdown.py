"""``report.md``: the report's tables in Markdown, every number taken from ``report.json``'s structure."""

from __future__ import annotations

from typing import Any

COLUMNS = (
    ("em", "EM"), ("f1", "F1"), ("tokens", "tokens/q"), ("generated", "generated/q"), ("steps", "steps/q"),
    ("turns", "retrievals/q"), ("tokens_per_retrieval", "tokens/retrieval"), ("graph_share", "graph share"),
    ("latency_s", "latency s/q"), ("latency_model_s", "modeled latency s/q"), ("osr", "OSR"), ("usr", "USR"),
)  # fmt: skip


TESTS = {"mcnemar_exact": "McNemar exact", "wilcoxon_exact": "Wilcoxon exact", "wilcoxon_normal": "Wilcoxon (normal)"}


def _num(x: Any) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"
    return str(x)


def _variants(m: dict[str, Any]) -> list[str]:
    """The policies' summary table; a column no measured policy has a figure for (e.g. OSR without the world's
    oracle) is left out."""
    measured = {k: v for k, v in m["variants"].items() if v["status"] == "measured"}
    cols = [(k, c) for k, c in COLUMNS if any(v["summary"].get(k) is not None for v in measured.values())] or list(
        COLUMNS
    )
    lines = ["| policy | " + " | ".join(c for _, c in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for label, v in measured.items():
        lines.append(f"| {label} | " + " | ".join(_num(v["summary"].get(k)) for k, _ in cols) + " |")
    for label, v in m["variants"].items():
        if v["status"] != "measured":
            lines.append(f"| {label} | {v['status']} |" + " |" * (len(cols) - 1))
    return lines


def _retrievals(m: dict[str, Any]) -> list[str]:
    """The retrieval-only runs (no policy: retrievers alone on gold sub-questions), when the paper has any."""
    if not m.get("retrieval"):
        return []
    head = "| retrieval alone | questions | sub-questions | k | answer recall % | tokens/retrieval | tokenizer |"
    lines = [head, "|---" * 7 + "|"]
    for label, r in m["retrieval"].items():
        if r["status"] != "measured":
            lines.append(f"| {label} | {r['status']} |" + " |" * 5)
            continue
        s = r["summary"]
        figures = (s["n_questions"], s["n_subqueries"], s["k"], s["answer_recall"], s["tokens_per_retrieval"])
        lines.append(f"| {label} | " + " | ".join(_num(x) for x in figures) + f" | {r['tokenizer']} |")
    return [*lines, ""]


def _claims(m: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for c in m["claims"]:
        paired = f" Paired by {c['pairing']}." if c.get("pairing") else ""
        if c.get("gains_over"):
            g = c["gains_over"]
            paired += f" A and B are gains per question: B − {g['b']}, A − {g['a']}."
        lines.append(f"**Claim** ({m['paper']}): {c['text']}. B = {c['b']}, A = {c['a']}.{paired}")
        lines.append("")
        if c["status"] != "measured":
            lines += [f"Not measured — {c['status']}.", ""]
            continue
        lines += ["| metric | claimed | A | B | B − A | 95% interval | test | p | here |", "|---" * 9 + "|"]
        for r in c["rows"]:
            d, t = r["diff"], r["test"]
            interval = "–" if d is None else f"[{_num(d['low'])}, {_num(d['high'])}]"
            sig = "" if d is None else " (significant)" if r["significant"] else " (not significant)"
            lines.append(
                f"| {r['metric']} | {r['expect'].replace('_', ' ')} | {_num(r['a'])} | {_num(r['b'])} | "
                f"{_num(None if d is None else d['mean'])} | {interval} | {'–' if t is None else TESTS[t['name']]} | "
                f"{'–' if t is None else _num(t['p_value'])} | {r['verdict']}{sig} |"
            )
        lines.append("")
    return lines


def render(report: dict[str, Any]) -> str:
    """The Markdown report: the run's settings, then one section per paper (policies, then claims)."""
    run = report["run"]
    settings = "the start policy's inference.yaml" + (
        f" with {', '.join(run['eval_settings'])}" if run["eval_settings"] else ""
    )
    lr = f"learning rate {run['learning_rate']:g}" if run.get("learning_rate") else "each recipe's learning rate"
    lines = [
        "# EffiRAG reproduces the papers' headline claims (in miniature)",
        "",
        f"Run {run['finished']} on {run['machine']}; seed {run['seed']}; budget {run['budget_minutes']:g} min, "
        f"used {run['minutes']:.1f} min. Start policy `{run['start']}`; {run['eval_questions']} evaluation "
        f"questions from `{run['eval_file']}` (the same for every policy, settings: {settings}); "
        f"training on at most {run['train_limit']} questions of `{run['train_file']}`, {lr}.",
        "",
        "Differences are B − A on paired questions (retrieval alone: paired gold sub-questions) with a paired "
        "bootstrap 95% interval; p-values: McNemar's exact test for EM and answer recall, Wilcoxon's signed-rank "
        "test for the rest. *here*: whether the paper's direction holds in this "
        "run (lower / higher: the sign of the mean difference; not lower: no significant drop); significant: the "
        "interval excludes 0 and p < 0.05. Scaled-down training: the steps per run are stated per paper.",
        "",
    ]
    for name, m in report["methods"].items():
        lines += [f"## {m['paper']} (`{name}`)", ""]
        steps = m["train_steps_per_run"]
        lines += [f"Training: {steps} optimiser step(s) per run." if steps else "No training ran for this paper.", ""]
        if m["note"]:
            lines += [m["note"], ""]
        lines += [*_variants(m), "", *_retrievals(m), *_claims(m)]
    lines += ["Plots: " + ", ".join(f"`{p}`" for p in report["plots"]), ""]
    return "\n".join(lines)


def render_summary(report: dict[str, Any]) -> str:
    """``summary.md``: one line per claimed metric of every paper (B against A, the interval, p and the verdict) under
    the run's date, machine and minutes — the table the README quotes."""
    run = report["run"]
    lines = [
        f"Run {run['finished']} on {run['machine']}; {run['minutes']:.1f} min of stages; {run['eval_questions']} "
        f"evaluation questions; seed {run['seed']}.",
        "",
        "| paper | B against A | metric (claimed) | A | B | B − A [95% interval] | p | here |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in report["methods"].values():
        for c in m["claims"]:
            if c["status"] != "measured":
                lines.append(f"| {m['paper']} | {c['b']} against {c['a']} | – | – | – | – | – | {c['status']} |")
                continue
            gain = " gain" if c.get("gains_over") else ""  # e.g. "em gain (higher)"
            for r in c["rows"]:
                d, t = r["diff"], r["test"]
                diff = "–" if d is None else f"{_num(d['mean'])} [{_num(d['low'])}, {_num(d['high'])}]"
                sig = "" if d is None else ", significant" if r["significant"] else ""
                claimed = f"{r['metric']}{gain} ({r['expect'].replace('_', ' ')})"
                lines.append(
                    f"| {m['paper']} | {c['b']} against {c['a']} | {claimed} | "
                    f"{_num(r['a'])} | {_num(r['b'])} | {diff} | {'–' if t is None else _num(t['p_value'])} | "
                    f"{r['verdict']}{sig} |"
                )
    return "\n".join(lines) + "\n"
