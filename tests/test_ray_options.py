"""Where the Ray options go: `rollout.ray_address` and `rollout.ray_gpus` (GRPO / PPO rollouts) and `eval qa
--ray-address` reach ``ray.init(address=…)`` and the actors' ``num_gpus``. A recording stand-in for the ``ray`` module
takes the calls (starting a real cluster for an address costs minutes; the real local-Ray path is run by
tests/test_rollout_ray.py and tests/test_ray_qa.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from effirag.agent import get_protocol
from effirag.cli.main import app
from effirag.train.rl.rollout_ray import RayRollout
from effirag.train.rl.rollout_split import RolloutConfig


class Joined(Exception):
    """Raised by the stand-in's ``init`` to stop a run once the address is known."""


class RecordingRay:
    """The parts of the ``ray`` module a runner calls before any work is sent, recorded."""

    def __init__(self, stop_at_init: bool = False) -> None:
        self.inits: list[dict[str, Any]] = []
        self.remotes: list[dict[str, Any]] = []
        self.stop_at_init = stop_at_init

    def is_initialized(self) -> bool:
        return False

    def init(self, **kwargs: Any) -> None:
        self.inits.append(kwargs)
        if self.stop_at_init:
            raise Joined(kwargs.get("address"))

    def remote(self, **kwargs: Any) -> Any:
        self.remotes.append(kwargs)

        class _Cls:
            @staticmethod
            def remote(*_a: Any) -> str:
                return "actor"

        return lambda _cls: _Cls


def test_rollout_ray_address_and_gpus_reach_ray() -> None:
    """ray_address=ray://head:10001 is joined (no local start, no CPU count); ray_gpus=0.5 is each actor's GPU share;
    without an address a local Ray starts with actors × ray_cpus CPUs and the actors ask for no GPU."""
    split = RolloutConfig(ray_actors=2, ray_address="ray://head:10001", ray_gpus=0.5)
    rollout = RayRollout(lambda: None, get_protocol("searchr1"), split)
    rollout.ray = RecordingRay()
    rollout._start()
    assert rollout.ray.inits == [{"address": "ray://head:10001", "include_dashboard": False, "log_to_driver": False}]
    assert rollout.ray.remotes == [{"num_cpus": split.ray_cpus, "num_gpus": 0.5}]
    assert rollout.actors == ["actor", "actor"]
    local = RayRollout(lambda: None, get_protocol("searchr1"), RolloutConfig(ray_actors=2))
    local.ray = RecordingRay()
    local._start()
    assert "address" not in local.ray.inits[0] and local.ray.inits[0]["num_cpus"] == max(1, round(2 * split.ray_cpus))
    assert local.ray.remotes[0]["num_gpus"] == 0.0


def test_eval_qa_ray_address_is_joined(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`eval qa --ray 2 --ray-address ray://head:10001` joins that cluster (the run stops at the join here)."""
    import effirag.distributed
    import effirag.eval.ray_qa

    fake = RecordingRay(stop_at_init=True)
    monkeypatch.setattr(effirag.distributed, "import_ray", lambda *a, **k: fake)
    monkeypatch.setattr(effirag.eval.ray_qa, "import_ray", lambda *a, **k: fake)
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"id": "a", "question": "What is the capital of France?", "answer": "Paris"}) + "\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["<answer> Paris </answer>"]), encoding="utf-8")
    args = ["eval", "qa", "-q", str(q), "-b", f"scripted:{script}", "-p", "zeroshot", "--judge", "none"]
    r = CliRunner().invoke(app, [*args, "--ray", "2", "--ray-address", "ray://head:10001"])
    assert isinstance(r.exception, Joined) and r.exception.args == ("ray://head:10001",), r.output
    assert fake.inits[0]["address"] == "ray://head:10001"
