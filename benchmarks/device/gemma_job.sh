#!/usr/bin/env bash
# Gemma 3 270M on a lent GPU machine, from the kit of gemma_kit.py (groups g1 … gN carried under .dev/ or copied to
# /tmp/kit by earlier calls). Run from the repository root:  OUT=DIR bash benchmarks/device/gemma_job.sh
#   A. QA through the HF backend (bench_gemma.py): PopQA and the MuSiQue slice, zero-shot / naive RAG / Search-R1
#      over BM25 and dense, all questions but the few-shot demos.
#   B. Search-R1 GRPO with LoRA (configs/rl/searchr1_grpo_gemma_lora.yaml) on PopQA over BM25, as many steps as fit.
#   C. The retrieval-server load benchmark with the MiniLM encoder on the GPU, one round.
# Each part runs under `timeout`, inside a total of JOB_SECONDS, and leaves its results in $OUT as it finishes
# (A_rows.jsonl grows row by row; A.tar.gz, B.tar.gz and C.tar.gz hold each part's files; job.log everything printed).
# DRY=1: a rehearsal with tiny sizes (a few questions, one GRPO step, 20 requests), on the CPU where no GPU is found.
# SKIP_WHEELS=1: use the packages already importable (a rehearsal in an environment that has them all).
set -u
T0=$(date +%s)
: "${OUT:?set OUT to the results folder}"
mkdir -p "$OUT"
exec > >(tee -a "$OUT/job.log") 2>&1
PY=${PY:-python3}
JOB_SECONDS=${JOB_SECONDS:-400}
DRY=${DRY:-0}
GK=${GK:-/tmp/gk}
SITE=${SITE:-/tmp/site}
REPO=$PWD
left() { echo $((JOB_SECONDS - ($(date +%s) - T0))); }
clamp() { local t=$1; [ "$t" -gt "$2" ] && t=$2; [ "$t" -lt 10 ] && t=10; echo "$t"; }
stamp() { echo "=== [$(($(date +%s) - T0)) s] $*"; }
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export HF_HUB_DISABLE_TELEMETRY=1 TRL_EXPERIMENTAL_SILENCE=1 EFFIRAG_SHARED_DATA=$GK/data

KITS=()
for k in ${KIT_ROOTS:-/tmp/kit .dev}; do [ -d "$k" ] && KITS+=(--kit "$k"); done
stamp "setup: kits ${KITS[*]}"
if [ "${SKIP_WHEELS:-0}" != 1 ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
    $(ls /tmp/kit/g*/wheels/*.whl .dev/g*/wheels/*.whl 2>/dev/null | awk -F/ '!seen[$NF]++') || exit 3
fi
export PYTHONPATH=$SITE:$REPO/src${PYTHONPATH:+:$PYTHONPATH}
if [ ! -f "$GK/.unpacked" ]; then
  timeout "${UNPACK_TIMEOUT:-240}" "$PY" benchmarks/device/gemma_kit.py unpack "${KITS[@]}" --to "$GK" --site "$SITE" || exit 4
  touch "$GK/.unpacked"
fi
nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
"$PY" - <<'EOF'
import importlib.metadata as md, sys, torch
names = "torch transformers tokenizers huggingface_hub accelerate peft trl datasets pyarrow sentence-transformers faiss-cpu bm25s fastapi uvicorn pydantic numpy".split()
print("python", sys.version.split()[0], {n: md.version(n) for n in names})
print("cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-")
EOF
DEV=$("$PY" -c "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')")

# ---------------------------------------------------------------- A (MuSiQue first: it is short; PopQA gets the rest)
if [ "$DRY" = 1 ]; then
  A_ARGS=(--runs zeroshot,naive:sparse,searchr1:passage --chunk 4 --batch 4 --max-steps 2); N=2; A_CAP=900; M_CAP=900
else
  A_ARGS=(--chunk 512 --batch 512); N=0; A_CAP=210; M_CAP=80
fi
if [ "${SKIP_A:-0}" != 1 ]; then  # SKIP_A=1: parts B and C only
rm -rf "$GK/A"; mkdir -p "$GK/A"  # a rerun starts afresh (evaluate_qa would resume and skew s/q)
bench() {  # bench DATA TIMEOUT --popqa N --musique N
  local name=$1 t=$2; shift 2
  stamp "A: $name, timeout ${t}s on $DEV"
  timeout -k 5 "$t" "$PY" benchmarks/bench_gemma.py --model "$GK/gemma-hf" --device "$DEV" --encoder-device "$DEV" \
    --popqa-index "$GK/index/popqa" --musique-index "$GK/index/musique_mini" "${A_ARGS[@]}" "$@" \
    --rows "$OUT/A_rows.jsonl" --out "$GK/A/runs" > "$GK/A/table_$name.md" 2> "$GK/A/log_$name.txt"
  echo "A $name exit $?"; cat "$GK/A/table_$name.md"; tail -2 "$GK/A/log_$name.txt"
}
bench musique $(clamp $(($(left) - 290)) $M_CAP) --popqa -1 --musique $N
bench popqa $(clamp $(($(left) - 190)) $A_CAP) --popqa $N --musique -1
(cd "$GK/A" && tar -czf "$OUT/A.tar.gz" table_*.md log_*.txt runs)
ls -la "$OUT/A.tar.gz"
fi

# ---------------------------------------------------------------- B
if [ "$DRY" = 1 ]; then
  B_ARGS=(max_steps=1 questions_per_step=1 num_generations=2 env.engine.max_new_tokens=16 env.engine.max_steps=2 bf16=false)
  B_CAP=${B_CAP:-900}
else
  B_ARGS=(max_steps=200)  # the recipe's batch (2 questions × 4 samples)
  B_CAP=${B_CAP:-160}
fi
[ "$DEV" = cpu ] && B_ARGS+=(bf16=false)
TB=$(clamp $(($(left) - 75)) $B_CAP)
stamp "B: GRPO with LoRA, timeout ${TB}s"
rm -rf "$GK/B"; mkdir -p "$GK/B"
# SIGINT first: the trainer stops where it is; steps.jsonl is written step by step either way.
timeout -s INT -k 15 "$TB" "$PY" -c "from effirag.cli.main import app; app()" train grpo --config configs/rl/searchr1_grpo_gemma_lora.yaml \
  env.model="$GK/gemma-hf" env.questions="$GK/data/popqa/questions.json" env.index="$GK/index/popqa_bm25" \
  --quiet output_dir="$GK/B/run" save_steps=100000 "${B_ARGS[@]}" > "$GK/B/log.txt" 2>&1
echo "B exit $?"; tail -5 "$GK/B/log.txt"
if [ -f "$GK/B/run/steps.jsonl" ] && [ ! -f "$GK/B/run/curves.png" ]; then
  "$PY" -c "from effirag.train.rl.log import plot_steps; import sys; plot_steps(sys.argv[1], sys.argv[2])" \
    "$GK/B/run/steps.jsonl" "$GK/B/run/curves.png" || true
fi
(cd "$GK/B" && tar -czf "$OUT/B.tar.gz" log.txt $(cd "$GK/B" && ls run/steps.jsonl run/curves.png run/config.yaml 2>/dev/null))
ls -la "$OUT/B.tar.gz"

# ---------------------------------------------------------------- C
if [ "$DRY" = 1 ]; then C_ARGS=(--requests 20 --concurrency 4); C_CAP=600; else C_ARGS=(--requests 1000 --concurrency 64); C_CAP=150; fi
TC=$(clamp $(($(left) - 8)) $C_CAP)
stamp "C: retrieval server load, timeout ${TC}s"
mkdir -p "$GK/C"
timeout -k 5 "$TC" "$PY" benchmarks/bench_retrieval_server.py --device "$DEV" --repeats 1 --peer-threads 0 \
  --index-dir "$GK/index/musique_mini" "${C_ARGS[@]}" --json > "$GK/C/result.json" 2> "$GK/C/log.txt"
echo "C exit $?"; tail -c 1500 "$GK/C/result.json"; tail -3 "$GK/C/log.txt"
(cd "$GK/C" && tar -czf "$OUT/C.tar.gz" result.json log.txt)
stamp "done"
