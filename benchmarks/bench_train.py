"""Training throughput of the SFT recipe: tokens/s of TRL SFTTrainer steps for the demo model shape (Qwen2) and a
peer (the same shape as Llama, and a smaller 0.75M-class Qwen2), on fixed pretokenized rows.

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
from pathlib import Path

from effirag.train.model import ModelConfig, build_model, count_parameters
from effirag.train.sft import OptimConfig, SFTConfig, run_sft
from effirag.train.tokenizer import TokenizerConfig, train_tokenizer

SHAPES = {
    "qwen2-demo (128x4)": ModelConfig(),
    "llama-demo (128x4)": ModelConfig(architecture="llama"),
    "qwen2-small (96x3)": ModelConfig(hidden_size=96, intermediate_size=256, num_layers=3, num_heads=4, num_kv_heads=2),
}


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
    print(json.dumps({"steps": args.steps, "batch": args.batch, "length": args.length, "results": out}, indent=1))


if __name__ == "__main__":
    main()
