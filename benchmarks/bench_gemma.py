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

``--backend llamacpp`` runs the same QA settings (prompts, demos, k, steps, new tokens) through EffiRAG's OpenAI
backend against llama-cpp-python's server, started here on 127.0.0.1 on the GGUF (``--gguf``; ``--llama-threads``
CPU threads; prompts' logits only at their last token). The server strips stop strings without saying which one
matched, so it is sent none: it generates up to the token limit and the client cuts at the first stop, as the HF
backend stops. Token counts: the returned text re-tokenised by Gemma's HF tokenizer (``--tokenizer DIR``), the same
counting as the HF rows. ``--shard I/N`` keeps questions i ≡ I (mod N) of those left after the demos, so one setting
runs in N processes; each shard writes ``OUT/DATA/RUN/shard-I-of-N/`` (trajectories chunk by chunk, and
``shard.json``: per-question prompt tokens, questions done, seconds so far). ``--merge OUT`` prints one row per
setting scored anew over the finished questions of all its shards (exact means, not means of means), s/q being the
shards' seconds summed over those questions (server-seconds per question).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from contextlib import ExitStack
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


def dataset(name: str, limit: int, shots: int) -> tuple[tuple[Any, ...], list[Any]]:
    qs = load_questions(DATA / name / "questions.json")
    demos, rest = split_demos(qs.examples, {p.id: p for p in qs.passages}, shots)
    rest = rest[:limit] if limit else rest
    check_disjoint(demos, [ex.question for ex in rest], [ex.id for ex in rest])
    return demos, rest


def query_encoder(device: str, torch_on_cpu: bool = False) -> Any:
    """The dense query encoder: None (the index's own, ONNX Runtime on CPU) or the same model on torch, ``device``
    (``torch_on_cpu``: torch on the CPU too, where ONNX Runtime is not installed)."""
    if device == "cpu" and not torch_on_cpu:
        return None
    from effirag.retrieval.encoders import EncoderConfig, SentenceTransformerEncoder

    return SentenceTransformerEncoder(EncoderConfig(backend="torch", device=device, batch_size=256)).load()


def qa_runs(gen: Any, args: argparse.Namespace) -> list[dict[str, Any]]:
    from effirag.retrieval.facade import load_retriever
    from effirag.retrieval.tokens import PolicyTokens

    rows = []
    for name, limit, index in (
        ("popqa", args.popqa, args.popqa_index),
        ("musique_mini", args.musique, args.musique_index),
    ):
        if limit < 0:
            continue
        demos, examples = dataset(name, limit, args.shots)
        i, n = args.shard or (0, 1)
        examples = examples[i::n]
        retriever = None
        if index:
            enc = query_encoder(args.encoder_device, args.encoder_torch)
            retriever = load_retriever(index, tokenizer=PolicyTokens(gen), encoder=enc, torch_threads=1).load()
        for run in args.runs.split(","):
            rows.append(qa_run(gen, retriever, name, run, demos, examples, args))
    return rows


def qa_run(
    gen: Any, retriever: Any, name: str, run: str, demos: Any, examples: list[Any], args: argparse.Namespace
) -> dict[str, Any]:
    """One (data, run) setting on ``examples``: its row; with ``--shard`` also ``shard.json`` beside its
    trajectories (per-question prompt tokens, questions done, seconds so far), which ``--merge`` reads."""
    proto_name, _, mode = run.partition(":")
    proto = get_protocol(proto_name).use_demos(demos)
    sets = {"k": args.k, "max_steps": args.max_steps, "max_new_tokens": args.max_new_tokens}
    if mode:
        sets |= {"passage_mode": mode} if mode == "sparse" else {}
    cfg = EngineConfig(**sets)  # type: ignore[arg-type]
    out_dir = args.out / name / run.replace(":", "-") if args.out else None
    prompt = {ex.id: gen.count_tokens(proto.build_prompt(ex.question)) for ex in examples}
    on_chunk = None
    if args.shard is not None and out_dir is not None:
        i, n = args.shard
        out_dir = out_dir / f"shard-{i}-of-{n}"
        out_dir.mkdir(parents=True, exist_ok=True)
        info = {"data": name, "run": run, "backend": args.backend, "threads": args.llama_threads, "shard": [i, n],
                "questions": len(examples), "prompt_tokens": prompt, "done": 0, "elapsed_s": 0.0}  # fmt: skip
        t_start = time.perf_counter()

        def on_chunk(done: int, total: int) -> None:
            info.update(done=done, elapsed_s=time.perf_counter() - t_start)
            tmp = out_dir / "shard.json.tmp"  # type: ignore[operator]
            tmp.write_text(json.dumps(info), encoding="utf-8")
            os.replace(tmp, out_dir / "shard.json")  # type: ignore[operator]

        on_chunk(0, len(examples))
    t0 = time.perf_counter()
    r = retriever if mode else None
    report, _ = evaluate_qa(examples, gen, r, proto, cfg, out_dir=out_dir, chunk_size=args.chunk, on_chunk=on_chunk)
    spent = time.perf_counter() - t0
    row = {
        "data": name, "run": run, "n": report["n"], "em": report["em"], "f1": report["f1"],
        "format_rate": report["format_rate"], "tokens": report["tokens"] | {"prompt": _mean(prompt.values())},
        "s_per_q": spent / max(1, report["n"]), "mean_steps": report["mean_steps"], "backend": args.backend,
        "shard": list(args.shard or (0, 1)),
    }  # fmt: skip
    print(json.dumps(row), file=sys.stderr, flush=True)
    if args.rows:
        with args.rows.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
    return row


def _mean(values: Any) -> float:
    vs = list(values)
    return sum(vs) / max(1, len(vs))


def throughput(prepared: Any, gen: Any, args: argparse.Namespace) -> dict[str, Any]:
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


def merge(root: Path, shots: int) -> list[dict[str, Any]]:
    """One row per (data, run) from the shards' files under ``root`` (``DATA/RUN/shard-I-of-N/``): EM, F1, format,
    tokens and steps scored anew over all the questions finished (the trajectories of a shard cut short count up
    to its last finished chunk); prompt tokens the mean over those questions; s/q the shards' seconds summed over
    the questions finished (server-seconds per question, each server on its ``threads``)."""
    from effirag.eval.qa import TRAJECTORIES, score
    from effirag.types import Trajectory

    groups: dict[tuple[str, str], list[tuple[dict[str, Any], Path]]] = {}
    for f in sorted(root.glob("*/*/shard-*/shard.json")):
        info = json.loads(f.read_text(encoding="utf-8"))
        groups.setdefault((info["data"], info["run"]), []).append((info, f.parent))
    rows = []
    for (name, run), shards in groups.items():
        trajs = []
        for _, d in shards:
            lines = (d / TRAJECTORIES).read_text(encoding="utf-8").splitlines() if (d / TRAJECTORIES).is_file() else []
            trajs += [Trajectory.from_dict(json.loads(line)) for line in lines if line.strip()]
        ids = {t.question_id for t in trajs}
        examples = [ex for ex in dataset(name, 0, shots)[1] if ex.id in ids]
        order = {ex.id: i for i, ex in enumerate(examples)}
        trajs.sort(key=lambda t: (order[t.question_id], t.sample_index))
        report = score(examples, trajs)
        prompt = {q: n for info, _ in shards for q, n in info["prompt_tokens"].items() if q in ids}
        info0 = shards[0][0]
        rows.append({
            "data": name, "run": run, "n": report["n"], "expected": sum(i["questions"] for i, _ in shards),
            "em": report["em"], "f1": report["f1"], "format_rate": report["format_rate"],
            "tokens": report["tokens"] | {"prompt": _mean(prompt.values())}, "mean_steps": report["mean_steps"],
            "s_per_q": sum(i["elapsed_s"] for i, _ in shards) / max(1, report["n"]), "shards": len(shards),
            "backend": info0["backend"], "threads": info0["threads"],
        })  # fmt: skip
    order_runs = ["zeroshot", "naive:sparse", "naive:passage", "searchr1:sparse", "searchr1:passage"]
    rows.sort(key=lambda r: (r["data"] != "popqa", order_runs.index(r["run"]) if r["run"] in order_runs else 9))
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| data | run | n | EM | F1 | format | prompt tok/q | gen tok/q | inserted tok/q | steps | s/q |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        t = r["tokens"]
        n = f"{r['n']}/{r['expected']}" if r.get("expected", r["n"]) != r["n"] else str(r["n"])
        lines.append(
            f"| {r['data']} | {r['run']} | {n} | {100 * r['em']:.1f} | {100 * r['f1']:.1f} | "
            f"{100 * r['format_rate']:.0f}% | {t['prompt']:.0f} | {t['generated']:.1f} | {t['inserted']:.0f} | "
            f"{r['mean_steps']:.2f} | {r['s_per_q']:.2f} |"
        )
    return "\n".join(lines)


def make_generator(args: argparse.Namespace, stack: ExitStack) -> tuple[Any, Any]:
    """(the QA generator, the prepared model or None): HFGenerator, or EffiRAG's OpenAI backend on a llama.cpp
    server started here on the GGUF (token ids and counts from the HF tokenizer of ``--tokenizer``)."""
    if args.backend == "llamacpp":
        from effirag.llm.models.llamacpp import llama_server

        prepared = None if (args.gguf and args.tokenizer) else prepare("gemma-3-270m")
        gguf = args.gguf or prepared.gguf  # type: ignore[union-attr]
        tok = args.tokenizer or prepared.hf_dir  # type: ignore[union-attr]
        log = args.llama_log or Path(f"/tmp/bench-gemma-llama-{os.getpid()}.log")
        server = stack.enter_context(
            llama_server(gguf, threads=args.llama_threads, n_ctx=args.n_ctx, log=log, logits_all=False)
        )
        gen = server.generator(tokenizer=tok)
        setup = {"backend": "llamacpp", "gguf": str(gguf), "threads": args.llama_threads, "url": server.url}
        print(json.dumps(setup), file=sys.stderr, flush=True)
        return gen, prepared
    prepared = None if args.model else prepare("gemma-3-270m")
    model_dir = args.model or prepared.hf_dir  # type: ignore[union-attr]
    batch = args.batch or args.chunk
    gen = HFGenerator(model_dir, device=args.device, dtype=args.dtype, max_batch_size=batch).load()
    setup = {"device": str(gen.device), "dtype": str(next(gen.model.parameters()).dtype), "batch": batch}
    print(json.dumps(setup), file=sys.stderr, flush=True)
    return gen, prepared


def shard(text: str) -> tuple[int, int]:
    i, _, n = text.partition("/")
    if not (i.isdigit() and n.isdigit() and 0 <= int(i) < int(n)):
        raise argparse.ArgumentTypeError(f"--shard {text!r}: want I/N with 0 <= I < N")
    return int(i), int(n)


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
    ap.add_argument("--backend", choices=("hf", "llamacpp"), default="hf", help="the QA runs' generator")
    ap.add_argument("--gguf", type=Path, help="llamacpp: the GGUF file (default: prepare('gemma-3-270m'))")
    ap.add_argument("--tokenizer", type=Path, help="llamacpp: HF folder of the tokenizer that counts tokens")
    ap.add_argument("--llama-threads", type=int, default=1, help="llamacpp: the server's CPU threads")
    ap.add_argument("--n-ctx", type=int, default=4096, help="llamacpp: the server's context length")
    ap.add_argument("--llama-log", type=Path, help="llamacpp: the server's log file")
    ap.add_argument("--shard", type=shard, help="I/N: only questions i with i % N == I (and the shard layout)")
    ap.add_argument("--merge", type=Path, help="print the table merged from the shards under this --out folder")
    ap.add_argument("--model", type=Path, help="a prepared HF folder of the model (default: prepare('gemma-3-270m'))")
    ap.add_argument("--device", default="cpu", help="the policy's device: cpu, cuda, cuda:N or auto")
    ap.add_argument("--dtype", default="auto", help="auto (float32 on CPU, bfloat16 on CUDA), float32, bfloat16")
    ap.add_argument("--encoder-device", default="cpu", help="cpu: the index's query encoder; else torch on it")
    ap.add_argument("--encoder-torch", action="store_true", help="the query encoder on torch even on the CPU")
    ap.add_argument("--rows", type=Path, help="append each QA row to this JSONL file as it finishes")
    ap.add_argument("--throughput", action="store_true")
    ap.add_argument("--tp-prompts", type=int, default=4)
    ap.add_argument("--tp-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, help="keep each run's trajectories under OUT/DATA/RUN")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.merge:
        rows = merge(args.merge, args.shots)
        print(json.dumps(rows, indent=1) if args.json else table(rows))
        return
    import torch

    torch.set_num_threads(args.threads)
    if args.throughput and (args.model or args.backend != "hf"):
        ap.error("--throughput serves the prepared GGUF: leave out --model and --backend")
    with ExitStack() as stack:
        gen, prepared = make_generator(args, stack)
        out: dict[str, Any] = {"qa": qa_runs(gen, args) if args.runs else []}
        if args.throughput:
            out["throughput"] = throughput(prepared, gen, args)
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(table(out["qa"]))
    if "throughput" in out:
        print(json.dumps(out["throughput"], indent=1))


if __name__ == "__main__":
    main()
