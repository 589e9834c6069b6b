"""Can a model shape learn to copy from its context, and how many optimiser steps does it take?

Why: the embedded policy's failure is copying. After a full SFT run it still writes `<entities> V…` instead of the
question's entity, even when teacher-forced (BENCHMARKS.md, "Embedded default policy"). This probe trains a fresh
model of a given shape on rows `p + s + s` (random tokens `p`, `s`; the loss covers the second `s` except its first
token) with plain AdamW at a constant learning rate and prints the masked loss every `--every` steps. Without copying
the loss stays near ln(vocab). The peer in the same run is `--fixed`: `s` always has the same length, so one
*positional* head at a fixed offset can copy. The variable-length task needs a real induction head (match the
previous occurrence of the current token, emit what followed it).

    .venv/bin/python benchmarks/bench_copy.py --steps 3000 --vocab 512               # induction (variable length)
    .venv/bin/python benchmarks/bench_copy.py --steps 600 --fixed 24 --vocab 3796    # positional peer
    .venv/bin/python benchmarks/bench_copy.py --steps 1000 --vocab 64 --architecture lfm2 --conv-layers 0,2  # conv+attn
"""

from __future__ import annotations

import argparse
import math
import random
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", type=Path, default=Path("checkpoints/demo-policy"))
    ap.add_argument("--architecture", default="qwen2", help="qwen2, llama or lfm2")
    ap.add_argument("--conv-layers", default="", help="lfm2: comma-separated indices of convolution blocks")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--mlp", type=int, default=768)
    ap.add_argument("--emb-std", type=float, default=0.0, help="ModelConfig.embedding_init_std")
    ap.add_argument("--final-norm", type=float, default=0.0, help="ModelConfig.final_norm_init")
    ap.add_argument("--copy-init", type=float, default=0.0, help="ModelConfig.copy_init")
    ap.add_argument("--induction-init", type=float, default=0.0, help="ModelConfig.induction_init (lfm2)")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--vocab", type=int, default=512, help="token ids drawn from [300, 300 + vocab)")
    ap.add_argument("--min-length", type=int, default=8)
    ap.add_argument("--max-length", type=int, default=32)
    ap.add_argument("--fixed", type=int, default=0, help="> 0: every string has this length, no prefix (peer)")
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import torch
    from transformers import AutoTokenizer

    from effirag.train.model import ModelConfig, build_model

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    tok = AutoTokenizer.from_pretrained(str(args.tokenizer))
    shape = ModelConfig(
        architecture=args.architecture, hidden_size=args.hidden, intermediate_size=args.mlp, num_layers=args.layers,
        num_heads=args.heads, num_kv_heads=args.kv_heads, tie_word_embeddings=True, seed=0,
        conv_layers=tuple(int(i) for i in args.conv_layers.split(",") if i), embedding_init_std=args.emb_std,
        final_norm_init=args.final_norm, copy_init=args.copy_init, induction_init=args.induction_init,
    )  # fmt: skip
    model = build_model(shape, tok)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    rng = random.Random(0)
    print(f"chance level ln({args.vocab}) = {math.log(args.vocab):.3f}")
    t0 = time.perf_counter()
    for step in range(0, args.steps + 1):
        n = args.fixed or rng.randint(args.min_length, args.max_length)
        pre = 0 if args.fixed else rng.randint(0, 8)
        rows = [[rng.randrange(300, 300 + args.vocab) for _ in range(pre + n)] for _ in range(args.batch)]
        x = torch.tensor([r + r[pre:] for r in rows])  # (batch, pre + 2n)
        labels = x.clone()
        labels[:, : pre + n + 1] = -100  # only the predictable part of the second copy
        loss = model(input_ids=x, labels=labels).loss
        if step == 0:  # the start, before any update: a copy-ready initialisation copies here already
            print(f"step     0  loss {loss.item():.3f}", flush=True)
            continue
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % args.every == 0:
            print(f"step {step:5d}  loss {loss.item():.3f}  {time.perf_counter() - t0:6.0f} s", flush=True)


if __name__ == "__main__":
    main()
