"""Preference-training logs in the viewer: ``effirag train dpo`` and ``effirag train ipdpo`` output folders.

A *DPO log* (:mod:`effirag.train.dpo.step`) is a folder with ``steps.jsonl`` whose records carry TRL's DPO statistics
(``rewards/margins``, ``rewards/accuracies``, ``logps/chosen``, ...) and ``config.yaml``. An *IP-DPO log*
(:mod:`effirag.train.dpo.ipdpo`) has ``rounds.jsonl`` (one record per finished round) and ``round-N/`` folders with
the round's ``steps.jsonl`` (its DPO steps), ``pairs.jsonl`` (who was paired with whom) and ``paths.jsonl``.

The page shows each run's configuration, its last step, a per-round table for IP-DPO (samples, pairs, format rate,
EM, rewards, tokens per path, η, DPO steps and their loss / margin / accuracy) with each round's pairs, and the curves
of :func:`effirag.view.plots.pref_curves` and :func:`effirag.view.plots.ipdpo_rounds`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from effirag.data.io import iter_jsonl
from effirag.view.files import config_html, num, read_config, read_jsonl

STEPS = "steps.jsonl"
ROUNDS = "rounds.jsonl"
DPO_KEYS = ("rewards/margins", "rewards/accuracies", "rewards/chosen", "logps/chosen", "logps/rejected")
ROUND_COLUMNS = (
    ("round", "round"), ("questions", "questions"), ("samples", "paths"), ("pairs", "pairs"),
    ("dropped", "dropped_pairs"), ("format %", "format_rate"), ("EM %", "em"), ("reward", "reward/total"),
    ("outcome", "reward/outcome"), ("process", "reward/process"), ("tokens / path", "generated_tokens_per_path"),
    ("searches / path", "searches_per_path"), ("η", "eta"), ("DPO steps", "dpo_steps"), ("loss", "loss"),
    ("margin", "rewards/margins"), ("accuracy", "rewards/accuracies"), ("round s", "round_s"),
    ("paths from", "paths_from"),
)  # fmt: skip
PERCENT = ("format_rate", "em")


@dataclass
class DPORun:
    """A step-level DPO log: its optimiser steps in order and its config."""

    name: str
    folder: Path
    steps: list[dict[str, Any]]
    config: dict[str, Any] = field(default_factory=dict)


@dataclass
class IPDPORun:
    """An IP-DPO log: the finished rounds' records, every round's DPO steps (each with its ``round``; ``x`` counts
    steps across rounds) and pair records, and the config."""

    name: str
    folder: Path
    rounds: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    pairs: dict[int, list[dict[str, Any]]]
    config: dict[str, Any] = field(default_factory=dict)


def is_dpo_log(folder: Path) -> bool:
    """Whether ``folder/steps.jsonl`` is a DPO log rather than an RL one: its records carry DPO statistics, or (no
    step logged yet) its config names a pairs file (``data``) and no questions."""
    for _, rec in iter_jsonl(folder / STEPS):  # the first record decides
        return isinstance(rec, dict) and any(k in rec for k in DPO_KEYS)
    cfg = read_config(folder)
    return "data" in cfg and "questions" not in cfg


def load_dpo_run(folder: Path, name: str) -> DPORun:
    return DPORun(name, folder, read_jsonl(folder / STEPS), read_config(folder))


def _round_folders(folder: Path) -> list[tuple[int, Path]]:
    found = [
        (int(m.group(1)), p) for p in folder.iterdir() if p.is_dir() and (m := re.fullmatch(r"round-(\d+)", p.name))
    ]
    return sorted(found)


def load_ipdpo_run(folder: Path, name: str) -> IPDPORun:
    """An IP-DPO folder; a round folder without a record in rounds.jsonl (cut off) still shows its steps."""
    steps: list[dict[str, Any]] = []
    pairs: dict[int, list[dict[str, Any]]] = {}
    for r, sub in _round_folders(folder):
        if (sub / STEPS).is_file():
            steps += [{**s, "round": r, "x": len(steps) + i} for i, s in enumerate(read_jsonl(sub / STEPS), start=1)]
        if (sub / "pairs.jsonl").is_file():
            pairs[r] = read_jsonl(sub / "pairs.jsonl")
    return IPDPORun(name, folder, read_jsonl(folder / ROUNDS), steps, pairs, read_config(folder))


def _last(steps: list[dict[str, Any]]) -> str:
    if not steps:
        return "no optimiser step logged"
    last = steps[-1]
    keys = ("loss", "rewards/margins", "rewards/accuracies", "logps/chosen", "logps/rejected", "learning_rate")
    return (
        "last step "
        + escape(str(last.get("step")))
        + ": "
        + ", ".join(f"{k} {num(last[k], 4)}" for k in keys if k in last)
    )


def _pairs_file_size(cfg: dict[str, Any]) -> str:
    data = Path(str(cfg.get("data", "")))
    if not cfg.get("data") or not data.is_file():
        return ""
    n = sum(1 for line in data.read_text(encoding="utf-8").splitlines() if line.strip())
    return f"; {n} pairs in {escape(str(data))}"


def dpo_section(run: DPORun) -> str:
    """A DPO log's summary: steps, pairs (when the data file is still there), last step, the config, a step table."""
    head = (
        f'<div class="dpo-run" data-run="{escape(run.name)}"><p><b>DPO run {escape(run.name)}</b>: {len(run.steps)} '
        f"optimiser steps{_pairs_file_size(run.config)}; {_last(run.steps)}</p>{config_html(run.config)}"
    )
    return head + _step_table(run.steps) + "</div>"


def _step_table(steps: list[dict[str, Any]]) -> str:
    if not steps:
        return ""
    keys = [k for k in ("round", "step", "loss", *DPO_KEYS[:2], "rewards/chosen", "rewards/rejected", *DPO_KEYS[3:],
                        "grad_norm", "learning_rate", "step_s") if any(k in s for s in steps)]  # fmt: skip
    head = "".join(f"<th>{escape(k)}</th>" for k in keys)
    rows = "".join(
        '<tr class="dpo-step">' + "".join(f"<td>{num(s.get(k), 4)}</td>" for k in keys) + "</tr>" for s in steps
    )
    table = f'<table class="dpo-steps"><tr>{head}</tr>{rows}</table>'
    return f'<details class="steps"><summary>steps</summary>{table}</details>'


def ipdpo_section(run: IPDPORun) -> str:
    """An IP-DPO log's summary: the config, one row per round, each round's pairs, the DPO steps."""
    head = "".join(f"<th>{escape(label)}</th>" for label, _ in ROUND_COLUMNS)
    rows = []
    for rec in run.rounds:
        # where the round's paths came from: sampled in this run, or another run's round (`reuse_paths`)
        rec = {**rec, "paths_from": rec.get("reused_from") or ("sampled" if "reused_from" in rec else None)}
        cells = "".join(
            f"<td>{num(100 * rec[k], 3) if k in PERCENT and isinstance(rec.get(k), int | float) else num(rec.get(k))}"
            "</td>"
            for _, k in ROUND_COLUMNS
        )
        rows.append(f'<tr class="round" data-round="{num(rec.get("round"))}">{cells}</tr>')
    unfinished = [r for r in run.pairs if r not in {rec.get("round") for rec in run.rounds}]
    note = f" (round {', '.join(map(str, unfinished))} unfinished)" if unfinished else ""
    pairs = "".join(_round_pairs(r, p) for r, p in sorted(run.pairs.items()))
    return (
        f'<div class="ipdpo-run" data-run="{escape(run.name)}"><p><b>IP-DPO run {escape(run.name)}</b>: '
        f"{len(run.rounds)} rounds{note}, {len(run.steps)} DPO steps; {_last(run.steps)}</p>{config_html(run.config)}"
        f'<table class="rounds"><tr>{head}</tr>{"".join(rows)}</table>{pairs}{_step_table(run.steps)}</div>'
    )


def _round_pairs(r: int, pairs: list[dict[str, Any]]) -> str:
    """A round's pairs: question, chosen / rejected sample with their (format, outcome, process, total) scores."""

    def scores(s: Any) -> str:
        s = s if isinstance(s, dict) else {}
        return " / ".join(num(s.get(k), 3) for k in ("format", "outcome", "process", "total"))

    head = "".join(f"<th>{c}</th>" for c in ("question", "chosen", "scores (f / o / p / total)", "prediction",
                                             "rejected", "scores (f / o / p / total)", "prediction"))  # fmt: skip
    rows = "".join(
        f'<tr class="ipdpo-pair"><td>{escape(str(p.get("question_id")))}</td><td>{num(p.get("chosen"))}</td>'
        f"<td>{scores(p.get('chosen_scores'))}</td><td>{escape(repr(p.get('chosen_prediction')))}</td>"
        f"<td>{num(p.get('rejected'))}</td><td>{scores(p.get('rejected_scores'))}</td>"
        f"<td>{escape(repr(p.get('rejected_prediction')))}</td></tr>"
        for p in pairs
    )
    return (
        f'<details class="round-pairs" data-round="{r}"><summary>round {r}: {len(pairs)} pairs</summary>'
        f'<table class="ipdpo-pairs"><tr>{head}</tr>{rows}</table></details>'
    )
