"""The prepared SmolLM2-135M-Instruct folder on vLLM against HF: greedy chat completions of a few prompts, token ids
compared, and each backend's load and generation seconds. Run in .venv-vllm (vLLM pins an older transformers):

    PYTHONPATH=src .venv-vllm/bin/python benchmarks/smollm2_vllm_check.py [--model DIR] [--tokens 24]

Prints one JSON object: per prompt the HF and vLLM completions and the length of their common prefix of ids.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PROMPTS = (
    "Who wrote Hamlet? Answer in a few words.",
    "What is the capital of France?",
    "You are a search agent. Search with <search> query </search> and answer with <answer> answer </answer>.\n"
    "Question: Who directed the film Jaws?\n",
)


def _common(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def main() -> None:
    from effirag.llm.base import GenerationConfig
    from effirag.llm.hf import HFGenerator
    from effirag.llm.models import default_cache_dir
    from effirag.llm.vllm_engine import VLLMGenerator

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=Path, default=default_cache_dir() / "smollm2-135m-instruct")
    ap.add_argument("--tokens", type=int, default=24)
    args = ap.parse_args()
    cfg = GenerationConfig(max_new_tokens=args.tokens)
    t = time.perf_counter()
    hf = HFGenerator(args.model, device="cpu", dtype="float32", chat=True).load()
    hf_load = time.perf_counter() - t
    prompts = [hf.format_prompt(p) for p in PROMPTS]
    t = time.perf_counter()
    h = [c[0] for c in hf.generate(prompts, cfg)]
    hf_gen = time.perf_counter() - t
    t = time.perf_counter()
    vl = VLLMGenerator(args.model, dtype="float32", max_model_len=2048, kv_cache_gb=0.5, chat=True).load()
    vllm_load = time.perf_counter() - t
    t = time.perf_counter()
    v = [c[0] for c in vl.generate(prompts, cfg)]
    vllm_gen = time.perf_counter() - t
    vl.close()
    rows = [
        {
            "prompt": p,
            "hf": a.text,
            "vllm": b.text,
            "common_prefix_ids": _common(list(a.token_ids), list(b.token_ids)),
            "hf_ids": len(a.token_ids),
            "vllm_ids": len(b.token_ids),
        }
        for p, a, b in zip(PROMPTS, h, v, strict=True)
    ]
    seconds = {"hf_load": hf_load, "hf_generate": hf_gen, "vllm_load": vllm_load, "vllm_generate": vllm_gen}
    print(json.dumps({"model": str(args.model), "rows": rows, "seconds": seconds}, indent=1))


if __name__ == "__main__":
    main()
