#!/usr/bin/env bash
# ReasonRAG's data-efficiency claim (§3, Table 3) from a start policy: process supervision (MCTS + SPRE step pairs →
# step-level DPO, ReasonRAG protocol) against outcome supervision (Search-R1 GRPO with an EM reward) trained on the
# same first N training questions, for each N in BUDGETS. Every policy is evaluated on the test split in its own
# protocol, and so is the start (once per protocol): the claim compares each side's gain over the start in its
# protocol, per question (`effirag eval compare ORL PRL --starts START_SEARCHR1 START_REASONRAG`).
#   recipes/demo_policy/reasonrag_budgets.sh prl|orl START OUT N [N ...]
#   recipes/demo_policy/reasonrag_budgets.sh prl checkpoints/start-policy runs/reasonrag-budgets 30 100 &
#   recipes/demo_policy/reasonrag_budgets.sh orl checkpoints/start-policy runs/reasonrag-budgets 30 100
# The two sides are independent (run them side by side, one core each). MCTS grows trees for the smallest N first
# and resumes for the next, so PRL-N's pairs come from the first N questions' trees. Every step resumes or is skipped
# when its output exists. Needs runs/demo (world and index) from `effirag demo`. Environment: SEED (default 0) seeds
# the MCTS, the DPO and the GRPO run; DISTINCT=1 mines only pairs whose two steps differ in content
# (search.distinct_content), SAME_ACTION=1 only pairs of one action (search.same_action);
# recipes/demo_policy/filter_pairs.py applies either rule to pairs already mined.
set -euo pipefail
cd "$(dirname "$0")/../.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
BIN=${BIN:-.venv/bin}
side=$1 start=$2 out=$3 seed=${SEED:-0}
flag() { [ "${1:-0}" = 1 ] && echo true || echo false; }
shift 3
recipes=recipes/demo_policy
mkdir -p "$out"
evaluate() {  # NAME MODEL PROTOCOL: the test split in PROTOCOL, every policy with the start's inference settings
  [ -f "$out/eval/$1/report.json" ] && return 0
  $BIN/effirag eval qa --questions runs/demo/world/questions_test.jsonl --index runs/demo/index \
    --backend "hf:$2" --protocol "$3" --inference "$start" --out "$out/eval/$1" --json > "$out/eval-$1.json"
}
case $side in
  prl)
    evaluate start-reasonrag "$start" reasonrag
    for n in "$@"; do
      if [ ! -f "$out/pairs-$n.jsonl" ]; then
        $BIN/effirag data mcts --config $recipes/mcts_reasonrag.yaml env.model="hf:$start" env.max_questions="$n" \
          search.seed="$seed" search.distinct_content="$(flag "${DISTINCT:-0}")" \
          search.same_action="$(flag "${SAME_ACTION:-0}")" \
          output_dir="$out/mcts" --json > "$out/mcts-$n.json"
        cp "$out/mcts/pairs.jsonl" "$out/pairs-$n.jsonl"
      fi
      [ -d "$out/prl-$n/policy" ] || $BIN/effirag train dpo --data "$out/pairs-$n.jsonl" \
        --config $recipes/step_dpo_reasonrag.yaml model="$start" train.seed="$seed" output_dir="$out/prl-$n" \
        --quiet --json \
        > "$out/prl-$n.json"
      evaluate "prl-$n" "$out/prl-$n/policy" reasonrag
    done
    ;;
  orl)
    evaluate start-searchr1 "$start" searchr1
    for n in "$@"; do
      # the start's own sampling budgets (its inference.yaml: 256 new tokens a turn) over the recipe's
      [ -d "$out/orl-$n/policy" ] || $BIN/effirag train grpo --config $recipes/orl_searchr1_grpo.yaml \
        env.model="$start" env.max_questions="$n" max_steps=$((n / 2)) env.engine.max_new_tokens=256 seed="$seed" \
        output_dir="$out/orl-$n" --quiet --json > "$out/orl-$n.json"
      evaluate "orl-$n" "$out/orl-$n/policy" searchr1
    done
    ;;
  *)
    echo "side must be prl or orl, got '$side'" >&2
    exit 2
    ;;
esac
