#!/usr/bin/env bash
# Gemma 3 270M Q4_K_M through llama-cpp-python's server on a lent machine's CPU cores, from the kit of llama_kit.py
# (groups g1 … gN copied to /tmp/lkit by earlier calls, or carried under .dev/llama). Run from the repository root:
#   OUT=DIR bash benchmarks/device/llama_job.sh
# The evaluation of bench_gemma.py's HF table (PopQA and the MuSiQue slice, all questions but the 3 demos; zero-shot,
# naive RAG and Search-R1 over BM25 and dense; k = 2, at most 4 steps of 48 new tokens, greedy) with --backend
# llamacpp: every process starts its own server on 127.0.0.1 with one llama.cpp thread and runs one setting, or one
# shard (questions i ≡ I mod N) of it; PLAN below spreads the work over PROCS processes, each under `timeout` inside
# JOB_SECONDS. Each shard writes its trajectories chunk by chunk, so a shard cut short still counts the questions it
# finished; `bench_gemma.py --merge` then scores every setting over all its finished questions (n/expected where
# short). $OUT gets rows.jsonl (a row per process as it finishes), table.md, merged.json, job.log, llama.tar.gz (shard
# files, reports and every process's and server's log) and llama_traj.tar.gz (the trajectories).
# UNPACK_ONLY=1: install the wheels and unpack (in a staging call, so that the job's time is spent on the runs).
# Several runs' unpacked tarballs: benchmarks/device/llama_union.py --out U RUN... (overlaps checked), then --merge U.
# DRY=1: a rehearsal with tiny sizes (2 questions, 2 steps of 24 tokens, 4 processes). SKIP_WHEELS=1: packages already importable.
#
# Cost, measured on the 2-core build host (AMD EPYC, shared: load 4-5, nice 10; one llama.cpp thread; 5 questions a
# setting; the server then computing every prompt token's logits), seconds per question: PopQA zero-shot 1.0, naive
# RAG 3.4 (BM25) / 3.4 (dense), Search-R1 29.1 / 19.7; MuSiQue zero-shot 1.2, naive 6.9 / 9.7, Search-R1 31.1 / 31.7.
# The server is told no stop strings (llama-cpp-python does not say which one matched), so every step generates its
# 48 tokens and the client cuts at the stop. The runs now read prompts with logits at the last token only: a
# 600-token prompt 2.0-2.8x faster there (7.5 s vs 15.5-21.7 s), so ≈ 0.55x the above for the prompt-heavy runs,
# ≈ 18,700 core-seconds of that shared host in all, ≈ 7,500 on quiet cores (≈ 2.5x faster): ≈ 470 s on 16. With the
# PLAN below (15 processes of ≈ equal cost, one core left to the clients) expect 70-100% of each setting's questions
# within JOB_SECONDS=420; a shard cut short still counts what it finished, and the table says n/expected.
set -u
T0=$(date +%s)
: "${OUT:?set OUT to the results folder}"
mkdir -p "$OUT"
exec > >(tee -a "$OUT/job.log") 2>&1
PY=${PY:-python3}
JOB_SECONDS=${JOB_SECONDS:-420}
DRY=${DRY:-0}
LK=${LK:-/tmp/lk}
SITE=${SITE:-/tmp/lsite}
REPO=$PWD
left() { echo $((JOB_SECONDS - ($(date +%s) - T0))); }
clamp() { local t=$1; [ "$t" -gt "$2" ] && t=$2; [ "$t" -lt 10 ] && t=10; echo "$t"; }
stamp() { echo "=== [$(($(date +%s) - T0)) s] $*"; }
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export HF_HUB_DISABLE_TELEMETRY=1 OMP_NUM_THREADS=1 EFFIRAG_SHARED_DATA=$LK/data
export JAX_PLATFORMS=cpu  # bm25s imports JAX when installed; a JAX with a CUDA plugin and no visible GPU fails at import

KITS=()
for k in ${KIT_ROOTS:-/tmp/lkit .dev/llama}; do [ -d "$k" ] && KITS+=(--kit "$k"); done
if [ ! -f "$LK/.unpacked" ]; then
  stamp "setup: kits ${KITS[*]}"
  if [ "${SKIP_WHEELS:-0}" != 1 ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
      $(for k in ${KIT_ROOTS:-/tmp/lkit .dev/llama}; do ls "$k"/g*/wheels/*.whl 2>/dev/null; done | awk -F/ '!seen[$NF]++') || exit 3
  fi
  PYTHONPATH=$SITE:$REPO/src timeout "${UNPACK_TIMEOUT:-240}" "$PY" benchmarks/device/llama_kit.py unpack "${KITS[@]}" \
    --to "$LK" --site "$SITE" || exit 4
  touch "$LK/.unpacked"
fi
export PYTHONPATH=$SITE:$REPO/src${PYTHONPATH:+:$PYTHONPATH}
stamp "unpacked in $LK; $(nproc --all) cores"
"$PY" - "$LK/gemma-3-270m-q4_k_m.gguf" <<'EOF' || exit 5
import importlib.metadata as md, sys, time
import llama_cpp, llama_cpp.server.app  # the shared libraries load, the server's imports resolve
names = "llama_cpp_python transformers tokenizers sentence-transformers faiss-cpu bm25s fastapi uvicorn pydantic numpy torch".split()
print("python", sys.version.split()[0], {n: md.version(n) for n in names}, "llama_cpp", llama_cpp.__file__)
t = time.perf_counter()  # the model runs on this CPU (a build for other instructions would die here, not in the runs)
m = llama_cpp.Llama(sys.argv[1], n_threads=1, n_ctx=256, logits_all=False, verbose=False)
out = m("Question: Who wrote Hamlet?\nAnswer:", max_tokens=8, temperature=0.0)["choices"][0]["text"]
print(f"llama.cpp check: {out!r} in {time.perf_counter() - t:.1f} s")
EOF
[ "${UNPACK_ONLY:-0}" = 1 ] && { stamp "unpack only: done"; exit 0; }

# PLAN: one process per entry, "DATA RUNS SHARDS" (RUNS comma-separated, run in turn by one process).
if [ "$DRY" = 1 ]; then
  SIZE=(--popqa 2 --musique 2 --max-steps 2 --max-new-tokens 24 --chunk 1); CAP=$JOB_SECONDS
  PLAN=("popqa searchr1:passage 2" "popqa zeroshot,naive:sparse 1" "musique_mini naive:passage,searchr1:sparse 1")
else
  SIZE=(--popqa 0 --musique 0 --chunk 2); CAP=$JOB_SECONDS
  PLAN=(  # 15 processes, each ≈ the same share of the work measured above (cheap runs first within a process)
    "popqa searchr1:sparse 6" "popqa searchr1:passage 4" "popqa zeroshot,naive:sparse 1" "popqa naive:passage 1"
    "musique_mini searchr1:sparse 1" "musique_mini searchr1:passage 1"
    "musique_mini zeroshot,naive:sparse,naive:passage 1"
  )
fi
RUNS_DIR=$LK/runs
rm -rf "$RUNS_DIR"; mkdir -p "$RUNS_DIR/logs"  # a rerun starts afresh (evaluate_qa would resume and skew s/q)
T=$(clamp $(($(left) - 25)) "$CAP")
stamp "runs: ${#PLAN[@]} plan entries, timeout ${T}s each"
PIDS=()
for entry in "${PLAN[@]}"; do
  read -r data runs shards <<< "$entry"
  if [ "$data" = popqa ]; then WHICH=(--musique -1 --popqa-index "$LK/index/popqa"); else
    WHICH=(--popqa -1 --musique-index "$LK/index/musique_mini"); fi
  for ((i = 0; i < shards; i++)); do
    name="$data-${runs//[:,]/_}-$i-of-$shards"
    timeout -s INT -k 10 "$T" "$PY" benchmarks/bench_gemma.py --backend llamacpp --gguf "$LK/gemma-3-270m-q4_k_m.gguf" \
      --tokenizer "$LK/tokenizer" --llama-threads 1 --encoder-torch "${SIZE[@]}" "${WHICH[@]}" \
      --runs "$runs" --shard "$i/$shards" --out "$RUNS_DIR" --rows "$OUT/rows.jsonl" \
      --llama-log "$RUNS_DIR/logs/server-$name.txt" > "$RUNS_DIR/logs/table-$name.md" 2> "$RUNS_DIR/logs/log-$name.txt" &
    PIDS+=($!)
  done
done
stamp "started ${#PIDS[@]} processes"
for p in "${PIDS[@]}"; do wait "$p"; echo "process $p exit $?"; done
stamp "merge"
"$PY" benchmarks/bench_gemma.py --merge "$RUNS_DIR" > "$OUT/table.md" && cat "$OUT/table.md"
"$PY" benchmarks/bench_gemma.py --merge "$RUNS_DIR" --json > "$OUT/merged.json"
for f in "$RUNS_DIR"/logs/log-*.txt; do grep -m1 -iE "error|Traceback" "$f" > /dev/null && { echo "--- $f"; tail -4 "$f"; }; done
(cd "$RUNS_DIR" && tar -czf "$OUT/llama.tar.gz" --exclude=trajectories.jsonl . && tar -czf "$OUT/llama_traj.tar.gz" \
  $(find . -name trajectories.jsonl))  # two: the small one comes back even if the trajectories are over a limit
ls -la "$OUT"
stamp "done"
