"""Does a shorter `<Reference>` make TeaRAG's first-hop read easier? Replays the first search of recorded trajectories
with the passage cut down, and counts the summaries that state the hop's answer.

    .venv/bin/python benchmarks/probe_read_context.py --model checkpoints/demo-policy \
        runs/eval/<name>/tearag/trajectories.jsonl [--world runs/demo/world] [--split test] [--show 0]

For every trajectory whose first search names the first gold hop's entity and whose one retrieved passage shows the
hop's answer in its text (no triplet), the prompt of the engine's second turn is rebuilt (the protocol's prompt, the
recorded search, the observation) with the passage replaced by:

- ``full``: the passage as retrieved (reproduces the recorded summary: a check of the replay, printed);
- ``answer sentence``: only the sentence that holds the answer (an oracle one-sentence chunk);
- ``window of 3``: that sentence with its neighbours;
- ``first + answer sentence``: the passage's opening sentence and the answer's.

The policy then writes the summary greedily with the demo's frequency penalty, and the script prints, per variant, how
many summaries state the hop's answer. If the oracle one-sentence chunk reads no better than the full passage, the
misses are not distraction by the passage's other sentences, and shorter chunks would not fix them. Film titles with
parentheses are skipped (the reference's title is then not cut cleanly). Reads the trajectories and the world; loads
the model once.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
from pathlib import Path

from read_tearag_hops import _entity, _names, _stated, _summary, evidence_kind

from effirag.agent.protocols import get_protocol
from effirag.llm.base import GenerationConfig
from effirag.llm.hf import HFGenerator
from effirag.metrics import normalize_answer
from effirag.train.gold_paths import world_paths

_REFERENCE = re.compile(r"(\n<Reference>\nDoc 1 \(Title: [^)]*\) )(.*)(\n</Reference>\n)$", re.S)
_SENTENCE_END = re.compile(r"(?<=\.)\s+(?=[A-Z])")


def variants(body: str, answer: str) -> dict[str, str] | None:
    """The passage ``body`` cut four ways around the sentence that holds ``answer`` (None when none does)."""
    sents = _SENTENCE_END.split(body)
    a = normalize_answer(answer)
    k = next((i for i, s in enumerate(sents) if a in normalize_answer(s)), None)
    if k is None:
        return None
    return {
        "full": body,
        "answer sentence": sents[k],
        "window of 3": " ".join(sents[max(0, k - 1) : k + 2]),
        "first + answer sentence": " ".join(dict.fromkeys([sents[0], sents[k]])),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trajectories", type=Path)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--world", type=Path, default=Path("runs/demo/world"))
    ap.add_argument("--split", default="test", choices=["train", "dev", "test"], help="the trajectories' split")
    ap.add_argument("--frequency-penalty", type=float, default=0.3, help="as the demo's evaluation")
    ap.add_argument("--show", type=int, default=0, help="print this many misreads of the one-sentence chunk")
    args = ap.parse_args()
    paths, _, _ = world_paths(args.world, args.split)
    gold = {p.id: p for p in paths}
    protocol = get_protocol("tearag")
    cases: list[tuple[str, str, dict[str, str]]] = []  # (hop answer, recorded summary turn, prompt per variant)
    for line in args.trajectories.open():
        t = json.loads(line)
        path, steps = gold[t["question_id"]], t["steps"]
        if len(steps) < 2 or steps[0]["action"] != "search" or not _names(steps[0], _entity(path.hops[0])):
            continue
        hop, obs = path.hops[0], steps[0]["observation"]
        m = _REFERENCE.match(obs)
        if evidence_kind(obs, hop.answer) != "in passage text only (no triplets)" or m is None:
            continue
        head, body, tail = m.groups()
        cut = variants(body, hop.answer)
        if cut is None:
            continue
        base = protocol.build_prompt(t["question"]) + steps[0]["text"]
        cases.append((hop.answer, steps[1]["text"], {v: base + head + b + tail for v, b in cut.items()}))
    generator = HFGenerator(args.model, device="cpu").load()
    config = GenerationConfig(max_new_tokens=128, stop=protocol.stop, frequency_penalty=args.frequency_penalty)
    right: collections.Counter[str] = collections.Counter()
    replayed = 0
    for variant in ("full", "answer sentence", "window of 3", "first + answer sentence"):
        outs = generator.generate([c[2][variant] for c in cases], config)
        for (answer, recorded, prompts), out in zip(cases, outs, strict=True):
            text = out[0].text
            ok = normalize_answer(_stated(_summary(text))) == normalize_answer(answer)
            right[variant] += ok
            replayed += variant == "full" and text.strip() == recorded.strip()
            if variant == "answer sentence" and not ok and args.show > 0:
                args.show -= 1
                print("reference:", prompts[variant].split("(Title: ")[-1].split("\n</Reference>")[0])
                print("    wrote:", text[:200].replace("\n", " "))
    print(f"{args.trajectories}: {len(cases)} first-hop searches whose passage text shows the answer")
    print(f"replay check: {replayed} of {len(cases)} full-passage summaries equal the recorded ones")
    print("| reference | summary states the answer |")
    print("|---|---|")
    for variant, n in right.items():
        print(f"| {variant} | {n} / {len(cases)} ({n / len(cases):.0%}) |")


if __name__ == "__main__":
    main()
