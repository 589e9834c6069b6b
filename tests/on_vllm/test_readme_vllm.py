"""The README's "Generate on vLLM" block, run as written in .venv-vllm (tests/test_readme.py runs every other block
in .venv), with the substitutions below: `ask` prints its answer and `eval qa` writes one trajectory per question.

Runs in .venv-vllm (tests/on_vllm/vllm_support.py says why and how).
"""

from __future__ import annotations

import json
import shutil

from vllm_support import PYTESTMARK

from test_readme import ROOT, needs_vllm, readme_commands, run

pytestmark = PYTESTMARK
# (README text, what runs instead, why); each README text must occur in the block
SUBSTITUTIONS = [
    ("make vllm-venv", "true", "make test has built .venv-vllm, and this test runs in it"),
    (
        "source .venv-vllm/bin/activate",
        "true",
        "tests/test_readme.run puts this interpreter's bin folder first on PATH",
    ),
    ("--limit 20 --out runs/qa-vllm", "--limit 3 --out runs/qa-vllm", "the first 3 questions, not 20"),
]
# The quick start's command that builds runs/demo (world and index), as tests/test_readme.py runs it.
DEMO = "effirag demo --skip-stats --limit 10 --out runs/readme-demo"


def _block() -> list[str]:
    """The "Generate on vLLM" block (the SmolLM2 block, also on vLLM, is tests/on_vllm/test_readme_smollm2.py's)."""
    [block] = [b for b in readme_commands() if needs_vllm(b) and any(c.startswith("make vllm-venv") for c in b)]
    return block


def test_generate_on_vllm_block_runs_and_answers() -> None:
    block = _block()
    for text, _, why in SUBSTITUTIONS:
        assert any(text in c for c in block), f"substitution no longer matches the README ({why}): {text!r}"
    if not (ROOT / "runs/demo/index").is_dir():  # the quick start builds it; tests/test_readme.py ran it earlier
        run(DEMO)
    shutil.rmtree(ROOT / "runs/qa-vllm", ignore_errors=True)  # eval qa would resume an earlier run
    outputs = {}
    for command in block:
        for text, instead, _ in SUBSTITUTIONS:
            command = command.replace(text, instead)
        outputs[command] = run(command).stdout
    [ask] = [out for cmd, out in outputs.items() if cmd.startswith("effirag ask")]
    assert "prediction:" in ask
    rows = (ROOT / "runs/qa-vllm/trajectories.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 3 and all("prediction" in json.loads(r) for r in rows)
