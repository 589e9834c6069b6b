"""Gemma 3 270M (base model, ``effirag[gemma]``) on real data, and HF float32 vs llama.cpp Q4 generation speed.

Part 1 — QA through the HF backend with few-shot prompts (demos from the same file, removed from the questions
evaluated): PopQA and the MuSiQue slice, each with no retrieval (zero-shot), naive RAG over BM25 and dense, and
Search-R1 over BM25 and dense. Reports EM, F1, format rate, generated + inserted tokens per question and seconds per
question. Indexes: ``effirag index build --corpus ../shared/data/D/corpus.json --out DIR`` (BM25 + MiniLM dense).

Part 2 (``--throughput``) — generated tokens/s of the same few-shot prompts, greedy, a fixed number of new tokens, on
one CPU thread each: HFGenerator (float32 safetensors) vs llama-cpp-python's server on the Q4_K_M GGUF through
EffiRAG's OpenAI backend; median of ``--repeats`` interleaved runs.

    .venv/bin/python benchmarks/bench_gemma.py --popqa-index DIR --musique-index DIR [--popqa 50] [--musique 70]
        [--runs zeroshot,naive:sparse,naive:passage,searchr1:sparse,searchr1:passage] [--throughput] [--json]

On a GPU: ``--device cuda`` (HFGenerator then picks bfloat16, or float16 where the card lacks bf16; ``--dtype`` to
choose), ``--chunk 512 --batch 512`` so that every engine step of all the questions is one ``generate`` call,
and ``--encoder-device cuda`` to encode dense queries with sentence-transformers on the GPU (the index's own engine,
ONNX Runtime, runs on CPU only). Seconds per question are then the run's wall time over its questions (they run
batched, so one question alone takes longer). ``--model DIR`` uses a prepared HF folder instead of ``prepare()``;
``--rows FILE`` appends each run's row as one JSON line as soon as it finishes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("EFFIRAG_SHARED_DATA", REPO.parent / "shared" / "data"))

from effirag.agent import EngineConfig, get_protocol  # noqa: E402
from effirag.agent.protocols.fewshot import check_disjoint, split_demos  # noqa: E402
from effirag.data import load_questions  # noqa: E402
from effirag.eval.qa import evaluate_qa  # noqa: E402
from effirag.llm.base import GenerationConfig  # noqa: E402
from effirag.llm.hf import HFGenerator  # noqa: E402
from effirag.llm.models import prepare  # noqa: E402


class _PolicyTokens:
    def __init__(self, gen: Any) -> None:
        self.gen = gen

    def encode(self, text: str) -> list[int]:
        return [0] * self.gen.count_tokens(text)


def dataset(name: str, limit: int, shots: int) -> tuple[tuple[Any, ...], list[Any]]:
    qs = load_questions(DATA / name / "questions.json")
    demos, rest = split_demos(qs.examples, {p.id: p for p in qs.passages}, shots)
    rest = rest[:limit] if limit else rest
    check_disjoint(demos, [ex.question for ex in rest], [ex.id for ex in rest])
    return demos, rest


def query_encoder(device: str) -> Any:
    """The dense query encoder: None (the index's own, ONNX Runtime on CPU) or the same model on torch, ``device``."""
    if device == "cpu":
        return None
    from effirag.retrieval.encoders import EncoderConfig, SentenceTransformerEncoder

    return SentenceTransformerEncoder(EncoderConfig(backend="torch", device=device, batch_size=256)).load()


def qa_runs(gen: HFGenerator, args: argparse.Namespace) -> list[dict[str, Any]]:
    from effirag.retrieval.facade import load_retriever

    rows = []
    for name, limit, index in (
        ("popqa", args.popqa, args.popqa_index),
        ("musique_mini", args.musique, args.musique_index),
    ):
        if limit < 0:
            continue
        demos, examples = dataset(name, limit, args.shots)
        retriever = None
        if index:
            enc = query_encoder(args.encoder_device)
            retriever = load_retriever(index, tokenizer=_PolicyTokens(gen), encoder=enc, torch_threads=1).load()
        for run in args.runs.split(","):
            proto_name, _, mode = run.partition(":")
            proto = get_protocol(proto_name).use_demos(demos)
            sets = {"k": args.k, "max_steps": args.max_steps, "max_new_tokens": args.max_new_tokens}
            if mode:
                sets |= {"passage_mode": mode} if mode == "sparse" else {}
            cfg = EngineConfig(**sets)  # type: ignore[arg-type]
            t0 = time.perf_counter()
            out_dir = args.out / name / run.replace(":", "-") if args.out else None
            r = retriever if mode else None
            report, _ = evaluate_qa(examples, gen, r, proto, cfg, out_dir=out_dir, chunk_size=args.chunk)
            spent = time.perf_counter() - t0
            tok = report["tokens"] | {
                "prompt": sum(gen.count_tokens(proto.build_prompt(ex.question)) for ex in examples) / len(examples)
            }
            row = {
                "data": name, "run": run, "n": report["n"], "em": report["em"], "f1": report["f1"],
                "format_rate": report["format_rate"], "tokens": tok, "s_per_q": spent / max(1, report["n"]),
                "mean_steps": report["mean_steps"],
            }  # fmt: skip
            print(json.dumps(row), file=sys.stderr, flush=True)
            if args.rows:
                with args.rows.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(row) + "\n")
            rows.append(row)
    return rows


def throughput(prepared: Any, gen: HFGenerator, args: argparse.Namespace) -> dict[str, Any]:
    from effirag.llm.models.llamacpp import llama_server

    demos, examples = dataset("popqa", args.tp_prompts, args.shots)
    proto = get_protocol("zeroshot").use_demos(demos)
    prompts = [proto.build_prompt(ex.question) for ex in examples]
    cfg = GenerationConfig(max_new_tokens=args.tp_tokens, temperature=0.0)
    load_before = os.getloadavg()[0]
    times: dict[str, list[float]] = {"hf_float32": [], "llamacpp_q4": []}
    counts: dict[str, int] = {}
    with llama_server(prepared.gguf, threads=1, log=Path("/tmp/bench-gemma-llama.log")) as server:
        http = server.generator(tokenizer=prepared.hf_dir)
        for _ in range(args.repeats):
            for key, g in (("hf_float32", gen), ("llamacpp_q4", http)):
                t0 = time.perf_counter()
                out = [g.generate([p], cfg)[0][0] for p in prompts]  # one prompt at a time: single-stream speed
                times[key].append(time.perf_counter() - t0)
                counts[key] = sum(len(c.token_ids) for c in out)
    return {
        key: {
            "tokens": counts[key],
            "median_s": statistics.median(ts),
            "tokens_per_s": counts[key] / statistics.median(ts),
        }
        for key, ts in times.items()
    } | {
        "prompts": len(prompts),
        "prompt_tokens": sum(gen.count_tokens(p) for p in prompts) / len(prompts),
        "new_tokens": args.tp_tokens,
        "repeats": args.repeats,
        "load_1min": [load_before, os.getloadavg()[0]],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--popqa", type=int, default=50, help="PopQA questions (0: all but the demos; -1: skip)")
    ap.add_argument("--musique", type=int, default=0, help="MuSiQue questions (0: all but the demos; -1: skip)")
    ap.add_argument("--popqa-index", type=Path)
    ap.add_argument("--musique-index", type=Path)
    ap.add_argument("--runs", default="zeroshot,naive:sparse,naive:passage,searchr1:sparse,searchr1:passage")
    ap.add_argument("--shots", type=int, default=3)
    ap.add_argument("--k", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--chunk", type=int, default=8, help="questions per batched engine call")
    ap.add_argument("--batch", type=int, default=0, help="rows per generate call (0: --chunk)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--model", type=Path, help="a prepared HF folder of the model (default: prepare('gemma-3-270m'))")
    ap.add_argument("--device", default="cpu", help="the policy's device: cpu, cuda, cuda:N or auto")
    ap.add_argument("--dtype", default="auto", help="auto (float32 on CPU, bfloat16 on CUDA), float32, bfloat16")
    ap.add_argument("--encoder-device", default="cpu", help="cpu: the index's query encoder; else torch on it")
    ap.add_argument("--rows", type=Path, help="append each QA row to this JSONL file as it finishes")
    ap.add_argument("--throughput", action="store_true")
    ap.add_argument("--tp-prompts", type=int, default=4)
    ap.add_argument("--tp-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, help="keep each run's trajectories under OUT/DATA/RUN")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    if args.throughput and args.model:
        ap.error("--throughput serves the prepared GGUF: leave out --model")
    prepared = None if args.model else prepare("gemma-3-270m")
    model_dir = args.model or prepared.hf_dir  # type: ignore[union-attr]
    batch = args.batch or args.chunk
    gen = HFGenerator(model_dir, device=args.device, dtype=args.dtype, max_batch_size=batch).load()
    setup = {"device": str(gen.device), "dtype": str(next(gen.model.parameters()).dtype), "batch": batch}
    print(json.dumps(setup), file=sys.stderr, flush=True)
    out: dict[str, Any] = {"setup": setup, "qa": qa_runs(gen, args) if args.runs else []}
    if args.throughput:
        out["throughput"] = throughput(prepared, gen, args)
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print("| data | run | n | EM | F1 | format | prompt tok/q | gen tok/q | inserted tok/q | s/q |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in out["qa"]:
        t = r["tokens"]
        print(
            f"| {r['data']} | {r['run']} | {r['n']} | {100 * r['em']:.1f} | {100 * r['f1']:.1f} | "
            f"{100 * r['format_rate']:.0f}% | {t['prompt']:.0f} | {t['generated']:.0f} | {t['inserted']:.0f} | "
            f"{r['s_per_q']:.2f} |"
        )
    if "throughput" in out:
        print(json.dumps(out["throughput"], indent=1))


if __name__ == "__main__":
    main()
