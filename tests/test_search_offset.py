"""``effirag search --offset N``: items N+1… of the same ranking (deep paging), from the command line."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from effirag.cli.main import app
from effirag.types import Passage


def test_search_offset_pages_the_ranking(tmp_path: Path, small_passages: list[Passage]) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"title": p.title, "text": p.text}) + "\n" for p in small_passages))
    built = CliRunner().invoke(app, ["index", "build", "--corpus", str(corpus), "--out", str(tmp_path / "idx"),
                                     "--no-dense"])  # fmt: skip
    assert built.exit_code == 0, built.output
    args = ["search", "Amsterdam Netherlands Europe", "--index", str(tmp_path / "idx"), "--mode", "sparse", "--json"]
    full = json.loads(CliRunner().invoke(app, [*args, "--k", "4"]).stdout)
    page = json.loads(CliRunner().invoke(app, [*args, "--k", "2", "--offset", "2"]).stdout)
    ids = [it["id"] for it in full["items"]]
    assert len(ids) == 4 and [it["id"] for it in page["items"]] == ids[2:4] and page["offset"] == 2
