"""An index cannot be quietly altered or overwritten: each tampering is refused with the file named."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from effirag.errors import IndexMismatchError
from effirag.retrieval.encoders import HashingEncoder
from effirag.retrieval.index import MANIFEST, IndexManifest, build_index, load_index
from effirag.types import Passage


@pytest.fixture()
def index(small_index_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the shared small index (each test tampers with its own)."""
    return Path(shutil.copytree(small_index_dir, tmp_path / "idx"))


def _edit(folder: Path, change: Any, *, resign: bool) -> None:
    """Apply ``change`` to the manifest's dict; ``resign`` recomputes settings_sha256 as a careful forger would."""
    path = folder / MANIFEST
    data = json.loads(path.read_text("utf-8"))
    change(data)
    if resign:
        data["settings_sha256"] = IndexManifest(**data).settings_digest()
    path.write_text(json.dumps(data), "utf-8")


def test_the_untouched_copy_loads(index: Path) -> None:
    assert load_index(index).manifest.n_passages == 6


def test_dropping_a_file_from_the_list_is_refused(index: Path) -> None:
    _edit(index, lambda d: d["files"].pop("sparse/bm25_config.json"), resign=False)
    with pytest.raises(IndexMismatchError, match="edited after the build"):
        load_index(index)
    _edit(index, lambda d: None, resign=True)  # a forger re-signs: the format still requires the file
    with pytest.raises(IndexMismatchError, match=r"does not list sparse/bm25_config\.json"):
        load_index(index)


def test_an_empty_file_list_is_refused(index: Path) -> None:
    _edit(index, lambda d: d["files"].clear(), resign=True)
    with pytest.raises(IndexMismatchError, match=r"does not list passages\.jsonl"):
        load_index(index)


def test_an_edited_bm25_k1_is_refused(index: Path) -> None:
    _edit(index, lambda d: d["sparse"].update(k1=9.0), resign=False)
    with pytest.raises(IndexMismatchError, match="settings_sha256 differs"):
        load_index(index)
    _edit(index, lambda d: None, resign=True)
    with pytest.raises(IndexMismatchError, match=r"bm25_config\.json: BM25 settings .* differ"):
        load_index(index)


def test_paths_outside_the_index_are_refused(index: Path) -> None:
    for bad in ("../outside.txt", "/etc/hostname"):
        _edit(index, lambda d, bad=bad: d["files"].update({bad: {"bytes": 1, "sha256": "0"}}), resign=True)
        with pytest.raises(IndexMismatchError, match="not a plain path inside the index"):
            load_index(index)
        _edit(index, lambda d, bad=bad: d["files"].pop(bad), resign=True)
    load_index(index)


def test_an_altered_file_is_named(index: Path) -> None:
    path = index / "passages.jsonl"
    text = path.read_text("utf-8")
    path.write_text(text.replace("Amsterdam", "Amsterdan", 1), "utf-8")
    with pytest.raises(IndexMismatchError, match=r"passages\.jsonl: SHA-256 differs"):
        load_index(index)


def test_building_over_another_corpus_is_refused_unless_replaced(index: Path) -> None:
    other = [Passage("q0", "Oslo", "Oslo is the capital of Norway.")]
    with pytest.raises(IndexMismatchError, match=r"another corpus.*--rebuild"):
        build_index(other, index, encoder=HashingEncoder(64))
    assert load_index(index).manifest.n_passages == 6  # untouched
    build_index(other, index, encoder=HashingEncoder(64), replace=True)
    assert load_index(index).manifest.n_passages == 1


def test_eval_retrieval_refuses_to_overwrite_another_corpus_index(tmp_path: Path) -> None:
    """`eval retrieval --index DIR` over another corpus refuses (naming --rebuild) and leaves DIR as it was."""
    from typer.testing import CliRunner

    from effirag.cli.main import app

    def corpus(name: str, rows: list[dict[str, str]]) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps(rows), "utf-8")
        return path

    a = corpus("a.json", [{"title": "Oslo", "text": "Oslo is the capital of Norway."}])
    b = corpus("b.json", [{"title": "Bern", "text": "Bern is the capital of Switzerland."}])
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps([{"question": "What is the capital of Norway?", "answer": "Oslo"}]), "utf-8")
    folder = tmp_path / "idx"
    runner = CliRunner()
    built = runner.invoke(app, ["index", "build", "--corpus", str(a), "--out", str(folder), "--no-dense"])
    assert built.exit_code == 0, built.output
    before = (folder / MANIFEST).read_bytes()
    args = ["eval", "retrieval", "-q", str(questions), "-c", str(b), "--index", str(folder), "-r", "bm25", "-k", "1"]
    refused = runner.invoke(app, args)
    assert refused.exit_code != 0 and "--rebuild" in refused.output
    assert (folder / MANIFEST).read_bytes() == before
    again = runner.invoke(app, ["index", "build", "--corpus", str(b), "--out", str(folder), "--no-dense"])
    assert again.exit_code != 0 and "another corpus" in again.output
    assert runner.invoke(app, [*args, "--rebuild"]).exit_code == 0
    assert load_index(folder).manifest.n_passages == 1 and (folder / MANIFEST).read_bytes() != before
