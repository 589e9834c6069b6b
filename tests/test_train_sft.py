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
    # "interrupted" at step 3 of 5: a second call with the same run folder starts at step 3, not 0; keeping one
    # checkpoint, it deletes checkpoint-3 (the resume point) once it has saved checkpoint-4
    again = replace(_config(tmp_path, 5, save_steps=1, logging_steps=1), save_total_limit=1)
    result = run_sft(again, _model(tok), tok, _examples(tok), progress=False)
    assert result.steps == 5 and not (tmp_path / "checkpoint-3").exists(), sorted(p.name for p in tmp_path.iterdir())
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
    from peft import PeftModel  # the adapter alone is saved too, and on the base model gives the merged logits

    ids = torch.tensor([[1, 2, 3, 4]])
    base = build_model(shape, tok)
    assert base.load_state_dict(before, strict=False).unexpected_keys == []  # the weights training started from
    adapted = PeftModel.from_pretrained(base.eval(), str(tmp_path / "adapter"))
    merged_model = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        assert torch.allclose(adapted(ids).logits, merged_model(ids).logits, atol=1e-5)


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
