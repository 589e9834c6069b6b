"""SFT data for chat models from real gold decompositions (recipes/smollm2/sft_lora.yaml): each trajectory's prompt in
the start model's chat template (``data.chat``), exactly the text a chat backend's episode starts from; held-out
questions (``data.source.holdout``) never trained on; and the recipe's LoRA SFT at a tiny size (a tiny model with a
chat template built from a config stands in for SmolLM2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from effirag.config import load_config
from effirag.errors import ConfigError
from effirag.train.data_source import DataSource, load_gold
from effirag.train.masking import Segment
from effirag.train.pipeline import SFTRunConfig, run_pipeline
from effirag.train.sft_data import SFTDataConfig, SFTExample, in_chat
from tiny_models import make_tiny_model

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "smollm2" / "sft_lora.yaml"


def test_in_chat_wraps_the_prompt_and_keeps_the_turns() -> None:
    ex = SFTExample("q/searchr1", "searchr1", [[Segment("P\n", False), Segment("<answer> a </answer>", True)]])
    (got,) = in_chat([ex], lambda t: f"<u>{t}</u><a>")
    assert got.pairs == [[Segment("<u>P\n</u><a>", False), Segment("<answer> a </answer>", True)]]
    assert ex.pairs[0][0].text == "P\n"  # the input is not changed
    staged = SFTExample("q/reasonrag", "reasonrag", [[Segment("A", False)], [Segment("B", False)]])
    with pytest.raises(ValueError, match=r"q/reasonrag: 2 prompts \(reasonrag rebuilds its prompt\)"):
        in_chat([staged], str)
    with pytest.raises(ConfigError, match="chat"):
        SFTDataConfig(protocols=("reasonrag",), chat=True)


def test_holdout_leaves_the_first_questions_out(shared_data: Path) -> None:
    """The slice's 70 questions all have decompositions: holding out 30 leaves the last 40, in file order."""
    mus = shared_data / "musique_mini"
    src = DataSource(questions=mus / "questions.json", corpus=mus / "corpus.json", holdout=30)
    ids = [q["id"] for q in json.loads((mus / "questions.json").read_text("utf-8"))]
    assert [p.id for p in load_gold(src).paths] == ids[30:]
    with pytest.raises(ConfigError, match="holdout"):
        DataSource(holdout=3)  # a world has splits instead


@pytest.mark.slow
def test_recipe_lora_sft_in_chat_format_at_a_tiny_size(shared_data: Path, tmp_path: Path) -> None:
    """The recipe with a tiny Llama (its tokenizer has a chat template), 10 training questions and 2 optimiser steps:
    every sampled trajectory starts with the chat-wrapped protocol prompt, the run writes the merged model and the
    LoRA adapter, and both protocols were trained on."""
    model = make_tiny_model(tmp_path / "tiny", arch="llama", seed=1, max_positions=4096)
    mus = shared_data / "musique_mini"
    overrides = [
        f"train.model={model}",
        f"train.output_dir={tmp_path / 'run'}",
        f"data.source.questions={mus / 'questions.json'}",
        f"data.source.corpus={mus / 'corpus.json'}",
        "data.source.holdout=60",
        "data.single_hop_rate=0.0",
        "train.max_length=1024",  # the tiny byte-level BPE spends ~1 token per 3 characters
        "data.k=1",
        "data.max_inserted_tokens=64",
        "train.optim.max_steps=2",
        "train.optim.batch_size=2",
        "train.logging_steps=1",
        "train.save_steps=2",
        "train.gradient_checkpointing=false",
    ]
    cfg = load_config(SFTRunConfig, RECIPE, overrides)
    assert cfg.data.chat and cfg.train.lora.enabled and cfg.data.source.holdout == 60
    rep = run_pipeline(cfg, progress=False)
    assert rep.counts["paths"] == 10 and rep.counts["by_protocol"] == {"searchr1": 10, "hiprag": 10}
    assert rep.result is not None and rep.result.steps == 2
    run = tmp_path / "run"
    for line in (run / "sft_data_sample.jsonl").read_text("utf-8").splitlines():
        prompt = json.loads(line)["pairs"][0][0]
        assert not prompt["trained"]
        assert prompt["text"].startswith("<|user|>\n") and prompt["text"].endswith("\n<|assistant|>\n")
    assert (run / "model.safetensors").is_file() and (run / "adapter" / "adapter_config.json").is_file()
