"""Does a pretrained model's choice between its memory and a search follow what it knows? Real questions, no training.

    python recipes/demo_policy/self_knowledge_probe.py --model ~/.cache/effirag/models/gemma-3-270m \\
        --questions ../shared/data/popqa/questions.json --out runs/self_knowledge/gemma.json

The demo world's start policies hold the knowledge the efficient choice needs but choose at chance
(``calibration_probe.py``); a pretrained model is the next candidate start, whose known facts are the ones it answers
closed-book. Three readouts on the same questions (the first ``--shots`` of the file are the few-shot demos, as
``eval qa --prompt-style fewshot`` draws them; the rest are asked):

1. **Closed book.** The zero-shot protocol's few-shot prompt, greedy; a question is *known* when the answer is right
   (exact match against any alias). Confidence = mean token log-probability of the answer; reported: EM and the AUROC
   of the confidence between right and wrong answers (0.5: confidence tells nothing).
2. **The format's decision.** HiPRAG's few-shot prompt up to ``<think>``; the log-probability of a first step answered
   from memory (``I know the answer to: Q`` then ``<conclusion>``) minus that of a searched one (``I need to search
   for: Q`` then ``<search>``), teacher-forced. Two demo sets: as written (every demo searches) and *mixed* (the
   middle demo answered from memory, so both choices are shown). Reported per set: the AUROC of the log-odds between
   known and unknown questions, and the share where memory is the likelier step (what greedy decoding takes):
   on known questions its complement is the first step's over-search rate, on unknown ones it is the under-search
   rate.
3. **Asked.** ``Can you answer this from memory, without searching?`` then the log-odds of `` yes`` over `` no``:
   whether the model reports its self-knowledge when asked in plain words rather than in a format.

Each AUROC comes with a 95% percentile-bootstrap interval over questions (seeded). The reading rule is written in
docs/demo_policy.md before the measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `demo_policy` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from demo_policy.calibration_probe import auroc

READOUTS = ("all_search", "mixed", "asked")  # the scores of parts 2 (two demo sets) and 3
ASK = "Question: {q}\nCan you answer this question from memory, without searching? Answer yes or no.\nAnswer:"


def auroc_interval(pos: Sequence[float], neg: Sequence[float], seed: int, n_boot: int = 1000) -> list[float]:
    """95% percentile-bootstrap interval of :func:`auroc`, each class resampled with replacement."""
    rng = random.Random(seed)
    stats = sorted(
        auroc([rng.choice(pos) for _ in pos], [rng.choice(neg) for _ in neg]) for _ in range(n_boot)
    )  # fmt: skip
    return [stats[int(0.025 * n_boot)], stats[int(0.975 * n_boot) - 1]]


def separation(known: Sequence[float], unknown: Sequence[float], seed: int) -> dict[str, Any]:
    """AUROC (with its interval) of a score between known and unknown questions, and the share with score > 0."""
    return {
        "auroc_known_vs_unknown": auroc(known, unknown),
        "auroc_95ci": auroc_interval(known, unknown, seed),
        "positive_share_known": sum(x > 0 for x in known) / len(known),
        "positive_share_unknown": sum(x > 0 for x in unknown) / len(unknown),
        "mean_known": sum(known) / len(known),
        "mean_unknown": sum(unknown) / len(unknown),
    }


def closed_book(gen: Any, demos: Sequence[Any], examples: Sequence[Any]) -> list[dict[str, Any]]:
    """Part 1: per question, the closed-book answer, whether it is right and its mean token log-probability."""
    from effirag.agent.protocols import get_protocol
    from effirag.agent.protocols.state import EpisodeState
    from effirag.llm.base import GenerationConfig
    from effirag.metrics import exact_match

    proto = get_protocol("zeroshot").use_demos(demos)
    cfg = GenerationConfig(max_new_tokens=16, stop=proto.stop, logprobs=True)
    prompts = [proto.build_prompt(ex.question) for ex in examples]
    rows = []
    for ex, prompt, (c,) in zip(examples, prompts, gen.generate(prompts, cfg), strict=True):
        answer = proto.parse_turn(c.text, EpisodeState(question=ex.question, prompt=prompt)).answer or ""
        lps = c.logprobs or (0.0,)
        rows.append({"id": ex.id, "answer": answer, "right": bool(exact_match(answer, list(ex.answers))),
                     "conf": sum(lps) / len(lps)})  # fmt: skip
    return rows


def mixed_shots(proto: Any, demos: Sequence[Any], memory: int) -> str:
    """HiPRAG's demos as :meth:`shots` writes them, except demo ``memory``, answered from memory in one step."""
    out = []
    for i, d in enumerate(demos):
        if i == memory:
            step = (proto.step_reasoning(d.question, "known"), f"{d.answer}.")
            out.append(proto.question_block(d.question) + proto.render_turn(first=True, steps=[step], answer=d.answer))
            out.append("\n\n")
        else:
            out.append(proto.__class__().use_demos([d]).shots())
    return "".join(out)


def continuation_logprob(model: Any, cache: Any, rest: list[int], cont: list[int]) -> float:
    """log P(cont | prefix + rest) by teacher forcing, the shared prefix read from its key-value ``cache`` (left
    untouched: the forward runs on a copy). Only the continuation's logits are computed: the 262k-word vocabulary
    of Gemma 3 makes full-length logits cost most of a forward."""
    import copy

    import torch

    ids = torch.tensor([rest + cont])  # (1, R + C)
    with torch.inference_mode():
        out = model(ids, **{_cache_arg(model): copy.deepcopy(cache)}, use_cache=True, logits_to_keep=len(cont) + 1)
    logits = out.logits[0, :-1].float()  # (C, V): position i predicts cont[i]
    return float(torch.log_softmax(logits, -1).gather(-1, torch.tensor(cont)[:, None]).sum())


def prefix_cache(model: Any, ids: list[int]) -> Any:
    """The key-value cache of ``ids`` (a prompt part shared by every question)."""
    import torch

    with torch.inference_mode():
        out = model(torch.tensor([ids]), use_cache=True, logits_to_keep=1)
    return getattr(out, _cache_arg(model))


def _cache_arg(model: Any) -> str:
    """The forward's name for the key-value cache: ``cache`` from transformers 5.2x, ``past_key_values`` before."""
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def log_odds(gen: Any, cache: Any, rest: str, memory: str, search: str) -> float:
    """log P(memory) − log P(search) after the cached prefix and ``rest``."""
    tail = gen.encode(rest)
    return continuation_logprob(gen.model, cache, tail, gen.encode(memory)) - continuation_logprob(
        gen.model, cache, tail, gen.encode(search)
    )


def decisions(gen: Any, demos: Sequence[Any], examples: Sequence[Any], progress: Callable[[], None]) -> dict[str, list]:
    """Part 2: per demo set, every question's first-step log-odds of a step from memory over a searched one, after
    the HiPRAG prompt and ``<think>``."""
    from effirag.agent.protocols import get_protocol
    from effirag.agent.protocols.hiprag import HiPRAGProtocol as H

    proto = get_protocol("hiprag").use_demos(demos)
    as_written = proto.shots()
    sets = {"all_search": as_written, "mixed": mixed_shots(proto, demos, memory=len(demos) // 2)}
    out: dict[str, list] = {}
    for name, shots in sets.items():
        shared = proto.build_prompt("").replace(as_written, shots, 1).removesuffix(proto.question_block(""))
        cache = prefix_cache(gen.model, gen.encode(shared, prompt=True))
        scores = []
        for ex in examples:
            q = ex.question
            memory = f"<step>\n<reasoning> {H.step_reasoning(q, 'known')} </reasoning>\n<conclusion>"
            search = f"<step>\n<reasoning> {H.step_reasoning(q, 'search')} </reasoning>\n<search>"
            scores.append(log_odds(gen, cache, proto.question_block(q) + "<think>\n", memory, search))
            progress()
        out[name] = scores
    return out


def asked(gen: Any, examples: Sequence[Any], progress: Callable[[], None]) -> list[float]:
    """Part 3: per question, log P(`` yes``) − log P(`` no``) after :data:`ASK`."""
    head, _ = ASK.split("{q}")
    cache = prefix_cache(gen.model, gen.encode(head, prompt=True))
    out = []
    for ex in examples:
        out.append(log_odds(gen, cache, ASK.removeprefix(head).format(q=ex.question), " yes", " no"))
        progress()
    return out


def within_strata_auroc(scores: Sequence[float], known: Sequence[bool], strata: Sequence[str]) -> float | None:
    """AUROC over the (known, unknown) pairs of the same stratum only (e.g. PopQA's relation): each stratum's
    Mann-Whitney U summed, over the summed pair counts. A pooled AUROC also rewards a score that differs between
    strata whose known rates differ; this one does not. None when no stratum holds both classes. E.g. scores
    [5, 5, 6, 1, 1], known [T, T, F, F, F], strata [a, a, a, b, b]: within a, 5 < 6 twice → 0 of 2 pairs → 0.0
    (b has no known question); pooled, each 5 beats the two 1s of b → 4 of 6 → 0.67."""
    groups: dict[str, tuple[list[float], list[float]]] = {}
    for x, k, s in zip(scores, known, strata, strict=True):
        groups.setdefault(s, ([], []))[0 if k else 1].append(x)
    u = pairs = 0.0
    for pos, neg in groups.values():
        if pos and neg:
            u += auroc(pos, neg) * len(pos) * len(neg)
            pairs += len(pos) * len(neg)
    return u / pairs if pairs else None


def report(rows: list[dict[str, Any]], names: Sequence[str], strata: Sequence[str], seed: int) -> dict[str, Any]:
    """The readouts' summaries: the closed-book confidence (``conf``) and each score in ``names`` (a field of every
    row) between known (``right``) and unknown questions, pooled and within ``strata`` (a label per row)."""
    right = [r["conf"] for r in rows if r["right"]]
    wrong = [r["conf"] for r in rows if not r["right"]]
    if not right or not wrong:
        raise ValueError(f"closed book: {len(right)} of {len(rows)} questions answered right; the known/unknown "
                         "AUROCs need both known and unknown questions (ask more questions)")  # fmt: skip
    known = [bool(r["right"]) for r in rows]
    em_by = {s: sum(k for k, t in zip(known, strata, strict=True) if t == s) / strata.count(s) for s in set(strata)}
    out: dict[str, Any] = {
        "questions": len(rows),
        "closed_book": {"em": len(right) / len(rows), "known": len(right), "em_by_stratum": em_by,
                        "auroc_right_vs_wrong": auroc(right, wrong), "auroc_95ci": auroc_interval(right, wrong, seed),
                        "auroc_within_strata": within_strata_auroc([r["conf"] for r in rows], known, strata)},
    }  # fmt: skip
    for name in names:
        xs = [r[name] for r in rows]
        out[name] = separation([x for x, k in zip(xs, known, strict=True) if k],
                               [x for x, k in zip(xs, known, strict=True) if not k], seed)  # fmt: skip
        out[name]["auroc_within_strata"] = within_strata_auroc(xs, known, strata)
    return out


def from_rows(rows_file: Path, questions: Path, seed: int) -> dict[str, Any]:
    """The report recomputed from a saved rows file (no model), strata looked up in ``questions`` by id."""
    from effirag.data import load_questions

    qtype = {ex.id: ex.qtype for ex in load_questions(questions).examples}
    rows = [json.loads(line) for line in rows_file.read_text().splitlines() if line.strip()]
    missing = [r["id"] for r in rows if r["id"] not in qtype]
    if missing:
        raise ValueError(f"{rows_file}: {len(missing)} row ids are not in {questions}, e.g. {missing[0]!r}")
    return report(rows, READOUTS, [qtype[r["id"]] or "" for r in rows], seed)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, help="A pretrained model folder (HF layout); not with --rows.")
    ap.add_argument("--questions", required=True, type=Path, help="A questions file (e.g. PopQA's questions.json).")
    ap.add_argument("--shots", type=int, default=3, help="Few-shot demos drawn from the same file.")
    ap.add_argument("--limit", type=int, default=0, help="Ask only the first N remaining questions (0: all).")
    ap.add_argument("--seed", type=int, default=0, help="Seed of the bootstrap intervals.")
    ap.add_argument("--out", type=Path, required=True, help="Where the JSON report goes (rows beside it).")
    ap.add_argument("--rows", type=Path, help="Recompute the report from this saved rows file (no model is run).")
    args = ap.parse_args(argv)
    if args.rows is not None:
        result = {"rows": str(args.rows), "questions_file": str(args.questions),
                  **from_rows(args.rows, args.questions, args.seed)}  # fmt: skip
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
        return
    if args.model is None:
        ap.error("--model is required unless --rows is given")
    from rich.progress import Progress

    from effirag.cli import fewshot
    from effirag.data import load_questions
    from effirag.llm.hf import HFGenerator

    examples = load_questions(args.questions).examples
    demos, examples = fewshot.load_demos("fewshot", args.questions, args.shots, examples, args.questions)
    examples = examples[: args.limit] if args.limit else examples
    gen = HFGenerator(args.model, device="cpu", max_batch_size=32).load()
    gen.model.eval()
    rows = closed_book(gen, demos, examples)
    with Progress() as bar:
        task = bar.add_task("teacher forcing", total=3 * len(examples))
        scores = decisions(gen, demos, examples, lambda: bar.advance(task))
        scores["asked"] = asked(gen, examples, lambda: bar.advance(task))
    for name, xs in scores.items():
        for r, x in zip(rows, xs, strict=True):
            r[name] = x
    strata = [ex.qtype or "" for ex in examples]
    result = {"model": str(args.model), "questions_file": str(args.questions),
              **report(rows, READOUTS, strata, args.seed)}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    args.out.with_suffix(".rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
