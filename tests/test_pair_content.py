"""Step pairs that differ only in wording: a protocol's ``turn_content`` and the MCTS pair builder's
``distinct_content`` rule (``search.distinct_content``); pairs of one action (``search.same_action``); both rules
applied by mining and by recipes/demo_policy/filter_pairs.py through one function (``keep_pairs``).

ReasonRAG's grounding turns, worked by hand:
  A = 'The reference states: "It was founded in 1733." Hence the answer is 1733.'  → 'it was founded in 1733. → 1733'
  B = 'The passage says: "It was founded in 1733." This implies the answer: 1733.' → the same key (a paraphrase of A)
  C = 'The passage says: "It was founded in 1733." This implies the answer: 1832.' → '… → 1832' (another value)
so the pair (A, B) is dropped and (A, C) kept; reasoning turns compare by their whole text, lower-cased with
whitespace collapsed.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from effirag.agent import EngineConfig, get_protocol
from effirag.train.mcts import EnginePolicy, MCTSConfig, mine_trees
from effirag.train.mcts.pairs import distinct_content, keep_pairs, same_action
from test_engine_support import LexicalRetriever
from test_mcts_resume import QUESTIONS, VariantGenerator

FILTER_PAIRS = Path(__file__).resolve().parents[1] / "recipes" / "demo_policy" / "filter_pairs.py"

A = '<evidence> The reference states: "It was founded in 1733." Hence the answer is 1733. </evidence>'
B = '<evidence> The passage says: "It was founded in 1733." This implies the answer: 1733. </evidence>'
C = '<evidence> The passage says: "It was founded in 1733." This implies the answer: 1832. </evidence>'


def test_reasonrag_grounding_content_is_the_quoted_fact_and_its_conclusion() -> None:
    p = get_protocol("reasonrag")
    assert p.turn_content(A, "grounding") == "it was founded in 1733. → 1733"
    assert p.turn_content(B, "grounding") == p.turn_content(A, "grounding")
    assert p.turn_content(C, "grounding") == "it was founded in 1733. → 1832"
    # no quoted fact: the whole evidence; reasoning turns: the whole text
    assert p.turn_content("<evidence>  None </evidence>", "grounding") == "none"
    assert p.turn_content("Search.\n<query>  Capital of Spain </query>", "reasoning") == (
        "search. <query> capital of spain </query>"
    )


def test_other_protocols_compare_the_text_itself() -> None:
    p = get_protocol("searchr1")
    assert p.turn_content(A, None) == A
    assert p.turn_content(A, None) != p.turn_content(B, None)


def test_distinct_content_drops_paraphrase_pairs_only() -> None:
    records = [
        {"stage": "grounding", "chosen": A, "rejected": B},  # the same fact and value: dropped
        {"stage": "grounding", "chosen": A, "rejected": C},  # another value: kept
        {"stage": "reasoning", "chosen": "Go.\n<query> x </query>", "rejected": "go. <query> X </query>"},  # dropped
        {"stage": "reasoning", "chosen": "Go.\n<query> x </query>", "rejected": "Stop.\n<answer> y </answer>"},
    ]
    kept = distinct_content(records, get_protocol("reasonrag"))
    assert kept == [records[1], records[3]]


class ParaphraseGenerator(VariantGenerator):
    """VariantGenerator whose two grounding variants that copy the document are paraphrases of each other."""

    def _turn(self, prompt: str, variant: int) -> str:
        if "(grounding stage)" not in prompt:
            return super()._turn(prompt, variant)
        doc = prompt.split("Doc 1 (Title: ", 1)[1].split(") ", 1)[1].split("\n", 1)[0]
        return [
            "<evidence> None </evidence>",
            f'<evidence> The passage says: "{doc}" So the answer is it. </evidence>',
            f'<evidence> The reference states: "{doc}" Hence the answer is it. </evidence>',
        ][variant]


def mine_with_and_without(tmp_path: Path, *rules: str) -> tuple[list[dict[str, str]], list[dict[str, str]], int]:
    """The scripted trees mined without and with the pair ``rules`` (same seeds, so the same trees): both pair lists
    and the ``left_out_pairs`` the rules' run recorded."""
    search = MCTSConfig(iterations=6, k=3, rollouts=1, max_depth=4, alpha=0.8)
    runs = {}
    for flag in (False, True):
        policy = EnginePolicy(ParaphraseGenerator(), LexicalRetriever(), get_protocol("reasonrag"), EngineConfig(k=1))
        out = tmp_path / str(flag)
        mine_trees(QUESTIONS, policy, replace(search, **dict.fromkeys(rules, flag)), out, dump_trees=False)
        runs[flag] = [json.loads(x) for x in (out / "pairs.jsonl").read_text().splitlines()]
    trees = [json.loads(x) for x in (tmp_path / "True" / "trees.jsonl").read_text().splitlines()]
    return runs[False], runs[True], sum(t["left_out_pairs"] for t in trees)


def test_mining_with_distinct_content_keeps_the_filtered_pairs(tmp_path: Path) -> None:
    """The rule's pairs are exactly the filtered ones, and the paraphrase pairs it drops exist (so the comparison can
    fail)."""
    every, kept, left_out = mine_with_and_without(tmp_path, "distinct_content")
    assert kept == distinct_content(every, get_protocol("reasonrag"))
    dropped = [r for r in every if r not in kept]
    assert dropped and all(r["stage"] == "grounding" for r in dropped)
    assert left_out == len(dropped)


def test_same_action_keeps_pairs_of_one_action() -> None:
    records = [
        {"chosen_action": "search", "rejected_action": "answer"},  # when to stop: left out
        {"chosen_action": "search", "rejected_action": "search"},
        {"chosen_action": "answer", "rejected_action": "invalid"},  # left out
        {"chosen_action": "reason", "rejected_action": "reason"},
    ]
    assert same_action(records) == [records[1], records[3]]


def test_mining_with_same_action_leaves_out_the_stop_pairs(tmp_path: Path) -> None:
    """The scripted tree's root pairs an answer against a search (VariantGenerator's first turn): mined with
    ``same_action`` those are gone, and the count left out is recorded."""
    every, kept, left_out = mine_with_and_without(tmp_path, "same_action")
    assert kept == same_action(every)
    assert any(r["chosen_action"] != r["rejected_action"] for r in every)
    assert left_out == len(every) - len(kept) > 0


def test_filter_pairs_recipe_keeps_what_mining_with_the_rules_keeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both rules on: the recipe run over the pairs mined without them writes exactly the pairs mined with them, and
    both equal ``keep_pairs`` over the unfiltered pairs (its count left out is the run's ``left_out_pairs``)."""
    every, kept, left_out = mine_with_and_without(tmp_path, "distinct_content", "same_action")
    both = MCTSConfig(distinct_content=True, same_action=True)
    assert keep_pairs(every, both, get_protocol("reasonrag")) == (kept, left_out)
    assert 0 < len(kept) < len(every)
    spec = importlib.util.spec_from_file_location("filter_pairs", FILTER_PAIRS)
    recipe = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(recipe)  # type: ignore[union-attr]
    out = tmp_path / "kept.jsonl"
    argv = ["filter_pairs", "reasonrag", str(tmp_path / "False" / "pairs.jsonl"), str(out), "--distinct-content"]
    monkeypatch.setattr(sys, "argv", [*argv, "--same-action"])
    recipe.main()
    assert [json.loads(x) for x in out.read_text().splitlines()] == kept
