"""The README's docs test: every command of its ```bash blocks is run from the repository root, so none can rot.

Commands run as written except for the substitutions in :data:`SUBSTITUTIONS`, each with its reason (an expensive
size made smaller, an install step `make test` has already done, a server that is started and stopped). A README
command that no longer matches its substitution fails the test, so the table cannot go stale either. Outputs go to
the git-ignored ``runs/`` as the README says; ``runs/demo`` (world and index) is reused when present, as `make demo`
reuses it.

The quick start is also checked for what it promises: its `effirag ask` answers the demo's question as the demo
does, and its `effirag eval qa` gives, question by question, the demo's TeaRAG answers (both read the checkpoint's
inference settings, so they run the policy exactly as the demo does).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SERVE = (
    'effirag serve --model checkpoints/demo-policy --port 8765 & pid=$!; python -c "'
    "import time, urllib.request as u\n"
    "for _ in range(120):\n"
    "    try: u.urlopen('http://127.0.0.1:8765/health', timeout=1); break\n"
    "    except OSError: time.sleep(1)\n"
    "else: raise SystemExit('server did not answer /health')\n"
    '"; rc=$?; kill $pid; exit $rc'
)
# (README text, what runs instead, why); each README text must occur in the README
SUBSTITUTIONS: list[tuple[str, str, str]] = [
    ("make demo", "effirag demo --skip-stats --limit 10 --out runs/readme-demo", "make test has installed .venv"),
    ("--limit 20 --out runs/qa-demo", "--limit 10 --out runs/qa-demo", "the demo's first 10 questions, not 20"),
    ("source .venv/bin/activate", "true", "the test puts the interpreter's bin folder first on PATH"),
    ("--mode hybrid --set k=2 --limit 20", "--mode hybrid --set k=2 --limit 3", "fewer questions"),
    ("output_dir=runs/reranker", "output_dir=runs/reranker epochs=1 fact_hops=50 eval_questions=10", "one epoch"),
    ("configs/sft/musique_searchr1.yaml ", "configs/sft/musique_searchr1.yaml train.optim.max_steps=2 ", "2 steps"),
    (
        "runs/grpo-demo",
        "runs/grpo-demo max_steps=1 questions_per_step=1 num_generations=2 env.engine.max_new_tokens=48",
        "one short GRPO step",
    ),
    ("effirag serve --model checkpoints/demo-policy --port 8000", SERVE, "start, check /health, stop"),
]


def readme_commands() -> list[list[str]]:
    """The commands of each ```bash block (continuation lines joined, trailing comments kept: bash ignores them)."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    out = []
    for block in blocks:
        joined = re.sub(r"\\\n\s*", "", block)
        out.append([ln.strip() for ln in joined.splitlines() if ln.strip() and not ln.strip().startswith("#")])
    return out


def substituted(command: str) -> str:
    for text, instead, _ in SUBSTITUTIONS:
        command = command.replace(text, instead)
    return command


def run(command: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env.setdefault("PYTHONPATH", str(ROOT / "src"))
    r = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"README command failed: {command}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def test_substitutions_match_the_readme() -> None:
    text = re.sub(r"\\\n\s*", "", README.read_text(encoding="utf-8"))
    for readme_text, _, why in SUBSTITUTIONS:
        assert readme_text in text, f"substitution no longer matches the README ({why}): {readme_text!r}"


def test_quick_start_names_both_set_up_commands_first() -> None:
    """The quick start's opening prose, before its first command block, names `make demo` and `make test`."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Quick start") :]
    opening = section[: section.index("```")]
    assert "`make demo`" in opening and "`make test`" in opening, opening


@pytest.fixture(scope="module")
def quick_start() -> dict[str, str]:
    """Run the quick start (the README's first block) from a clean output folder; stdout of each command."""
    # outputs of an earlier run: eval and demo would resume them, GRPO refuses a folder holding a run
    for stale in ("runs/qa-demo", "runs/readme-demo", "runs/grpo-demo"):
        shutil.rmtree(ROOT / stale, ignore_errors=True)
    return {cmd: run(substituted(cmd)).stdout for cmd in readme_commands()[0]}


@pytest.mark.slow
def test_quick_start_reproduces_the_demo(quick_start: dict[str, str]) -> None:
    [ask] = [out for cmd, out in quick_start.items() if cmd.startswith("effirag ask")]
    assert "prediction: 'Porela Dimandton'" in ask  # test-1hop-00010: the demo's first trajectory answers it so
    demo = _predictions(ROOT / "runs/readme-demo/tearag/trajectories.jsonl")
    mine = _predictions(ROOT / "runs/qa-demo/trajectories.jsonl")
    assert len(mine) == 10 and mine == {q: demo[q] for q in mine}


def needs_vllm(commands: list[str]) -> bool:
    """A block run on vLLM: tests/on_vllm/test_readme_vllm.py runs it in .venv-vllm, where vLLM is installed."""
    return any("vllm:" in c or "vllm-venv" in c for c in commands)


@pytest.mark.slow
@pytest.mark.parametrize("block", [i for i, b in enumerate(readme_commands()) if i > 0 and not needs_vllm(b)])
def test_reference_block_runs(quick_start: dict[str, str], block: int) -> None:
    for cmd in readme_commands()[block]:
        run(substituted(cmd))


def _predictions(path: Path) -> dict[str, str | None]:
    rows = [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    return {r["question_id"]: r["prediction"] for r in rows}
