#!/usr/bin/env bash
# SmolLM2-135M-Instruct (chat prompt) and Gemma 3 270M (3 few-shot demos) on PopQA (first N) and the MuSiQue slice:
# zero-shot, naive RAG, Search-R1 and HiPRAG over BM25, greedy (benchmarks/real_eval.py's settings), on vLLM
# (.venv-vllm, eager, float32), then the same runs on HF for the first N_HF PopQA questions and each pair's agreement.
# One OMP thread: on 2 shared cores (load 10-21) vLLM's two bound threads had not finished 100 zero-shot PopQA
# questions in 7 min; one thread took 81 s. N_AGENT (default N_POPQA) caps the PopQA questions of the multi-turn
# protocols (Search-R1, HiPRAG): Gemma's few-shot Search-R1 ran at about 5 questions a minute here.
# Usage (repo root): [N_AGENT=200] benchmarks/real_eval.sh OUT [N_POPQA] [N_HF] [MODELS]   (MODELS: "smol gemma")
set -euo pipefail
OUT=$1 N=${2:-100} N_HF=${3:-20} MODELS=${4:-"smol gemma"} N_AGENT=${N_AGENT:-${2:-100}}
CACHE=${EFFIRAG_CACHE:-$HOME/.cache/effirag}/models
VPY=${VLLM_PYTHON:-.venv-vllm/bin/python} HPY=${HF_PYTHON:-.venv/bin/python}
export PYTHONPATH=$PWD/src OMP_NUM_THREADS=1 VLLM_CPU_OMP_THREADS_BIND=nobind EFFIRAG_SHARED_DATA=${EFFIRAG_SHARED_DATA:-../shared/data}
for m in $MODELS; do
  if [ "$m" = smol ]; then dir=$CACHE/smollm2-135m-instruct q="chat=1&" shots=0
  else dir=$CACHE/gemma-3-270m q="" shots=3; fi
  [ -d "$dir" ] || { echo "prepare it first: effirag models prepare ${dir##*/}" >&2; exit 1; }
  vllm="vllm:$dir?${q}dtype=float32&eager=1&max_model_len=2048&kv_cache_gb=1"
  nice -n 10 "$VPY" benchmarks/real_eval.py --backend "$vllm" --out "$OUT/$m-vllm" --fewshot "$shots" --chunk 50 \
    --data "popqa:$N:zeroshot,naive" --data "popqa:$N_AGENT:searchr1,hiprag" --data musique_mini:0
  nice -n 10 "$HPY" benchmarks/real_eval.py --backend "hf:$dir?${q}dtype=float32" --out "$OUT/$m-hf" \
    --fewshot "$shots" --data "popqa:$N_HF" --chunk "$N_HF"
  for p in zeroshot naive searchr1 hiprag; do
    echo "$m popqa.$p $("$HPY" benchmarks/real_eval.py --agree "$OUT/$m-hf/popqa.$p" "$OUT/$m-vllm/popqa.$p")"
  done
done
