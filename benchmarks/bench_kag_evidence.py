"""What the demo's TeaRAG observation shows for each gold hop: the hop's answer in a triplet, in passage text, or not.

    .venv/bin/python benchmarks/bench_kag_evidence.py [--questions 150] [--k 3] [--tau 0.2 0.0] [--calibrate 0.7 0.05]
        [--reranker checkpoints/demo-reranker]

Each hop the policy does not know, of the first ``--questions`` demo test questions, is retrieved in KAG mode with its
gold sub-question and key entities (TeaRAG §4.2; ``k`` items, the index's default KAG settings but τ), then rendered
with the TeaRAG protocol and cut to the demo engine's budget (160 inserted tokens, the policy's tokenizer), as the
agent would see it. Counts: the answer anywhere in the observation, in a triplet line, and observations holding any
triplet; and, before the PPR filter, whether the two-stage triplet candidates (k_t of them) hold a triplet naming the
answer, and whether the first one does. SFT's simulated contexts (``SFTDataConfig.gold_triplet_rate``) should show
the gold triplet about as often.
Needs the demo's world and index (``effirag demo`` builds them under runs/demo).

``--reranker`` scores with a trained bilinear reranker (``effirag train reranker``) instead of the index's cosines:
the two-stage candidates are then reranked by it too.

``--calibrate SHIFT SCALE`` is a probe, not a library option: every bi-encoder cosine enters eqs. 1-2 as
(cos − SHIFT) / SCALE, a logit-like scale such as a cross-encoder reranker's (the paper's relevance scores), instead of
the raw cosine, whose sigmoid lies within about 0.65-0.70 for every candidate here. ``--demo-model`` then runs the
demo's evaluation (100 questions, TeaRAG and Search-R1) under that scoring, into ``--out``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from effirag.agent.config import truncate_to_budget
from effirag.agent.protocols import get_protocol
from effirag.cli.demo import _PolicyTokens
from effirag.llm.hf import HFGenerator
from effirag.metrics import normalize_answer
from effirag.retrieval import kag
from effirag.retrieval.facade import RetrieverConfig, load_retriever
from effirag.retrieval.kag import KAGConfig
from effirag.train.gold_paths import world_paths

BUDGET = 160  # the demo engine's max_inserted_tokens (effirag.cli.demo)


def calibrate(shift: float, scale: float) -> None:
    """Patch the KAG filter so that every similarity reaches eqs. 1-2 as (sim − shift) / scale (probe only)."""
    plain = kag.KAGFilter.filter_scored

    def filter_scored(self, entities, chunks, triplets, chunk_sims, triplet_sims):  # type: ignore[no-untyped-def]
        chunk_sims = [(s - shift) / scale for s in chunk_sims]
        triplet_sims = [(s - shift) / scale for s in triplet_sims]
        return plain(self, entities, chunks, triplets, chunk_sims, triplet_sims)

    kag.KAGFilter.filter_scored = filter_scored  # type: ignore[method-assign]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", type=Path, default=Path("runs/demo"))
    ap.add_argument("--model", type=Path, default=Path("checkpoints/demo-policy"), help="for its tokenizer")
    ap.add_argument("--questions", type=int, default=150)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--tau", type=float, nargs="+", default=[KAGConfig().tau])
    ap.add_argument("--calibrate", type=float, nargs=2, metavar=("SHIFT", "SCALE"))
    ap.add_argument("--reranker", type=Path, help="a KAG reranker folder (effirag train reranker); default: cosine")
    ap.add_argument("--demo-model", type=Path, help="with --calibrate: run the demo's evaluation of this policy")
    ap.add_argument("--out", type=Path, default=Path("runs/eval/kag-calibrated"))
    args = ap.parse_args()
    if args.calibrate:
        calibrate(*args.calibrate)
        print(f"calibrated: sim' = (cos - {args.calibrate[0]}) / {args.calibrate[1]}")
    if args.demo_model:
        from effirag.cli.demo import demo

        demo(data=Path("../shared/data"), work=args.work, model=args.demo_model, limit=100, show=0, k=args.k,
             skip_stats=True, out=args.out, reranker=str(args.reranker or "none"))  # fmt: skip
        return

    gen = HFGenerator(args.model, device="cpu").load()
    protocol = get_protocol("tearag")
    paths, _, _ = world_paths(args.work / "world", "test")
    hops = [h for p in paths[: args.questions] for h in p.hops if not h.known]
    print(f"{len(hops)} unknown hops of the first {args.questions} test questions; k = {args.k}, budget {BUDGET}")
    print("| τ | answer shown | in a triplet | any triplet shown | tokens / obs. | candidates: first / any | s |")
    print("|---|---|---|---|---|---|---|")
    for tau in args.tau:
        config = RetrieverConfig(kag=KAGConfig(tau=tau))
        retriever = load_retriever(
            args.work / "index", tokenizer=_PolicyTokens(gen), config=config, reranker=args.reranker
        ).load()
        shown = in_triplet = any_triplet = tokens = first = among = 0
        c = config.kag
        t0 = time.perf_counter()
        for hop in hops:
            res = retriever.retrieve(hop.question, "kag", args.k, entities=list(hop.entities))
            body = protocol.render_items(res.items, start=1)
            body, _ = truncate_to_budget(body, lambda b: gen.count_tokens(protocol.wrap_observation(b)) <= BUDGET)
            answer = normalize_answer(hop.answer)
            triplets = [line for line in body.split("\n") if "(Triplet)" in line]
            shown += answer in normalize_answer(body)
            in_triplet += any(answer in normalize_answer(line) for line in triplets)
            any_triplet += bool(triplets)
            tokens += gen.count_tokens(protocol.wrap_observation(body))
            candidates = retriever._triplets().retrieve_with_triplets(
                list(hop.entities), hop.question, c.k_t, c.k_e, c.n_entities, c.n_triplets
            )
            hits = [answer in normalize_answer(item.text) for item, _ in candidates]
            first += bool(hits) and hits[0]
            among += any(hits)
        n = len(hops)
        print(
            f"| {tau} | {100 * shown / n:.1f}% | {100 * in_triplet / n:.1f}% | {100 * any_triplet / n:.1f}% "
            f"| {tokens / n:.0f} | {100 * first / n:.1f}% / {100 * among / n:.1f}% | {time.perf_counter() - t0:.0f} |"
        )


if __name__ == "__main__":
    main()
