"""An ``effirag data mcts`` output folder in the viewer: its trees, their statistics and the preference pairs.

The folder (:mod:`effirag.train.mcts.runner`) holds ``trees.jsonl`` (one statistics record per finished question),
``pairs.jsonl`` (the step-level pairs, each naming its parent node and its chosen / rejected sibling nodes),
``trees/<question id>.json`` (the whole tree, when the run dumped trees) and ``config.json``. The page shows a summary
table (one row per question: iterations, nodes, depth, visits, values, terminal and correct leaves, pairs), and per
question the tree drawn as SVG (:mod:`effirag.view.tree_svg`), a table of its nodes and the list of its pairs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from effirag.errors import DataError
from effirag.view.files import clip, config_html, num, read_config, read_json, read_jsonl
from effirag.view.tree_svg import tree_svg

TREES = "trees.jsonl"
PAIRS = "pairs.jsonl"
NODE_KEYS = ("id", "parent", "depth", "children")
SEARCH_KEYS = ("iterations", "k", "rollouts", "max_depth", "alpha", "c_uct", "outcome", "min_gap")
SUMMARY = ("iterations", "nodes", "depth", "visits", "root_value", "best_value", "terminal", "correct", "pairs",
           "generated_tokens", "seconds")  # fmt: skip


@dataclass
class MCTSTree:
    """One dumped tree: the question, its gold answers and the node records (ids are positions)."""

    question_id: str
    question: str
    answers: list[str]
    nodes: list[dict[str, Any]]


@dataclass
class MCTSRun:
    """One MCTS folder: the statistics records in file order, the pairs by question, the dumped trees by question."""

    name: str
    folder: Path
    records: list[dict[str, Any]]
    pairs: dict[str, list[dict[str, Any]]]
    trees: dict[str, MCTSTree] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def n_pairs(self) -> int:
        return sum(len(p) for p in self.pairs.values())


def load_mcts_run(folder: Path, name: str) -> MCTSRun:
    """An MCTS folder (see the module docstring); a question without a tree file is shown without its tree."""
    from effirag.train.mcts.runner import tree_file

    records = read_jsonl(folder / TREES)
    for i, rec in enumerate(records, start=1):
        if "question_id" not in rec:
            raise DataError("no question_id", path=folder / TREES, record=f"line {i}", field="question_id")
    pairs: dict[str, list[dict[str, Any]]] = {}
    if (folder / PAIRS).is_file():
        for i, p in enumerate(read_jsonl(folder / PAIRS), start=1):
            missing = [k for k in ("question_id", "chosen_node", "rejected_node") if k not in p]
            if missing:
                raise DataError("not a tree pair", path=folder / PAIRS, record=f"line {i}", field=missing[0])
            pairs.setdefault(str(p["question_id"]), []).append(p)
    trees = {}
    for rec in records:
        path = tree_file(folder, str(rec["question_id"]))
        doc = read_json(path)
        if doc is not None:
            trees[str(rec["question_id"])] = _tree(doc, path)
    return MCTSRun(name, folder, records, pairs, trees, read_config(folder))


def _tree(doc: Any, path: Path) -> MCTSTree:
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list) or not doc["nodes"]:
        raise DataError("not a dumped tree (no node list)", path=path, field="nodes")
    for i, n in enumerate(doc["nodes"]):
        missing = [k for k in NODE_KEYS if k not in n] if isinstance(n, dict) else ["id"]
        if missing:
            raise DataError("not a tree node", path=path, record=f"nodes[{i}]", field=missing[0])
        if n["id"] != i:
            raise DataError(f"node ids must be their positions (0, 1, ...), found {n['id']!r}", path=path,
                            record=f"nodes[{i}]", field="id")  # fmt: skip
    return MCTSTree(str(doc.get("question_id", "")), str(doc.get("question", "")), list(doc.get("answers", [])),
                    doc["nodes"])  # fmt: skip


def mcts_summary(run: MCTSRun) -> str:
    """The run's settings and one table row per question (plus a row of totals / means)."""
    search = run.config.get("search", {}) if isinstance(run.config.get("search"), dict) else {}
    setting = ", ".join(f"{k} {v}" for k, v in search.items() if k in SEARCH_KEYS)
    head = "".join(f"<th>{c.replace('_', ' ')}</th>" for c in ("question", *SUMMARY))
    rows = []
    for rec in run.records:
        qid = str(rec["question_id"])
        cells = "".join(f"<td>{num(rec.get(k))}</td>" for k in SUMMARY)
        rows.append(f'<tr class="tree-row" data-question="{escape(qid)}"><td><a href="#{_anchor(run, qid)}">'
                    f"{escape(qid)}</a></td>{cells}</tr>")  # fmt: skip
    n = max(1, len(run.records))
    total = {k: sum(float(r.get(k) or 0) for r in run.records) for k in SUMMARY}
    means = "".join(f"<td>{num(total[k] if k in ('pairs', 'generated_tokens', 'seconds') else total[k] / n)}</td>"
                    for k in SUMMARY)  # fmt: skip
    return (
        f'<div class="mcts-run"><p><b>MCTS folder {escape(run.name)}</b>: {len(run.records)} questions, '
        f"{run.n_pairs} preference pairs{'; search: ' + escape(setting) if setting else ''}</p>"
        f'{config_html(run.config)}<table class="mcts-summary">{"<tr>" + head + "</tr>"}{"".join(rows)}'
        f'<tr class="total"><td>total / mean</td>{means}</tr></table></div>'
    )


def _anchor(run: MCTSRun, qid: str) -> str:
    return escape(f"tree-{run.name}-{qid}")


def mcts_questions(run: MCTSRun) -> str:
    """Per question a collapsible block: the tree SVG, the node table, the pair list."""
    out = []
    for rec in run.records:
        qid = str(rec["question_id"])
        tree, pairs = run.trees.get(qid), run.pairs.get(qid, [])
        head = (
            f"<summary><b>{escape(qid)}</b> {escape(tree.question) if tree else ''} "
            f'<span class="meta">(gold {escape(" | ".join(map(str, tree.answers))) if tree else "?"}; '
            f"{num(rec.get('nodes'))} nodes, depth {num(rec.get('depth'))}, {len(pairs)} pairs)</span></summary>"
        )
        if tree is None:
            body = '<p class="meta">no tree file (the run was made with dump_trees false)</p>'
        else:
            body = f'<div class="tree">{tree_svg(tree.nodes, pairs)}</div>{_node_table(tree.nodes, pairs)}'
        out.append(
            f'<div class="mcts-question" id="{_anchor(run, qid)}" data-question="{escape(qid)}" '
            f'data-run="{escape(run.name)}"><details>{head}{body}{pair_table(pairs)}</details></div>'
        )
    return "".join(out)


def _node_table(nodes: list[dict[str, Any]], pairs: list[dict[str, Any]]) -> str:
    roles: dict[int, list[str]] = {}
    for p in pairs:
        roles.setdefault(int(p["chosen_node"]), []).append(f"chosen over #{p['rejected_node']}")
        roles.setdefault(int(p["rejected_node"]), []).append(f"rejected for #{p['chosen_node']}")
    head = "".join(f"<th>{c}</th>" for c in ("id", "parent", "depth", "stage", "action", "N", "Q", "rollouts",
                                             "reward", "answer", "pairs", "step text"))  # fmt: skip
    rows = "".join(
        f'<tr class="tree-node" data-id="{n["id"]}"><td>#{n["id"]}</td><td>{num(n.get("parent"))}</td>'
        f"<td>{n['depth']}</td><td>{escape(str(n.get('stage', '')))}</td><td>{escape(str(n.get('action', '')))}</td>"
        f"<td>{num(n.get('visits'))}</td><td>{num(n.get('value'), 4)}</td><td>{num(n.get('rollouts'))}</td>"
        f"<td>{num(n.get('outcome')) if n.get('terminal') else ''}</td><td>{escape(str(n.get('answer') or ''))}</td>"
        f"<td>{escape('; '.join(roles.get(int(n['id']), [])))}</td><td>{clip(str(n.get('text', '')))}</td></tr>"
        for n in nodes
    )
    table = f'<table class="tree-nodes"><tr>{head}</tr>{rows}</table>'
    return f'<details class="nodes"><summary>nodes</summary>{table}</details>'


def pair_table(pairs: list[dict[str, Any]]) -> str:
    """The question's preference pairs: where (parent node, depth, stage), chosen and rejected node, value and text."""
    if not pairs:
        return '<p class="meta">no preference pair (no two siblings differed by the value gap)</p>'
    head = "".join(f"<th>{c}</th>" for c in ("parent", "depth", "stage", "chosen", "Q", "rejected", "Q", "gap",
                                             "chosen step", "rejected step"))  # fmt: skip
    rows = "".join(
        f'<tr class="pair-row"><td>#{p.get("node", "?")}</td><td>{num(p.get("depth"))}</td>'
        f"<td>{escape(str(p.get('stage', '')))}</td><td>#{p['chosen_node']} {escape(str(p.get('chosen_action', '')))}"
        f"</td><td>{num(p.get('chosen_value'), 4)}</td><td>#{p['rejected_node']} "
        f"{escape(str(p.get('rejected_action', '')))}</td><td>{num(p.get('rejected_value'), 4)}</td>"
        f"<td>{num(float(p.get('chosen_value', 0)) - float(p.get('rejected_value', 0)), 3)}</td>"
        f"<td>{clip(str(p.get('chosen', '')))}</td><td>{clip(str(p.get('rejected', '')))}</td></tr>"
        for p in pairs
    )
    return f'<table class="pairs"><tr>{head}</tr>{rows}</table>'
