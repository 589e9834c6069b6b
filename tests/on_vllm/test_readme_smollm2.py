"""The README's SmolLM2 block ("Teaching an instruct model to search, on a CPU": LoRA SFT → eval → Search-R1 GRPO on
vLLM rollouts → eval → compare → view), run in .venv-vllm at a tiny size: a tiny random Llama with a chat template
stands in for SmolLM2-135M-Instruct, 2 SFT steps, 2 evaluated questions (on HF), one GRPO step (on vLLM); every
output goes to runs/readme-smollm2 instead of the README's folders (a real run there is left alone).

Runs in .venv-vllm (tests/on_vllm/vllm_support.py says why and how).
"""

from __future__ import annotations

import json
import shutil

from vllm_support import PYTESTMARK

from test_readme import ROOT, needs_vllm, readme_commands, run

pytestmark = PYTESTMARK
WORK = "runs/readme-smollm2"
# (README text, what runs instead, why), applied in order; each README text must occur in the block
SUBSTITUTIONS = [
    ("source .venv-vllm/bin/activate", "true", "tests/test_readme.run puts this interpreter's bin folder first"),
    ("$HOME/.cache/effirag/models/smollm2-135m-instruct", f"{WORK}/model", "a tiny chat Llama stands in for SmolLM2"),
    ("runs/musique/index", f"{WORK}/index", "the test's own folders"),
    ("runs/sft-smollm2-lora", f"{WORK}/sft", "the test's own folders"),
    ("runs/grpo-smollm2-searchr1", f"{WORK}/grpo", "the test's own folders"),
    ("runs/eval-smollm2-", f"{WORK}/eval-", "the test's own folders"),
    (
        "recipes/smollm2/sft_lora.yaml ",
        "recipes/smollm2/sft_lora.yaml train.optim.max_steps=2 train.optim.batch_size=2 train.save_steps=2 "
        "train.gradient_checkpointing=false data.k=1 data.max_inserted_tokens=64 "
        f"train.output_dir={WORK}/sft ",
        "2 SFT steps on short observations",
    ),
    ("--limit 30", "--limit 2", "2 questions"),
    ("--set max_steps=4 --set max_new_tokens=128", "--set max_steps=2 --set max_new_tokens=16", "short episodes"),
    (
        '--backend "vllm:',
        '--backend "hf:',
        "the evaluations on HF: one vLLM start (GRPO's rollouts) keeps the test within minutes on a loaded CPU; the "
        "vLLM backend of eval qa is tests/on_vllm/test_vllm_backend.py's",
    ),
    (
        "recipes/smollm2/grpo_searchr1.yaml",
        f"recipes/smollm2/grpo_searchr1.yaml env.model=hf:{WORK}/sft?chat=1 env.index={WORK}/index "
        f"output_dir={WORK}/grpo max_steps=1 "
        "save_steps=1 questions_per_step=1 num_generations=2 env.max_questions=2 env.engine.max_new_tokens=16 "
        "env.engine.max_steps=2 env.engine.max_inserted_tokens=64",
        "one short GRPO step",
    ),
]


def test_smollm2_block_runs_sft_eval_grpo_compare_view() -> None:
    from tiny_models import make_tiny_model

    [block] = [b for b in readme_commands() if needs_vllm(b) and any("smollm2" in c for c in b)]
    text = "\n".join(block)
    for readme_text, _, why in SUBSTITUTIONS:
        assert readme_text in text, f"substitution no longer matches the README ({why}): {readme_text!r}"
    shutil.rmtree(ROOT / WORK, ignore_errors=True)  # eval qa would resume an earlier run, GRPO refuses one
    # head_dim 32 (64 hidden / 2 heads): the smallest head size vLLM's CPU attention supports
    make_tiny_model(ROOT / WORK / "model", arch="llama", heads=2, kv_heads=1, max_positions=4096, seed=5)
    outputs = {}
    for command in block:
        for readme_text, instead, _ in SUBSTITUTIONS:
            command = command.replace(readme_text, instead)
        outputs[command] = run(command).stdout
    for name in ("sft", "grpo-searchr1"):
        rows = (ROOT / WORK / f"eval-{name}" / "trajectories.jsonl").read_text(encoding="utf-8").splitlines()
        assert len(rows) == 2 and all(json.loads(r)["prompt"].startswith("<|user|>") for r in rows), name
    assert (ROOT / WORK / "sft" / "adapter" / "adapter_config.json").is_file()
    steps = (ROOT / WORK / "grpo" / "steps.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(steps) == 1 and "reward/format" in json.loads(steps[0])
    [compare] = [out for cmd, out in outputs.items() if cmd.startswith("effirag eval compare")]
    assert "em" in compare.lower()
    assert (ROOT / WORK / "grpo" / "report.html").is_file()
