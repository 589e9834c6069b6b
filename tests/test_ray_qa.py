"""``eval qa`` over Ray actors equals the one-process run number for number: chunks keep their seeds wherever they
run, and come back in question order; a missing Ray fails with the install hint. Ray runs on 2 local CPUs."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from effirag.agent import EngineConfig, get_protocol
from effirag.data.questions import load_questions
from effirag.eval.qa import evaluate_qa
from effirag.types import Trajectory

RL_QUESTIONS_N = 3  # questions in the `setup` fixture's file (conftest.py)


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    """One local Ray instance on 2 CPUs for the module (runners join it instead of starting their own)."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _trajectory(t: Trajectory) -> tuple[Any, ...]:
    steps = [(s.action, s.text, s.query, [i.id for i in s.items], s.generated_tokens) for s in t.steps]
    return t.question_id, t.sample_index, t.prompt, t.prediction, t.format_ok, t.generated_tokens, steps


def _no_latency(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k != "latency_s"}


@pytest.mark.slow
def test_two_actors_sample_the_same_episodes_as_one_process(setup: dict[str, str], ray_local: Any) -> None:
    """A tiny random policy sampled at temperature 1 (2 samples a question, one question a chunk): the episodes
    depend on each chunk's seed, so a split that lost the seeds or the order would differ from the one-process run."""
    from effirag.env import EnvConfig, policy_and_retriever
    from effirag.eval.ray_qa import RayChunkRunner

    examples = load_questions(Path(setup["questions"])).examples
    proto = get_protocol("searchr1")
    cfg = EngineConfig(max_steps=2, max_new_tokens=12, temperature=1.0, seed=7, n=2)
    env = EnvConfig(model=f"hf:{setup['model']}", index=setup["index"], engine=cfg)
    make = partial(policy_and_retriever, env)
    gen, retriever = make()
    one, one_t = evaluate_qa(examples, gen, retriever, proto, cfg, chunk_size=1)
    runner = RayChunkRunner(make, proto, actors=2)
    two, two_t = evaluate_qa(examples, gen, None, proto, cfg, chunk_size=1, runner=runner)
    assert [_trajectory(t) for t in two_t] == [_trajectory(t) for t in one_t]
    assert _no_latency(two) == _no_latency(one)
    # the samples really are random draws: the two samples of a question differ, and another seed changes them
    assert len({t.steps[0].text for t in one_t}) == len(one_t)
    _, other = evaluate_qa(examples[:1], gen, retriever, proto, dataclasses.replace(cfg, seed=8), chunk_size=1)
    assert other[0].steps[0].text != one_t[0].steps[0].text


SCRIPT = {
    "Blue River?": ["<search> who directed Blue River </search>", "<answer> Ana Lopez </answer>"],
    "through Lyon?": ["<search> river Lyon </search>", "<answer> Rhone </answer>"],
    "capital of Spain?": ["<answer> Paris </answer>"],
}


@pytest.mark.slow
def test_cli_eval_qa_ray_through_the_server_equals_one_process(
    setup: dict[str, str], ray_local: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``eval qa --ray 2 --retriever URL`` (both actors searching one real server) prints the report of
    ``eval qa --index`` in one process, and its --out holds every question's trajectory."""
    from effirag.cli.main import app
    from effirag.retrieval.facade import load_retriever
    from effirag.serve.background import BackgroundServer
    from effirag.serve.retrieval import create_app

    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    args = ["eval", "qa", "--questions", setup["questions"], "--backend", f"scripted:{script}", "--json"]
    args += ["--protocol", "searchr1", "--inference", "none", "--chunk-size", "1"]
    args += ["--set", "k=2", "--set", "passage_mode=sparse"]
    monkeypatch.delenv("EFFIRAG_TOKEN", raising=False)
    runner = CliRunner()
    one = runner.invoke(app, [*args, "--index", setup["index"]])
    with BackgroundServer(create_app(load_retriever(Path(setup["index"])))) as srv:
        two = runner.invoke(app, [*args, "--retriever", srv.url, "--ray", "2", "--out", str(tmp_path / "out")])
    assert one.exit_code == 0 and two.exit_code == 0, one.output + two.output
    a, b = json.loads(one.stdout), json.loads(two.stdout)
    assert _no_latency(a) == _no_latency(b)
    assert (a["em"], a["retrieval_turns"]) == (0.666667, 0.666667)  # Ana Lopez and Rhone right, Paris wrong; 2 searches
    rows = [json.loads(line) for line in (tmp_path / "out" / "trajectories.jsonl").read_text().splitlines()]
    assert sorted(r["question_id"] for r in rows) == ["q1", "q2", "q3"]


def test_ray_missing_fails_with_the_install_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Checked before anything is loaded (the index folder here does not even exist)."""
    from effirag.cli.main import app

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    script, questions = tmp_path / "script.json", tmp_path / "q.jsonl"
    script.write_text(json.dumps(SCRIPT))
    questions.write_text('{"id": "q1", "question": "Who directed Blue River?", "answer": "Ana Lopez"}\n')
    args = ["eval", "qa", "--questions", str(questions), "--backend", f"scripted:{script}"]
    res = CliRunner().invoke(app, [*args, "--index", str(tmp_path / "idx"), "--ray", "2", "--inference", "none"])
    assert res.exit_code != 0
    assert "Ray is not installed: install EffiRAG's distributed extra" in res.output
