"""Rollout throughput, HF ``generate`` vs vLLM (in process), same weights, same prompt ids, same sampling settings.

The model is a Qwen2-shaped random-init model built here from a config (nothing downloaded; the byte-level test
tokenizer of tests/tiny_models.py, vocab 384, so nearly every parameter sits in the transformer blocks): hidden 768,
intermediate 3584, ``--layers`` blocks of 9.8 M parameters (12: ~120 M, 14: ~138 M); or, with ``--model DIR``, a model
folder (e.g. checkpoints/demo-policy). Prompts: the first ``--prompts`` real MuSiQue questions of
../shared/data/musique_mini behind a Search-R1 style instruction, encoded once and given to both backends as ids.
Sampling at temperature 1, ``--new-tokens`` per completion, no stop strings; tokens/s counts the tokens each backend
actually generated (an end-of-sequence token ends a completion early). Each backend is warmed up on one short request
first; the engine start is timed apart.
One run (the machine is shared: the load average is printed with the result).

Run it in the venv that has vLLM (``make vllm-venv``):

    .venv-vllm/bin/python benchmarks/bench_vllm.py [--prompts 64] [--new-tokens 128] [--dtype float32] [--eager] \
        [--layers 12 | --model DIR]

BENCHMARKS.md's table: ``--prompts 32 --new-tokens 64 --eager --model DIR`` for checkpoints/demo-policy and the folders
``effirag models prepare smollm2-135m-instruct`` and ``effirag models prepare gemma-3-270m`` print.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
DATA = Path(os.environ.get("EFFIRAG_SHARED_DATA", REPO.parent / "shared" / "data"))


def prompts(n: int) -> list[str]:
    qs = json.loads((DATA / "musique_mini" / "questions.json").read_text(encoding="utf-8"))
    head = "Answer the question. Think in <think></think>, search with <search> query </search>.\nQuestion: "
    return [head + q["question"] + "\n<think>" for q in qs[:n]]


def run(gen: Any, ids: list[list[int]], new_tokens: int) -> dict[str, float]:
    from effirag.llm.base import GenerationConfig

    warm = GenerationConfig(max_new_tokens=4, temperature=1.0, seed=0)
    gen.generate_ids(ids[:1], warm)
    cfg = GenerationConfig(max_new_tokens=new_tokens, temperature=1.0, seed=1)
    t0 = time.perf_counter()
    out = gen.generate_ids(ids, cfg)
    seconds = time.perf_counter() - t0
    tokens = sum(len(c.token_ids) for cs in out for c in cs)
    return {"seconds": round(seconds, 2), "tokens": tokens, "tokens_per_s": round(tokens / seconds, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    ap.add_argument("--eager", action="store_true", help="vLLM without torch.compile")
    ap.add_argument("--layers", type=int, default=12, help="transformer blocks of the model built from a config")
    ap.add_argument("--model", type=Path, default=None, help="a model folder instead of the one built from a config")
    args = ap.parse_args()

    from effirag.llm.hf import HFGenerator
    from effirag.llm.vllm_engine import VLLMGenerator
    from tiny_models import make_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or make_tiny_model(
            tmp, arch="qwen2", hidden=768, layers=args.layers, heads=12, kv_heads=4, intermediate=3584, init_std=0.02
        )
        hf = HFGenerator(model, device="cpu", dtype=args.dtype, max_batch_size=args.prompts).load()
        params = sum(p.numel() for p in hf.model.parameters())
        ids = [hf.encode(p, prompt=True) for p in prompts(args.prompts)]
        result: dict[str, Any] = {
            "model": str(args.model) if args.model else f"qwen2 from config, {args.layers} layers",
            "parameters_m": round(params / 1e6, 1),
            "prompts": len(ids),
            "mean_prompt_tokens": round(sum(map(len, ids)) / len(ids), 1),
            "new_tokens": args.new_tokens,
            "dtype": args.dtype,
            "hf": run(hf, ids, args.new_tokens),
        }
        print(json.dumps({"partial": result}), file=sys.stderr, flush=True)  # kept if a slow vLLM part is killed
        del hf
        t0 = time.perf_counter()
        vllm = VLLMGenerator(model, dtype=args.dtype, kv_cache_gb=2.0, eager=args.eager).load()
        result["vllm_start_s"] = round(time.perf_counter() - t0, 1)
        result["vllm"] = run(vllm, ids, args.new_tokens)
        result["vllm_eager"] = args.eager
        result["speedup"] = round(result["vllm"]["tokens_per_s"] / result["hf"]["tokens_per_s"], 1)
        result["load_average"] = [round(x, 2) for x in os.getloadavg()]
        print(json.dumps(result, indent=2))
        vllm.close()


if __name__ == "__main__":
    main()
