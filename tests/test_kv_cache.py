"""Generation uses the KV cache whatever the model's config says: transformers' Trainer saves ``use_cache: false``
(it trains without the cache), and a generator that followed it would re-run the whole prefix for every new token.
The shipped checkpoints say ``use_cache: true``, and EffiRAG's trainers save their policies that way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from effirag.llm.base import GenerationConfig
from effirag.llm.hf import HFGenerator
from tiny_models import make_tiny_model

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("kv"), arch="lfm2", seed=7)


def test_generation_feeds_one_new_token_per_step_even_when_the_config_turns_the_cache_off(model_dir: Path) -> None:
    import torch

    gen = HFGenerator(model_dir, device="cpu").load()
    model = gen.model
    prompt = gen.encode("The river flows through", prompt=True)
    with torch.inference_mode():  # the reference: transformers without the cache, greedy
        ref = model.generate(
            torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            do_sample=False, max_new_tokens=12, use_cache=False, eos_token_id=None, pad_token_id=0,
        )[0, len(prompt):].tolist()  # fmt: skip
    model.config.use_cache = False  # what a Trainer leaves behind
    model.generation_config.use_cache = False
    widths: list[int] = []
    forward = model.forward

    def recording(*args: Any, **kw: Any) -> Any:
        widths.append(int(kw["input_ids"].shape[1]))
        return forward(*args, **kw)

    model.forward = recording
    try:
        (out,) = gen.generate(["The river flows through"], GenerationConfig(max_new_tokens=12, temperature=0.0))
    finally:
        del model.forward
    steps = len(out[0].token_ids)
    assert steps >= 2 and widths[0] == len(prompt)
    assert widths[1:] == [1] * (len(widths) - 1), widths  # only the newest token goes through the model
    assert list(out[0].token_ids) == ref[:steps]  # the cache changes the cost, never the tokens


def test_shipped_checkpoints_say_use_cache_true() -> None:
    configs = sorted((REPO / "checkpoints").glob("*/config.json"))
    assert configs, "no shipped checkpoint found"
    for path in configs:
        cfg = json.loads(path.read_text(encoding="utf-8"))
        assert cfg.get("use_cache", True) is True, path


def test_saved_policy_says_use_cache_true(model_dir: Path, tmp_path: Path) -> None:
    from effirag.train.outputs import save_policy

    gen = HFGenerator(model_dir, device="cpu").load()
    gen.model.config.use_cache = False  # as transformers' Trainer leaves it
    save_policy(gen.model, gen.tokenizer, tmp_path / "policy")
    assert json.loads((tmp_path / "policy" / "config.json").read_text(encoding="utf-8"))["use_cache"] is True
