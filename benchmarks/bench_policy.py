"""The embedded policy on the demo world's test split, per protocol: EM, F1, cover-EM, format rate, mean steps by hop
count, tokens per question, and HiPRAG's over-/under-search rates judged exactly by the world oracle.

    OMP_NUM_THREADS=1 .venv/bin/python -u benchmarks/bench_policy.py --limit 300 --k 1 \
        --reranker checkpoints/demo-reranker --frequency-penalty 0.3 --protocols tearag searchr1 hiprag

Needs the demo world and index of `effirag demo` (runs/demo/world, runs/demo/index) and checkpoints/demo-policy.
Engine settings are the demo's (160 inserted tokens per observation, at most 8 steps, greedy); ``--k`` items per
retrieval (3 unless given; the demo uses 1). ``--split dev`` for choosing settings; ``--reranker`` a KAG reranker
folder; ``--frequency-penalty`` and ``--presence-penalty`` the engine's per-turn repetition penalties (0 unless given;
the demo uses a frequency penalty of 0.3). OSR = searches whose query asks a
fact the policy knows / all searches; USR = non-search steps asserting a fact it does not know (or asserting a known
one wrongly) / all non-search steps (only HiPRAG writes non-search steps).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from effirag.agent.config import EngineConfig
from effirag.agent.protocols import get_protocol
from effirag.data import load_corpus, load_questions
from effirag.eval.qa import evaluate_qa
from effirag.llm.hf import HFGenerator
from effirag.retrieval.facade import load_retriever
from effirag.rewards.hiprag import over_search_rate, under_search_rate
from effirag.rewards.judges import WorldJudge
from effirag.world import World


class _Tokens:
    def __init__(self, gen: HFGenerator) -> None:
        self.gen = gen

    def encode(self, text: str) -> list[int]:
        return list(self.gen.tokenizer.encode(text, add_special_tokens=False))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", type=Path, default=Path("runs/demo"))
    ap.add_argument("--model", type=Path, default=Path("checkpoints/demo-policy"))
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--protocols", nargs="+", default=["tearag", "searchr1", "hiprag"])
    ap.add_argument("--split", default="test", choices=["train", "dev", "test"])
    ap.add_argument("--k", type=int, default=3, help="items per retrieval (the demo uses 1)")
    ap.add_argument("--reranker", type=Path, help="KAG reranker folder (default: the index's cosines)")
    ap.add_argument("--frequency-penalty", type=float, default=0.0, help="per-turn frequency penalty (OpenAI's)")
    ap.add_argument("--presence-penalty", type=float, default=0.0, help="per-turn presence penalty (OpenAI's)")
    ap.add_argument("--out", type=Path, help="folder for each protocol's trajectories (OUT/<protocol>/)")
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    world_dir = args.work / "world"
    gen = HFGenerator(args.model, device="cpu").load()
    retriever = load_retriever(args.work / "index", tokenizer=_Tokens(gen), reranker=args.reranker).load()
    test = load_questions(world_dir / f"questions_{args.split}.jsonl", load_corpus(world_dir / "corpus.jsonl")).examples
    test = test[: args.limit]
    judge = WorldJudge(World.load(world_dir))
    engine = EngineConfig(
        k=args.k,
        max_new_tokens=96,
        max_inserted_tokens=160,
        max_steps=8,
        max_total_tokens=3072,
        frequency_penalty=args.frequency_penalty,
        presence_penalty=args.presence_penalty,
    )
    out = {}
    for name in args.protocols:
        t0 = time.perf_counter()
        save = args.out / name if args.out else None
        rep, trajs = evaluate_qa(test, gen, retriever, get_protocol(name), engine, out_dir=save)
        rep["seconds"] = round(time.perf_counter() - t0, 1)
        rep["osr"] = round(over_search_rate(trajs, judge), 4)
        rep["usr"] = round(under_search_rate(trajs, judge), 4)
        steps_by_hop: dict[str, list[int]] = {}
        for e, t in zip(test, trajs, strict=True):
            steps_by_hop.setdefault(str(e.hops), []).append(len(t.steps))
        rep["mean_steps_by_hops"] = {h: round(sum(v) / len(v), 3) for h, v in sorted(steps_by_hop.items())}
        out[name] = rep
    meta = {"n": len(test), "model": str(args.model), "split": args.split, "k": args.k, "reranker": str(args.reranker),
            "frequency_penalty": args.frequency_penalty, "presence_penalty": args.presence_penalty}  # fmt: skip
    print(json.dumps({**meta, "results": out}, indent=1))


if __name__ == "__main__":
    main()
