"""``effirag train sft`` on a user's question file with gold decompositions: the shared MuSiQue slice.

The documented example config (configs/sft/musique_searchr1.yaml) with a tiny model and tokenizer built from the
config, 20 optimiser steps; the checkpoint it writes must load and answer through ``effirag ask --backend hf:DIR``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from effirag.cli.main import app

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "sft" / "musique_searchr1.yaml"
runner = CliRunner()


def test_musique_example_config_reads_the_slice(shared_data: Path) -> None:
    """The example config's source is the MuSiQue slice: every one of its 70 questions has a gold decomposition, so
    all 70 become gold paths of 2-4 hops, each hop with its supporting passage."""
    from effirag.config import load_config
    from effirag.train.data_source import load_gold
    from effirag.train.pipeline import SFTRunConfig

    mus = shared_data / "musique_mini"
    source = [f"data.source.questions={mus / 'questions.json'}", f"data.source.corpus={mus / 'corpus.json'}",
              f"data.source.openie={mus / 'openie_gpt-3.5-turbo-1106.json'}"]  # fmt: skip
    cfg = load_config(SFTRunConfig, CONFIG, source)
    gold = load_gold(cfg.data.source)
    assert gold.world is None and len(gold.paths) == 70 and len(gold.passages) == 1890
    assert all(2 <= len(p.hops) <= 4 and all(h.passage is not None for h in p.hops) for p in gold.paths)


@pytest.mark.slow
def test_train_sft_on_musique_gold_decompositions_then_ask(shared_data: Path, tmp_path: Path) -> None:
    """20 steps on the MuSiQue slice's Search-R1 and TeaRAG trajectories with a tiny Qwen2 (hidden 32, 2 layers) and a
    600-token BPE trained on the slice: the logged loss falls (mean of the last 5 steps below the first 5), the
    export folder holds a model and tokenizer, and ``effirag ask --backend hf:DIR`` loads it and runs the Search-R1
    loop over a BM25 index of the slice's corpus (a 20-step model answers nonsense, but it must run and parse)."""
    mus = shared_data / "musique_mini"
    out, export = tmp_path / "run", tmp_path / "policy"
    overrides = [
        f"data.source.questions={mus / 'questions.json'}",
        f"data.source.corpus={mus / 'corpus.json'}",
        f"data.source.openie={mus / 'openie_gpt-3.5-turbo-1106.json'}",
        f"train.output_dir={out}",
        f"train.export_dir={export}",
        "train.tokenizer_train.vocab_size=600",
        "train.model_shape.architecture=qwen2",
        "train.model_shape.hidden_size=32",
        "train.model_shape.intermediate_size=64",
        "train.model_shape.num_layers=2",
        "train.model_shape.num_heads=2",
        "train.model_shape.num_kv_heads=1",
        "train.max_length=384",
        "train.optim.max_steps=20",
        "train.optim.batch_size=4",
        "train.optim.learning_rate=3e-3",
        "train.logging_steps=1",
        "train.save_steps=100",
        "data.max_inserted_tokens=128",
    ]
    r = runner.invoke(app, ["train", "sft", "--config", str(CONFIG), *overrides, "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)  # --json: the report alone on stdout, the progress bar and log lines on stderr
    assert "20/20" in r.stderr and "'loss':" in r.stderr
    assert summary["steps"] == 20 and summary["paths"] == 70
    assert set(summary["by_protocol"]) == {"searchr1", "tearag"}
    losses = [p["loss"] for p in json.loads((out / "loss_curve.json").read_text("utf-8"))]
    assert len(losses) == 20
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5, losses
    assert all((export / f).is_file() for f in ("model.safetensors", "tokenizer.json", "pipeline_report.json"))

    corpus = json.loads((mus / "corpus.json").read_text("utf-8"))[:300]
    (tmp_path / "corpus.json").write_text(json.dumps(corpus), encoding="utf-8")
    r = runner.invoke(app, ["index", "build", "--corpus", str(tmp_path / "corpus.json"), "--out",
                            str(tmp_path / "index"), "--no-dense"])  # fmt: skip
    assert r.exit_code == 0, r.output
    question = json.loads((mus / "questions.json").read_text("utf-8"))[0]["question"]
    settings = ["--set", "passage_mode=sparse", "--set", "k=1", "--set", "max_steps=2", "--set", "max_new_tokens=24"]
    r = runner.invoke(app, ["ask", question, "-p", "searchr1", "--backend", f"hf:{export}", "--index",
                            str(tmp_path / "index"), *settings, "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["question"] == question and 1 <= doc["totals"]["steps"] <= 2
    assert doc["totals"]["generated_tokens"] > 0
