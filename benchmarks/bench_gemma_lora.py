"""LoRA SFT then LoRA GRPO of Gemma 3 270M (base model, ``effirag[gemma]``) on the MuSiQue slice: a smoke run that
shows the loss falls, the adapter saves and loads, and GRPO moves the parameters and writes its log.

1. ``effirag train sft`` with configs/sft/gemma_lora_searchr1.yaml (Search-R1 trajectories from the gold
   decompositions) for ``--sft-steps`` steps of one ``--max-length``-token row: the logged losses, then the saved
   adapter loaded onto the base model (peft) against the merged model: max |Δ logit| on a probe text.
2. ``effirag train grpo`` with configs/rl/gemma_lora_grpo.yaml from the SFT model for ``--grpo-steps`` steps (a BM25
   index of the corpus is built first when missing): the steps.jsonl records, and how far the merged policy moved
   from its start (tensors changed, max |Δw|).
The GPU-sized settings are the configs' own; the overrides here make the run fit a shared CPU.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_gemma_lora.py [--sft-steps 6] [--grpo-steps 3] [--out /tmp/gl]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("EFFIRAG_SHARED_DATA", REPO.parent / "shared" / "data")) / "musique_mini"
PROBE = "Question: Who wrote Hamlet?\n<search> Hamlet author </search>"


def sft(model: Path, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    from effirag.config import load_config
    from effirag.train.pipeline import SFTRunConfig, run_pipeline

    sets = [f"train.model={model}", f"train.output_dir={out}", f"train.max_length={args.max_length}"]
    sets += [
        "train.optim.batch_size=1",
        f"train.optim.max_steps={args.sft_steps}",
        f"train.save_steps={args.sft_steps}",
    ]
    sets += [f"train.optim.learning_rate={args.sft_lr}", f"data.source.questions={DATA / 'questions.json'}"]
    sets += [f"data.source.corpus={DATA / 'corpus.json'}"]
    cfg = load_config(SFTRunConfig, REPO / "configs/sft/gemma_lora_searchr1.yaml", sets)
    t0 = time.perf_counter()
    rep = run_pipeline(cfg, progress=False)
    losses = [h["loss"] for h in json.loads((out / "loss_curve.json").read_text(encoding="utf-8"))]
    return {"seconds": time.perf_counter() - t0, "losses": losses, "rows": rep.counts} | adapter_check(model, out)


def adapter_check(base_dir: Path, out: Path) -> dict[str, Any]:
    """Load ``out/adapter`` onto the base model and compare its logits on PROBE with the merged model's."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ids = AutoTokenizer.from_pretrained(str(base_dir))(PROBE, return_tensors="pt").input_ids
    with torch.no_grad():
        base = AutoModelForCausalLM.from_pretrained(str(base_dir)).eval()
        plain = base(ids).logits
        adapted = PeftModel.from_pretrained(base, str(out / "adapter")).eval()(ids).logits
        merged = AutoModelForCausalLM.from_pretrained(str(out)).eval()(ids).logits
    return {
        "adapter_files": sorted(p.name for p in (out / "adapter").iterdir()),
        "max_abs_logit_diff_adapter_vs_merged": float((adapted - merged).abs().max()),
        "max_abs_logit_diff_base_vs_merged": float((plain - merged).abs().max()),
    }


def grpo(model: Path, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from safetensors.torch import load_file

    from effirag.config import load_config
    from effirag.train.rl.grpo import GRPORunConfig
    from effirag.train.rl.log import read_steps
    from effirag.train.rl.run import run_grpo

    index = out.parent / "musique-bm25"
    if not (index / "manifest.json").is_file():
        from effirag.data import load_corpus
        from effirag.retrieval.index import IndexConfig, build_index

        build_index(load_corpus(DATA / "corpus.json").passages, index, config=IndexConfig(dense=False))
    sets = [f"env.model={model}", f"output_dir={out}", f"env.index={index}", f"env.questions={DATA / 'questions.json'}"]
    sets += [f"max_steps={args.grpo_steps}", f"save_steps={args.grpo_steps}", f"num_generations={args.group}"]
    sets += [
        "questions_per_step=1",
        "env.max_questions=3",
        "env.engine.max_steps=2",
        f"env.engine.max_new_tokens={args.turn_tokens}",
    ]
    sets += ["env.engine.max_inserted_tokens=64", "env.engine.k=1", f"env.protocol={args.grpo_protocol}"]
    cfg = load_config(GRPORunConfig, REPO / "configs/rl/gemma_lora_grpo.yaml", sets)
    t0 = time.perf_counter()
    res = run_grpo(cfg)
    before, after = load_file(str(model / "model.safetensors")), load_file(str(res.policy_dir / "model.safetensors"))
    moved = [k for k in before if not torch.equal(before[k], after[k])]
    keep = ("step", "loss", "reward", "em", "reward/cost", "generated_tokens_per_q", "format_rate", "update_s")
    return {
        "seconds": time.perf_counter() - t0,
        "steps": [{k: r.get(k) for k in keep} for r in read_steps(out / "steps.jsonl")],
        "tensors_changed": f"{len(moved)} of {len(before)}",
        "max_abs_dw": max((float((before[k] - after[k]).abs().max()) for k in moved), default=0.0),
        "adapter_files": sorted(p.name for p in (out / "adapter").iterdir()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sft-steps", type=int, default=6)
    ap.add_argument("--sft-lr", type=float, default=1e-3)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--grpo-steps", type=int, default=3)
    ap.add_argument("--group", type=int, default=4, help="GRPO samples per question")
    ap.add_argument("--grpo-protocol", default="searchr1", help="e.g. zeroshot: one turn that ends at its newline")
    ap.add_argument("--turn-tokens", type=int, default=64, help="GRPO rollout: most new tokens per turn")
    ap.add_argument(
        "--grpo-from", type=Path, help="GRPO start model (default: the SFT run's, or Gemma with --skip sft)"
    )
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--out", type=Path, default=Path("/tmp/gemma-lora"))
    ap.add_argument("--skip", choices=("sft", "grpo"), help="run only the other part (GRPO then starts from Gemma)")
    args = ap.parse_args()
    import torch

    from effirag.llm.models import prepare

    torch.set_num_threads(args.threads)
    gemma = prepare("gemma-3-270m").hf_dir
    report: dict[str, Any] = {}
    if args.skip != "sft":
        report["sft"] = sft(gemma, args.out / "sft", args)
        print(json.dumps(report["sft"], indent=1), flush=True)
    if args.skip != "grpo":
        start = args.grpo_from or (args.out / "sft" if args.skip != "sft" else gemma)
        report["grpo"] = grpo(start, args.out / "grpo", args)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
