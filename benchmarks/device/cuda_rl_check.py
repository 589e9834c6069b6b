"""GRPO and PPO on a CUDA device: a few steps of each trainer, from config, on the RL tests' workspace (a tiny
random-init Qwen2 policy, a BM25 index over the engine tests' passages, three questions), for a task lent a GPU.

The CPU test suite never places a trainer on a GPU; this checks that it can: PPO with ``device=cuda`` (both critics
where ``critic`` exists) and GRPO, which TRL places on the GPU when one is visible. Each run must change every trained
tensor and leave a step log; the script prints one JSON line per run (steps, seconds, peak GPU memory, the device the
policy was on) and writes them to OUT/cuda_rl_check.jsonl. Exit status 1 if any check fails.

    PYTHONPATH=src:tests python3 benchmarks/device/cuda_rl_check.py --out /tmp/cuda_check [--device cpu]

``--device cpu`` rehearses it here. Needs trl, datasets and bm25s besides torch and transformers (carried as wheels
on a bare GPU machine: see /work/.library's device notes).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any


def _workspace(root: Path) -> dict[str, str]:
    """The RL tests' workspace (tests/conftest.py ``rl_workspace``), built the same way."""
    from conftest import RL_QUESTIONS, _end_turns_early
    from effirag.retrieval.index import IndexConfig, build_index
    from effirag.types import Passage
    from test_engine_support import PASSAGES
    from tiny_models import make_tiny_model

    model = make_tiny_model(root / "model", arch="qwen2", seed=11)
    _end_turns_early(model)
    index = root / "index"
    build_index([Passage(i, t, x) for i, t, x in PASSAGES], index, config=IndexConfig(dense=False), corpus_path="mem")
    qfile = root / "questions.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in RL_QUESTIONS[:3]), encoding="utf-8")
    return {"model": str(model), "index": str(index), "questions": str(qfile)}


def _common(ws: dict[str, str], out: Path, steps: int) -> list[str]:
    return [
        *(f"env.{key}={value}" for key, value in ws.items()),
        f"output_dir={out}",
        "save_steps=1000",
        "env.engine.max_steps=2",
        "env.engine.max_new_tokens=16",
        "env.engine.max_inserted_tokens=48",
        "env.engine.k=1",
        "env.engine.passage_mode=sparse",
        "objective.format_weight=0.5",
        "objective.cost=memory",
        "objective.cost_alpha=0.01",
    ]


def _changed(before: Path, after: Path) -> tuple[int, list[str]]:
    from safetensors.torch import load_file

    a, b = load_file(str(before / "model.safetensors")), load_file(str(after / "model.safetensors"))
    return len(a), [k for k in a if bool((a[k] == b[k].to(a[k].device)).all())]


def _run_ppo(ws: dict[str, str], out: Path, device: str, critic: str | None, steps: int) -> dict[str, Any]:
    from effirag.config import load_config
    from effirag.train.rl.ppo_config import PPORunConfig
    from effirag.train.rl.ppo_run import run_ppo

    extra = [f"steps={steps}", f"device={device}", "lr=0.001", "questions_per_step=3", "samples_per_question=2"]
    extra += ["mini_batch_size=2", "ppo_epochs=1"] + ([f"critic={critic}"] if critic else [])
    cfg = load_config(PPORunConfig, Path("configs/rl/dsr1_ppo_cost.yaml"), _common(ws, out, steps) + extra)
    res = run_ppo(cfg)
    return {"steps": res.steps, "policy_dir": str(res.policy_dir)}


def _run_grpo(ws: dict[str, str], out: Path, steps: int) -> dict[str, Any]:
    from effirag.config import load_config
    from effirag.train.rl.grpo import GRPORunConfig
    from effirag.train.rl.run import run_grpo

    extra = [f"max_steps={steps}", "learning_rate=0.001", "num_generations=3", "questions_per_step=2", "beta=0.04"]
    extra += ["scale_rewards=none"]
    cfg = load_config(GRPORunConfig, Path("configs/rl/dsr1_grpo_cost.yaml"), _common(ws, out, steps) + extra)
    res = run_grpo(cfg)
    return {"steps": res.steps, "policy_dir": str(res.policy_dir)}


def _check(name: str, fn: Any, ws: dict[str, str], steps: int) -> dict[str, Any]:
    import torch

    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    row: dict[str, Any] = {"run": name}
    try:
        row.update(fn())
    except Exception as exc:  # reported as a failed check with its message, never swallowed
        import traceback

        where = traceback.format_exception(exc)[-4:-1]
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}", where="".join(where))
        return row
    row["seconds"] = round(time.perf_counter() - t0, 1)
    row["peak_gpu_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1) if cuda else 0.0
    n, same = _changed(Path(ws["model"]), Path(row["policy_dir"]))
    row.update(tensors=n, unchanged=same, ok=row["steps"] == steps and not same and (row["peak_gpu_mib"] > 0) == cuda)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda", help="cuda (the check) or cpu (a rehearsal)")
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    import torch

    from effirag.train.rl.ppo_config import PPORunConfig

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.stderr.write("cuda_rl_check: --device cuda but torch sees no GPU\n")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    ws = _workspace(args.out / "ws")
    critics = ["shared", "separate"] if "critic" in PPORunConfig.__dataclass_fields__ else [None]
    runs: list[tuple[str, Any]] = [
        (f"ppo-{c or 'default'}", lambda c=c: _run_ppo(ws, args.out / f"ppo-{c}", args.device, c, args.steps))
        for c in critics
    ]
    runs.append(("grpo", lambda: _run_grpo(ws, args.out / "grpo", args.steps)))
    rows = [_check(name, fn, ws, args.steps) | {"device": args.device} for name, fn in runs]
    with (args.out / "cuda_rl_check.jsonl").open("w", encoding="utf-8") as f:
        for row in rows:
            line = json.dumps(row)
            f.write(line + "\n")
            sys.stdout.write(line + "\n")
    return 0 if all(r.get("ok") for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
