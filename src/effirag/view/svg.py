"""The Knowledge Association Graph of one KAG step as inline SVG (no script, no external resource).

Layout (deterministic, so two reports of one run are identical): the subquery at the centre, chunks on the inner
ring, triplets on the middle ring, entities on the outer ring, each ring in the graph's node order. A node's area
grows with its PPR score (radius ∝ √score, relative to the step's largest chunk/triplet score); the nodes the filter
kept (the step's retrieved items) get a thick outline. Edges are typed: co-occurrence (grey, solid) and semantic
relevance to the subquery (blue, dashed, width ∝ weight: TeaRAG eq. 1–2).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from html import escape
from typing import Any

SIZE = 460
RINGS = {"subquery": 0.0, "chunk": 0.3, "triplet": 0.6, "entity": 0.9}
COLOURS = {"subquery": "#444", "chunk": "#1f77b4", "triplet": "#2ca02c", "entity": "#ff7f0e"}
SEMANTIC = ("chunk-subquery", "triplet-subquery")


def node_positions(nodes: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """Centre coordinates of every node (see the module docstring)."""
    by_kind: dict[str, list[str]] = {}
    for n in nodes:
        by_kind.setdefault(str(n["kind"]), []).append(str(n["id"]))
    c = SIZE / 2
    pos: dict[str, tuple[float, float]] = {}
    for kind, ids in by_kind.items():
        radius = RINGS.get(kind, 0.9) * (SIZE / 2 - 24)
        offset = {"chunk": 0.0, "triplet": 0.5, "entity": 0.25}.get(kind, 0.0)
        for i, nid in enumerate(ids):
            a = 2 * math.pi * (i + offset) / max(1, len(ids)) - math.pi / 2
            pos[nid] = (c + radius * math.cos(a), c + radius * math.sin(a))
    return pos


def node_radius(score: float, top: float) -> float:
    """3 px for a node without PPR mass up to 15 px for the step's best chunk or triplet."""
    if top <= 0.0 or score <= 0.0:
        return 3.0
    return 3.0 + 12.0 * math.sqrt(min(score / top, 1.0))


def kag_svg(kag: dict[str, Any], kept: Iterable[str]) -> str:
    """``<svg class="kag">`` of a step's ``extras["kag"]`` (``graph`` nodes/edges, ``scores`` by node id); ``kept``
    are the node ids the filter kept (``c:<id>`` / ``t:<id>``)."""
    graph, scores = kag["graph"], kag.get("scores", {})
    nodes, edges = graph["nodes"], graph["edges"]
    kept_ids = set(kept)
    pos = node_positions(nodes)
    top = max((float(scores.get(n["id"], 0.0)) for n in nodes if n["kind"] in ("chunk", "triplet")), default=0.0)
    parts = [
        f'<svg class="kag" xmlns="http://www.w3.org/2000/svg" width="{SIZE}" height="{SIZE + 20}" '
        f'viewBox="0 0 {SIZE} {SIZE + 20}" role="img" aria-label="knowledge association graph">'
    ]
    for e in edges:
        if e["u"] not in pos or e["v"] not in pos:
            continue
        (x1, y1), (x2, y2) = pos[e["u"]], pos[e["v"]]
        semantic = e["kind"] in SEMANTIC
        style = (
            f'stroke="#1f77b4" stroke-dasharray="4 3" stroke-width="{0.5 + 2.5 * float(e["weight"]):.2f}"'
            if semantic
            else 'stroke="#aaa" stroke-width="1"'
        )
        cls = "semantic" if semantic else "cooccurrence"
        parts.append(
            f'<line class="edge {cls}" data-kind="{escape(e["kind"])}" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" '
            f'y2="{y2:.1f}" {style}/>'
        )
    for n in nodes:
        x, y = pos[n["id"]]
        score = float(scores.get(n["id"], 0.0))
        r = 9.0 if n["kind"] == "subquery" else node_radius(score, top)
        is_kept = n["id"] in kept_ids
        outline = 'stroke="#000" stroke-width="3"' if is_kept else 'stroke="#fff" stroke-width="1"'
        tip = f"{n['kind']}: {n['label']} (PPR {score:.4f}){' — kept' if is_kept else ''}"
        parts.append(
            f'<circle class="node {escape(n["kind"])}{" kept" if is_kept else ""}" data-id="{escape(n["id"])}" '
            f'data-ppr="{score:.6g}" cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{COLOURS.get(n["kind"], "#999")}" '
            f"{outline}><title>{escape(tip)}</title></circle>"
        )
        if is_kept or n["kind"] == "subquery":
            label = n["label"] if len(n["label"]) <= 28 else n["label"][:27] + "…"
            parts.append(
                f'<text x="{x + r + 2:.1f}" y="{y + 4:.1f}" font-size="10" class="node-label">{escape(label)}</text>'
            )
    legend = "".join(f'<tspan fill="{COLOURS[k]}">● {k} </tspan>' for k in ("chunk", "triplet", "entity"))
    parts.append(
        f'<text x="4" y="{SIZE + 14}" font-size="10" fill="#333">{legend}· size: PPR · thick outline: kept · '
        "dashed blue: semantic · grey: co-occurrence</text></svg>"
    )
    return "".join(parts)
