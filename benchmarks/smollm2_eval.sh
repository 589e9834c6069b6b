#!/usr/bin/env bash
# SmolLM2-135M-Instruct (chat prompt) on PopQA (first N) and the MuSiQue slice: zero-shot, naive RAG, Search-R1 and
# HiPRAG over BM25, greedy. Usage (from the repo root; BACKEND e.g. "vllm:DIR?chat=1&dtype=float32" in .venv-vllm):
#   benchmarks/smollm2_eval.sh PYTHON BACKEND OUT [POPQA_N] [MUSIQUE_N] [PROTOCOLS]
# Indexes: effirag index build --no-dense --corpus ../shared/data/D/corpus.json --out OUT/idx-D (built here if absent).
set -euo pipefail
PY=$1 BACKEND=$2 OUT=$3 POPQA_N=${4:-100} MUSIQUE_N=${5:-70} PROTOCOLS=${6:-"zeroshot naive searchr1 hiprag"}
DATA=${EFFIRAG_SHARED_DATA:-../shared/data}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
SET=(--set k=3 --set max_steps=4 --set max_new_tokens=64 --set max_total_tokens=2048 --set max_inserted_tokens=384
     --set passage_mode=sparse)
mkdir -p "$OUT"
effirag() { "$PY" -c "from effirag.cli.main import app; app()" "$@"; }
for d in popqa musique_mini; do
  [ -d "$OUT/idx-$d" ] || effirag index build --no-dense --corpus "$DATA/$d/corpus.json" --out "$OUT/idx-$d"
done
for d in popqa musique_mini; do
  for p in $PROTOCOLS; do
    n=$POPQA_N; [ "$d" = musique_mini ] && n=$MUSIQUE_N
    [ -s "$OUT/$d.$p.json" ] && continue
    start=$(date +%s)
    effirag eval qa --questions "$DATA/$d/questions.json" --index "$OUT/idx-$d" --protocol "$p" \
      --backend "$BACKEND" --limit "$n" --chunk-size "${CHUNK:-10}" --out "$OUT/$d.$p" "${SET[@]}" --json > "$OUT/$d.$p.tmp"
    mv "$OUT/$d.$p.tmp" "$OUT/$d.$p.json"
    echo "$d $p n=$n wall_s=$(( $(date +%s) - start ))" >> "$OUT/walls.txt"
  done
done
