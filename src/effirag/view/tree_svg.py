"""One MCTS search tree (``effirag data mcts``'s ``trees/<question id>.json``) as inline SVG (no script).

Layout (deterministic): depth grows downwards, one row per depth; leaves take consecutive columns in depth-first
order of the children lists and every parent sits above the middle of its children. A node's area grows with its
visit count N (relative to the root's); its colour is its stage (question / reasoning / grounding); terminal nodes
(an answer, or an episode out of budget) get a square and their reward (the rollout outcome) written under them.
Under each node: ``#id`` and ``N / Q`` (Q: the SPRE value). Hovering a node shows its stage, action, the whole step
text, N, Q, rollouts and the reward. Sibling pairs that became preference pairs are joined by an orange arc from the
chosen to the rejected node; a node chosen in some pair has a green outline, one only rejected a red one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import Any

COLUMN, ROW, MARGIN, MIN_WIDTH = 66, 78, 24, 820
STAGE_COLOURS = {"question": "#444", "reasoning": "#1f77b4", "grounding": "#2ca02c"}


def layout(nodes: Sequence[dict[str, Any]]) -> dict[int, tuple[float, float]]:
    """Centre of every node reachable from the root (``nodes[0]``), by the rule in the module docstring."""
    by_id = {int(n["id"]): n for n in nodes}
    xs: dict[int, float] = {}
    next_leaf = 0
    # Iterative post-order: a node is placed once all its children are.
    stack: list[tuple[int, bool]] = [(int(nodes[0]["id"]), False)]
    while stack:
        nid, ready = stack.pop()
        kids = [int(k) for k in by_id[nid].get("children") or [] if int(k) in by_id]
        if not kids:
            xs[nid] = MARGIN + COLUMN / 2 + COLUMN * next_leaf
            next_leaf += 1
        elif ready:
            xs[nid] = (xs[kids[0]] + xs[kids[-1]]) / 2
        else:
            stack.append((nid, True))
            stack.extend((k, False) for k in reversed(kids))
    return {nid: (x, MARGIN + 12 + ROW * int(by_id[nid]["depth"])) for nid, x in xs.items()}


def _radius(visits: int, top: int) -> float:
    return 5.0 + 9.0 * math.sqrt(min(1.0, visits / top)) if top > 0 and visits > 0 else 5.0


def _tip(n: dict[str, Any], roles: tuple[int, int]) -> str:
    lines = [
        f"#{n['id']} {n.get('stage', '')}{' / ' + n['action'] if n.get('action') else ''} (depth {n['depth']})",
        f"visits N {n.get('visits', 0)}, value Q {float(n.get('value', 0.0)):.4f}, rollouts {n.get('rollouts', 0)}",
    ]
    if n.get("terminal"):
        lines.append(f"terminal: answer {n.get('answer')!r}, reward {n.get('outcome')}")
    if roles != (0, 0):
        lines.append(f"preference pairs: chosen in {roles[0]}, rejected in {roles[1]}")
    if n.get("text"):
        lines.append(str(n["text"]))
    return "\n".join(lines)


def tree_svg(nodes: Sequence[dict[str, Any]], pairs: Sequence[dict[str, Any]]) -> str:
    """``<svg class="mcts">`` of one tree's node records (:func:`~effirag.train.mcts.tree.dump_tree`) and the pair
    records mined from it (``node``, ``chosen_node``, ``rejected_node``); one ``<g class="node">`` per node."""
    pos = layout(nodes)
    width = max(MIN_WIDTH, max(x for x, _ in pos.values()) + COLUMN / 2 + MARGIN)  # room for the legend
    height = max(y for _, y in pos.values()) + 44
    top = int(nodes[0].get("visits", 0))
    chosen: dict[int, int] = {}
    rejected: dict[int, int] = {}
    for p in pairs:
        chosen[int(p["chosen_node"])] = chosen.get(int(p["chosen_node"]), 0) + 1
        rejected[int(p["rejected_node"])] = rejected.get(int(p["rejected_node"]), 0) + 1
    parts = [
        f'<svg class="mcts" xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="MCTS search tree">'
    ]
    for n in nodes:
        if n.get("parent") is not None and int(n["id"]) in pos and int(n["parent"]) in pos:
            (x1, y1), (x2, y2) = pos[int(n["parent"])], pos[int(n["id"])]
            parts.append(f'<line class="edge" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#bbb"/>')
    for p in pairs:
        a, b = int(p["chosen_node"]), int(p["rejected_node"])
        if a not in pos or b not in pos:
            continue
        (x1, y), (x2, _) = pos[a], pos[b]
        tip = f"pair: #{a} (Q {p['chosen_value']}) preferred to #{b} (Q {p['rejected_value']})"
        parts.append(
            f'<path class="pair" data-chosen="{a}" data-rejected="{b}" d="M{x1:.1f},{y - 16:.1f} '
            f'Q{(x1 + x2) / 2:.1f},{y - 40:.1f} {x2:.1f},{y - 16:.1f}" fill="none" stroke="#ff7f0e" '
            f'stroke-width="1.5"><title>{escape(tip)}</title></path>'
        )
    for n in nodes:
        nid = int(n["id"])
        if nid not in pos:
            continue
        parts.append(_node(n, pos[nid], _radius(int(n.get("visits", 0)), top), (chosen.get(nid, 0),
                                                                                rejected.get(nid, 0))))  # fmt: skip
    legend = "".join(f'<tspan fill="{c}">● {k} </tspan>' for k, c in STAGE_COLOURS.items())
    parts.append(
        f'<text x="4" y="{height - 6:.0f}" font-size="10" fill="#333">{legend}· ■ terminal (r: reward) · size: '
        "visits · #id N / Q · orange arc: preference pair (green outline: chosen, red: rejected)</text></svg>"
    )
    return "".join(parts)


def _node(n: dict[str, Any], at: tuple[float, float], r: float, roles: tuple[int, int]) -> str:
    x, y = at
    stroke = "#2ca02c" if roles[0] else "#d62728" if roles[1] else "#fff"
    width = 3 if any(roles) else 1
    fill = STAGE_COLOURS.get(str(n.get("stage")), "#999")
    if n.get("terminal"):
        shape = f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r:.1f}" height="{2 * r:.1f}"'
    else:
        shape = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}"'
    label = f"#{n['id']} {n.get('visits', 0)} / {float(n.get('value', 0.0)):.2f}"
    reward = ""
    if n.get("terminal"):
        reward = f'<text x="{x:.1f}" y="{y + r + 22:.1f}" font-size="9" text-anchor="middle" class="reward">' \
                 f"r {n.get('outcome')}</text>"  # fmt: skip
    cls = "node" + (" terminal" if n.get("terminal") else "") + (" chosen" if roles[0] else "")
    cls += " rejected" if roles[1] else ""
    return (
        f'<g class="{cls}" data-id="{n["id"]}" data-stage="{escape(str(n.get("stage")))}" '
        f'data-visits="{n.get("visits", 0)}" data-value="{n.get("value", 0.0)}"><title>{escape(_tip(n, roles))}</title>'
        f'{shape} fill="{fill}" stroke="{stroke}" stroke-width="{width}"/>'
        f'<text x="{x:.1f}" y="{y + r + 11:.1f}" font-size="9" text-anchor="middle">{escape(label)}</text>{reward}</g>'
    )
