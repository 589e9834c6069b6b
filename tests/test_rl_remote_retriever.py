"""The RL trainers search through ``effirag serve retrieval`` (a real server on 127.0.0.1) when the run config names
``retriever`` instead of ``index``: a PPO step then samples the same episodes and ends at the same weights as with the
index loaded in process; a config naming both, or a non-URL, is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from effirag.config import load_config
from effirag.env import EnvConfig
from effirag.errors import ConfigError
from effirag.train.rl.grpo import GRPORunConfig
from effirag.train.rl.log import read_steps
from effirag.train.rl.ppo_config import PPORunConfig

RL_QUESTIONS_N = 2  # questions in the run's file (the `setup` fixture of conftest.py builds it)


def _overrides(out: Path) -> list[str]:
    # naive RAG retrieves with the question before its one turn, so every episode searches (a random policy never
    # writes a search tag itself)
    return [
        f"output_dir={out}",
        "env.protocol=naive",
        "steps=1",
        "save_steps=1",
        "lr=0.001",
        "questions_per_step=2",
        "samples_per_question=2",
        "mini_batch_size=2",
        "env.engine.max_new_tokens=8",
        "env.engine.max_inserted_tokens=48",
        "env.engine.k=2",
        "env.engine.passage_mode=sparse",
        "objective.cost_alpha=0.01",
    ]


@pytest.mark.slow
def test_ppo_step_through_the_server_equals_the_in_process_index(
    setup: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx
    from safetensors.torch import load_file

    from effirag.retrieval.facade import load_retriever
    from effirag.serve.background import BackgroundServer
    from effirag.serve.retrieval import create_app
    from effirag.train.rl.ppo_run import run_ppo

    base = [f"env.model={setup['model']}", f"env.questions={setup['questions']}"]
    config = Path("configs/rl/dsr1_ppo_cost.yaml")
    monkeypatch.setenv("EFFIRAG_TOKEN", "s3cret")  # the trainer sends it; the server refuses requests without it
    local = run_ppo(
        load_config(PPORunConfig, config, [*base, f"env.index={setup['index']}", *_overrides(tmp_path / "a")])
    )
    app = create_app(load_retriever(Path(setup["index"])), token="s3cret")
    with BackgroundServer(app) as srv:
        cfg = load_config(PPORunConfig, config, [*base, f"env.retriever={srv.url}", *_overrides(tmp_path / "b")])
        remote = run_ppo(cfg)
        metrics = httpx.get(f"{srv.url}/metrics", headers={"Authorization": "Bearer s3cret"}).text
    [a], [b] = read_steps(tmp_path / "a" / "steps.jsonl"), read_steps(tmp_path / "b" / "steps.jsonl")
    assert a["searches_per_q"] == b["searches_per_q"] > 0
    assert a["inserted_tokens_per_q"] == b["inserted_tokens_per_q"] > 0
    assert (a["reward"], a["loss"]) == (b["reward"], b["loss"])
    wa = load_file(str(local.policy_dir / "model.safetensors"))
    wb = load_file(str(remote.policy_dir / "model.safetensors"))
    assert wa.keys() == wb.keys() and all(bool((wa[k] == wb[k]).all()) for k in wa)
    assert _searches(metrics) == 2  # one per question: a round's samples share the search of the same query


def _searches(metrics: str) -> float:
    """The ``/search`` requests answered 200 (``effirag_requests_total{route="/search",status="200"} N``)."""
    lines = [ln for ln in metrics.splitlines() if ln.startswith('effirag_requests_total{route="/search",status="200"}')]
    return sum(float(ln.rsplit(" ", 1)[1]) for ln in lines)


@pytest.mark.parametrize("cls", [GRPORunConfig, PPORunConfig])
def test_retriever_is_a_url_and_excludes_index(cls: Any) -> None:
    assert cls(env=EnvConfig(retriever="http://127.0.0.1:8000")).env.retriever == "http://127.0.0.1:8000"
    with pytest.raises(ConfigError, match="not both"):
        cls(env=EnvConfig(index="runs/demo/index", retriever="http://127.0.0.1:8000"))
    with pytest.raises(ConfigError, match="http"):
        cls(env=EnvConfig(retriever="127.0.0.1:8000"))
