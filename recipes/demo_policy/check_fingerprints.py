"""Check that the recipe's stage configs still build the SFT rows that trained checkpoints/demo-policy-sft (the SFT
chain's export).

    python recipes/demo_policy/check_fingerprints.py [--world DIR] [stage ...]

Each stage's rows (input_ids and labels, in order) are built with checkpoints/demo-policy-sft's tokenizer (the one every
stage encodes with) over the demo world (generated into --world when missing: preset demo, seed 0) and hashed; the
sha256 and row count must equal data_fingerprints.json's. About 15-50 s per stage on one CPU core; no training.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `demo_policy` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from demo_policy.config import StageConfig
from demo_policy.stage import data_only
from effirag.config import load_config

HERE = Path(__file__).resolve().parent
FINGERPRINTS = HERE / "data_fingerprints.json"


def stage_fingerprint(stage: str, world: Path, model: Path = Path("checkpoints/demo-policy-sft")) -> dict[str, object]:
    """The rows' fingerprint of ``stage`` (a YAML name without .yaml) over ``world``, encoded by ``model``'s
    tokenizer."""
    overrides = [f"train.model={model}", "previous_stage=null", f"data.source.world={world}"]
    return data_only(load_config(StageConfig, HERE / f"{stage}.yaml", overrides))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", type=Path, default=Path("runs/world-demo-seed0"), help="The demo world (preset demo, "
                    "seed 0); generated when missing.")  # fmt: skip
    ap.add_argument("stages", nargs="*", help="Stage names (default: all in data_fingerprints.json).")
    args = ap.parse_args(argv)
    expected = json.loads(FINGERPRINTS.read_text("utf-8"))["stages"]
    bad = 0
    for stage in args.stages or list(expected):
        got = stage_fingerprint(stage, args.world)
        ok = got == expected[stage]
        bad += not ok
        print(f"{stage}: {'same rows' if ok else 'DIFFERENT'} {got}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
