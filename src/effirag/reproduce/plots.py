"""The report's plots (matplotlib, Agg): accuracy vs tokens, step-count histograms, OSR/USR bars, reward curves.

Each plot is drawn from ``report.json``'s figures; a plot with nothing to show (no policy judged by the world's
oracle, no training log) says so in its frame instead of being left out, so a run always writes the same files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PLOTS = ("accuracy_vs_tokens.png", "steps_hist.png", "osr_usr.png", "reward_curves.png")


def _measured(report: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{name}: {label}", v)
        for name, m in report["methods"].items()
        for label, v in m["variants"].items()
        if v["status"] == "measured"
    ]


def _empty(ax: Any, why: str) -> None:
    ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes, wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def _accuracy_vs_tokens(plt: Any, report: dict[str, Any], path: Path) -> None:
    """One panel per method (shared EM axis), one marker per variant with a legend: the start against what each
    recipe trained from it, without labels written over each other."""
    methods = [(m.get("paper", name), m) for name, m in report["methods"].items()]
    fig, axes = plt.subplots(1, max(len(methods), 1), figsize=(3.2 * max(len(methods), 1), 3.8), sharey=True)
    axes = list(axes) if len(methods) > 1 else [axes]
    for ax, (paper, m) in zip(axes, methods, strict=False):
        measured = [(label, v) for label, v in m["variants"].items() if v["status"] == "measured"]
        starts = 0
        for label, v in measured:
            style: dict[str, Any] = {"s": 36}
            if v.get("start"):  # the start policy's own evaluations: a black star, then hollow ones
                style = {"marker": "*", "s": 90, "edgecolors": "black", "facecolors": "none" if starts else "black"}
                starts += 1
            ax.scatter(v["summary"]["tokens"], v["summary"]["em"], label=label, **style)
        if measured:
            ax.legend(fontsize=6, loc="best")
        else:
            _empty(ax, "nothing measured")
        ax.set_title(paper, fontsize=9)
        ax.set_xlabel("tokens / question", fontsize=8)
    if not methods:
        _empty(axes[0], "no method in this run")
    axes[0].set_ylabel("EM")
    fig.suptitle("Accuracy vs tokens (generated + inserted), each method from the same start", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_plots(report: dict[str, Any], out: Path) -> list[str]:
    """Write :data:`PLOTS` into ``out``; return their names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = _measured(report)
    _accuracy_vs_tokens(plt, report, out / PLOTS[0])

    fig, ax = plt.subplots(figsize=(7, 5))
    width = 0.8 / max(len(rows), 1)
    for i, (label, v) in enumerate(rows):
        xs = [int(k) + i * width for k in v["steps_hist"]]
        ax.bar(xs, list(v["steps_hist"].values()), width=width, label=label)
    ax.set(xlabel="steps per trajectory", ylabel="trajectories", title="Step counts")
    if rows:
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out / PLOTS[1], dpi=110)
    plt.close(fig)

    judged = [(label, v) for label, v in rows if v["summary"].get("osr") is not None]
    fig, ax = plt.subplots(figsize=(7, 5))
    if judged:
        pos = list(range(len(judged)))
        ax.bar([x - 0.2 for x in pos], [v["summary"]["osr"] for _, v in judged], width=0.4, label="OSR")
        ax.bar([x + 0.2 for x in pos], [v["summary"]["usr"] or 0.0 for _, v in judged], width=0.4, label="USR")
        ax.set_xticks(pos, [label for label, _ in judged], rotation=20, fontsize=7, ha="right")
        ax.legend()
    else:
        _empty(ax, "no policy of this run was judged by the world's oracle (OSR/USR are measured for HiPRAG)")
    ax.set_title("Over-search and under-search rates")
    fig.tight_layout()
    fig.savefig(out / PLOTS[2], dpi=110)
    plt.close(fig)

    curves = [(label, v["reward_curve"]) for label, v in rows if v["reward_curve"]]
    fig, ax = plt.subplots(figsize=(7, 5))
    for label, curve in curves:
        ax.plot([p[0] for p in curve], [p[1] for p in curve], marker="o", label=label)
    if curves:
        ax.legend(fontsize=6)
    else:
        _empty(ax, "no training log (steps.jsonl) in this run")
    ax.set(xlabel="optimiser step", ylabel="mean reward", title="Reward curves")
    fig.tight_layout()
    fig.savefig(out / PLOTS[3], dpi=110)
    plt.close(fig)
    return list(PLOTS)
