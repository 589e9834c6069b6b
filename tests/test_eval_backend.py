"""The evaluation backend of ``effirag demo`` (``--backend``) and ``effirag reproduce`` (``eval_backend``): HF by
default with the stage commands as before, vLLM when asked (eager, float32, or the user's options), bad values refused
naming them, and a missing vLLM refused before any work, naming ``make vllm-venv``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from effirag.cli.demo import demo_backend
from effirag.cli.main import app
from effirag.errors import BackendError, ConfigError
from effirag.llm.factory import policy_backend
from effirag.reproduce.config import ReproduceConfig
from effirag.reproduce.plan import make_plan

ROOT = Path(__file__).resolve().parents[1]
POLICY = ROOT / "checkpoints" / "demo-policy"
MISSING = "vLLM is not installed in this Python; on a CPU machine `make vllm-venv` builds .venv-vllm …"


def _cfg(**kw: Any) -> ReproduceConfig:
    base = {"start": "/m", "world": "/w", "index": "/i", "recipes": str(ROOT / "configs"), "musique": ""}
    return ReproduceConfig(**{**base, **kw})


def _stages(cfg: ReproduceConfig, out: Path) -> dict[str, tuple[str, ...]]:
    return {s.key: s.argv for s in make_plan(cfg, out, lambda words: True).stages}


def _backend(argv: tuple[str, ...]) -> str:
    return argv[argv.index("-b") + 1]


def test_the_default_plan_evaluates_on_hf_as_before(tmp_path: Path) -> None:
    """The default plan's eval commands, byte for byte as before ``eval_backend`` existed."""
    out = tmp_path / "out"
    stages = _stages(_cfg(), out)
    assert stages["eval-start-tearag"] == (
        "eval", "qa", "-q", "/w/questions_test.jsonl", "-i", "/i", "-b", "hf:/m", "-p", "tearag",
        "--limit", "100", "--out", str(out / "stages" / "eval-start-tearag" / "run"), "--inference", "none",
        "--set", "seed=0", "--json",
    )  # fmt: skip
    evals = {k: a for k, a in stages.items() if a[:2] == ("eval", "qa")}
    assert len(evals) > 5
    for argv in evals.values():
        assert _backend(argv).startswith("hf:") and "?" not in _backend(argv)
    assert _stages(_cfg(eval_backend="hf"), out) == stages


@pytest.mark.parametrize(
    ("choice", "query"),
    [("vllm", "?eager=1&dtype=float32"), ("vllm?dtype=bfloat16&kv_cache_gb=2", "?dtype=bfloat16&kv_cache_gb=2")],
)
def test_eval_backend_vllm_runs_every_evaluation_on_vllm_and_no_training(
    tmp_path: Path, choice: str, query: str
) -> None:
    out = tmp_path / "out"
    hf, vllm = _stages(_cfg(), out), _stages(_cfg(eval_backend=choice), out)
    assert hf.keys() == vllm.keys()
    evals = [k for k, a in hf.items() if a[:2] == ("eval", "qa")]
    for key in evals:
        policy = _backend(hf[key]).removeprefix("hf:")
        assert _backend(vllm[key]) == f"vllm:{policy}{query}"
        assert [a for a in vllm[key] if a != _backend(vllm[key])] == [a for a in hf[key] if a != _backend(hf[key])]
    assert "vllm:/m" + query in {_backend(vllm[k]) for k in evals}  # the start policy
    assert any("trainings" in _backend(vllm[k]) for k in evals)  # and the trained ones
    assert {k: a for k, a in vllm.items() if k not in evals} == {k: a for k, a in hf.items() if k not in evals}


@pytest.mark.parametrize(
    ("choice", "said"),
    [("tgi", "'tgi': expected hf or vllm"), ("vllm:/m", "expected hf or vllm"),
     ("vllm?warp=1", "unknown option 'warp'"), ("hf?max_batch_size=x", "max_batch_size='x' must be of type int")],
)  # fmt: skip
def test_a_bad_eval_backend_is_refused_naming_it(choice: str, said: str) -> None:
    with pytest.raises(ConfigError, match="eval_backend") as e:
        _cfg(eval_backend=choice)
    assert said in str(e.value) and repr(choice) in str(e.value)


def test_policy_backend_specs() -> None:
    assert policy_backend("hf", "d") == "hf:d"
    assert policy_backend("vllm", "d") == "vllm:d?eager=1&dtype=float32"
    assert policy_backend("hf?dtype=float32", "d") == "hf:d?dtype=float32"
    assert policy_backend("vllm?", "d") == "vllm:d"  # an empty query: vLLM's own defaults
    with pytest.raises(BackendError, match="given twice"):
        policy_backend("vllm?eager=1&eager=0", "d")


def test_demo_backend_is_hf_on_the_cpu_by_default_and_vllm_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert demo_backend("hf", POLICY) == f"hf:{POLICY}?device=cpu"
    monkeypatch.setattr("effirag.llm.factory.vllm_missing", lambda python="": "")
    assert demo_backend("vllm", POLICY) == f"vllm:{POLICY}?eager=1&dtype=float32"
    assert demo_backend("vllm?dtype=bfloat16", POLICY) == f"vllm:{POLICY}?dtype=bfloat16"


class _Built(BackendError):
    """Stops the demo at its environment build, carrying the policy spec it was given."""


def test_cli_demo_loads_the_policy_through_the_chosen_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`effirag demo --backend vllm` builds its environment (every stage's policy) on vLLM, its engine started before
    the world and index stages; the default on HF, loaded with the environment."""
    monkeypatch.setattr("effirag.llm.factory.vllm_missing", lambda python="": "")
    monkeypatch.setattr("effirag.cli.demo._start_vllm", lambda spec: f"engine of {spec}")
    monkeypatch.setattr("effirag.cli.demo._world", lambda folder: folder)
    monkeypatch.setattr("effirag.cli.demo._index", lambda world, folder, shipped: folder)

    def build_env(cfg: Any, tokens: Any = None) -> Any:
        raise _Built(f"built: {cfg.model} with {tokens}")

    monkeypatch.setattr("effirag.env.build_env", build_env)
    base = ["demo", "--work", str(tmp_path), "--model", str(POLICY), "--skip-stats", "--threads", "0"]
    vllm = f"vllm:{POLICY}?eager=1&dtype=float32"
    for extra, built in (([], f"hf:{POLICY}?device=cpu with None"), (["-b", "vllm"], f"{vllm} with engine of {vllm}")):
        res = CliRunner().invoke(app, base + extra, env={"COLUMNS": "300"})
        assert res.exit_code == 2, res.output
        assert f"built: {built}" in res.output


@pytest.mark.parametrize(
    "command", [["demo", "--backend", "vllm", "--skip-stats"], ["reproduce", "eval_backend=vllm", "start=/m"]]
)
def test_vllm_without_vllm_fails_before_any_work_naming_make_vllm_venv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.setattr("effirag.llm.factory.vllm_missing", lambda python="": MISSING)
    work = tmp_path / "work"
    res = CliRunner().invoke(app, [*command, "--work" if command[0] == "demo" else "--out", str(work)])
    assert res.exit_code == 2
    assert "make vllm-venv" in res.output and "vllm" in res.output.split("make vllm-venv")[0]
    assert not work.exists()  # no world, index or stage was started


def test_cli_demo_refuses_a_bad_backend_naming_it(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["demo", "--backend", "tgi", "--work", str(tmp_path / "w"), "--skip-stats"])
    assert res.exit_code == 2 and "--backend: 'tgi': expected hf or vllm" in res.output
    assert not (tmp_path / "w").exists()


def test_eval_python_runs_the_evaluations_only(tmp_path: Path) -> None:
    """``eval_python``: the evaluation stages run with that interpreter (e.g. .venv-vllm's), the trainings with the
    run's; their commands are unchanged."""
    import sys

    from effirag.reproduce.plan import Stage
    from effirag.reproduce.runner import run_stage

    out = tmp_path / "out"
    plain = make_plan(_cfg(), out, lambda words: True).stages
    assert {s.python for s in plain} == {""}
    split = make_plan(_cfg(eval_backend="vllm", eval_python=sys.executable), out, lambda words: True).stages
    assert {s.key for s in split if s.python} == {s.key for s in split if s.argv[:2] == ("eval", "qa")}
    assert {s.python for s in split if s.python} == {sys.executable}
    link = tmp_path / "py"
    link.symlink_to(sys.executable)
    effirag = (sys.executable, "-c", "import json, sys; print(json.dumps({'python': sys.executable}))")
    assert run_stage(Stage("e", "eval", ("x",), python=str(link)), out, effirag)["result"] == {"python": str(link)}
    assert run_stage(Stage("t", "train", ("x",)), out, effirag)["result"] == {"python": sys.executable}
    with pytest.raises(ConfigError, match="eval_python"):
        _cfg(eval_python=str(tmp_path / "none"))


def test_vllm_missing_asks_the_given_interpreter(tmp_path: Path) -> None:
    has, lacks = tmp_path / "has", tmp_path / "lacks"
    for script, rc in ((has, 0), (lacks, 1)):
        script.write_text(f"#!/bin/sh\nexit {rc}\n")
        script.chmod(0o755)
    from effirag.llm.factory import vllm_missing

    assert vllm_missing(str(has)) == ""
    assert f"vLLM is not installed in {lacks}" in vllm_missing(str(lacks)) and "make vllm-venv" in vllm_missing(
        str(lacks)
    )
