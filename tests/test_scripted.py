"""The scripted backend: list and keyed replay, stop strings and token limits applied, files, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from effirag.errors import BackendError, DataError
from effirag.llm.base import GenerationConfig, Generator
from effirag.llm.scripted import ScriptedGenerator


def test_list_replay_across_calls_with_stops_and_limits() -> None:
    g = ScriptedGenerator(["a b </search> c", "one two three four", "x", "y"])
    assert isinstance(g, Generator) and g.name == "scripted:<memory>"
    out = g.generate(["p1", "p2"], GenerationConfig(max_new_tokens=3, stop=("</search>",)))
    (a,), (b,) = out
    assert (a.text, a.finish_reason, a.stop_string, len(a.token_ids)) == ("a b </search>", "stop", "</search>", 3)
    assert (b.text, b.finish_reason, b.stop_string) == ("one two three", "length", None)
    assert [[c.text for c in cs] for cs in g.generate(["p3"], GenerationConfig(n=2))] == [["x", "y"]]
    assert g.prompts == ["p1", "p2", "p3"] and g.calls == 2
    with pytest.raises(BackendError, match="script exhausted after 4 completion"):
        g.generate(["p4"], GenerationConfig())


def test_keyed_replay_has_one_cursor_per_key() -> None:
    g = ScriptedGenerator({"Lyon": ["l1", "l2"], "Paris": "p1"})
    got = g.generate(["Q: Paris?", "Q: Lyon?", "Q: Lyon again"], GenerationConfig())
    assert [cs[0].text for cs in got] == ["p1", "l1", "l2"]
    with pytest.raises(BackendError, match="no scripted key occurs in the prompt"):
        g.generate(["Q: Rome?"], GenerationConfig())


def test_token_counts_use_the_given_tokenizer() -> None:
    class Chars:
        def encode(self, text: str) -> list[int]:
            return [ord(c) for c in text]

        def decode(self, ids: list[int]) -> str:
            return "".join(map(chr, ids))

    g = ScriptedGenerator(["abcdef"], tokenizer=Chars())
    assert g.count_tokens("a b") == 3
    (c,) = g.generate(["p"], GenerationConfig(max_new_tokens=4))[0]
    assert (c.text, c.token_ids, c.finish_reason) == ("abcd", (97, 98, 99, 100), "length")
    assert ScriptedGenerator([]).count_tokens("  two words ") == 2


def test_from_file_json_and_jsonl(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(["x", "y"]))
    assert ScriptedGenerator.from_file(tmp_path / "a.json").generate(["p"], GenerationConfig())[0][0].text == "x"
    (tmp_path / "b.jsonl").write_text('{"key": "Lyon", "text": "l1"}\n\n{"key": "Paris", "text": "p1"}\n')
    g = ScriptedGenerator.from_file(tmp_path / "b.jsonl")
    assert g.generate(["Paris?"], GenerationConfig())[0][0].text == "p1" and g.name.endswith("b.jsonl")
    (tmp_path / "c.jsonl").write_text('"x"\n{"nope": 1}\n')
    with pytest.raises(DataError, match=r"c.jsonl, record line 2: expected a string or an object"):
        ScriptedGenerator.from_file(tmp_path / "c.jsonl")
    (tmp_path / "d.json").write_text('{"a": 3}')
    with pytest.raises(DataError, match="expected a JSON list of strings"):
        ScriptedGenerator.from_file(tmp_path / "d.json")
    (tmp_path / "e.json").write_text('["x",')
    with pytest.raises(DataError, match=r"e\.json: invalid JSON at line 1"):
        ScriptedGenerator.from_file(tmp_path / "e.json")
    with pytest.raises(DataError, match="not found"):
        ScriptedGenerator.from_file(tmp_path / "missing.json")
