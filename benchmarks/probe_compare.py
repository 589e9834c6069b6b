"""Does a policy compare two values it is shown? The comparison drill's probe (BENCHMARKS.md item 36).

    .venv/bin/python benchmarks/probe_compare.py probe <model> [--world runs/world-demo-seed0] [--n 600]
    .venv/bin/python benchmarks/probe_compare.py train <out> [--model checkpoints/demo-policy] [--steps 300]
        [--lr 1e-3] [--rows 3000]
    .venv/bin/python benchmarks/probe_compare.py swap <model> <trajectories.jsonl> [--context full|summary|line]
    .venv/bin/python benchmarks/probe_compare.py word <model> <trajectories.jsonl>

``probe``: greedy continuation of held-out pairs lines cut before the answer ("Ada Vell: 3 May 1901; Bo Rinn: 9 June
1880. So the answer is") from comparisons drawn from the world's facts (the draw after the first 48,000, which no
drill of this script or of the configs uses); right when the continuation starts with the compared-out answer. Split by
kind: "which first" (two names, chance 50%) and nationality (yes / no, chance ~50%).

``train``: SFT on comparison drill rows alone (train/drill.py, the first ``rows`` x 16 of the draw), to ask whether
the model can learn the compare at all, apart from the trajectories that would also have to teach it to write the line.

``swap``: the compare inside the policy's own trajectories. Each "which first" TeaRAG trajectory (bench_policy.py's
trajectories.jsonl) whose last summary writes the pairs line is cut before the pairs line's answer, or before its
decision word where it writes one (``comparison_decision``; its `prompt` field: the run's whole context); the greedy
answer there is read (after the decision word and "So the answer is"), then again with the two values swapped.
An answer read off the values names the other entity after the swap; one that ignores them names the same one.
``--context summary`` keeps only the run's last summary (from its "<summary>" on), ``--context line`` the pairs line
alone: where along the context the compare is lost.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from effirag.train.drill import ANSWER_CUE
from effirag.train.trajectories import EARLIER_CUE, SAME_CUE, find_pairs_line

CUES = (ANSWER_CUE.rstrip(" "), f" {EARLIER_CUE}", f" {SAME_CUE}")  # what ends a pairs line before its decision

HELD_OUT = 48_000  # drawn paths before the probe's (the drill draws at most this many)


def probe(model_dir: str, world: str, n: int, decide: bool = False) -> dict[str, dict[str, float]]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from effirag.train.drill import drill_line
    from effirag.train.gold_paths import world_comparison_paths

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    paths = world_comparison_paths(world, HELD_OUT + n, seed=0)[HELD_OUT:]
    counts: dict[str, list[int]] = {}
    for p in paths:
        head, answer = drill_line(p, decide=decide)
        ids = tok(head.text, return_tensors="pt", add_special_tokens=False).input_ids  # (1, T)
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=24 if decide else 12, do_sample=False)
        text = tok.decode(out[0, ids.shape[1] :], skip_special_tokens=False)
        kind = "nationality" if p.answer in ("yes", "no") else "which first"
        right, total = counts.setdefault(kind, [0, 0])
        counts[kind] = [right + text.strip().startswith(answer.text.strip().rstrip(".")), total + 1]
    return {k: {"right": r, "n": t, "accuracy": round(r / t, 3)} for k, (r, t) in counts.items()}


def _year(value: str) -> int | None:
    years = re.findall(r"\d{4}", value)
    return int(years[-1]) if years else None


CONTEXTS = ("full", "summary", "line")


def swap(model_dir: str, trajectories: str, context: str = "full") -> dict[str, int]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()

    def answer(text: str, cue: str) -> str:
        """The name the policy gives after ``text``: what it writes at once, or after its decision word and "So the
        answer is" when ``text`` ends with a decision cue (nothing when it never writes that)."""
        ids = tok(text, return_tensors="pt", add_special_tokens=False).input_ids  # (1, T)
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=24, do_sample=False)
        said = tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
        if cue != ANSWER_CUE.rstrip(" "):
            _, sep, said = said.partition(ANSWER_CUE.rstrip(" "))
            said = said if sep else ""
        return said.strip()

    counts = {"no pairs line": 0, "n": 0, "as in the run": 0, "right": 0, "names the first": 0, "follows the swap": 0}
    for line in Path(trajectories).read_text().splitlines():
        t = json.loads(line)
        full = t["prompt"]  # the run's whole context: the prompt, then every step's text and observation
        if t["steps"] and t["steps"][-1]["text"] not in full:
            raise SystemExit(f"{trajectories}: {t['question_id']}: the prompt field does not hold the last step")
        if " first" not in t["question"]:
            continue
        # the last pairs line, cut where the policy decided: before the name, or before the decision word
        line = find_pairs_line(full[: full.rfind(ANSWER_CUE.rstrip(" ")) + len(ANSWER_CUE)])
        if line is None:
            counts["no pairs line"] += 1
            continue
        head = full[: line.end]
        cue = next(c for c in CUES if head.endswith(c))
        # how much of the run's context the policy sees: all of it, its last summary on, or the pairs line alone
        keep = {"full": 0, "summary": max(head.rfind("<summary>"), 0), "line": line.start}[context]
        head, start = head[keep:], line.start - keep
        (a, va), (b, vb) = line.first, line.second
        ya, yb = _year(va), _year(vb)
        if ya is None or yb is None or ya == yb:
            continue  # same year: the compare needs the day and month, which this count leaves out
        said = answer(head, cue)
        swapped = answer(f"{head[:start]}{a}: {vb}; {b}: {va}.{cue}", cue)
        counts["n"] += 1
        counts["as in the run"] += said.startswith(str(t["prediction"]).strip())
        counts["right"] += said.startswith(a if ya < yb else b)
        counts["names the first"] += said.startswith(a)
        counts["follows the swap"] += said.startswith(a) != swapped.startswith(a)
    return counts


def word(model_dir: str, trajectories: str) -> dict[str, int]:
    """The decision word alone (``comparison_decision`` lines), in the run's whole context: each "which first"
    trajectory is cut after "The earlier is the"; the next word is read, then again with the two values swapped."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()

    def next_word(text: str) -> str:
        ids = tok(text, return_tensors="pt", add_special_tokens=False).input_ids  # (1, T)
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=2, do_sample=False)
        said = tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True).strip()
        return said.split(" ")[0].rstrip(".")

    counts = {"n": 0, "right": 0, "follows the swap": 0}
    for line in Path(trajectories).read_text().splitlines():
        t = json.loads(line)
        full = t["prompt"]
        found = find_pairs_line(full[: full.rfind(ANSWER_CUE.rstrip(" ")) + len(ANSWER_CUE)])
        if " first" not in t["question"] or found is None or not full[: found.end].endswith(EARLIER_CUE):
            continue
        (a, va), (b, vb) = found.first, found.second
        ya, yb = _year(va), _year(vb)
        if ya is None or yb is None or ya == yb:
            continue
        said = next_word(full[: found.end])
        swapped = next_word(f"{full[: found.start]}{a}: {vb}; {b}: {va}. {EARLIER_CUE}")
        counts["n"] += 1
        counts["right"] += said == ("first" if ya < yb else "second")
        counts["follows the swap"] += {said, swapped} == {"first", "second"}
    return counts


def train(
    out: str, model_dir: str, world: str, steps: int, lr: float, rows: int, decide: bool = False, threads: int = 1
) -> dict[str, float]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from effirag.train.drill import comparison_drill
    from effirag.train.gold_paths import world_comparison_paths
    from effirag.train.sft import OptimConfig, SFTConfig, run_sft
    from effirag.train.sft_data import tokenize_examples

    if rows * 16 > HELD_OUT:
        raise SystemExit(f"--rows {rows}: at most {HELD_OUT // 16} rows leave the probe's comparisons unseen")
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    data = tokenize_examples(
        comparison_drill(world_comparison_paths(world, rows * 16, seed=0), 16, decide=decide), tok, 768
    )
    cfg = SFTConfig(output_dir=Path(out), threads=threads, save_steps=10**6, resume=False,
                    optim=OptimConfig(learning_rate=lr, max_steps=steps, weight_decay=0.1, batch_size=16))  # fmt: skip
    r = run_sft(cfg, model, tok, data, progress=False)
    return {"steps": r.steps, "train_loss": r.train_loss, "seconds": r.seconds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("probe")
    p.add_argument("model")
    p.add_argument("--world", default="runs/world-demo-seed0")
    p.add_argument("--n", type=int, default=600)
    p.add_argument("--decide", action="store_true", help="lines with the decision word (comparison_decision)")
    t = sub.add_parser("train")
    t.add_argument("out")
    t.add_argument("--model", default="checkpoints/demo-policy")
    t.add_argument("--world", default="runs/world-demo-seed0")
    t.add_argument("--steps", type=int, default=300)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--rows", type=int, default=3000)
    t.add_argument("--decide", action="store_true", help="lines with the decision word (comparison_decision)")
    t.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    w = sub.add_parser("swap")
    w.add_argument("model")
    w.add_argument("trajectories")
    w.add_argument(
        "--context",
        choices=CONTEXTS,
        default="full",
        help="what the policy sees before the line: the run's whole context, its last summary on, or none",
    )
    d = sub.add_parser("word")
    d.add_argument("model")
    d.add_argument("trajectories")
    a = ap.parse_args()
    if a.cmd == "probe":
        result: dict = probe(a.model, a.world, a.n, a.decide)
    elif a.cmd == "word":
        result = word(a.model, a.trajectories)
    elif a.cmd == "swap":
        result = swap(a.model, a.trajectories, a.context)
    else:
        result = train(a.out, a.model, a.world, a.steps, a.lr, a.rows, a.decide, a.threads)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
