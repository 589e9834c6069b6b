"""Lone UTF-16 surrogates and invalid UTF-8 in input files: one DataError naming file, record and field — through
the loaders and through ``effirag index build`` (one error line, exit code 2, no traceback)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from effirag.cli.main import app
from effirag.data import load_corpus, load_openie, load_questions, read_records
from effirag.data.io import lone_surrogate
from effirag.errors import DataError

LONE = '"\\ud800"'  # the JSON escape of a high surrogate without its low partner
PAIR = '"\\ud83d\\ude00"'  # a valid surrogate pair (one emoji): must load unchanged


def _jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_lone_surrogate_in_a_jsonl_corpus_names_file_line_and_field(tmp_path: Path) -> None:
    p = _jsonl(
        tmp_path / "corpus.jsonl",
        ['{"id": "a", "contents": "T\\nfine"}', '{"id": "b", "title": "T2", "text": ' + LONE + "}"],
    )
    with pytest.raises(DataError) as e:
        load_corpus(p)
    msg = str(e.value)
    assert str(p) in msg and "record line 2" in msg and "field 'text'" in msg and "surrogate" in msg
    assert "\\ud800" in msg  # the value is shown escaped, so the message itself can be printed
    msg.encode("utf-8")  # ... and encoded


def test_skip_invalid_passes_over_a_bad_line(tmp_path: Path) -> None:
    p = _jsonl(tmp_path / "c.jsonl", ['{"id": "b", "text": ' + LONE + "}", '{"id": "a", "text": "fine"}'])
    c = load_corpus(p, skip_invalid=True)
    assert [x.id for x in c] == ["a"] and len(c.skipped) == 1 and "line 1" in c.skipped[0]


def test_lone_surrogate_in_a_json_list_names_the_index_and_nested_field(tmp_path: Path) -> None:
    recs = '[{"title": "A", "text": "x"}, {"title": "B", "text": "y", "meta": {"tags": ["ok", ' + LONE + "]}}]"
    p = tmp_path / "corpus.json"
    p.write_text(recs, encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_corpus(p)
    assert "record [1]" in str(e.value) and "field 'meta.tags[1]'" in str(e.value)


def test_lone_surrogate_in_openie_and_questions(tmp_path: Path) -> None:
    oie = tmp_path / "openie.json"
    oie.write_text('{"docs": [{"passage": "T\\nx", "extracted_triples": [["a", ' + LONE + ', "c"]]}]}', "utf-8")
    with pytest.raises(DataError, match=r"record docs\[0\], field 'extracted_triples\[0\]\[1\]'"):
        load_openie(oie)
    q = _jsonl(tmp_path / "q.jsonl", ['{"id": "1", "question": ' + LONE + ', "golden_answers": ["x"]}'])
    with pytest.raises(DataError, match=r"record line 1, field 'question'"):
        load_questions(q)


def test_invalid_utf8_names_file_line_and_column(tmp_path: Path) -> None:
    p = tmp_path / "c.jsonl"
    p.write_bytes(b'{"id": "a", "text": "ok"}\n{"id": "b", "text": "caf\xe9"}\n')
    with pytest.raises(DataError, match=r"record line 2: invalid UTF-8 at column 25: byte\(s\) b'\\xe9'"):
        load_corpus(p)
    j = tmp_path / "c.json"
    j.write_bytes(b'[{"title": "A",\n "text": "\xff"}]')
    with pytest.raises(DataError, match=r"invalid UTF-8 at line 2, column 11"):
        read_records(j)


def test_valid_surrogate_pairs_and_plain_unicode_load_unchanged(tmp_path: Path) -> None:
    p = _jsonl(tmp_path / "c.jsonl", ['{"id": "a", "text": ' + PAIR + "}", '{"id": "b", "text": "café ß"}'])
    assert [x.text for x in load_corpus(p)] == ["\U0001f600", "café ß"]
    assert lone_surrogate({"k": ["x", {"y": "\U0001f600"}]}) is None
    assert lone_surrogate({"k": ["x", {"y": "a\udc00"}]}) == (["k", 1, "y"], "a\udc00")
    assert lone_surrogate({"\ud800": 1}) == (["\ud800"], "\ud800")


@pytest.mark.parametrize("content", [b'{"id": "a", "text": "\\ud800 x"}\n', b'{"id": "a", "text": "\xc3\x28"}\n'])
def test_index_build_prints_one_error_line(tmp_path: Path, content: bytes) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(content)
    r = CliRunner().invoke(
        app, ["index", "build", "--corpus", str(corpus), "--out", str(tmp_path / "idx"), "--no-dense"]
    )
    assert r.exit_code == 2, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)
    assert "Traceback" not in r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "corpus.jsonl" in lines[0] and "line 1" in lines[0]
    assert not (tmp_path / "idx").exists() or not any((tmp_path / "idx").iterdir())


def test_nested_json_encoded_list_is_checked_too(tmp_path: Path) -> None:
    """PopQA keeps answers as a JSON string inside the record; a lone surrogate there is caught as well."""
    inner = json.dumps(["\ud800"])  # ensure_ascii: the escape survives into the outer file
    rec = {"id": "1", "question": "q", "possible_answers": inner, "s_pop": 1}
    p = _jsonl(tmp_path / "popqa.jsonl", [json.dumps(rec)])
    with pytest.raises(DataError, match=r"record line 1, field 'possible_answers\[0\]'"):
        load_questions(p)
