"""A real model on real questions under several protocols in one process: the backend is loaded once (a vLLM start
costs minutes on this CPU) and every (dataset, protocol) run is `effirag eval qa`'s evaluation with its report and
trajectories saved. Run with the venv whose backend it names (vLLM: .venv-vllm):

    PYTHONPATH=src .venv-vllm/bin/python benchmarks/real_eval.py --backend "vllm:DIR?chat=1&dtype=float32&eager=1" \
        --out OUT --data popqa:500 --data musique_mini:0 --protocols zeroshot,naive,searchr1,hiprag

``--data NAME:N`` runs the first N questions of ``$EFFIRAG_SHARED_DATA/NAME`` (0: all) over a BM25 index of its
corpus (built in ``OUT/idx-NAME`` when absent); ``NAME:N:P1,P2`` runs those protocols there instead of
``--protocols``. ``--fewshot 3`` draws 3 demos from the same file (base models), as
``eval qa --prompt-style fewshot --demos FILE`` does. Each run writes ``OUT/NAME.PROTOCOL/`` (trajectories) and
``OUT/NAME.PROTOCOL.json`` (report with ``wall_s``); a run whose report exists is skipped.

``--agree RUN_A RUN_B`` (no model): of the questions both ``eval qa --out`` folders answered, how many have the same
prediction and the same text in every turn (greedy HF and vLLM should agree), and each run's EM on them.
``--text-cover RUN...`` (no model): per run, the share of questions whose gold answer (any alias, normalised) occurs
in the text the model generated in any turn, parsed answer or not (a lenient signal for a model that ignores the
answer tags).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Engine settings: BM25, k 3, <= 4 turns of 64 tokens, greedy (the real-model rows of BENCHMARKS.md).
SETTINGS = (
    "k=3", "max_steps=4", "max_new_tokens=64", "max_total_tokens=2048", "max_inserted_tokens=384",
    "passage_mode=sparse",
)  # fmt: skip


def _index(data: Path, name: str, out: Path) -> Path:
    idx = out / f"idx-{name}"
    if not idx.is_dir():
        cmd = [sys.executable, "-c", "from effirag.cli.main import app; app()", "index", "build", "--no-dense"]
        subprocess.run([*cmd, "--corpus", str(data / name / "corpus.json"), "--out", str(idx)], check=True)
    return idx


def _run(args: argparse.Namespace, generator: object, name: str, limit: int, protocol: str) -> None:
    from effirag.cli import fewshot
    from effirag.cli.agent import env_config
    from effirag.data import load_questions
    from effirag.env.build import build_env
    from effirag.eval.qa import evaluate_qa

    report_file = args.out / f"{name}.{protocol}.json"
    if report_file.is_file():
        return
    questions = args.data_root / name / "questions.json"
    index = _index(args.data_root, name, args.out)
    cfg = env_config(protocol, args.backend, index, list(SETTINGS), judge="none", questions=questions)
    env = dataclasses.replace(build_env(cfg, tokens=generator), generator=generator)
    style = "fewshot" if args.fewshot else "instruct"
    demos_file = questions if args.fewshot else None
    examples = load_questions(questions).examples
    demos, examples = fewshot.load_demos(style, demos_file, args.fewshot or 3, examples, questions)
    if limit:
        examples = examples[:limit]
    protocol_obj = env.protocol.use_demos(demos)
    start = time.perf_counter()
    report, _ = evaluate_qa(
        examples, env.policy, env.retriever, protocol_obj, env.engine, out_dir=args.out / f"{name}.{protocol}",
        chunk_size=args.chunk,
    )  # fmt: skip
    report["wall_s"] = time.perf_counter() - start
    report_file.write_text(json.dumps(report, indent=1, default=str))
    t = report["tokens"]
    line = (
        f"{name} {protocol} n={report['n']} em={report['em']:.4f} f1={report['f1']:.4f} "
        f"cover_em={report['cover_em']:.4f} format={report['format_rate']:.4f} "
        f"searches={report['retrieval_turns']:.3f} tokens={json.dumps(t)} wall_s={report['wall_s']:.0f}"
    )
    with (args.out / "summary.txt").open("a") as f:
        f.write(line + "\n")


def agree(run_a: Path, run_b: Path) -> dict[str, object]:
    """Paired agreement of two runs' trajectories (one sample per question), with each run's EM on the pair."""
    from effirag.data import load_questions
    from effirag.eval.compare import read_trajectories, run_questions
    from effirag.metrics import exact_match

    gold = {ex.id: ex.answers for ex in load_questions(run_questions(run_a)).examples}
    a = {t.question_id: t for t in read_trajectories(run_a / "trajectories.jsonl")}
    b = {t.question_id: t for t in read_trajectories(run_b / "trajectories.jsonl")}
    ids = sorted(a.keys() & b.keys())
    same_pred = sum(a[i].prediction == b[i].prediction for i in ids)
    same_text = sum([s.text for s in a[i].steps] == [s.text for s in b[i].steps] for i in ids)
    em = [sum(exact_match(r[i].prediction or "", gold[i]) for i in ids) / max(len(ids), 1) for r in (a, b)]
    return {"n": len(ids), "same_prediction": same_pred, "same_turn_texts": same_text, "em_a": em[0], "em_b": em[1]}


def text_cover(run: Path) -> dict[str, object]:
    """Share of a run's trajectories whose generated text (all turns) covers a gold answer."""
    from effirag.data import load_questions
    from effirag.eval.compare import read_trajectories, run_questions
    from effirag.metrics import cover_exact_match

    gold = {ex.id: ex.answers for ex in load_questions(run_questions(run)).examples}
    trajs = read_trajectories(run / "trajectories.jsonl")
    hits = [cover_exact_match(" ".join(s.text for s in t.steps), gold[t.question_id]) for t in trajs]
    return {"run": str(run), "n": len(trajs), "text_cover_em": sum(hits) / max(len(hits), 1)}


def main() -> None:
    from effirag.llm.factory import make_generator

    if sys.argv[1:2] == ["--agree"]:
        print(json.dumps(agree(Path(sys.argv[2]), Path(sys.argv[3]))))
        return
    if sys.argv[1:2] == ["--text-cover"]:
        for run in sys.argv[2:]:
            print(json.dumps(text_cover(Path(run))))
        return

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data", action="append", default=[], help="NAME:N[:PROTOCOLS] (repeatable)")
    ap.add_argument("--protocols", default="zeroshot,naive,searchr1,hiprag")
    ap.add_argument("--fewshot", type=int, default=0, help="demos per prompt drawn from the questions file (0: none)")
    ap.add_argument("--chunk", type=int, default=100, help="questions per batched engine call")
    args = ap.parse_args()
    args.data_root = Path(os.environ.get("EFFIRAG_SHARED_DATA", "../shared/data"))
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    generator = make_generator(args.backend, load=True)
    with (args.out / "summary.txt").open("a") as f:
        f.write(f"backend {args.backend} load_s={time.perf_counter() - start:.0f}\n")
    for spec in args.data or ["popqa:500"]:
        name, _, rest = spec.partition(":")
        n, _, protocols = rest.partition(":")
        for protocol in (protocols or args.protocols).split(","):
            _run(args, generator, name, int(n or 0), protocol)


if __name__ == "__main__":
    main()
