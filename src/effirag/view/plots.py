"""The viewer's plots (matplotlib, PNG): what each run spent and what it got for it.

- ``steps_by_hops``: how many steps questions of each hop count took (one panel per QA run);
- ``tokens_by_protocol``: tokens per question of each QA run, stacked by kind (generated reasoning / answer / summary,
  inserted observation);
- ``accuracy_vs_tokens``: EM against tokens per question, one point per QA run;
- ``rl_rewards``: reward components (``reward/*``) and KL over the optimiser steps of each RL run;
- ``rl_mode_shares``: share of searches per retrieval mode over the steps of each RL run (RouteRAG's routing);
- ``pref_curves``: per DPO / IP-DPO run, the loss, the reward margin and accuracy, and the chosen / rejected
  log-probabilities over the optimiser steps (IP-DPO: steps counted across rounds, round boundaries dotted);
- ``ipdpo_rounds``: per IP-DPO run, EM, format rate and mean reward of each round's samples, and their tokens per path.

A plot without data (no RL run, no hop counts) is not drawn.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

from effirag.view.runs import KINDS, RunSet, rows, run_means

COLOURS = {"reasoning": "#1f77b4", "answer": "#2ca02c", "summary": "#9467bd", "inserted": "#ff7f0e"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=90)
    _pyplot().close(fig)
    return buf.getvalue()


def steps_by_hops(runs: RunSet) -> bytes | None:
    plt = _pyplot()
    if not runs.qa:
        return None
    fig, axes = plt.subplots(1, len(runs.qa), figsize=(4.2 * len(runs.qa), 3.2), squeeze=False)
    for ax, run in zip(axes[0], runs.qa, strict=True):
        counts: dict[str, Counter[int]] = {}
        for r in rows(run):
            counts.setdefault(r.hops, Counter())[len(r.trajectory.steps)] += 1
        steps = sorted({s for c in counts.values() for s in c})
        width = 0.8 / max(1, len(counts))
        for i, (hops, c) in enumerate(sorted(counts.items())):
            ax.bar([s + i * width - 0.4 + width / 2 for s in steps], [c[s] for s in steps], width, label=f"{hops}-hop")
        ax.set_xticks(steps)
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.set_xlabel("steps")
        ax.set_ylabel("questions")
        ax.set_title(run.name)
        ax.legend(fontsize=8)
    return _png(fig)


def tokens_by_protocol(runs: RunSet) -> bytes | None:
    plt = _pyplot()
    if not runs.qa:
        return None
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(runs.qa), 3.4))
    means = [run_means(r) for r in runs.qa]
    labels = [f"{r.name}\n({r.protocol})" if r.name != r.protocol else r.name for r in runs.qa]
    bottom = [0.0] * len(means)
    for kind in (*KINDS, "inserted"):
        values = [m[kind] for m in means]
        ax.bar(labels, values, 0.6, bottom=bottom, label=kind, color=COLOURS[kind])
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_ylabel("tokens per question")
    ax.set_ylim(0, 1.35 * max(bottom, default=1.0) or 1.0)  # headroom for the legend above the bars
    ax.legend(fontsize=8, ncols=2, loc="upper center")
    return _png(fig)


def accuracy_vs_tokens(runs: RunSet) -> bytes | None:
    plt = _pyplot()
    points = [(r.name, run_means(r)) for r in runs.qa]
    points = [(n, m) for n, m in points if m["em"] == m["em"]]  # runs without gold have no EM (NaN)
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(4.6, 3.4))
    for name, m in points:
        ax.scatter([m["tokens"]], [100 * m["em"]], s=40)
        ax.annotate(name, (m["tokens"], 100 * m["em"]), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.set_xlabel("tokens per question (generated + inserted)")
    ax.set_ylabel("EM (%)")
    ax.grid(alpha=0.3)
    return _png(fig)


def rl_rewards(runs: RunSet) -> bytes | None:
    plt = _pyplot()
    if not runs.rl:
        return None
    fig, axes = plt.subplots(1, len(runs.rl), figsize=(5.0 * len(runs.rl), 3.4), squeeze=False)
    for ax, run in zip(axes[0], runs.rl, strict=True):
        x = [r["step"] for r in run.steps]
        keys = sorted({k for r in run.steps for k in r if k.startswith("reward/")})
        for key in keys:
            ax.plot(x, [r.get(key, float("nan")) for r in run.steps], label=key.removeprefix("reward/"))
        ax.set_xlabel("optimiser step")
        ax.set_ylabel("reward component")
        if any("kl" in r for r in run.steps):
            kl = ax.twinx()
            kl.plot(x, [r.get("kl", float("nan")) for r in run.steps], "k--", label="KL")
            kl.set_ylabel("KL")
        ax.set_title(run.name)
        ax.legend(fontsize=7)
    return _png(fig)


def rl_mode_shares(runs: RunSet) -> bytes | None:
    plt = _pyplot()
    withmodes = [r for r in runs.rl if any(k.startswith("mode_share/") for s in r.steps for k in s)]
    if not withmodes:
        return None
    fig, axes = plt.subplots(1, len(withmodes), figsize=(5.0 * len(withmodes), 3.2), squeeze=False)
    for ax, run in zip(axes[0], withmodes, strict=True):
        x = [r["step"] for r in run.steps]
        modes = sorted({k for r in run.steps for k in r if k.startswith("mode_share/")})
        ys = [[r.get(m, 0.0) for r in run.steps] for m in modes]
        ax.stackplot(x, ys, labels=[m.removeprefix("mode_share/") for m in modes])
        ax.set_ylim(0, 1)
        ax.set_xlabel("optimiser step")
        ax.set_ylabel("share of searches")
        ax.set_title(run.name)
        ax.legend(fontsize=8)
    return _png(fig)


def _line(ax: Any, x: list[Any], steps: list[dict[str, Any]], key: str, label: str, style: str = "-") -> None:
    """``key`` of ``steps`` over ``x`` (nothing when no step logged it)."""
    if any(key in s for s in steps):
        ax.plot(x, [s.get(key, float("nan")) for s in steps], style, label=label)


def pref_curves(runs: RunSet) -> bytes | None:
    plt = _pyplot()
    logs = [(r.name, r.steps, "step") for r in runs.dpo] + [(r.name, r.steps, "x") for r in runs.ipdpo]
    logs = [(name, steps, x) for name, steps, x in logs if steps]
    if not logs:
        return None
    fig, axes = plt.subplots(len(logs), 3, figsize=(13.5, 3.0 * len(logs)), squeeze=False)
    for row, (name, steps, xkey) in zip(axes, logs, strict=True):
        x = [s[xkey] for s in steps]
        _line(row[0], x, steps, "loss", "loss")
        _line(row[1], x, steps, "rewards/margins", "reward margin")
        if any("rewards/accuracies" in s for s in steps):
            acc = row[1].twinx()
            _line(acc, x, steps, "rewards/accuracies", "reward accuracy", "g--")
            acc.set_ylim(-0.05, 1.05)
            acc.set_ylabel("reward accuracy")
            acc.legend(fontsize=7, loc="lower right")
        _line(row[2], x, steps, "logps/chosen", "log p(chosen)")
        _line(row[2], x, steps, "logps/rejected", "log p(rejected)")
        bounds = [s[xkey] - 0.5 for a, s in pairwise(steps) if s.get("round") != a.get("round")]
        for ax, title in zip(row, ("loss", "reward margin / accuracy", "log-probs"), strict=True):
            for b in bounds:
                ax.axvline(b, color="#999", linestyle=":")
            ax.set_xlabel("optimiser step" + (" (all rounds)" if xkey == "x" else ""))
            ax.set_title(f"{name}: {title}", fontsize=10)
            ax.legend(fontsize=7)
    return _png(fig)


def ipdpo_rounds(runs: RunSet) -> bytes | None:
    plt = _pyplot()
    withrounds = [r for r in runs.ipdpo if r.rounds]
    if not withrounds:
        return None
    fig, axes = plt.subplots(1, len(withrounds), figsize=(5.0 * len(withrounds), 3.4), squeeze=False)
    for ax, run in zip(axes[0], withrounds, strict=True):
        x = [r["round"] for r in run.rounds]
        for key, label in (("em", "EM"), ("format_rate", "format rate"), ("reward/total", "mean reward")):
            ax.plot(x, [r.get(key, float("nan")) for r in run.rounds], "o-", label=label)
        tokens = ax.twinx()
        tokens.plot(x, [r.get("generated_tokens_per_path", float("nan")) for r in run.rounds], "k^--", label="tokens")
        tokens.set_ylabel("generated tokens per path")
        ax.set_xticks(x)
        ax.set_xlabel("round")
        ax.set_title(run.name)
        ax.legend(fontsize=7, loc="upper left")
    return _png(fig)


PLOTS: dict[str, Callable[[RunSet], bytes | None]] = {
    "steps_by_hops": steps_by_hops,
    "tokens_by_protocol": tokens_by_protocol,
    "accuracy_vs_tokens": accuracy_vs_tokens,
    "rl_rewards": rl_rewards,
    "rl_mode_shares": rl_mode_shares,
    "pref_curves": pref_curves,
    "ipdpo_rounds": ipdpo_rounds,
}


def make_plots(runs: RunSet, folder: Path | None = None) -> dict[str, bytes]:
    """Every plot that has data, as PNG bytes by name; with ``folder``, each is also written there as NAME.png."""
    out = {}
    for name, fn in PLOTS.items():
        png = fn(runs)
        if png is None:
            continue
        out[name] = png
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{name}.png").write_bytes(png)
    return out
