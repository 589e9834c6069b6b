"""One policy update's forward and backward pass on a CPU: float32 against bfloat16 autocast (what ``bf16=true``
runs under the GRPO and DPO trainers on a machine without a GPU), with LoRA and gradient checkpointing as
``recipes/smollm2/grpo_searchr1_popqa.yaml`` trains. The two settings alternate, so load drift hits both alike; the
median of each is printed, with the bf16 loss's gap to float32 on the same batch.

    .venv/bin/python benchmarks/bench_bf16_update.py --model runs/sft-smollm2-lora --rows 4 --tokens 700 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any


def _pass(model: Any, ids: Any, bf16: bool) -> tuple[float, float]:
    """Seconds of one forward + backward over ``ids`` (rows × tokens), and its loss (mean next-token NLL)."""
    import torch

    start = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = model(input_ids=ids).logits  # rows × tokens × vocab
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    loss = -logp.gather(-1, ids[:, 1:, None]).mean()
    loss.backward()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - start, float(loss)


def main() -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a Hugging Face model folder")
    ap.add_argument("--rows", type=int, default=4, help="rows in one pass (the recipe's micro_batch_rows)")
    ap.add_argument("--tokens", type=int, default=700, help="tokens per row")
    ap.add_argument("--repeats", type=int, default=3, help="passes per setting, after one warm-up pass each")
    args = ap.parse_args()
    gen = torch.Generator().manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    model: Any = get_peft_model(base, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear"))
    model.gradient_checkpointing_enable()
    model.enable_input_require_grads()
    model.train()
    ids = torch.randint(0, model.config.vocab_size, (args.rows, args.tokens), generator=gen)
    seconds: dict[bool, list[float]] = {False: [], True: []}
    losses: dict[bool, float] = {}
    for i in range(2 * (args.repeats + 1)):
        bf16 = i % 2 == 1
        s, losses[bf16] = _pass(model, ids, bf16)
        if i >= 2:  # the first pass of each setting warms up
            seconds[bf16].append(s)
    fp32_s, bf16_s = statistics.median(seconds[False]), statistics.median(seconds[True])
    result = {
        "rows": args.rows, "tokens": args.tokens, "threads": torch.get_num_threads(),
        "fp32_s": round(fp32_s, 2), "bf16_s": round(bf16_s, 2), "speedup": round(fp32_s / bf16_s, 2),
        "loss_fp32": round(losses[False], 4), "loss_gap": round(abs(losses[True] - losses[False]), 4),
    }  # fmt: skip
    print(json.dumps(result))


if __name__ == "__main__":
    main()
