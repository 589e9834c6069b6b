"""``effirag data mcts`` resumes: a run killed with SIGKILL mid-question and run again writes exactly the pairs, tree
statistics and tree files of an uninterrupted run, with no question twice.

The policy is a deterministic stand-in for a sampler (:class:`VariantGenerator`): the j-th copy of a prompt within a
batch, under generation seed s, writes variant (s + j) mod 3 of its stage's turn, so siblings differ and rollouts
depend on the seed as a real seeded sampler's do.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from effirag.agent import EngineConfig, get_protocol
from effirag.llm.base import Completion, GenerationConfig
from effirag.train.mcts import EnginePolicy, MCTSConfig, mine_trees
from effirag.types import QAExample
from test_engine_support import LexicalRetriever

QUESTIONS = [
    QAExample("spain", "What is the capital of Spain?", ("Madrid",)),
    QAExample("france", "What is the capital of France?", ("Paris",)),
    QAExample("lyon", "Which river flows through Lyon?", ("Rhone",)),
]
SEARCH = MCTSConfig(iterations=4, k=2, rollouts=1, max_depth=4, alpha=0.8)


class VariantGenerator:
    """See the module docstring; ``delay`` seconds per call give a test time to kill the run mid-question."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.answers = {q.question: q.answers[0] for q in QUESTIONS}

    @property
    def name(self) -> str:
        return "variant"

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def _turn(self, prompt: str, variant: int) -> str:
        question = prompt.split("Question: ", 1)[1].split("\n", 1)[0]
        gold = self.answers[question]
        if "(grounding stage)" in prompt:
            doc = prompt.split("Doc 1 (Title: ", 1)[1].split(") ", 1)[1].split("\n", 1)[0]
            return ["<evidence> None </evidence>", f"<evidence> {doc} </evidence>", f"<evidence> {doc} </evidence>"][
                variant
            ]
        if "Nothing has been searched yet." in prompt:
            return [f"I guess.\n<answer> {gold[::-1]} </answer>", f"Search.\n<query> {question} </query>",
                    f"Search it.\n<query> {question.rstrip('?')} </query>"][variant]  # fmt: skip
        if "Evidence: None" in prompt:
            return f"Nothing found.\n<answer> {gold[::-1]} </answer>"
        return [f"Enough.\n<answer> {gold} </answer>", f"Check.\n<query> {gold} </query>",
                f"So.\n<answer> {gold} </answer>"][variant]  # fmt: skip

    def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[list[Completion]]:
        time.sleep(self.delay)
        out = []
        for i, p in enumerate(prompts):
            j = prompts[:i].count(p)
            text = self._turn(p, ((config.seed or 0) + j) % 3)
            out.append([Completion(text, tuple(range(len(text.split()))))])
        return out


def mine(out: Path, delay: float = 0.0) -> None:
    policy = EnginePolicy(VariantGenerator(delay), LexicalRetriever(), get_protocol("reasonrag"), EngineConfig(k=1))
    mine_trees(QUESTIONS, policy, SEARCH, out)


def _outputs(out: Path) -> tuple[str, list[dict[str, object]], dict[str, str]]:
    trees = [json.loads(x) for x in (out / "trees.jsonl").read_text(encoding="utf-8").splitlines()]
    for r in trees:
        r.pop("seconds")
    dumps = {p.name: p.read_text(encoding="utf-8") for p in sorted((out / "trees").glob("*.json"))}
    return (out / "pairs.jsonl").read_text(encoding="utf-8"), trees, dumps


def test_kill_9_then_rerun_equals_one_run(tmp_path: Path) -> None:
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    mine(whole)
    pairs, trees, dumps = _outputs(whole)
    assert [r["question_id"] for r in trees] == ["spain", "france", "lyon"]
    assert pairs.count("\n") == sum(int(r["pairs"]) for r in trees) > 0  # type: ignore[call-overload]

    here = Path(__file__).resolve().parent
    code = (
        f"import sys; sys.path.insert(0, {str(here)!r}); import test_mcts_resume as m; "
        f"m.mine(m.Path({str(cut)!r}), 0.05)"
    )
    env = {**os.environ, "PYTHONPATH": str(here.parent / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while not (cut / "trees.jsonl").is_file() or not (cut / "trees.jsonl").read_text(encoding="utf-8"):
        assert p.poll() is None and time.time() < deadline, p.stdout.read().decode() if p.stdout else ""
        time.sleep(0.02)
    time.sleep(0.15)  # into the second question
    assert p.poll() is None, "the run ended before it could be killed"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    done = (cut / "trees.jsonl").read_text(encoding="utf-8").count("\n")
    assert 1 <= done < 3
    mine(cut)
    assert _outputs(cut) == (pairs, trees, dumps)


def test_recover_drops_an_unfinished_question_and_a_torn_line(tmp_path: Path) -> None:
    """What a kill can leave between the pairs append and the trees.jsonl line: the next question's pairs, and a
    line cut mid-write. A rerun drops both and searches the question again; nothing appears twice."""
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    mine(whole)
    expected = _outputs(whole)
    mine_trees(QUESTIONS[:1], EnginePolicy(VariantGenerator(), LexicalRetriever(), get_protocol("reasonrag"),
                                           EngineConfig(k=1)), SEARCH, cut)  # fmt: skip
    france = [ln for ln in expected[0].splitlines(keepends=True) if '"question_id": "france"' in ln]
    assert france
    with (cut / "pairs.jsonl").open("a", encoding="utf-8") as f:
        f.write("".join(france) + '{"question_id": "lyon", "prompt": "cut mid-wr')
    with (cut / "trees.jsonl").open("a", encoding="utf-8") as f:
        f.write('{"question_id": "fra')
    mine(cut)
    assert _outputs(cut) == expected
