"""Training throughput of the SFT recipe: tokens/s of TRL SFTTrainer steps for the committed demo model's shape
(LFM2, read from recipes/demo_policy/stage1_induction.yaml) and peers measured in the same run: the same rows through a
plain torch loop (forward, masked loss, AdamW — what TRL adds on top is the difference), Qwen2 and Llama of the same
width and depth (attention in every block), and a smaller 128-wide Qwen2.

    .venv/bin/python benchmarks/bench_train.py --repeats 3 --steps 10

Each repeat trains a fresh model for ``--steps`` optimiser steps (batch ``--batch`` rows of ``--length`` tokens, half
of each row masked as TeaRAG eq. 4 would) and reports processed tokens / wall seconds of ``trainer.train``; the
median over repeats is printed as JSON. The first step of every run is included (a real run pays it too).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

import yaml

from effirag.config import from_dict
from effirag.train.model import ModelConfig, build_model, count_parameters
from effirag.train.sft import OptimConfig, SFTConfig, run_sft
from effirag.train.tokenizer import TokenizerConfig, train_tokenizer

STAGE1 = Path(__file__).resolve().parents[1] / "recipes" / "demo_policy" / "stage1_induction.yaml"
DEMO = from_dict(SFTConfig, yaml.safe_load(STAGE1.read_text("utf-8"))["train"], source=str(STAGE1)).model_shape
SHAPES = {
    "lfm2-demo (256x4, committed)": DEMO,
    "qwen2 (256x4)": replace(DEMO, architecture="qwen2", conv_layers=(), copy_init=0.0, induction_init=0.0),
    "llama (256x4)": replace(DEMO, architecture="llama", conv_layers=(), copy_init=0.0, induction_init=0.0),
    "qwen2-small (128x4)": ModelConfig(),
}


def plain_torch_rate(shape: ModelConfig, tok: object, rows: list[dict[str, list[int]]], batch: int, seed: int) -> float:
    """Peer: the same rows and optimiser through a hand-written loop (no Trainer, no collator, no callbacks)."""
    import time

    import torch

    model = build_model(shape, tok)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    n = 0
    for i in range(0, len(rows), batch):
        chunk = rows[i : i + batch]
        ids = torch.tensor([r["input_ids"] for r in chunk])  # (batch, length)
        labels = torch.tensor([r["labels"] for r in chunk])  # (batch, length), -100 = masked
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        n += ids.numel()
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--length", type=int, default=512)
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    words = [f"w{i}" for i in range(500)]
    rng = random.Random(0)
    texts = [" ".join(rng.choice(words) for _ in range(50)) for _ in range(200)]
    tok = train_tokenizer(texts, TokenizerConfig(vocab_size=4096, min_frequency=1))
    vocab = len(tok)
    rows = []
    for _ in range(args.batch * args.steps):
        ids = [rng.randrange(vocab) for _ in range(args.length)]
        rows.append({"input_ids": ids, "labels": [-100] * (args.length // 2) + ids[args.length // 2 :]})
    out: dict[str, dict[str, float]] = {}
    for name, shape in SHAPES.items():
        rates = []
        for r in range(args.repeats):
            model = build_model(shape, tok)
            with tempfile.TemporaryDirectory() as d:
                cfg = SFTConfig(
                    output_dir=Path(d),
                    optim=OptimConfig(max_steps=args.steps, batch_size=args.batch, seed=r),
                    save_steps=10_000,
                    logging_steps=args.steps,
                )
                res = run_sft(cfg, model, tok, rows, progress=False)
            rates.append(args.steps * args.batch * args.length / res.seconds)
        out[name] = {
            "parameters_M": round(count_parameters(model) / 1e6, 3),
            "tokens_per_s_median": round(statistics.median(rates), 1),
            "tokens_per_s_runs": [round(x, 1) for x in rates],
        }
    peer = [plain_torch_rate(DEMO, tok, rows, args.batch, r) for r in range(args.repeats)]
    out["plain torch loop, lfm2-demo shape (peer)"] = {
        "tokens_per_s_median": round(statistics.median(peer), 1),
        "tokens_per_s_runs": [round(x, 1) for x in peer],
    }
    print(json.dumps({"steps": args.steps, "batch": args.batch, "length": args.length, "results": out}, indent=1))


if __name__ == "__main__":
    main()
