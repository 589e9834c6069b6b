"""``effirag data mcts`` takes ``reranker=none`` (no reranker, as its banner prints), not a folder named "none"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from effirag.errors import ConfigError
from effirag.types import Passage


@pytest.fixture()
def run_files(tmp_path: Path, small_passages: list[Passage]) -> list[str]:
    from effirag.retrieval.index import IndexConfig, build_index

    build_index(small_passages, tmp_path / "index", config=IndexConfig(dense=False), corpus_path="mem")
    (tmp_path / "script.json").write_text(json.dumps(["Final answer: Amsterdam"]), encoding="utf-8")
    row = {"id": "q0", "question": "What is the capital of the Netherlands?", "answer": "Amsterdam"}
    (tmp_path / "questions.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    return [
        f"env.model=scripted:{tmp_path / 'script.json'}",
        f"env.questions={tmp_path / 'questions.jsonl'}",
        f"env.index={tmp_path / 'index'}",
        f"output_dir={tmp_path / 'out'}",
        "env.protocol=searchr1",
    ]


@pytest.mark.parametrize("none", ["none", "None", ""])
def test_mcts_opens_its_run_without_a_reranker(run_files: list[str], none: str) -> None:
    from effirag.train.mcts import load_run_config
    from effirag.train.mcts.runner import open_run

    cfg = load_run_config(None, [*run_files, f"env.reranker={none}"])
    examples, policy, out = open_run(cfg)
    assert [ex.id for ex in examples] == ["q0"] and out.is_dir()
    assert policy.retriever is not None and policy.retriever.reranker is None
    assert policy.retriever.retrieve("capital Netherlands", "sparse", 1).items[0].id == "p0"


def test_mcts_refuses_a_spec_without_a_folder(run_files: list[str]) -> None:
    from effirag.train.mcts import load_run_config

    with pytest.raises(ConfigError, match="reranker"):
        load_run_config(None, [*run_files, "env.reranker=cross-encoder:"])
