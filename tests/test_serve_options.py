"""`effirag serve --limits --max-wait-ms --max-batch-size` and `effirag serve retrieval --limits`, each server run as
its own process on 127.0.0.1 and each option checked by what it changes; and `effirag train export`."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from effirag.cli.main import app
from effirag.retrieval.index import IndexConfig, build_index
from effirag.types import Passage
from test_serve_shutdown import _start
from tiny_models import make_tiny_model


def _stop(proc: object) -> None:
    proc.send_signal(signal.SIGTERM)  # type: ignore[attr-defined]
    try:
        proc.wait(timeout=20)  # type: ignore[attr-defined]
    finally:
        if proc.poll() is None:  # type: ignore[attr-defined]
            proc.kill()  # type: ignore[attr-defined]


@pytest.mark.slow
def test_serve_retrieval_limits_file(tmp_path: Path) -> None:
    """limits.yaml sets max_topk 2 and default_topk 1: a request without topk gets 1 document, topk 2 gets 2, and
    topk 3 is refused (422, naming topk); the defaults (3 and 100) would answer 3 and 3."""
    passages = [Passage(f"p{i}", f"Title {i}", f"Passage {i} about the river and the city.") for i in range(6)]
    build_index(passages, tmp_path / "index", config=IndexConfig(dense=False), corpus_path="mem")
    limits = tmp_path / "limits.yaml"
    limits.write_text("max_topk: 2\ndefault_topk: 1\n", encoding="utf-8")
    proc, url = _start(["serve", "retrieval", "--index", str(tmp_path / "index"), "--limits", str(limits)])
    try:
        one = httpx.post(url + "/retrieve", json={"queries": ["river city"]}, timeout=30)
        two = httpx.post(url + "/retrieve", json={"queries": ["river city"], "topk": 2}, timeout=30)
        three = httpx.post(url + "/retrieve", json={"queries": ["river city"], "topk": 3}, timeout=30)
    finally:
        _stop(proc)
    assert one.status_code == 200 and len(one.json()["result"][0]) == 1, one.text
    assert two.status_code == 200 and len(two.json()["result"][0]) == 2, two.text
    assert three.status_code == 422 and "topk" in three.text, three.text


@pytest.mark.slow
def test_serve_llm_limits_max_wait_and_batch_size(tmp_path: Path) -> None:
    """One server with --limits (max_prompts 2), --max-wait-ms 3000 and --max-batch-size 1: a 3-prompt request is
    refused (400, naming prompts); an unseeded 2-prompt request waits the 3 s for company before generating (at
    least 2.9 s; the default 5 ms answers this tiny model in well under that) and its greedy completions, generated
    one row per forward batch, equal those of a seeded request (which skips the wait)."""
    model = make_tiny_model(tmp_path / "model", arch="qwen2", seed=4)
    limits = tmp_path / "limits.yaml"
    limits.write_text("max_prompts: 2\n", encoding="utf-8")
    args = ["serve", "--model", str(model), "--model-name", "tiny", "--device", "cpu", "--limits", str(limits)]
    proc, url = _start([*args, "--max-wait-ms", "3000", "--max-batch-size", "1"])
    body = {"model": "tiny", "prompt": ["The river", "The city of"], "max_tokens": 4, "temperature": 0.0}
    try:
        too_many = httpx.post(url + "/v1/completions", json={**body, "prompt": ["a", "b", "c"]}, timeout=60)
        t0 = time.monotonic()
        waited = httpx.post(url + "/v1/completions", json=body, timeout=60)
        waited_s = time.monotonic() - t0
        seeded = httpx.post(url + "/v1/completions", json={**body, "seed": 1}, timeout=60)
    finally:
        _stop(proc)
    assert too_many.status_code == 400 and "prompt" in too_many.text, too_many.text
    assert waited.status_code == 200 and seeded.status_code == 200, (waited.text, seeded.text)
    assert waited_s >= 2.9
    texts = [c["text"] for c in waited.json()["choices"]]
    assert len(texts) == 2 and texts == [c["text"] for c in seeded.json()["choices"]]


def test_train_export_copies_a_checkpoint_as_a_policy(tmp_path: Path) -> None:
    """A checkpoint-2 of an SFT run: the model, tokenizer and run config are copied, the loss curve is written from
    trainer_state.json (the two logged losses), and the optimiser state is left behind; a folder without
    trainer_state.json is refused in one line."""
    run = tmp_path / "run"
    ck = run / "checkpoint-2"
    ck.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        (ck / name).write_text(name, encoding="utf-8")
    (ck / "optimizer.pt").write_bytes(b"state")
    history = [{"step": 1, "loss": 2.5, "learning_rate": 1e-4}, {"step": 2, "loss": 1.5}, {"step": 2, "eval": 1}]
    (ck / "trainer_state.json").write_text(json.dumps({"log_history": history}), encoding="utf-8")
    (run / "sft_config.json").write_text("{}", encoding="utf-8")
    r = CliRunner().invoke(app, ["train", "export", "--checkpoint", str(ck), "--to", str(tmp_path / "policy")])
    assert r.exit_code == 0, r.output
    out = tmp_path / "policy"
    assert (out / "model.safetensors").read_text(encoding="utf-8") == "model.safetensors"
    assert (out / "sft_config.json").is_file() and not (out / "optimizer.pt").exists()
    curve = json.loads((out / "loss_curve.json").read_text(encoding="utf-8"))
    assert [(p["step"], p["loss"]) for p in curve] == [(1, 2.5), (2, 1.5)]
    bad = CliRunner().invoke(app, ["train", "export", "--checkpoint", str(run), "--to", str(tmp_path / "x")])
    assert bad.exit_code != 0 and "no trainer_state.json" in bad.output


def test_train_export_merges_a_lora_checkpoint_onto_its_base(tmp_path: Path) -> None:
    """A LoRA checkpoint (an RL run stopped early holds the adapter alone): the export is a plain model folder whose
    logits are the base-plus-adapter model's (max |Δ| < 1e-4 at logits up to about 6: merged weights round apart by
    about 1e-5 in float32; the adapter itself moves them by more than 1), with the adapter alone in adapter/. The base
    is the adapter config's base_model_name_or_path, or --base; a base that is no model folder fails naming the
    field."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = make_tiny_model(tmp_path / "base", arch="llama", seed=2)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    peft = get_peft_model(AutoModelForCausalLM.from_pretrained(base), lora)  # random B: the adapter changes logits
    ck = tmp_path / "run" / "checkpoint-8"
    peft.save_pretrained(str(ck))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (ck / name).write_bytes((base / name).read_bytes())
    (ck / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 8, "loss": 0.1}]}), encoding="utf-8")
    ids = torch.tensor([[1, 5, 9, 13, 17]])
    with torch.no_grad():
        want = peft(input_ids=ids).logits  # [1, 5, vocab]
        plain = AutoModelForCausalLM.from_pretrained(base)(input_ids=ids).logits
    assert (want - plain).abs().max() > 1.0
    for extra, out in (([], tmp_path / "policy"), (["--base", str(base)], tmp_path / "policy2")):
        r = CliRunner().invoke(app, ["train", "export", "--checkpoint", str(ck), "--to", str(out), *extra])
        assert r.exit_code == 0, r.output
        with torch.no_grad():
            got = AutoModelForCausalLM.from_pretrained(out)(input_ids=ids).logits
        assert (got - want).abs().max() < 1e-4
        assert (out / "adapter" / "adapter_config.json").is_file() and not (out / "adapter_model.safetensors").exists()
    r = CliRunner().invoke(
        app, ["train", "export", "--checkpoint", str(ck), "--to", str(tmp_path / "x"), "--base", str(tmp_path)]
    )
    assert r.exit_code != 0 and "--base=" in r.output and "no config.json" in r.output
