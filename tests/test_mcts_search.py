"""ReasonRAG MCTS + SPRE on a scripted policy, over a tree small enough to follow by hand.

Question "What is the capital of Spain?" (gold Madrid); search: iterations 3, k 2, rollouts 1, max_depth 3,
α = 0.5, c_uct = 1, outcome F1; retrieval k 1 (the query "capital of Spain" finds "Madrid is the capital of Spain.").
The script serves each prompt by a substring of it (the stage and history), so every call below is forced.

Iteration 1 — the root is the only node: expand it (2 samples)
  A = "I know it. <answer> Barcelona </answer>" — terminal, v = F1 = 0 after 1 step: sample (0, 1)
  B = "I need to search. <query> capital of Spain </query>" — rollout: evidence "Madrid …", answer Madrid:
      v = 1 after 3 steps: sample (1, 3), SPRE 1 · 0.5³ = 0.125
  backup: A N=1 Q=0; B N=1 Q=0.125; root N=2 Q=(0 + 0.125)/2 = 0.0625.
Iteration 2 — selection: A is closed (terminal), so B; expand B (grounding stage)
  C = "<evidence> Madrid is the capital of Spain. </evidence>" — rollout answers Madrid in 3 steps: (1, 3) → 0.125
  D = "<evidence> None </evidence>" — rollout answers Seville in 3 steps: (0, 3) → 0
  backup: C N=1 Q=0.125; D N=1 Q=0; B N=3 Q=(0.125 + 0.125 + 0)/3 = 0.083333; root N=4, over its 4 samples
  (0,1),(1,3),(1,3),(0,3): Q=(0 + 0.125 + 0.125 + 0)/4 = 0.0625.
Iteration 3 — selection: root → B (A closed); B's children: UCT(C) = 0.125 + √2/2 = 0.832 > UCT(D) = 0 + √2/2 =
  0.707, so C; expand C (reasoning stage)
  E = "The evidence is enough. <answer> Madrid </answer>" — terminal, v = 1 after 3 steps: (1, 3) → 0.125
  F = "Let me check again. <query> Spain capital city </query>" — at max_depth 3 (closed, never expanded); its
      rollout: evidence, answer Madrid after 5 steps: (1, 5) → 0.5⁵ = 0.03125
  backup: E N=1 Q=0.125; F N=1 Q=0.03125; C N=3 Q=(0.125 + 0.125 + 0.03125)/3 = 0.09375;
  B N=5 Q=(0.125 + 0.125 + 0 + 0.125 + 0.03125)/5 = 0.08125; root N=6, over its 6 samples (A's and B's five):
  Q=(0 + 3·0.125 + 0 + 0.03125)/6 = 0.067708.

Pairs (every sibling pair with a value gap ≥ 0.01): root: B (0.08125) over A (0); B: C (0.09375) over D (0);
C: E (0.125) over F (0.03125) — SPRE prefers the shorter right path. C is closed (E terminal, F at the depth
limit), D is still open, so the root is not closed. 12 prompts were generated: 4 per iteration.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from effirag.agent import EngineConfig, get_protocol
from effirag.agent.protocols import ReasonRAGProtocol
from effirag.llm.scripted import ScriptedGenerator
from effirag.train.mcts import EnginePolicy, MCTSConfig, mine_trees, search_tree
from effirag.train.mcts.pairs import sibling_pairs, tree_pairs
from effirag.train.mcts.tree import tree_stats
from effirag.types import QAExample
from test_engine_support import LexicalRetriever

Q = QAExample("q1", "What is the capital of Spain?", ("Madrid",))
EV = "<evidence> Madrid is the capital of Spain. </evidence>"
A = "I know it.\n<answer> Barcelona </answer>"
B = "I need to search.\n<query> capital of Spain </query>"
D = "<evidence> None </evidence>"
E = "The evidence is enough.\n<answer> Madrid </answer>"
F = "Let me check again.\n<query> Spain capital city </query>"
SCRIPT = {  # the first key found in a prompt serves it: the more specific histories come first
    "Query: Spain capital city\nEvidence:": [E],
    "Query: Spain capital city\n<documents>": [EV],
    "Query: capital of Spain\n<documents>": [EV, EV, D],
    "Evidence: None": ["Nothing was found.\n<answer> Seville </answer>"],
    "Evidence: Madrid is the capital of Spain.": [E, E, E, F],
    "Nothing has been searched yet.": [A, B],
}
SEARCH = MCTSConfig(iterations=3, k=2, rollouts=1, max_depth=3, alpha=0.5, c_uct=1.0, seed=0)


def _policy() -> tuple[EnginePolicy, ScriptedGenerator]:
    gen = ScriptedGenerator(SCRIPT)
    return EnginePolicy(gen, LexicalRetriever(), get_protocol("reasonrag"), EngineConfig(k=1, max_steps=6)), gen


def test_hand_worked_tree() -> None:
    policy, gen = _policy()
    res = search_tree(Q, policy, SEARCH)
    nodes = res.nodes
    assert res.iterations == 3 and len(gen.prompts) == 12
    assert [n.text for n in nodes] == ["", A, B, EV, D, E, F]
    assert [n.parent for n in nodes] == [None, 0, 0, 2, 2, 3, 3]
    assert [n.stage for n in nodes] == ["question", "reasoning", "reasoning", "grounding", "grounding", "reasoning",
                                        "reasoning"]  # fmt: skip
    assert [n.visits for n in nodes] == [6, 1, 5, 3, 1, 1, 1]
    values = [n.value(SEARCH.alpha) for n in nodes]
    assert values == pytest.approx([0.40625 / 6, 0.0, 0.08125, 0.09375, 0.0, 0.125, 0.03125])
    assert [(n.terminal, n.outcome) for n in (nodes[1], nodes[5])] == [(True, 0.0), (True, 1.0)]
    assert [n.closed for n in nodes] == [False, True, False, True, False, True, True]
    assert nodes[2].observation.startswith("<documents>\nDoc 1 (Title: Madrid) Madrid is the capital of Spain.")
    assert tree_stats(nodes, SEARCH.alpha) == {
        "visits": 6, "root_value": round(0.40625 / 6, 6), "nodes": 7, "depth": 3, "best_value": 0.125,
        "terminal": 2, "correct": 1, "closed": False,
    }  # fmt: skip

    pairs = tree_pairs(nodes, Q.id, SEARCH.alpha, SEARCH.min_gap)
    got = [(p["chosen"], p["rejected"], p["chosen_value"], p["rejected_value"], p["stage"]) for p in pairs]
    assert got == [
        (B, A, 0.08125, 0.0, "reasoning"),
        (EV, D, 0.09375, 0.0, "grounding"),
        (E, F, 0.125, 0.03125, "reasoning"),
    ]
    assert all(p["question_id"] == "q1" and p["prompt"] in gen.prompts for p in pairs)  # as the policy saw it
    assert pairs[0]["prompt"] == ReasonRAGProtocol.reasoning_prompt(Q.question, [])
    assert "Query: capital of Spain\n<documents>" in pairs[1]["prompt"]
    assert pairs[2]["prompt"].endswith("Evidence: Madrid is the capital of Spain.\n")


def test_sibling_pairs_gap_and_duplicates() -> None:
    """Values (0.5, 0.2, 0.5, 0.195) with texts (a, b, a, c), gap 0.01: (0,1) 0.3 → (0, 1); (0,2) same text; (0,3)
    → (0, 3); (1,2) → (2, 1); (1,3) gap 0.005 < 0.01 dropped; (2,3) → (2, 3)."""
    assert sibling_pairs([0.5, 0.2, 0.5, 0.195], ["a", "b", "a", "c"], 0.01) == [(0, 1), (0, 3), (2, 1), (2, 3)]
    assert sibling_pairs([0.3, 0.3], ["a", "b"], 0.0) == []  # equal values prefer neither
    with pytest.raises(ValueError, match="2 values but 1 texts"):
        sibling_pairs([0.1, 0.2], ["a"], 0.0)


def test_identical_samples_merge_and_root_closes(tmp_path: Path) -> None:
    """Two identical answers at the root make one terminal child: the root closes after one iteration (of 5), no
    pair is possible, and the tree dump is valid JSON with the node records."""
    gen = ScriptedGenerator({"Nothing has been searched yet.": [E, E]})
    policy = EnginePolicy(gen, LexicalRetriever(), get_protocol("reasonrag"), EngineConfig(k=1, max_steps=4))
    cfg = MCTSConfig(iterations=5, k=2, alpha=0.5)
    summary = mine_trees([Q], policy, cfg, tmp_path)
    [rec] = summary.records
    assert (rec["iterations"], rec["nodes"], rec["pairs"], rec["closed"]) == (1, 2, 0, True)
    assert rec["root_value"] == rec["best_value"] == 0.5  # v = 1 after 1 step, α = 0.5
    doc = json.loads((tmp_path / "trees" / "q1.json").read_text(encoding="utf-8"))
    assert doc["question_id"] == "q1" and doc["answers"] == ["Madrid"]
    root, child = doc["nodes"]
    assert (root["parent"], child["parent"], root["children"]) == (None, 0, [1])
    assert (child["stage"], child["action"], child["text"], child["answer"]) == ("reasoning", "answer", E, "Madrid")
    assert (child["visits"], child["value"], child["terminal"], child["outcome"]) == (1, 0.5, True, 1.0)
    assert (tmp_path / "pairs.jsonl").read_text(encoding="utf-8") == ""


def test_pairs_file_holds_the_hand_worked_pairs(tmp_path: Path) -> None:
    """The run writes the three pairs above as JSONL with the documented fields, and one trees.jsonl record."""
    policy, _ = _policy()
    summary = mine_trees([Q], policy, SEARCH, tmp_path)
    assert (summary.searched, summary.skipped, summary.pairs) == (1, 0, 3)
    lines = (tmp_path / "pairs.jsonl").read_text(encoding="utf-8").splitlines()
    pairs = [json.loads(x) for x in lines]
    need = {"prompt", "chosen", "rejected", "chosen_value", "rejected_value", "stage", "question_id"}
    assert all(need <= p.keys() for p in pairs) and [p["chosen"] for p in pairs] == [B, EV, E]
    [rec] = [json.loads(x) for x in (tmp_path / "trees.jsonl").read_text(encoding="utf-8").splitlines()]
    assert (rec["question_id"], rec["visits"], rec["pairs"]) == ("q1", 6, 3)
    assert math.isclose(rec["root_value"], 0.40625 / 6, abs_tol=1e-6)
