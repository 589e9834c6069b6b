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


def write_plots(report: dict[str, Any], out: Path) -> list[str]:
    """Write :data:`PLOTS` into ``out``; return their names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = _measured(report)
    fig, ax = plt.subplots(figsize=(7, 5))
    for label, v in rows:
        ax.scatter(v["summary"]["tokens"], v["summary"]["em"])
        ax.annotate(label, (v["summary"]["tokens"], v["summary"]["em"]), fontsize=7)
    ax.set(xlabel="tokens per question (generated + inserted)", ylabel="EM", title="Accuracy vs tokens")
    fig.tight_layout()
    fig.savefig(out / PLOTS[0], dpi=110)
    plt.close(fig)

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
