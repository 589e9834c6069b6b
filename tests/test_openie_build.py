"""``effirag index build --openie-llm``: resumable LLM OpenIE through the scripted backend, written in HippoRAG's
layout, and the knowledge graph built from it; a killed run resumes without redoing finished passages."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from effirag.cli.main import app
from effirag.data import load_corpus, load_openie
from effirag.errors import DataError
from effirag.llm.scripted import ScriptedGenerator
from effirag.retrieval.index import load_index
from effirag.retrieval.openie_run import OpenIERunConfig, progress_path, read_progress, run_openie
from effirag.types import Passage, Triplet

runner = CliRunner()


def _replies(passages: list[Passage], triplets: list[Triplet], broken: str) -> dict[str, list[str]]:
    """Per passage text: the NER reply, then the triple reply (the passage ``broken`` gets a NER reply with no JSON)."""
    out = {}
    for p in passages:
        ts = [[t.head, t.relation, t.tail] for t in triplets if t.source_id == p.id]
        ents = sorted({x for t in ts for x in (t[0], t[2])}) or [p.title]
        ner = "no idea" if p.id == broken else json.dumps({"named_entities": ents})
        out[p.text] = [ner, json.dumps({"triples": ts})]
    return out


@pytest.fixture
def corpus(tmp_path: Path, small_passages: list[Passage]) -> Path:
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps([{"title": p.title, "text": p.text} for p in small_passages]), encoding="utf-8")
    return path


def _script(
    path: Path, passages: list[Passage], small_triplets: list[Triplet], skip: frozenset[str] = frozenset()
) -> Path:
    reps = _replies(passages, small_triplets, broken="p3")
    path.write_text(json.dumps({k: v for k, v in reps.items() if k not in skip}), encoding="utf-8")
    return path


@pytest.fixture
def small_triplets() -> list[Triplet]:
    from conftest import SMALL_TRIPLETS

    return list(SMALL_TRIPLETS)


def test_cli_extracts_writes_hipporag_layout_and_builds_graph(
    tmp_path: Path, corpus: Path, small_passages: list[Passage], small_triplets: list[Triplet]
) -> None:
    script = _script(tmp_path / "replies.json", small_passages, small_triplets)
    out = tmp_path / "idx"
    args = ["index", "build", "-c", str(corpus), "-o", str(out), "--no-dense", "--openie-llm", f"scripted:{script}"]
    r = runner.invoke(app, [*args, "--openie-batch", "4"])
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())
    assert "6 passages extracted, 0 resumed" in said and "1 passages with a reply that did not parse" in said
    assert "OpenIE (LLM): 100%" in r.output  # the progress bar
    doc = json.loads((out / "openie_llm.json").read_text(encoding="utf-8"))
    by_title = {d["title"]: d for d in doc["docs"]}
    assert (
        len(by_title) == 6
        and by_title["Amsterdam"]["passage"] == "Amsterdam\nAmsterdam is the capital of the Netherlands."
    )
    assert by_title["Amsterdam"]["extracted_triples"] == [["Amsterdam", "capital of", "Netherlands"]]
    assert by_title["Amsterdam"]["extracted_entities"] == ["Amsterdam", "Netherlands"]  # the NER reply, not the triples
    assert by_title["Tulip"]["extracted_entities"] == [] and by_title["Tulip"]["extracted_triples"] == []  # broken NER
    kg = load_index(out).kg
    assert kg is not None
    assert sorted((t.head, t.relation, t.tail) for t in kg.triplets) == sorted(
        (t.head, t.relation, t.tail) for t in small_triplets
    )
    assert {"Dutch East India Company", "The Night Watch"} <= set(kg.entity_names)
    # a rerun finds every passage done: the script (exhausted after one pass) is not asked again
    r = runner.invoke(app, [*args, "--rebuild"])
    assert r.exit_code == 0, r.output
    assert "0 passages extracted, 6 resumed" in " ".join(r.output.split())
    r = runner.invoke(app, [*args, "--rebuild", "--openie", str(out / "openie_llm.json")])
    assert r.exit_code != 0 and "give one of --openie, --triplets, --openie-llm" in r.output


_SLOW_RUN = """
import sys, time
from effirag.data import load_corpus
from effirag.llm.scripted import ScriptedGenerator
from effirag.retrieval.openie_run import OpenIERunConfig, run_openie

class Slow(ScriptedGenerator):
    def generate(self, prompts, config):
        time.sleep(0.4)
        return super().generate(prompts, config)

run_openie(load_corpus(sys.argv[1]).passages, Slow.from_file(sys.argv[2]), sys.argv[3], OpenIERunConfig(batch_size=1))
"""


def test_killed_run_resumes_without_redoing_finished_passages(
    tmp_path: Path, corpus: Path, small_passages: list[Passage], small_triplets: list[Triplet]
) -> None:
    script = _script(tmp_path / "replies.json", small_passages, small_triplets)
    out = tmp_path / "openie.json"
    env = {**os.environ, "PYTHONPATH": str(Path("src").resolve()) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.Popen([sys.executable, "-c", _SLOW_RUN, str(corpus), str(script), str(out)], env=env)
    prog = progress_path(out)
    deadline = time.time() + 120
    while not (prog.is_file() and prog.read_bytes().count(b"\n") >= 2):
        assert p.poll() is None and time.time() < deadline, "the run ended before its second passage"
        time.sleep(0.05)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert not out.exists()
    done = read_progress(prog, f"scripted:{script}", "instruct")
    assert 2 <= len(done) < 6
    # the rerun's script only answers the passages not done: asking for a finished one would fail the build
    texts = {q.id: q.text for q in load_corpus(corpus).passages}
    _script(script, small_passages, small_triplets, skip=frozenset(texts[i] for i in done))
    args = ["index", "build", "-c", str(corpus), "-o", str(tmp_path / "idx"), "--no-dense"]
    r = runner.invoke(app, [*args, "--openie-llm", f"scripted:{script}", "--openie-out", str(out)])
    assert r.exit_code == 0, r.output
    assert f"{6 - len(done)} passages extracted, {len(done)} resumed" in " ".join(r.output.split())
    got = load_openie(out, load_corpus(corpus))
    assert len(got.triplets) == 6 and len(got.entities) == 6


def test_progress_file_torn_line_and_other_backend(tmp_path: Path, small_passages: list[Passage]) -> None:
    passages = small_passages[:2]
    reps = {p.text: [json.dumps({"named_entities": [p.title]}), '{"triples": []}'] for p in passages}
    out = tmp_path / "o.json"
    s = run_openie(passages, ScriptedGenerator(reps, source="a"), out, OpenIERunConfig(batch_size=1))
    assert (s.extracted, s.resumed, s.failed, s.triplets) == (2, 0, 0, 0)  # empty triple lists parse
    prog = progress_path(out)
    first = prog.read_text(encoding="utf-8").splitlines()[0]
    prog.write_text(first + "\n" + '{"id": "p1", "torn', encoding="utf-8")  # killed in the middle of a write
    s = run_openie(passages, ScriptedGenerator({passages[1].text: reps[passages[1].text]}, source="a"), out)
    assert (s.extracted, s.resumed) == (1, 1)
    assert prog.read_text(encoding="utf-8").count("\n") == 2 and '"torn' not in prog.read_text(encoding="utf-8")
    with pytest.raises(DataError, match=r"line 1.*made with backend 'scripted:a', this run uses 'scripted:b'"):
        run_openie(passages, ScriptedGenerator({}, source="b"), out)
    with pytest.raises(DataError, match="made with prompt 'instruct', this run uses 'fewshot'"):
        run_openie(passages, ScriptedGenerator({}, source="a"), out, OpenIERunConfig(prompt="fewshot"))
