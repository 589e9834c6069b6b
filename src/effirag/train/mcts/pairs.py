"""Step-level preference pairs from a searched tree (ReasonRAG §2.2.3, RAG-ProGuide).

At every expanded node, two children are a pair when their SPRE values differ by at least ``min_gap`` and their
texts differ (RAG-ProGuide drops pairs with identical responses and pairs whose reward gap is below 0.01): the child
with the higher value is ``chosen``, the other ``rejected``. The pair's ``prompt`` is the text the policy saw when
it wrote both (the parent node's prompt), so a step-level DPO (ReasonRAG eq. 3) trains log p(chosen | prompt) against
log p(rejected | prompt). :func:`distinct_content` drops the pairs whose two steps say the same thing in other
words, as the protocol reads them; :func:`same_action` keeps the pairs of two steps of the same action;
:func:`keep_pairs` applies the rules a search config turns on, in one order, for every caller (mining and the
filtering of pairs mined without them).
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from effirag.agent.protocols import AgentProtocol
from effirag.train.mcts.config import MCTSConfig
from effirag.train.mcts.tree import Node


def sibling_pairs(values: list[float], texts: list[str], min_gap: float) -> list[tuple[int, int]]:
    """(chosen, rejected) index pairs over one node's children: every two children whose ``values`` differ by at
    least ``min_gap`` and whose ``texts`` differ, the higher-valued one chosen. Ordered by (chosen, rejected) index
    of the earlier child first, as :func:`itertools.combinations` yields them."""
    if len(values) != len(texts):
        raise ValueError(f"{len(values)} values but {len(texts)} texts")
    if min_gap < 0:
        raise ValueError(f"min_gap={min_gap!r} must be >= 0")
    out: list[tuple[int, int]] = []
    for i, j in combinations(range(len(values)), 2):
        if texts[i] == texts[j] or abs(values[i] - values[j]) < min_gap or values[i] == values[j]:
            continue
        out.append((i, j) if values[i] > values[j] else (j, i))
    return out


def tree_pairs(nodes: list[Node], question_id: str, alpha: float, min_gap: float) -> list[dict[str, Any]]:
    """The pair records of a tree, node by node in creation order (see the module docstring for the fields)."""
    records: list[dict[str, Any]] = []
    for parent in nodes:
        if not parent.expanded or len(parent.children) < 2:
            continue
        kids = [nodes[i] for i in parent.children]
        values = [k.value(alpha) for k in kids]
        for a, b in sibling_pairs(values, [k.text for k in kids], min_gap):
            win, lose = kids[a], kids[b]
            records.append(
                {
                    "question_id": question_id,
                    "prompt": parent.prompt,
                    "chosen": win.text,
                    "rejected": lose.text,
                    "chosen_value": round(values[a], 6),
                    "rejected_value": round(values[b], 6),
                    "stage": win.stage,
                    "chosen_action": win.action,
                    "rejected_action": lose.action,
                    "depth": parent.depth,
                    "node": parent.id,
                    "chosen_node": win.id,
                    "rejected_node": lose.id,
                }
            )
    return records


def distinct_content(records: list[dict[str, Any]], protocol: AgentProtocol) -> list[dict[str, Any]]:
    """The pair records whose chosen and rejected steps differ in content as ``protocol`` reads it
    (:meth:`~effirag.agent.protocols.AgentProtocol.turn_content` at the pair's ``stage``), in their order: two
    phrasings of the same content pair only by rollout luck, which DPO would learn as a preference for wording."""
    kept = []
    for r in records:
        stage = r.get("stage") or None
        if protocol.turn_content(r["chosen"], stage) != protocol.turn_content(r["rejected"], stage):
            kept.append(r)
    return kept


def same_action(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pair records whose chosen and rejected steps take the same action (``chosen_action`` equals
    ``rejected_action``), in their order: a search against an answer prefers *when to stop*, which a policy that
    cannot tell whether its evidence suffices learns as "search again"."""
    return [r for r in records if r["chosen_action"] == r["rejected_action"]]


def keep_pairs(
    records: list[dict[str, Any]], search: MCTSConfig, protocol: AgentProtocol
) -> tuple[list[dict[str, Any]], int]:
    """The pair records ``search``'s pair rules keep, in their order, and how many they leave out:
    :func:`distinct_content` (``search.distinct_content``, steps read by ``protocol``) then :func:`same_action`
    (``search.same_action``). Mining and the filtering of an already-mined pairs file both go through here, so a
    filtered file holds the pairs a run with the rules on would have written."""
    kept = distinct_content(records, protocol) if search.distinct_content else records
    kept = same_action(kept) if search.same_action else kept
    return kept, len(records) - len(kept)
