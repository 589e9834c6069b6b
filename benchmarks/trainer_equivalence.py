"""Every trainer for a few steps with a fixed seed on a tiny model and a tiny world: rewards, losses and final weights.

The check that a refactor of the training side changes no number: run this on a checkout from before the change and
on one after, then compare the two JSON files (``--compare``). It writes, per run, every numeric value of every record
of the run's log (``steps.jsonl`` / ``rounds.jsonl`` / the MCTS ``trees.jsonl``) except timings, and of the final
policy: the sha256 of its weights and, per tensor, its sum and sum of squares.

    # on the checkout to test (its ``src`` is the code run; the workspace is built once and reused)
    python benchmarks/trainer_equivalence.py run --repo . --work /tmp/eq --out after.json
    python benchmarks/trainer_equivalence.py compare before.json after.json --tol 1e-6

A checkout from before the ``env:`` sections (e.g. ``0a473ba``, #54's base) runs its own copy of this file (the same
runs with the old top-level keys; set its step counts to the ones here); give both sides the same ``--work``, so they
train on one workspace.

Runs (all CPU, float32, seed 0; 5 optimiser steps, RouteRAG's two stages 2 + 2): SFT (tiny LFM2 from scratch on
the MuSiQue slice), GRPO (Search-R1 EM; Dynamic Search-R1 memory cost; HiPRAG with the world judge; RouteRAG's two
stages with modeled times), PPO (Search-R1; Dynamic Search-R1 memory cost; HiPRAG), IP-DPO (one TeaRAG round), MCTS
(ReasonRAG trees) and step DPO (fixed pairs).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # tiny_models: a random-init policy built from a config

ENGINE = ["env.engine.max_steps=2", "env.engine.max_new_tokens=8", "env.engine.max_inserted_tokens=48"]
ENGINE += ["env.engine.k=1", "env.engine.passage_mode=sparse"]
GRPO = ["max_steps=5", "save_steps=5", "learning_rate=0.001", "num_generations=3", "questions_per_step=2", "beta=0.04"]
PPO = ["steps=5", "save_steps=5", "lr=0.001", "questions_per_step=2", "samples_per_question=2", "mini_batch_size=2"]
PPO += ["kl_coef=0.05"]
ROUTE = [
    "stages=[{name: outcome, max_steps: 2, objective: {outcome: em}}, {name: efficiency, max_steps: 2, objective: "
    "{outcome_weight: 0.0, routerag_weight: 1.0, routerag_time: modeled, routerag_mode_s: {passage: 0.005, "
    "graph: 0.008, hybrid: 0.012}}}]"
]
TIMING_SUFFIXES = ("_s", "_per_s", "s_per_path", "seconds")
TIMING_PREFIXES = ("s_per_",)  # IP-DPO's s_per_dpo_step


PAIRS = [
    {"prompt": "Question: Who directed Blue River?\n", "chosen": "<think> the director </think>",
     "rejected": "<answer> Paris </answer>", "stage": "reasoning", "question_id": "q1"},
    {"prompt": "Question: Which river flows through Lyon?\n", "chosen": "<search> Lyon river </search>\n"
     "<information> Doc 1 Lyon is on the Rhone. </information>\n", "rejected": "<answer> Seine </answer>"},
]  # fmt: skip
"""Step DPO's pairs: fixed, as a random tiny policy's MCTS trees rarely hold a pair (their statistics are compared)."""


def pairs_file(root: Path) -> Path:
    path = root / "pairs.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PAIRS), encoding="utf-8")
    return path


def workspace(root: Path) -> dict[str, str]:
    """A tiny random-init Qwen2 policy whose turns end at varied lengths, the demo world, a BM25 index over its corpus
    and its first training questions (built once under ``root``; later calls reuse it)."""
    done = root / "workspace.json"
    if done.is_file():
        return dict(json.loads(done.read_text(encoding="utf-8")))
    from transformers import GenerationConfig

    from effirag.data import load_corpus
    from effirag.retrieval.index import IndexConfig, build_index
    from effirag.world import generate_world, load_world_config
    from tiny_models import make_tiny_model

    model = make_tiny_model(root / "model", arch="qwen2", seed=11)
    gc = GenerationConfig.from_pretrained(str(model))
    eos = gc.eos_token_id if isinstance(gc.eos_token_id, int) else 0
    gc.eos_token_id = [eos, *range(100, 160)]  # random turns end at varied lengths: rewards and costs differ
    gc.save_pretrained(str(model))
    world, index = root / "world", root / "index"
    generate_world(load_world_config("demo", None, ()), world)
    corpus = load_corpus(world / "corpus.jsonl")
    build_index(corpus.passages, index, config=IndexConfig(dense=False), corpus_path=str(world / "corpus.jsonl"))
    lines = (world / "questions_train.jsonl").read_text(encoding="utf-8").splitlines()[:4]
    questions = root / "questions.jsonl"
    questions.write_text("\n".join(lines) + "\n", encoding="utf-8")
    ws = {"model": str(model), "index": str(index), "questions": str(questions), "world": str(world)}
    done.write_text(json.dumps(ws), encoding="utf-8")
    return ws


def runs(ws: dict[str, str], out: Path) -> dict[str, list[str]]:
    """name → the ``effirag`` command line of that run (output in ``out/name``)."""
    env = [f"env.model={ws['model']}", f"env.index={ws['index']}", f"env.questions={ws['questions']}", *ENGINE]
    world = [f"env.judge=world:{ws['world']}"]
    sft = ["train", "sft", "--config", "configs/sft/musique_searchr1.yaml", "--quiet", f"train.output_dir={out}/sft"]
    sft += ["train.optim.max_steps=5", "train.save_steps=5", "train.logging_steps=1", "train.max_length=256"]
    sft += ["train.model_shape.hidden_size=32", "train.model_shape.intermediate_size=64"]
    sft += ["train.model_shape.num_layers=1", "train.tokenizer_train.vocab_size=512", "train.optim.batch_size=4"]
    out_: dict[str, list[str]] = {"sft": sft}
    for name, cfg, extra in (
        ("grpo_searchr1", "searchr1_grpo", ["objective.format_weight=0.5"]),
        ("grpo_dsr1_cost", "dsr1_grpo_cost", ["objective.format_weight=0.5", "objective.cost_alpha=1.0"]),
        ("grpo_hiprag", "hiprag_grpo", world),
        ("grpo_routerag", "routerag_grpo", ROUTE),
    ):
        grpo = ["train", "grpo", "--config", f"configs/rl/{cfg}.yaml", "--quiet", *env, *GRPO, *extra]
        out_[name] = [*grpo, f"output_dir={out}/{name}"]
    for name, cfg, extra in (
        ("ppo_searchr1", "searchr1_ppo", ["objective.format_weight=0.5"]),
        ("ppo_dsr1_cost", "dsr1_ppo_cost", ["objective.format_weight=0.5", "objective.cost_alpha=0.01"]),
        ("ppo_hiprag", "hiprag_ppo", world),
    ):
        ppo = ["train", "ppo", "--config", f"configs/rl/{cfg}.yaml", "--quiet", *env, *PPO, *extra]
        out_[name] = [*ppo, f"output_dir={out}/{name}"]
    ipdpo = ["train", "ipdpo", "--config", "configs/dpo/tearag_ipdpo.yaml", *env, "rounds=1", "env.protocol=searchr1"]
    ipdpo += ["samples_per_question=2", "similarity=lexical", "env.max_questions=2", f"output_dir={out}/ipdpo"]
    out_["ipdpo"] = ipdpo
    mcts = ["data", "mcts", "--config", "configs/mcts/reasonrag.yaml", "--quiet", f"env.model=hf:{ws['model']}"]
    mcts += ["env.inference=none", f"env.index={ws['index']}", f"env.questions={ws['questions']}"]
    mcts += ["env.max_questions=2"]
    mcts += ["search.iterations=3", "search.k=2", "search.min_gap=0.0", "search.max_depth=2", *ENGINE]
    out_["mcts"] = [*mcts, f"output_dir={out}/mcts"]
    dpo = ["train", "dpo", "--config", "configs/dpo/reasonrag_step_dpo.yaml", "--quiet"]
    dpo += [f"--data={pairs_file(out.parent / 'workspace')}"]
    dpo += [f"model={ws['model']}", "train.max_steps=5", "train.batch_size=1", "train.grad_accum=1", "save_steps=5"]
    dpo += ["protocol=searchr1"]
    dpo += ["train.learning_rate=1e-3", f"output_dir={out}/step_dpo"]
    out_["step_dpo"] = dpo
    return out_


def _numbers(rec: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """The numeric values of a log record, nested keys joined by '/', timings left out (they vary run to run)."""
    out: dict[str, float] = {}
    for k, v in rec.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_numbers(v, key + "/"))
        elif isinstance(v, bool | int | float) and not (key.endswith(TIMING_SUFFIXES) or k.startswith(TIMING_PREFIXES)):
            out[key] = float(v)
    return out


def weights(folder: Path) -> dict[str, Any]:
    """sha256 of the policy's tensors (name-sorted raw bytes) and per tensor its sum and sum of squares."""
    from safetensors.torch import load_file

    tensors: dict[str, Any] = {}
    for f in sorted(folder.glob("*.safetensors")):
        tensors.update(load_file(str(f)))
    h = hashlib.sha256()
    stats = {}
    for name in sorted(tensors):
        t = tensors[name].float().contiguous()
        h.update(name.encode() + t.numpy().tobytes())
        stats[name] = [float(t.double().sum()), float((t.double() ** 2).sum())]
    return {"sha256": h.hexdigest(), "tensors": stats}


def collect(folder: Path) -> dict[str, Any]:
    """Every log record's numbers and the final policy's weights of the run in ``folder``."""
    logs = {}
    for name in ("steps.jsonl", "rounds.jsonl", "trees.jsonl"):
        for path in sorted(folder.rglob(name)):
            recs = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
            logs[str(path.relative_to(folder))] = [_numbers(r) for r in recs]
    for path in sorted(folder.rglob("loss_curve.json")):  # SFT's per-step losses
        logs[str(path.relative_to(folder))] = [_numbers(r) for r in json.loads(path.read_text(encoding="utf-8"))]
    pairs = folder / "pairs.jsonl"
    out: dict[str, Any] = {"logs": logs}
    if pairs.is_file():
        out["pairs_sha256"] = hashlib.sha256(pairs.read_bytes()).hexdigest()
    policies = sorted(p.parent for p in folder.rglob("config.json") if p.parent.name in ("policy", folder.name))
    for p in policies:
        if any(p.glob("*.safetensors")) and "checkpoint-" not in str(p):
            out[f"weights:{p.relative_to(folder.parent)}"] = weights(p)
    return out


def run_all(repo: Path, work: Path, only: list[str]) -> dict[str, Any]:
    ws = workspace(work / "workspace")
    out = work / f"runs-{repo.resolve().name}"
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(repo.resolve() / "src"), "HF_HUB_OFFLINE": "1"}
    env.update(TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", CUDA_VISIBLE_DEVICES="")
    result: dict[str, Any] = {}
    for name, args in runs(ws, out).items():
        if only and name not in only:
            continue
        done = out / f"{name}.done"  # a finished run is collected again, not rerun (its folder refuses a rerun)
        if not done.is_file():
            cmd = [sys.executable, "-c", "from effirag.cli.main import app; app()", *args]
            p = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True)
            if p.returncode:
                raise SystemExit(f"{name} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
            done.write_text(" ".join(args), encoding="utf-8")
        result[name] = collect(out / name)
    return result


def _flat(x: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(x, dict):
        return {k: v for key, val in x.items() for k, v in _flat(val, f"{prefix}{key}.").items()}
    if isinstance(x, list):
        return {k: v for i, val in enumerate(x) for k, v in _flat(val, f"{prefix}{i}.").items()}
    return {prefix.rstrip("."): x}


def compare(a: dict[str, Any], b: dict[str, Any], tol: float) -> list[str]:
    """Differences between two results: keys in one only, strings that differ, numbers further apart than ``tol``
    (absolute, or relative to the larger magnitude when that is above 1)."""
    fa, fb = _flat(a), _flat(b)
    bad = [f"only in first: {k}" for k in sorted(fa.keys() - fb.keys())]
    bad += [f"only in second: {k}" for k in sorted(fb.keys() - fa.keys())]
    for k in sorted(fa.keys() & fb.keys()):
        x, y = fa[k], fb[k]
        if isinstance(x, float) and isinstance(y, float):
            if not (math.isnan(x) and math.isnan(y)) and abs(x - y) > tol * max(1.0, abs(x), abs(y)):
                bad.append(f"{k}: {x!r} vs {y!r}")
        elif x != y and not k.endswith("sha256"):
            bad.append(f"{k}: {x!r} vs {y!r}")
    return bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run every trainer on the checkout --repo and write --out")
    r.add_argument("--repo", type=Path, default=Path("."))
    r.add_argument("--work", type=Path, required=True, help="scratch folder (the workspace is reused across calls)")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--only", nargs="*", default=[], help="only these runs")
    c = sub.add_parser("compare", help="compare two results")
    c.add_argument("first", type=Path)
    c.add_argument("second", type=Path)
    c.add_argument("--tol", type=float, default=1e-6)
    args = ap.parse_args()
    if args.cmd == "run":
        res = run_all(args.repo, args.work, args.only)
        args.out.write_text(json.dumps(res, indent=1, sort_keys=True), encoding="utf-8")
        sys.stdout.write(f"{len(res)} runs written to {args.out}\n")
        return
    a = json.loads(args.first.read_text(encoding="utf-8"))
    b = json.loads(args.second.read_text(encoding="utf-8"))
    missing = sorted(a.keys() ^ b.keys())
    if missing:  # a partial result: compare the runs both hold, and say which were left out
        sys.stdout.write(f"runs in one file only (not compared): {missing}\n")
        a, b = ({k: x[k] for k in x if k in a and k in b} for x in (a, b))
    bad = compare(a, b, args.tol)
    fa, fb = _flat(a), _flat(b)
    hashes = [k for k in fa if k.endswith("sha256")]
    same = sum(fa[k] == fb.get(k) for k in hashes)
    sys.stdout.write(f"{len(fa)} values compared, {len(bad)} differ beyond {args.tol}; ")
    sys.stdout.write(f"{same} of {len(hashes)} hashes (weights, pairs files) equal to the bit\n")
    sys.stdout.write("".join(f"  {x}\n" for x in bad[:50]))
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
