"""The search tree of ReasonRAG's MCTS (ReasonRAG §2.2.2, appendix A): nodes, UCT selection, SPRE backup, statistics.

A node is a partial trajectory: the root is the question (no step yet), each other node is its parent's trajectory
plus one policy turn (a query, an evidence extraction, an answer, or a turn the parser refused). Each node keeps
N (its visit count, appendix A eq. 7) and the Monte-Carlo samples (outcome value, total steps) of every rollout that
went through it, so that its value Q is SPRE over them (eq. 1): Q = (1/m) Σ v_i · α^{steps_i}.

A node is *closed* when nothing below it is left to explore: it ended (an answer, or an episode out of budget), it
sits at the depth limit, or it was expanded and all its children are closed. Selection (eq. 5) descends by UCT among
open children only, so terminal leaves are not re-selected; the search stops early once the root is closed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from effirag.rewards.spre import spre_value, uct_score
from effirag.types import Trajectory


@dataclass(eq=False)
class Node:
    """One state of the tree. ``text`` is the turn the policy wrote to reach it ('' at the root); ``prompt`` is the
    text the policy sees next at this node (its children's prompt), set when the node is expanded."""

    id: int
    parent: int | None
    depth: int
    trajectory: Trajectory
    text: str = ""
    stage: str = "question"
    action: str = ""
    observation: str = ""
    answer: str | None = None
    terminal: bool = False
    outcome: float | None = None
    prompt: str | None = None
    children: list[int] = field(default_factory=list)
    visits: int = 0
    samples: list[tuple[float, int]] = field(default_factory=list)  # (outcome value v, total steps) per rollout
    closed: bool = False

    def value(self, alpha: float) -> float:
        """Q: SPRE (ReasonRAG eq. 1) over every rollout sample that went through this node (0.0 before any)."""
        return spre_value([v for v, _ in self.samples], [s for _, s in self.samples], alpha)

    @property
    def expanded(self) -> bool:
        return self.prompt is not None


def select_child(nodes: list[Node], parent: Node, alpha: float, c: float) -> Node:
    """ReasonRAG appendix A eq. 5: the open child of ``parent`` with the largest Q + c·√(Σ N) / (1 + N), Σ over all
    of ``parent``'s children; ties go to the earlier child. ValueError when no child is open."""
    kids = [nodes[i] for i in parent.children]
    total = sum(k.visits for k in kids)
    best: Node | None = None
    best_score = float("-inf")
    for k in kids:
        if k.closed:
            continue
        score = uct_score(k.value(alpha), k.visits, total, c)
        if score > best_score:
            best, best_score = k, score
    if best is None:
        raise ValueError(f"node {parent.id} has no open child")
    return best


def select_leaf(nodes: list[Node], alpha: float, c: float) -> Node:
    """Selection: from the root down through expanded nodes by :func:`select_child` to an unexpanded open node."""
    node = nodes[0]
    while node.expanded:
        node = select_child(nodes, node, alpha, c)
    return node


def path_to_root(nodes: list[Node], node: Node) -> list[Node]:
    """``node`` and its ancestors, ``node`` first."""
    path = [node]
    while path[-1].parent is not None:
        path.append(nodes[path[-1].parent])
    return path


def backup(nodes: list[Node], node: Node, samples: list[tuple[float, int]]) -> None:
    """Backpropagation (appendix A eq. 7): every node from ``node`` to the root is visited once more and takes the
    rollout ``samples`` into its SPRE estimate."""
    for n in path_to_root(nodes, node):
        n.visits += 1
        n.samples.extend(samples)


def close_upwards(nodes: list[Node], node: Node, max_depth: int) -> None:
    """Close ``node`` if it ended, sits at ``max_depth`` or has only closed children, then its ancestors likewise."""
    for n in path_to_root(nodes, node):
        ended = n.terminal or n.depth >= max_depth
        done_below = n.expanded and all(nodes[i].closed for i in n.children)
        if not (ended or done_below):
            return
        n.closed = True


def tree_stats(nodes: list[Node], alpha: float) -> dict[str, Any]:
    """Per-question statistics: root visits and value, node count, deepest node, best non-root value, terminal
    nodes and how many of them answered right (outcome 1.0)."""
    rest = nodes[1:]
    terminal = [n for n in rest if n.terminal]
    return {
        "visits": nodes[0].visits,
        "root_value": round(nodes[0].value(alpha), 6),
        "nodes": len(nodes),
        "depth": max((n.depth for n in nodes), default=0),
        "best_value": round(max((n.value(alpha) for n in rest), default=0.0), 6),
        "terminal": len(terminal),
        "correct": sum(1 for n in terminal if n.outcome == 1.0),
        "closed": nodes[0].closed,
    }


def dump_tree(nodes: list[Node], alpha: float) -> list[dict[str, Any]]:
    """The nodes as plain JSON records (the tree viewer's input): ids, parent, depth, stage, action, text, what the
    environment inserted after it, answer and outcome of terminal nodes, visits, value and rollout count."""
    return [
        {
            "id": n.id,
            "parent": n.parent,
            "depth": n.depth,
            "stage": n.stage,
            "action": n.action,
            "text": n.text,
            "observation": n.observation,
            "answer": n.answer,
            "terminal": n.terminal,
            "outcome": n.outcome,
            "visits": n.visits,
            "value": round(n.value(alpha), 6),
            "rollouts": len(n.samples),
            "children": list(n.children),
        }
        for n in nodes
    ]
