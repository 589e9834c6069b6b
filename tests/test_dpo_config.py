"""The preference-learning configs: per-round η and epochs (the last value repeats), each round's sampling seed and
temperature, and validation that names the bad field."""

from __future__ import annotations

from pathlib import Path

import pytest

from effirag.config import load_config
from effirag.errors import ConfigError
from effirag.train.dpo.config import DPOTrainConfig, IPDPORunConfig


def test_rounds_take_their_eta_and_epochs_and_repeat_the_last() -> None:
    cfg = load_config(IPDPORunConfig, None, ["rounds=4", "eta=[1, 0.5]", "epochs=[2]", "temperature=0.7", "seed=3"])
    assert [cfg.round_train(r).sft_weight for r in (1, 2, 3, 4)] == [1.0, 0.5, 0.5, 0.5]
    assert [cfg.round_train(r).epochs for r in (1, 4)] == [2.0, 2.0]
    eng = cfg.round_engine(2)
    assert (eng.n, eng.temperature, eng.seed, eng.token_ids) == (8, 0.7, 2003, True)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        (["samples_per_question=1"], "samples_per_question"),
        (["temperature=0"], "temperature"),
        (["eta=[]"], "eta"),
        (["eta=[-1]"], "eta"),
        (["similarity=cosine"], "similarity"),
        (["outcome=bleu"], "outcome"),
        (["train.beta=0"], "beta"),
    ],
)
def test_bad_values_name_their_field(overrides: list[str], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        load_config(IPDPORunConfig, None, overrides)


def test_train_config_rejects_no_length() -> None:
    with pytest.raises(ConfigError, match="epochs"):
        DPOTrainConfig(epochs=0, max_steps=0)


def test_bf16_builds_trl_args_on_a_machine_without_a_gpu(tmp_path: Path) -> None:
    """transformers refuses ``bf16`` without a GPU unless ``use_cpu`` is set: the trainer arguments set it there, so
    bfloat16 autocast runs on a CPU."""
    import torch

    from effirag.train.dpo.trainer import dpo_args

    args = dpo_args(DPOTrainConfig(bf16=True), tmp_path)
    assert args.bf16 and args.use_cpu == (not torch.cuda.is_available())
