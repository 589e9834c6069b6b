"""`effirag data stats` through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from typer.testing import CliRunner

from effirag.cli.main import app

runner = CliRunner()


def test_stats_json_on_musique(shared_data: Path) -> None:
    mus = shared_data / "musique_mini"
    r = runner.invoke(
        app,
        [
            "data",
            "stats",
            "--questions",
            str(mus / "questions.json"),
            "--corpus",
            str(mus / "corpus.json"),
            "--openie",
            str(mus / "openie_gpt-3.5-turbo-1106.json"),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert (s["n_questions"], s["n_passages"], s["n_triplets"]) == (70, 1890, 17204)
    assert s["triplets"]["raw"] == 17419
    assert s["hops"] == {"2": 45, "3": 21, "4": 4}


def test_stats_bad_file_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "q.jsonl"
    bad.write_text("{not json}\n", encoding="utf-8")
    r = runner.invoke(app, ["data", "stats", "--questions", str(bad)])
    assert r.exit_code == 2
    assert "line 1" in r.output and str(bad.name) in r.output


def _command_paths(cmd: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    for name, sub in getattr(cmd, "commands", {}).items():
        paths += _command_paths(sub, (*prefix, name))
    return paths


def test_every_command_has_help() -> None:
    """Walk the whole command tree (groups added later included): every command answers --help."""
    paths = _command_paths(typer.main.get_command(app))
    assert ("data", "stats") in paths
    for path in paths:
        r = runner.invoke(app, [*path, "--help"])
        assert r.exit_code == 0, (path, r.output)
        assert "Usage" in r.output
