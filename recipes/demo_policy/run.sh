#!/usr/bin/env bash
# Reproduce the embedded default policy (checkpoints/demo-policy) from nothing, on CPU.
# `python recipes/demo_policy/stage.py --config recipes/demo_policy/stage7_compare_decide.yaml` runs the seven stages
# below in one go (each stage names the one before it as `previous_stage` and runs it when its export is missing); they
# are spelled out here so that each stage can be inspected, changed or rerun on its own. Every stage resumes from its
# train.output_dir/checkpoint-* when interrupted. About 5 h 25 min in all, alone on the project's 2-core CPU.
# `python recipes/demo_policy/check_fingerprints.py` checks, without training, that the stage configs still build the
# rows that trained the committed SFT checkpoint (data_fingerprints.json).
set -euo pipefail
cd "$(dirname "$0")/../.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
BIN=${BIN:-.venv/bin}
STAGE="$BIN/python recipes/demo_policy/stage.py --config recipes/demo_policy"

# 0. The demo world: 3,000 passages, 800/200/300 train/dev/test questions, ~30% of facts marked known.
$BIN/effirag world generate --preset demo --seed 0 --out runs/world-demo-seed0

# 1. Tokenizer (byte-level BPE, 4,096 tokens; every protocol tag and world entity name one token) and a fresh LFM2
#    model (5.02M parameters; attention, conv, attention, conv) whose first attention block starts as a copy and whose
#    (conv, attention) pair starts as an induction head; trained on whole TeaRAG trajectories with renamed entities so
#    that names are copied from the context, not memorised. 600 steps, ~45 min.
time $STAGE/stage1_induction.yaml

# 2. The full mixture: every protocol's trajectories (with redundant_step_rate waste) and the known facts. 2,000 steps,
#    ~47 min.
time $STAGE/stage2_full.yaml

# 3. The stop decision: TeaRAG and Search-R1 question paths alone, no waste; TeaRAG summaries end with the next
#    hop's sub-question or a stop note (writing.hop_aware_summary). 300 steps, ~33 min.
time $STAGE/stage3_decide.yaml

# 4. The known facts again (20 copies as text, 2 as zero-shot questions, half a copy of stage 3's rows); from here
#    on summaries quote the evidence before the answer (writing.evidence_first). One pass, 4,117 steps, ~21 min.
time $STAGE/stage4_recall.yaml

# 5. The decision again, with a small share of every protocol's rows and a cosine decay. 300 steps, ~30 min.
time $STAGE/stage5_decide2.yaml

# 6. Stage 5's recipe on one-item observations (the demo's k = 1), TeaRAG searching every hop (known facts too), one
#    copy of the known facts as text, and ~1,500 single-hop TeaRAG reads of world facts (extra.fact_weights), for
#    2,400 steps, about four passes over its rows. ~1 h 37 min on 2 threads.
time $STAGE/stage6_read.yaml

# 7. Stage 6's mixture with comparison questions whose pairs line writes the decision word before the name
#    (writing.comparison_decision), each asked in both orders, and a small drill of such lines; 900 steps, exported to
#    checkpoints/demo-policy-sft. ~29 min on 2 threads.
time $STAGE/stage7_compare_decide.yaml

# 8. Every known fact (2,923) asked without retrieval: the recall target. About 7 min.
$BIN/effirag train recall --model checkpoints/demo-policy-sft --knowledge runs/world-demo-seed0/knowledge.jsonl

# 9. The main job on the SFT checkpoint (it builds runs/demo: the world and index the RL stage trains over).
$BIN/effirag demo --model checkpoints/demo-policy-sft

# 10. The KAG reranker the demo loads (checkpoints/demo-reranker, committed): trained on the demo world's gold hops
#    over the index that step 9 built under runs/demo. About 3 min.
$BIN/effirag train reranker --config recipes/demo_policy/reranker.yaml

# 11. The RL stage: cost-aware GRPO (TeaRAG over KAG, EM reward, A = z(EM) − 0.3·z(tokens)) from the SFT checkpoint on
#    the 800 train questions, 120 steps, a checkpoint every 20 (about 20 min on one thread alone). The selection rule
#    of docs/demo_policy.md ("RL stage") chose checkpoint-20 on the dev split; it becomes checkpoints/demo-policy.
OMP_NUM_THREADS=1 $BIN/effirag train grpo --config recipes/demo_policy/rl_tearag_grpo_cost.yaml
mkdir -p checkpoints/demo-policy
cp checkpoints/demo-policy-sft/{config.json,generation_config.json,tokenizer.json,tokenizer_config.json,inference.yaml} \
  checkpoints/demo-policy/
cp runs/rl/tearag_grpo_cost/checkpoint-20/model.safetensors checkpoints/demo-policy/
$BIN/effirag demo --model checkpoints/demo-policy
