"""(slow) ``effirag data mcts`` with the committed policy on demo-world training questions, end to end.

The world is generated afresh (preset demo, seed 0: the demo's world) with a BM25 index over it, built in seconds;
`effirag demo`'s dense index with the reranker (the policy's own inference settings) takes minutes to build, so the
searches go to BM25 here (``engine.passage_mode=sparse``, ``inference=none`` with the policy's engine settings given
as overrides). The run must write valid pairs and tree statistics, and a rerun must skip every finished question.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from effirag.cli.main import app

REPO = Path(__file__).resolve().parents[1]
ENGINE = ["env.engine.k=1", "env.engine.max_new_tokens=96", "env.engine.max_total_tokens=3072",
          "env.engine.max_inserted_tokens=160",
          "env.engine.frequency_penalty=0.3", "env.engine.passage_mode=sparse"]  # fmt: skip
PROMPTS = ("You answer questions with the ReasonRAG protocol", "You extract evidence with the ReasonRAG protocol")


@pytest.mark.slow
def test_data_mcts_on_demo_questions(tmp_path: Path) -> None:
    from effirag.data import load_corpus
    from effirag.retrieval.index import IndexConfig, build_index
    from effirag.world import generate_world, load_world_config

    world, index, out = tmp_path / "world", tmp_path / "index", tmp_path / "mcts"
    generate_world(load_world_config("demo", None, ()), world)
    corpus = load_corpus(world / "corpus.jsonl")
    build_index(corpus.passages, index, config=IndexConfig(dense=False), corpus_path=str(world / "corpus.jsonl"))
    args = ["data", "mcts", "--config", str(REPO / "configs" / "mcts" / "reasonrag.yaml"), "--quiet",
            f"env.model=hf:{REPO / 'checkpoints' / 'demo-policy'}", "env.inference=none", f"env.index={index}",
            f"env.questions={world / 'questions_train.jsonl'}", "env.max_questions=2", "search.iterations=4",
            f"output_dir={out}", *ENGINE]  # fmt: skip
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    trees = [json.loads(x) for x in (out / "trees.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(trees) == 2 and len({t["question_id"] for t in trees}) == 2
    pairs = [json.loads(x) for x in (out / "pairs.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(pairs) == sum(t["pairs"] for t in trees) >= 1
    for p in pairs:
        assert p["question_id"] in {t["question_id"] for t in trees}
        assert p["prompt"].startswith(PROMPTS) and p["chosen"] and p["chosen"] != p["rejected"]
        assert p["chosen_value"] - p["rejected_value"] >= 0.01 and p["stage"] in ("reasoning", "grounding")
    for t in trees:
        assert 1 <= t["iterations"] <= 4 and t["nodes"] >= 2 and t["visits"] >= 1
        doc = json.loads((out / "trees" / f"{t['question_id']}.json").read_text(encoding="utf-8"))
        nodes = doc["nodes"]
        assert len(nodes) == t["nodes"] and nodes[0]["visits"] == t["visits"]
        assert all(n["parent"] is None or n["id"] in nodes[n["parent"]]["children"] for n in nodes)
    before = (out / "pairs.jsonl").read_text(encoding="utf-8")
    again = CliRunner().invoke(app, [*args[:4], *args[5:], "--json"])
    assert again.exit_code == 0, again.output
    summary = json.loads(again.stdout)
    assert (summary["searched"], summary["skipped"], summary["pairs"]) == (0, 2, 0)
    assert (out / "pairs.jsonl").read_text(encoding="utf-8") == before
