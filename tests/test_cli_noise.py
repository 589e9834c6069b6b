"""CLI output hygiene: progress goes to stderr, flags show no value type, library notices that cannot be acted on are
silenced (only those), and rich markup in trajectories is escaped."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from effirag.cli.common import setup_logging
from effirag.cli.demo import _print_trajectory
from effirag.cli.main import app
from effirag.llm.hf import _NoKernelFallbackNotice
from effirag.types import Action, ItemKind

runner = CliRunner()


def test_eval_qa_progress_on_stderr_json_on_stdout(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.json"
    docs = [{"title": "A", "text": "Ana Lopez directed Blue River."}, {"title": "B", "text": "x"}]
    corpus.write_text(json.dumps(docs))
    r = runner.invoke(app, ["index", "build", "--corpus", str(corpus), "--out", str(tmp_path / "idx"), "--no-dense"])
    assert r.exit_code == 0, r.output
    qs = tmp_path / "q.jsonl"
    rows = [{"id": "a", "question": "Who directed Blue River?", "answer": "Ana Lopez"}, {"id": "b", "question": "Hm?"}]
    rows[1]["answer"] = "x"
    qs.write_text("\n".join(json.dumps(q) for q in rows))
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"Blue River?": ["<answer> Ana Lopez </answer>"], "Hm?": ["<answer> y </answer>"]}))
    args = ["eval", "qa", "-q", str(qs), "-i", str(tmp_path / "idx"), "-b", f"scripted:{script}", "-p", "zeroshot"]
    r = runner.invoke(app, [*args, "--chunk-size", "1", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["em"] == 0.5  # nothing but the report on stdout
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("eval qa zeroshot")]
    assert lines[0].startswith("eval qa zeroshot: 0/2 questions")
    assert "1/2 questions, EM 100.0%" in lines[1] and "ETA" in lines[1]
    assert "2/2 questions, EM 50.0%" in lines[2]


@pytest.mark.parametrize("command", [["ask"], ["eval", "qa"], ["world", "generate"], ["data", "stats"], ["demo"]])
def test_flags_show_no_value_type(command: list[str]) -> None:
    r = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    rows = [ln for ln in r.stdout.splitlines() if "--json" in ln or "--verbose" in ln or "--skip-stats" in ln]
    assert rows and not any("<bool>" in ln for ln in rows)


def test_ask_json_true_is_refused() -> None:
    """A plain flag takes no value: `--json true` makes `true` an extra argument, which click refuses."""
    r = runner.invoke(app, ["ask", "q", "--backend", "scripted:x.json", "--json", "true"])
    assert r.exit_code != 0


def test_only_the_kernel_fallback_notice_is_dropped() -> None:
    f = _NoKernelFallbackNotice()

    def rec(msg: str) -> logging.LogRecord:
        return logging.LogRecord("transformers.integrations.hub_kernels", logging.WARNING, "", 0, msg, None, None)

    notice = (
        "`causal_conv1d_fn` is falling back to its reference PyTorch implementation because `causal_conv1d` is not "
        "installed. This is correct but much slower; install `causal_conv1d` for the optimized kernel."
    )
    assert not f.filter(rec(notice))
    assert f.filter(rec(notice.replace("causal_conv1d", "flash_attn")))
    assert f.filter(rec("Kernel x not found"))


def test_bm25s_debug_lines_are_quiet() -> None:
    import bm25s  # noqa: F401  (sets its logger to DEBUG at import)

    setup_logging(False)
    assert not logging.getLogger("bm25s").isEnabledFor(logging.DEBUG)
    setup_logging(True)
    assert logging.getLogger("bm25s").isEnabledFor(logging.INFO)
    assert not logging.getLogger("bm25s").isEnabledFor(logging.DEBUG)


def test_demo_trajectory_keeps_the_mode_and_whole_words(capsys: pytest.CaptureFixture[str]) -> None:
    long = "Directed by Porela Dimandton, Gentle Meadow under Zobith is a drama film " * 4
    item = SimpleNamespace(kind=ItemKind.CHUNK, text=long)
    search = SimpleNamespace(
        action=Action.SEARCH, mode="kag", entities=["[x]"], query="Who directed it?", items=[item], summary="[b]ok[/b]"
    )
    answer = SimpleNamespace(action=Action.ANSWER, answer="Porela Dimandton")
    ex = SimpleNamespace(id="q1", hops=1, question="Who?", answers=["Porela Dimandton"])
    t = SimpleNamespace(steps=[search, answer], prediction="Porela Dimandton", generated_tokens=5, inserted_tokens=9)
    _print_trajectory(ex, t)
    out = capsys.readouterr().out
    assert "search[kag] entities=['[x]']" in out and "summary: [b]ok[/b]" in out
    chunk = " ".join(out[out.index("· chunk:") : out.index("summary:")].split())  # rich wraps it over lines
    assert chunk.endswith("…") and chunk.split()[-2] in long.split()  # cut after a whole word


def _command_paths() -> list[list[str]]:
    """Every command and group of the CLI as its argument path (``[]``, ``["index"]``, ``["index", "build"]``, …)."""
    import typer.main

    def walk(cmd: Any, path: list[str]) -> list[list[str]]:
        if hasattr(cmd, "commands"):  # a group (typer ships its own click: no isinstance check on click's classes)
            return [path, *(p for name, sub in sorted(cmd.commands.items()) for p in walk(sub, [*path, name]))]
        return [path]

    return walk(typer.main.get_command(app), [])


def test_every_command_is_walked() -> None:
    paths = _command_paths()
    for known in (
        [],
        ["train"],
        ["index", "build"],
        ["train", "grpo"],
        ["train", "ppo"],
        ["serve", "retrieval"],
        ["demo"],
    ):
        assert known in paths
    assert len(paths) >= 15


@pytest.mark.parametrize("command", _command_paths(), ids=lambda path: " ".join(path) or "effirag")
def test_no_help_shows_a_value_type_for_a_flag(command: list[str]) -> None:
    """A boolean option is a plain flag (``--rebuild``, not ``--rebuild true``): no ``<bool>`` in any --help."""
    r = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "<bool>" not in r.stdout, "\n".join(ln for ln in r.stdout.splitlines() if "<bool>" in ln)
