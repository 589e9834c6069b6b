"""Does a policy know which facts it knows? Two measurements on the demo world, no training.

    python recipes/demo_policy/calibration_probe.py --model checkpoints/start-policy --out runs/calib/start.json

1. **Closed-book confidence.** Every sampled fact's canonical question is asked with the zero-shot protocol (no
   retrieval, greedy); the answer's mean token log-probability is the policy's confidence. Reported: recall on
   known and on unknown facts, and the AUROC of the confidence between known and unknown facts (0.5: the confidence
   does not tell them apart) and between right and wrong answers.
2. **The decision the format asks for.** Gold trajectories of the world's ``split`` paths are written with every
   hop searched (HiPRAG and TeaRAG writers); at each search step the policy's log-probability of the memory
   alternative (HiPRAG: ``<conclusion>`` in place of ``<search>``; TeaRAG: ``<memory>`` in place of
   ``<subquery>``) minus that of the search is read by teacher forcing. Reported: the mean probability of the
   memory alternative at known and at unknown hops, the share of hops where it is the likelier one (what greedy
   decoding takes), and the AUROC of the log-odds between known and unknown hops.

A policy whose confidence separates known from unknown facts (1.) but whose decision does not (2.) holds the
knowledge the efficient choice needs without acting on it; one whose confidence does not separate them cannot be
taught the choice by any reward that reads only its own samples.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `demo_policy` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from demo_policy.config import StageConfig
from effirag.config import load_config
from effirag.train.data_source import load_gold
from effirag.train.sft_data import SFTDataBuilder

# A search step of each protocol's written trajectories: the sub-question is group "q"; HiPRAG's reasoning is group "r".
SEARCH_STEPS: dict[str, re.Pattern[str]] = {
    "hiprag": re.compile(r"<reasoning> (?P<r>[^<]*?) </reasoning>\s*<search> (?P<q>[^<]*?) </search>"),
    "tearag": re.compile(r"</entities>\s*(?P<tag><subquery>) (?P<q>[^<]*?) </subquery>"),
}


def alternatives(protocol: str, m: re.Match[str]) -> tuple[int, str, str] | None:
    """Where the choice is made in a matched search step (a text offset), the searched continuation and the memory
    one: HiPRAG's reasoning against the same sub-question's non-search reasoning (from the last word boundary of
    their common prefix),
    TeaRAG's ``<subquery>`` against ``<memory>``. None for a reasoning the protocol's writer does not produce."""
    from effirag.agent.protocols.hiprag import HiPRAGProtocol

    if protocol == "tearag":
        return m.start("tag"), "<subquery>", "<memory>"
    r, q = m.group("r"), m.group("q")
    for first in (False, True):
        if r == HiPRAGProtocol.step_reasoning(q, "search", first):
            memory = HiPRAGProtocol.step_reasoning(q, "known", first)
            n = next((i for i, (a, b) in enumerate(zip(r, memory, strict=False)) if a != b), min(len(r), len(memory)))
            n = max(r.rfind(" ", 0, n), 0)  # cut at a word's leading space, as the tokenizer splits
            return m.start("r") + n, r[n:], memory[n:]
    return None


def auroc(pos: Sequence[float], neg: Sequence[float]) -> float:
    """Probability that a random ``pos`` score exceeds a random ``neg`` one (ties count half): the Mann-Whitney U
    statistic over ``len(pos) * len(neg)``. E.g. pos [3, 1], neg [2]: pairs (3>2) 1, (1<2) 0 → 0.5."""
    if not pos or not neg:
        raise ValueError(f"auroc needs both classes: {len(pos)} positive, {len(neg)} negative scores")
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(pos, neg).statistic) / (len(pos) * len(neg))


def closed_book(gen: Any, world: Any, n: int, seed: int) -> dict[str, Any]:
    """Part 1: ``n`` known and ``n`` unknown facts asked closed-book; recall and confidence AUROCs."""
    from effirag.agent.protocols import get_protocol
    from effirag.agent.protocols.state import EpisodeState
    from effirag.llm.base import GenerationConfig
    from effirag.metrics import cover_exact_match

    rng = random.Random(seed)
    facts = sorted(world.facts.values(), key=lambda f: f.id)
    known = [f for f in facts if world.knows(f)]
    unknown = [f for f in facts if not world.knows(f)]
    chosen = [(f, True) for f in rng.sample(known, n)] + [(f, False) for f in rng.sample(unknown, n)]
    proto = get_protocol("zeroshot")
    cfg = GenerationConfig(max_new_tokens=32, stop=proto.stop, logprobs=True)
    prompts = [proto.build_prompt(f.question) for f, _ in chosen]
    outs = gen.generate(prompts, cfg)
    rows = []
    for (f, is_known), prompt, (c,) in zip(chosen, prompts, outs, strict=True):
        answer = proto.parse_turn(c.text, EpisodeState(question=f.question, prompt=prompt)).answer or ""
        lps = c.logprobs or (0.0,)
        rows.append({"fact": f.id, "known": is_known, "right": bool(cover_exact_match(answer, [f.object])),
                     "conf": sum(lps) / len(lps)})  # fmt: skip
    conf = {k: [r["conf"] for r in rows if r["known"] is k] for k in (True, False)}
    right = {k: [r["conf"] for r in rows if r["right"] is k] for k in (True, False)}
    return {
        "n_known": n,
        "n_unknown": n,
        "recall_known": sum(r["right"] for r in rows if r["known"]) / n,
        "recall_unknown": sum(r["right"] for r in rows if not r["known"]) / n,
        "auroc_known_vs_unknown": auroc(conf[True], conf[False]),
        "auroc_right_vs_wrong": auroc(right[True], right[False]) if right[True] and right[False] else None,
    }


def sequence_logprob(model: Any, prefix: list[int], cont: list[int]) -> float:
    """log P(cont | prefix) by teacher forcing."""
    import torch

    from effirag.train.rl.ppo_batch import token_logprobs

    ids = torch.tensor([prefix + cont])  # (1, L)
    with torch.no_grad():
        lp = token_logprobs(model(ids).logits, ids, temperature=1.0)  # (1, L - 1)
    return float(lp[0, len(prefix) - 1 :].sum())


def decision_points(
    cfg: StageConfig, gold: Any, protocol: str, n_paths: int, world: Any
) -> list[tuple[str, str, str, bool]]:
    """(text before the choice, searched continuation, memory continuation, hop known) for every search step of the
    protocol's trajectories over the first ``n_paths`` gold paths, written with every hop searched and the stage's
    writing and behaviour switches."""
    behaviour = replace(cfg.data.behaviour, known_search={protocol: 1.0})
    data = replace(cfg.data, protocols=(protocol,), weights={protocol: 1.0}, single_hop_rate=0.0, behaviour=behaviour)
    builder = SFTDataBuilder(gold.passages, gold.triplets, lambda s: len(s.split()), data,
                             render_options=cfg.writing.render_options())  # fmt: skip
    points = []
    for ex in builder.build(gold.paths[:n_paths]):
        for pair in ex.pairs:
            text = "".join(s.text for s in pair)
            for m in SEARCH_STEPS[protocol].finditer(text):
                fact, alt = world.fact_for(m.group("q").strip()), alternatives(protocol, m)
                if fact is not None and alt is not None:
                    points.append((text[: alt[0]], alt[1], alt[2], world.knows(fact)))
    return points


def decisions(gen: Any, cfg: StageConfig, gold: Any, protocol: str, n_paths: int, world: Any) -> dict[str, Any]:
    """Part 2 for one protocol: P(memory alternative) at known and unknown hops, teacher-forced (the two
    continuations' log-probabilities normalised against each other)."""
    import math

    tok, model = gen.tokenizer, gen.model
    log_odds: dict[bool, list[float]] = {True: [], False: []}
    for before, searched, memory, known in decision_points(cfg, gold, protocol, n_paths, world):
        prefix = tok.encode(before, add_special_tokens=False)[-1000:]
        lp_search = sequence_logprob(model, prefix, tok.encode(searched, add_special_tokens=False))
        lp_memory = sequence_logprob(model, prefix, tok.encode(memory, add_special_tokens=False))
        log_odds[known].append(lp_memory - lp_search)

    def p_memory(xs: list[float]) -> float:
        return sum(1 / (1 + math.exp(-x)) for x in xs) / len(xs)

    return {
        "hops_known": len(log_odds[True]),
        "hops_unknown": len(log_odds[False]),
        "p_memory_known": p_memory(log_odds[True]),
        "p_memory_unknown": p_memory(log_odds[False]),
        "greedy_memory_known": sum(x > 0 for x in log_odds[True]) / len(log_odds[True]),
        "greedy_memory_unknown": sum(x > 0 for x in log_odds[False]) / len(log_odds[False]),
        "auroc_known_vs_unknown": auroc(log_odds[True], log_odds[False]),
    }


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, type=Path, help="The policy folder (HF layout).")
    ap.add_argument("--config", type=Path, default=Path(__file__).with_name("start_policy.yaml"),
                    help="A stage YAML: its world and writing settings write the gold trajectories.")  # fmt: skip
    ap.add_argument("--facts", type=int, default=400, help="Known facts asked closed-book (and as many unknown).")
    ap.add_argument("--paths", type=int, default=300, help="Gold paths whose search steps are read (part 2).")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True, help="Where the JSON report goes.")
    ap.add_argument("overrides", nargs="*", help="key=value overrides of the stage YAML (e.g. data.source.split=dev)")
    args = ap.parse_args(argv)
    from effirag.llm.hf import HFGenerator
    from effirag.world.world import World

    cfg = load_config(StageConfig, args.config, args.overrides)
    gen = HFGenerator(args.model, device="cpu", max_batch_size=32).load()
    gen.model.eval()
    gold = load_gold(cfg.data.source)
    world_dir = gold.world
    if world_dir is None:
        raise SystemExit(f"{args.config}: data.source gives no world folder; the probe reads the world's facts")
    world = World.load(world_dir)
    report = {"model": str(args.model), "split": cfg.data.source.split,
              "closed_book": closed_book(gen, world, args.facts, args.seed)}  # fmt: skip
    for protocol in SEARCH_STEPS:
        report[protocol] = decisions(gen, cfg, gold, protocol, args.paths, world)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
