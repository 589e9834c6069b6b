#!/usr/bin/env bash
# Reproduce the embedded default policy (checkpoints/demo-policy) from nothing, on CPU.
# Every stage below is what `effirag train sft --config configs/demo/sft.yaml` runs in one go; it is spelled out here
# so that each step can be inspected or changed on its own.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
BIN=${BIN:-.venv/bin}

# 1. The demo world: 3,000 passages, 800/200/300 train/dev/test questions, ~30% of facts marked known.
$BIN/effirag world generate --preset demo --seed 0 --out runs/world-demo-seed0

# 2-5. Tokenizer (byte-level BPE, 4,096 tokens; every protocol tag and world entity name one token) → LFM2 model (4.82M
#      parameters; conv, attention, conv, attention) → SFT data (TeaRAG §4.3.1 trajectories for every protocol, several fresh draws per gold path,
#      redundant_step_rate 0.3, plus 40 copies of each known fact as text and as a zero-shot question) → TRL
#      SFTTrainer with TeaRAG eq. 4 masking (one pass) → runs/demo-policy, exported to checkpoints/demo-policy.
#      The world folder of step 1 is reused; an interrupted run resumes from runs/demo-policy/checkpoint-*.
#      ≈ 98 min of SFT (an upper bound, see BENCHMARKS.md) + 2 min of data on the 2-core CPU.
time $BIN/effirag train sft --config configs/demo/sft.yaml -v

# 6. Check the knowledge phase: known facts asked without retrieval.
$BIN/effirag train recall --model checkpoints/demo-policy --knowledge runs/world-demo-seed0/knowledge.jsonl --limit 300

# 7. The main job on the new checkpoint.
$BIN/effirag demo --model checkpoints/demo-policy
