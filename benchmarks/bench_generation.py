"""Raw backend batching: 32 prompts generated in one batched call vs one prompt at a time.

The prompts are the first 32 real MuSiQue questions of ../shared/data/musique_mini (Search-R1-style instruction
prefix). The policy is a tiny random-init Qwen2 built from a config (≈3 M parameters; nothing is downloaded).
Greedy decoding, a fixed ``max_new_tokens`` and no stop strings, so both ways generate the same tokens (checked).

Measured, each as the median of ``--repeats`` interleaved runs:
- ``HFGenerator`` batched (``max_batch_size=32``) vs the same generator called once per prompt;
- with ``--http``: ``OpenAIGenerator`` → ``effirag serve``'s app on 127.0.0.1, 32 concurrent requests (merged by the
  server's micro-batcher) vs ``concurrency=1``;
- with ``--kv-cache``: ``HFGenerator`` batched (which always generates with the KV cache) vs the peer, the same model
  with the cache off (what generation did when a model's config said ``use_cache: false``, as transformers' Trainer
  saves it); ``--model DIR`` measures a local model (e.g. ``checkpoints/demo-policy``) instead of the tiny one.

    .venv/bin/python benchmarks/bench_generation.py [--repeats 3] [--new-tokens 64] [--http] [--json]
    .venv/bin/python benchmarks/bench_generation.py --kv-cache --model checkpoints/demo-policy --prompts 20
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from effirag.llm.base import Completion, GenerationConfig  # noqa: E402
from effirag.llm.hf import HFGenerator  # noqa: E402
from tiny_models import make_tiny_model  # noqa: E402

DATA = Path(os.environ.get("EFFIRAG_SHARED_DATA", REPO.parent / "shared" / "data"))


def prompts(n: int) -> list[str]:
    qs = json.loads((DATA / "musique_mini" / "questions.json").read_text(encoding="utf-8"))
    head = "Answer the question. Think in <think></think>, search with <search> query </search>.\nQuestion: "
    return [head + q["question"] + "\n<think>" for q in qs[:n]]


def without_cache(model: Any) -> None:
    """The peer of ``--kv-cache``: every ``generate`` call of ``model`` runs with ``use_cache=False`` (each step re-runs
    the whole sequence), as it did when the model's config said so."""
    plain = model.generate

    def generate(*args: Any, **kw: Any) -> Any:
        kw["generation_config"].use_cache = False
        return plain(*args, **kw)

    model.generate = generate


def timed(fn: Callable[[], list[list[Completion]]]) -> tuple[float, list[list[Completion]]]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--http", action="store_true", help="also measure the OpenAI backend against effirag serve")
    ap.add_argument("--kv-cache", action="store_true", help="peer: the same model with the KV cache off")
    ap.add_argument("--model", type=Path, help="local model folder (default: a tiny random-init Qwen2)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    import torch

    tmp = Path(tempfile.mkdtemp(prefix="effirag-bench-gen-"))
    path = args.model or make_tiny_model(tmp, arch="qwen2", hidden=256, layers=4, heads=8, kv_heads=4, intermediate=688)
    gen = HFGenerator(path, device="cpu", max_batch_size=args.prompts).load()
    n_params = sum(p.numel() for p in gen.model.parameters())
    ps = prompts(args.prompts)
    cfg = GenerationConfig(max_new_tokens=args.new_tokens)
    gen.generate(ps[:2], cfg)  # warm-up

    ways: dict[str, Callable[[], list[list[Completion]]]] = {"hf batched": lambda: gen.generate(ps, cfg)}
    peer = "hf one by one"
    if args.kv_cache:
        peer = "hf batched, no KV cache"
        uncached = HFGenerator(path, device="cpu", max_batch_size=args.prompts).load()
        without_cache(uncached.model)
        ways[peer] = lambda: uncached.generate(ps, cfg)
    else:
        ways[peer] = lambda: [gen.generate([p], cfg)[0] for p in ps]
    closers: list[Callable[[], None]] = []
    if args.http:
        from effirag.llm.openai_http import OpenAIGenerator
        from effirag.serve.background import BackgroundServer
        from effirag.serve.llm import create_app

        srv = BackgroundServer(create_app(gen, "tiny", max_wait_ms=20.0)).__enter__()
        many = OpenAIGenerator(srv.url + "/v1", "tiny", concurrency=args.prompts)
        one = OpenAIGenerator(srv.url + "/v1", "tiny", concurrency=1)
        ways["http 32 concurrent"] = lambda: many.generate(ps, cfg)
        ways["http sequential"] = lambda: one.generate(ps, cfg)
        closers += [many.close, one.close, lambda: srv.__exit__(None, None, None)]

    secs: dict[str, list[float]] = {k: [] for k in ways}
    outputs: dict[str, list[list[Completion]]] = {}
    for _ in range(args.repeats):
        for name, fn in ways.items():
            s, outputs[name] = timed(fn)
            secs[name].append(s)
    for c in closers:
        c()
    ref = [[c.token_ids for c in cs] for cs in outputs[peer]]
    same = {k: [[c.token_ids for c in cs] for cs in v] == ref for k, v in outputs.items()}
    tokens = {k: sum(len(c.token_ids) for cs in v for c in cs) for k, v in outputs.items()}
    result = {
        "model_params": n_params,
        "prompts": args.prompts,
        "new_tokens": args.new_tokens,
        "repeats": args.repeats,
        "torch_threads": torch.get_num_threads(),
        "ways": {
            k: {
                "median_s": statistics.median(v),
                "runs_s": [round(x, 3) for x in v],
                "tokens": tokens[k],
                "tokens_per_s": tokens[k] / statistics.median(v),
                "same_tokens_as_peer": same[k],
            }
            for k, v in secs.items()
        },
    }
    w = result["ways"]
    result["speedup_hf"] = w["hf batched"]["tokens_per_s"] / w[peer]["tokens_per_s"]
    if args.http:
        result["speedup_http"] = w["http 32 concurrent"]["tokens_per_s"] / w["http sequential"]["tokens_per_s"]
    if args.json:
        print(json.dumps(result, indent=1))
        return
    name = args.model or "tiny qwen2"
    print(f"{name} {n_params / 1e6:.2f} M params, {args.prompts} prompts × {args.new_tokens} new tokens, greedy")
    for k, v in w.items():
        print(
            f"{k:20s} median {v['median_s']:.2f}s  {v['tokens_per_s']:.0f} tok/s  runs {v['runs_s']}  "
            f"same tokens as {peer}: {v['same_tokens_as_peer']}"
        )
    print(f"speedup hf: {result['speedup_hf']:.1f}×" + (f", http: {result['speedup_http']:.1f}×" if args.http else ""))


if __name__ == "__main__":
    main()
