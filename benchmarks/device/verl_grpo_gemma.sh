#!/usr/bin/env bash
# A few steps of verl GRPO on Gemma 3 270M with EffiRAG as verl's agent loop (configs/verl/agent_loop.yaml), for a
# machine with one GPU. UNMEASURED: written and checked (bash -n only) on a CPU-only machine; it has never
# run, and no figure from it is in BENCHMARKS.md.
#
# Needs, importable by $PY: verl (with verl.experimental.agent_loop), vLLM with CUDA, Ray, and EffiRAG's runtime
# dependencies (src/ goes on PYTHONPATH). The lent machines of this workplace have none of verl, vLLM or Ray and no
# network, and vLLM's CUDA wheel alone is larger than one call's upload: run it where verl is installed (verl's
# docker image, or `pip install verl vllm` with `pip install -e .` of this repository).
# Inputs (the gemma kit's unpacked folders fit: $GK/gemma-hf, $GK/data/popqa/questions.json, $GK/index/popqa_bm25):
#   MODEL      a Gemma 3 270M HF folder (`effirag models prepare gemma-3-270m` writes one)
#   QUESTIONS  a question file (any layout `effirag export verl` reads)
#   INDEX      an index folder for `effirag serve retrieval` (a BM25-only index needs MODE=sparse)
#   OUT        the results folder: job.log (everything printed), steps.txt (verl's per-step lines)
# Usage, from the repository root:
#   OUT=/tmp/out MODEL=… QUESTIONS=… INDEX=… [STEPS=3] [N=4] [BATCH=8] [MODE=sparse] bash benchmarks/device/verl_grpo_gemma.sh
set -euo pipefail
: "${OUT:?set OUT}" "${MODEL:?set MODEL}" "${QUESTIONS:?set QUESTIONS}" "${INDEX:?set INDEX}"
PY=${PY:-python3}
STEPS=${STEPS:-3}
N=${N:-4}            # rollouts per question (GRPO group)
BATCH=${BATCH:-8}    # questions per step
MODE=${MODE:-sparse} # what serves passage searches: sparse (BM25) or passage (dense)
PORT=${PORT:-8000}
REPO=$PWD
W=$(mktemp -d)
mkdir -p "$OUT"
exec > >(tee -a "$OUT/job.log") 2>&1
export PYTHONPATH=$REPO/src${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
effirag() { "$PY" -c "from effirag.cli.main import app; app()" "$@"; }
stamp() { echo "=== [$(date -u +%T)] $*"; }

stamp "versions"
"$PY" -c "import importlib.metadata as m; print({n: m.version(n) for n in ('verl', 'vllm', 'ray', 'torch', 'transformers')})"
nvidia-smi -L || true

stamp "rows: effirag export verl (Search-R1 prompts), agent_name=effirag_agent"
effirag export verl --questions "$QUESTIONS" --protocol searchr1 --split train --limit $((BATCH * STEPS)) --out "$W"
effirag export verl --questions "$QUESTIONS" --protocol searchr1 --split dev --limit 16 --out "$W"
"$PY" - "$W" <<'EOF'
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

for f in Path(sys.argv[1]).glob("*.parquet"):  # verl's agent loop worker reads the loop's name from the row
    t = pq.read_table(f)
    pq.write_table(t.append_column("agent_name", pa.array(["effirag_agent"] * t.num_rows)), f)
    print(f, t.num_rows, "rows")
EOF

stamp "retrieval server on 127.0.0.1:$PORT"
effirag serve retrieval --index "$INDEX" --port "$PORT" >"$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; rm -rf "$W"' EXIT
for _ in $(seq 120); do
  "$PY" -c "import httpx, sys; sys.exit(httpx.get('http://127.0.0.1:$PORT/health').status_code != 200)" 2>/dev/null && break
  sleep 1
done
sed -e "s#http://127.0.0.1:8000#http://127.0.0.1:$PORT#" configs/verl/agent_loop.yaml >"$W/agent_loop.yaml"
printf '    passage_mode: %s\n' "$MODE" >>"$W/agent_loop.yaml" # engine is the file's last block

stamp "verl GRPO: $STEPS steps, $BATCH questions x $N rollouts"
"$PY" -m verl.trainer.main_ppo \
  algorithm.adv_estimator=grpo \
  algorithm.use_kl_in_reward=false \
  data.train_files="$W/train.parquet" data.val_files="$W/dev.parquet" \
  data.train_batch_size="$BATCH" data.max_prompt_length=1024 data.max_response_length=2048 \
  data.return_raw_chat=true data.filter_overlong_prompts=true \
  actor_rollout_ref.model.path="$MODEL" \
  actor_rollout_ref.model.use_remove_padding=true \
  actor_rollout_ref.actor.optim.lr=1e-6 \
  actor_rollout_ref.actor.ppo_mini_batch_size="$BATCH" \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \
  actor_rollout_ref.actor.use_kl_loss=false \
  actor_rollout_ref.actor.fsdp_config.param_offload=false \
  actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.mode=async \
  actor_rollout_ref.rollout.n="$N" \
  actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.4 \
  actor_rollout_ref.rollout.calculate_log_probs=true \
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16 \
  actor_rollout_ref.rollout.agent.agent_loop_config_path="$W/agent_loop.yaml" \
  actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16 \
  custom_reward_function.path="$REPO/src/effirag/integrations/verl.py" \
  custom_reward_function.name=compute_score \
  +custom_reward_function.reward_kwargs.format_weight=0.2 \
  trainer.n_gpus_per_node=1 trainer.nnodes=1 \
  trainer.total_training_steps="$STEPS" trainer.total_epochs=1 \
  trainer.val_before_train=false trainer.test_freq=-1 trainer.save_freq=-1 \
  trainer.logger='[console]' trainer.project_name=effirag trainer.experiment_name=gemma270m_grpo_effirag_loop
grep -E "^step:" "$OUT/job.log" >"$OUT/steps.txt" || true
stamp "done: $(wc -l <"$OUT/steps.txt") step lines in $OUT/steps.txt"
