"""The SFT recipe end to end on a tiny model: the loss falls, every weight moves, runs resume, the curve is saved."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from effirag.train.masking import InsertedSpan, build_example
from effirag.train.model import ModelConfig, build_model
from effirag.train.sft import LoraConfig, OptimConfig, SFTConfig, last_checkpoint, run_sft, to_dataset
from effirag.train.tokenizer import TokenizerConfig, train_tokenizer

FACTS = [("Alice", "Veltran"), ("Bruno", "Oskaria"), ("Clara", "Port Ilse"), ("Dmitri", "Kessel")]
INFO = InsertedSpan("<information>", "</information>")


def _examples(tok):  # type: ignore[no-untyped-def]
    out = []
    for name, place in FACTS * 4:
        prompt = f"Question: Where was {name} born?\n"
        completion = (
            f"<search> {name} birthplace </search><information>{name} was born in {place}.</information>"
            f"<answer> {place} </answer>"
        )
        ids, labels = build_example(prompt, completion, tok, [INFO], eos_id=tok.eos_token_id)
        out.append({"input_ids": ids, "labels": labels})
    return out


@pytest.fixture(scope="module")
def tok():  # type: ignore[no-untyped-def]
    texts = [f"{n} was born in {p}. Where was {n} born?" for n, p in FACTS] * 10
    return train_tokenizer(texts, TokenizerConfig(vocab_size=350))


def _config(out: Path, steps: int, save_steps: int = 1000, logging_steps: int = 5) -> SFTConfig:
    return SFTConfig(
        output_dir=out,
        optim=OptimConfig(max_steps=steps, batch_size=4, learning_rate=3e-3, warmup_ratio=0.0, scheduler="constant"),
        logging_steps=logging_steps,
        save_steps=save_steps,
    )


def _model(tok):  # type: ignore[no-untyped-def]
    shape = ModelConfig(hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2, num_kv_heads=1)
    return build_model(shape, tok)


@pytest.mark.slow
def test_20_steps_lower_the_loss_and_change_every_trained_parameter(tok, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = _model(tok)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    result = run_sft(_config(tmp_path, 20), model, tok, _examples(tok), progress=False)
    assert result.steps == 20
    curve = json.loads((tmp_path / "loss_curve.json").read_text())
    assert [p["step"] for p in curve] == [5, 10, 15, 20]
    assert curve[-1]["loss"] < curve[0]["loss"]
    assert (tmp_path / "loss_curve.png").stat().st_size > 0
    for name, p in model.named_parameters():
        assert p.requires_grad, name
        assert not torch.equal(p.detach(), before[name]), f"{name} did not change"
    # the final model is an ordinary HF checkpoint
    from transformers import AutoModelForCausalLM

    again = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert sum(p.numel() for p in again.parameters()) == sum(p.numel() for p in model.parameters())


@pytest.mark.slow
def test_resume_continues_from_the_last_checkpoint(tok, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run_sft(_config(tmp_path, 3, save_steps=3, logging_steps=1), _model(tok), tok, _examples(tok), progress=False)
    ckpt = last_checkpoint(tmp_path)
    assert ckpt is not None and ckpt.name == "checkpoint-3"
    # "interrupted" at step 3 of 5: a second call with the same run folder starts at step 3, not 0
    result = run_sft(_config(tmp_path, 5, logging_steps=1), _model(tok), tok, _examples(tok), progress=False)
    assert result.steps == 5
    steps = [h["step"] for h in result.log_history if "loss" in h]
    assert steps == [1, 2, 3, 4, 5]  # history restored from the checkpoint, then continued
    # throughput counts the 2 steps this call ran (2 steps x 4 rows x mean row length), not the 3 restored ones
    ex = _examples(tok)
    assert result.trained_tokens == int(2 * 4 * sum(len(e["input_ids"]) for e in ex) / len(ex))
    no_resume = replace(_config(tmp_path, 2), resume=False)
    assert run_sft(no_resume, _model(tok), tok, _examples(tok), progress=False).steps == 2


def test_to_dataset_drops_rows_with_nothing_to_learn() -> None:
    ds = to_dataset([{"input_ids": [1, 2], "labels": [-100, -100]}, {"input_ids": [1, 2], "labels": [-100, 2]}])
    assert ds.num_rows == 1 and ds[0]["labels"] == [-100, 2]


DEMO_CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "demo"


@pytest.mark.parametrize("name", sorted(p.name for p in DEMO_CONFIGS.glob("sft*.yaml")))
def test_demo_configs_load(name: str) -> None:
    """The committed recipes' configs parse into SFTConfig (a typo in a field name would fail here, not after the
    hour-long data build), and a curriculum stage's `previous_stage` exports exactly the model it starts from."""
    from effirag.config import load_config

    cfg = load_config(SFTConfig, DEMO_CONFIGS / name)
    in_progress = {  # not yet promoted to the demo checkpoint
        "sft_copyinit.yaml": Path("runs/export-copyinit"),
        "sft_copyfirst.yaml": Path("runs/export-copyfirst"),
        "sft_stage1.yaml": Path("runs/export-copyfirst-stage1"),
        "sft_induction.yaml": Path("runs/export-induction-stage1"),
        "sft_induction_full.yaml": Path("runs/export-induction-stage2-recipe"),
        "sft_induction_decide.yaml": Path("runs/export-hop-decide"),
        "sft_induction_recall.yaml": Path("runs/export-he-recall"),
        "sft_onepass.yaml": Path("runs/export-onepass-policy"),  # the checkpoint before the chain's
        "sft_continue.yaml": Path("runs/export-demo-policy-continue"),  # a candidate, promoted by hand
        "sft_decide2.yaml": Path("runs/export-he-final"),  # stage 5, the checkpoint until item 29
        "sft_k1.yaml": Path("runs/export-k1-continue"),  # ablations of item 29's stage 6 (sft_search.yaml)
        "sft_k1_search_cmp.yaml": Path("runs/export-k1-search-cmp-continue"),
        "sft_noreplay.yaml": Path("runs/export-k1-search-noreplay"),
        "sft_search.yaml": Path("runs/export-k1-search-continue"),  # stage 6 until item 30
        "sft_read.yaml": Path("runs/export-k1-read"),  # stage 6 from item 30 to item 31 (300 steps)
        "sft_read_noreplay.yaml": Path("runs/export-k1-read-noreplay"),  # candidates of stage 6 (item 30)
        "sft_read_seed2.yaml": Path("runs/export-k1-read-seed2"),
        "sft_read_pairs.yaml": Path("runs/export-k1-read-pairs"),
        "sft_read_pairs_cmp.yaml": Path("runs/export-k1-read-pairs-cmp"),
        "sft_read_heavy.yaml": Path("runs/export-k1-read-heavy"),
        "sft_continue_lowlr.yaml": Path("runs/export-demo-policy-lowlr"),  # candidates of item 31
        "sft_read_long.yaml": Path("runs/export-k1-read-long"),
        "sft_read_reasonrag.yaml": Path("runs/export-k1-read-reasonrag"),
        "sft_read_compare.yaml": Path("runs/export-k1-read-compare"),  # candidates of item 32
        "sft_read_compare_half.yaml": Path("runs/export-k1-read-compare-half"),
        "sft_compare_continue.yaml": Path("runs/export-compare-continue"),
        "sft_read_long2.yaml": Path("runs/export-k1-read-long2"),  # stage 6 from item 31 to item 32
        "sft_read_weighted.yaml": Path("runs/export-read-weighted"),  # candidates of item 33
        "sft_compare_final.yaml": Path("runs/export-compare-final"),
        "sft_read_long3.yaml": Path("runs/export-k1-read-long3"),  # stage 6 of item 34, exported by sft.yaml
        "sft_lowlr_from_long2.yaml": Path("runs/export-lowlr-from-long2"),  # stage 7 from item 32 to item 34
        "sft_long3_lowlr.yaml": Path("runs/export-long3-lowlr"),  # candidates of item 34
        "sft_long3_compare.yaml": Path("runs/export-long3-compare"),
        "sft_read_compare_long.yaml": Path("runs/export-k1-read-compare-long"),  # candidate of item 35
        "sft_long3_drill.yaml": Path("runs/export-long3-drill"),  # candidate of item 36
        "sft_compare_drill.yaml": Path("runs/export-compare-drill"),  # candidates of items 37-38
        "sft_compare_drill_evidence.yaml": Path("runs/export-compare-drill-evidence"),
        "sft_compare_both_orders.yaml": Path("runs/export-compare-both-orders"),  # candidate of item 39
        "sft_read_compare_4800.yaml": Path("runs/export-k1-read-compare-4800"),  # item 35's stage, twice as long
        "sft_compare_decide.yaml": Path("runs/export-compare-decide"),  # candidates of item 40
        "sft_compare_decide_hops.yaml": Path("runs/export-compare-decide-hops"),
        "sft_compare_decide_hops15.yaml": Path("runs/export-compare-decide-hops15"),
    }
    assert cfg.world is not None and cfg.export_dir == in_progress.get(name, Path("checkpoints/demo-policy"))
    if cfg.previous_stage is not None:
        prev = load_config(SFTConfig, DEMO_CONFIGS.parents[1] / cfg.previous_stage)
        assert prev.export_dir == cfg.model
    assert cfg.sft_data.max_inserted_tokens == 160  # the demo engine's observation budget


@pytest.mark.slow
def test_lora_adapts_every_linear_layer_of_lfm2_and_saves_a_merged_model(tok, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """With the default ``target_modules`` (peft's ``all-linear``) LoRA reaches the layers LFM2 names differently
    from Qwen (attention ``out_proj``, the convolution's ``in_proj``/``out_proj``): after a few steps those weights
    of the merged checkpoint moved, while what LoRA does not adapt (embeddings, norms, the depthwise conv kernel)
    did not; the saved model is a plain checkpoint of the base model's size."""
    from transformers import AutoModelForCausalLM

    shape = ModelConfig(architecture="lfm2", hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2,
                        num_kv_heads=1, conv_layers=(0,))  # fmt: skip
    model = build_model(shape, tok)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    config = replace(_config(tmp_path, 6), lora=LoraConfig(enabled=True, r=4, alpha=8, dropout=0.0))
    run_sft(config, model, tok, _examples(tok), progress=False)
    merged = dict(AutoModelForCausalLM.from_pretrained(tmp_path).named_parameters())
    assert merged.keys() == before.keys()
    moved = {n for n in merged if not torch.equal(merged[n].detach(), before[n])}
    for name in ("layers.0.conv.in_proj.weight", "layers.0.conv.out_proj.weight",
                 "layers.1.self_attn.out_proj.weight", "layers.1.self_attn.q_proj.weight"):  # fmt: skip
        assert f"model.{name}" in moved, name
    assert not any("embed" in n or "norm" in n or "conv.conv" in n for n in moved), sorted(moved)


def test_checkpointing_switch_takes_the_name_of_the_installed_transformers() -> None:
    """transformers 5.x renamed the switch and warns on the old name: the installed version gets its own name, with
    no FutureWarning, and a class with only the old name still gets the old one."""
    import dataclasses
    import warnings

    from trl import SFTConfig as TRLConfig

    from effirag.train.sft import checkpointing_arg

    @dataclasses.dataclass
    class OldArgs:
        gradient_checkpointing: bool = False

    assert checkpointing_arg(OldArgs, True) == {"gradient_checkpointing": True}
    for enabled in (True, False):
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            args = TRLConfig(output_dir="unused", use_cpu=True, report_to=[], **checkpointing_arg(TRLConfig, enabled))
        assert args.gradient_checkpointing is enabled
