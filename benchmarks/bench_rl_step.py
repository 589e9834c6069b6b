"""Where an RL step's seconds go: the generator's sync (vLLM: the trainer's weights loaded into the engine),
generation, retrieval, no-gradient log-probs (old / reference), the update, and EffiRAG's own overhead (the rollout
beyond sync, generation and retrieval, plus the reward functions).

Reads the ``steps.jsonl`` of GRPO runs (``effirag train grpo``; :mod:`effirag.train.rl.log` defines each field) and
prints, per run, the median over its steps of each part and the overhead's share of the step. Pass ``--skip N`` to
leave out the first steps (model loading and warm-up fall into step 1).

    .venv/bin/python benchmarks/bench_rl_step.py runs/rl/hiprag_grpo/steps.jsonl [more steps.jsonl ...] [--json]

To measure a fresh run, train a few steps first, e.g. with a reference model (``beta`` > 0) so that reference
log-probs are computed:

    OMP_NUM_THREADS=1 .venv/bin/effirag train grpo --config recipes/demo_policy/rl_tearag_grpo_cost.yaml \
        max_steps=12 beta=0.001 output_dir=runs/rl/bench_step

HF against vLLM rollouts (BENCHMARKS.md, "vLLM in process vs HF generate"): SmolLM2-135M-Instruct with LoRA on PopQA
over a BM25 index (``effirag index build --corpus ../shared/data/popqa/corpus.json --out runs/popqa-sparse
--no-dense``), G = hf, then vllm, in .venv-vllm:

    effirag train grpo --config configs/rl/searchr1_grpo_gemma_lora.yaml env.model=SMOLLM2_DIR \
        env.questions=../shared/data/popqa/questions.json env.index=runs/popqa-sparse env.max_questions=16 \
        env.shots=0 env.engine.max_steps=2 env.engine.max_new_tokens=48 bf16=false max_steps=4 \
        questions_per_step=2 num_generations=2 rollout.generator=G output_dir=runs/vbench/grpo-G
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from effirag.train.rl.log import read_steps

PARTS = ("sync_s", "generation_s", "retrieval_s", "logprob_s", "reward_s", "overhead_s", "update_s", "step_s")


def split(steps: list[dict[str, float]]) -> dict[str, float]:
    """Median of each part over ``steps`` and the median overhead share of the step."""
    missing = [p for p in PARTS if any(p not in r for r in steps)]
    if missing:
        raise SystemExit(f"steps lack {missing}: the log predates this split of the step (effirag.train.rl.log)")
    out = {p: statistics.median(r[p] for r in steps) for p in PARTS}
    out["overhead_share"] = statistics.median(r["overhead_s"] / r["step_s"] for r in steps)
    out["steps"] = float(len(steps))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="+", type=Path, help="steps.jsonl files of GRPO runs")
    ap.add_argument("--skip", type=int, default=1, help="leave out the first N steps (warm-up)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = {str(p): split(read_steps(p)[args.skip :]) for p in args.logs}
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    head = "| run | steps | " + " | ".join(PARTS) + " | overhead share |"
    print(head)
    print("|" + "---|" * (len(PARTS) + 3))
    for name, r in rows.items():
        cells = " | ".join(f"{r[p]:.2f}" for p in PARTS)
        print(f"| {Path(name).parent.name} | {int(r['steps'])} | {cells} | {100 * r['overhead_share']:.1f}% |")


if __name__ == "__main__":
    main()
