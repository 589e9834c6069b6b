#!/usr/bin/env bash
# Evaluate a policy on the demo world with its own inference settings (its inference.yaml), one protocol at a time,
# writing runs/eval/NAME/PROTOCOL-SPLIT/ (trajectories.jsonl, report.json; re-running resumes). Pairs of runs are then
# compared with `effirag eval compare A B` (paired bootstrap interval and test per metric).
#   recipes/demo_policy/eval_policy.sh NAME MODEL SPLIT PROTOCOL [PROTOCOL ...]
#   recipes/demo_policy/eval_policy.sh start checkpoints/start-policy test tearag hiprag searchr1
# Needs runs/demo (world and index) from `effirag demo`. One torch thread per evaluation.
set -euo pipefail
cd "$(dirname "$0")/../.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
BIN=${BIN:-.venv/bin}
name=$1 model=$2 split=$3
shift 3
mkdir -p runs/eval
for protocol in "$@"; do
  $BIN/effirag eval qa --questions "runs/demo/world/questions_$split.jsonl" --index runs/demo/index \
    --backend "hf:$model" --protocol "$protocol" --out "runs/eval/$name/$protocol-$split" --json \
    > "runs/eval/$name.$protocol-$split.json"
done
