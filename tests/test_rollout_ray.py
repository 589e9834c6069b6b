"""The RL trainers' rollouts split into chunks and sampled on Ray actors: the chunk split and seeds by hand, one chunk
is exactly the unsplit call, two chunks on two Ray actors sample what two chunks in process sample (also after the
trainer's weights change), LoRA policies load strictly into the actors' networks, and a missing Ray fails with the
install hint before anything is loaded. Ray runs on 2 local CPUs (one instance for the module)."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from effirag.agent import EngineConfig, get_protocol
from effirag.config import load_config
from effirag.env import EnvConfig
from effirag.errors import ConfigError
from effirag.llm.scripted import ScriptedGenerator
from effirag.train.rl.grpo import GRPORunConfig
from effirag.train.rl.ppo_config import PPORunConfig
from effirag.train.rl.rollout import EngineRollout, RolloutBatch
from effirag.train.rl.rollout_split import CHUNK_STRIDE, RolloutConfig, chunk_bounds, chunk_seed, group_bounds
from effirag.types import QAExample
from test_engine_support import LexicalRetriever
from test_grpo_trainer import CharTokenizer

RL_QUESTIONS_N = 3  # questions in the `setup` fixture's file (conftest.py)


def test_chunks_are_contiguous_whole_groups_dealt_evenly() -> None:
    rows = ["a", "a", "b", "b", "c", "c", "d", "d", "e", "e"]  # 5 groups of 2
    assert group_bounds(rows) == [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)]
    assert chunk_bounds(rows, 1) == [(0, 10)]
    assert chunk_bounds(rows, 2) == [(0, 6), (6, 10)]  # 3 + 2 groups
    assert chunk_bounds(rows, 3) == [(0, 4), (4, 8), (8, 10)]  # 2 + 2 + 1
    assert chunk_bounds(rows[:4], 3) == [(0, 2), (2, 4)]  # 2 groups: 2 chunks, none empty
    assert chunk_bounds(["a", "b", "b", "a"], 2) == [(0, 3), (3, 4)]  # groups are runs: a, b b | a
    assert chunk_bounds([], 2) == []
    with pytest.raises(ValueError, match="chunks=0"):
        chunk_bounds(rows, 0)


def test_chunk_seeds_by_hand() -> None:
    assert chunk_seed(7, 3, 0, 8) == 3007  # chunk 0: the unsplit seed, 7 + 1000·3
    assert chunk_seed(7, 3, 2, 8) == 2_000_003_007  # + 10⁹·2
    assert CHUNK_STRIDE == 1_000_000_000
    assert chunk_seed(None, 3, 2, 8) is None
    # every (step, chunk, round) of a run gets its own seed
    seeds = [chunk_seed(0, s, c, 8) for s in (0, 1, 999, 999_999) for c in range(3)]
    assert len({x + r for x in seeds for r in range(8)}) == len(seeds) * 8  # type: ignore[operator]
    with pytest.raises(ValueError, match="steps < 1000000"):
        chunk_seed(0, 1_000_000, 1, 8)
    with pytest.raises(ValueError, match="max_steps < 1000"):
        chunk_seed(0, 0, 1, 1000)
    assert chunk_seed(0, 1_000_000, 0, 1000) == 1_000_000_000  # unsplit: the seed of a run without chunks


def test_rollout_config_validates_and_defaults_chunks_to_actors() -> None:
    assert RolloutConfig().n_chunks == 1
    assert RolloutConfig(chunks=3).n_chunks == 3
    assert RolloutConfig(ray_actors=2).n_chunks == 2
    assert RolloutConfig(ray_actors=2, chunks=5).n_chunks == 5
    for bad, field in [({"chunks": 0}, "chunks=0"), ({"ray_actors": -1}, "ray_actors=-1")]:
        with pytest.raises(ConfigError, match=field):
            RolloutConfig(**bad)
    with pytest.raises(ConfigError, match="ray_address='auto': is set but ray_actors is 0"):
        RolloutConfig(ray_address="auto")
    for cls in (GRPORunConfig, PPORunConfig):
        cfg = load_config(cls, None, ["rollout.ray_actors=2", "rollout.chunks=4", "rollout.ray_address=auto"])
        assert cfg.rollout == RolloutConfig(chunks=4, ray_actors=2, ray_address="auto")
        assert cls().rollout == RolloutConfig()


Q = [QAExample(f"q{i}", f"Which city is number {i}?", ("Lyon",)) for i in range(3)]


def _scripted_rollout(chunks: int, calls: list[tuple[list[str], int | None]], monkeypatch: Any) -> EngineRollout:
    """A scripted rollout whose engine calls are recorded as (question ids, seed)."""
    import effirag.train.rl.rollout as mod
    from effirag.agent import run_episodes as real

    def record(gen: Any, retriever: Any, protocol: Any, rows: Any, cfg: Any) -> Any:
        calls.append(([q.id for q in rows], cfg.seed))
        return real(gen, retriever, protocol, rows, cfg)

    monkeypatch.setattr(mod, "run_episodes", record)
    gen = ScriptedGenerator(
        {q.question: ["<answer> Lyon </answer>", "<answer> Rome </answer>"] for q in Q}, CharTokenizer()
    )
    engine = EngineConfig(k=1, seed=5, max_steps=2)
    return EngineRollout(get_protocol("searchr1"), LexicalRetriever(), engine, lambda _p: gen, chunks=chunks)


def _rows(batch: RolloutBatch) -> dict[str, Any]:
    """A batch's samples as TRL's rollout dict lays them out."""
    s = batch.samples
    return {
        "prompt_ids": [list(x.prompt_ids) for x in s],
        "completion_ids": [list(x.completion_ids) for x in s],
        "env_mask": [list(x.mask) for x in s],
        "logprobs": [list(x.old_logprobs or ()) for x in s],
    }


def test_one_chunk_is_the_unsplit_call_and_chunks_keep_row_order(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [q for q in Q for _ in range(2)]
    calls: list[tuple[list[str], int | None]] = []
    one = _scripted_rollout(1, calls, monkeypatch).run(rows, 4, None)
    assert calls == [(["q0", "q0", "q1", "q1", "q2", "q2"], 5 + 4000)]  # one call, the seed of a run without chunks
    calls.clear()
    two = _scripted_rollout(2, calls, monkeypatch).run(rows, 4, None)
    assert calls == [(["q0", "q0", "q1", "q1"], 4005), (["q2", "q2"], 4005 + CHUNK_STRIDE)]
    assert [t.question_id for t in two.trajectories] == [t.question_id for t in one.trajectories]
    assert _rows(two)["completion_ids"] == _rows(one)["completion_ids"]  # a script ignores seeds: the same rows


def test_lora_policy_loads_strictly_into_the_actor_network(setup: dict[str, str]) -> None:
    """An actor builds the run's LoRA wrapping from the config, so the trainer's peft state_dict loads strictly."""
    from transformers import AutoModelForCausalLM

    from effirag.train.rl.ppo_lora import lora_policy
    from effirag.train.rl.sources import policy_network

    cfg = load_config(PPORunConfig, None, [f"env.model={setup['model']}", "lora.enabled=true", "lora.r=4"])
    trainer_side = lora_policy(cfg.lora, AutoModelForCausalLM.from_pretrained(cfg.env.model), seed=3)
    actor_side = policy_network(cfg)
    actor_side.load_state_dict(trainer_side.state_dict(), strict=True)
    assert any("lora_A" in k for k in actor_side.state_dict())
    with pytest.raises(RuntimeError, match="Missing key"):  # the plain network does not take a LoRA state_dict
        policy_network(dataclasses.replace(cfg, lora=dataclasses.replace(cfg.lora, enabled=False))).load_state_dict(
            trainer_side.state_dict(), strict=True
        )


def test_ppo_builds_its_rollout_from_the_rollout_section(setup: dict[str, str]) -> None:
    """``rollout.chunks`` reaches the rollout; ``rollout.ray_actors`` gives it a Ray runner (actors start on the first
    step) that builds actors from the config's paths made absolute."""
    pytest.importorskip("ray")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from effirag.train.rl.ppo_trainer import build_ppo
    from effirag.train.rl.rollout_ray import RayRollout

    cfg = load_config(
        PPORunConfig, None, [f"env.model={setup['model']}", "rollout.ray_actors=2", "env.index=rel/index"]
    )
    policy, tok = AutoModelForCausalLM.from_pretrained(cfg.env.model), AutoTokenizer.from_pretrained(cfg.env.model)
    parts = build_ppo(cfg, policy, None, tok, Q, get_protocol("searchr1"), None)
    runner = parts.rollout.runner
    assert isinstance(runner, RayRollout) and parts.rollout.chunks == 2 and not runner.actors
    assert runner.make_worker.args[0].env.index == str(Path("rel/index").resolve())  # type: ignore[attr-defined]
    here = build_ppo(
        dataclasses.replace(cfg, rollout=RolloutConfig(chunks=3)), policy, None, tok, Q, get_protocol("searchr1"), None
    )
    assert here.rollout.chunks == 3 and here.rollout.runner is None


def test_missing_ray_fails_with_the_install_hint_before_loading(tmp_path: Path, monkeypatch: Any) -> None:
    from typer.testing import CliRunner

    from effirag.cli.main import app
    from effirag.train.rl.ppo_run import run_ppo

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    out = tmp_path / "run"
    cfg = PPORunConfig(
        env=EnvConfig(model=str(tmp_path), questions="q.jsonl"),
        output_dir=str(out),
        rollout=RolloutConfig(ray_actors=2),
    )
    with pytest.raises(ConfigError, match=r"RolloutConfig.ray_actors='not installed': Ray is not installed"):
        run_ppo(cfg)
    assert not out.exists()
    args = [
        "train",
        "grpo",
        f"env.model={tmp_path}",
        "env.questions=q.jsonl",
        f"output_dir={out}",
        "rollout.ray_actors=2",
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code != 0 and "install EffiRAG's distributed extra" in res.output
    assert not out.exists()


# --- on Ray actors ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    """One local Ray instance on 2 CPUs for the module (the rollouts join it instead of starting their own)."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _rows_equal(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Same ids and masks, log-probs within 1e-6, row for row."""
    same = all(a[k] == b[k] for k in ("prompt_ids", "completion_ids", "env_mask"))
    lps = list(zip(a["logprobs"], b["logprobs"], strict=True))
    return same and all(len(x) == len(y) and all(abs(u - v) <= 1e-6 for u, v in zip(x, y, strict=True)) for x, y in lps)


@pytest.mark.slow
def test_two_actors_sample_what_two_chunks_sample_in_process(setup: dict[str, str], ray_local: Any) -> None:
    """A tiny random policy at temperature 1, 3 questions × 2 samples in 2 chunks: the rows depend on each chunk's
    seed and on the weights, so an actor that lost a seed, the row order or the trainer's weights would differ."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from effirag.data.questions import load_questions
    from effirag.env import make_retriever
    from effirag.llm.hf import HFGenerator
    from effirag.train.rl.rollout import hf_generator
    from effirag.train.rl.rollout_ray import ray_rollout

    sets = [f"env.{k}={v}" for k, v in setup.items()]
    sets += [
        "env.protocol=naive",
        "env.engine.max_steps=2",
        "env.engine.max_new_tokens=8",
        "env.engine.k=1",
        "rollout.ray_actors=2",
    ]
    cfg = load_config(PPORunConfig, None, [*sets, "env.engine.passage_mode=sparse", "seed=3"])
    model, tok = AutoModelForCausalLM.from_pretrained(cfg.env.model), AutoTokenizer.from_pretrained(cfg.env.model)
    proto, questions = get_protocol(cfg.env.protocol), load_questions(Path(cfg.env.questions)).examples
    here = EngineRollout(
        proto, make_retriever(cfg.env, tok), cfg.rollout_engine, lambda p: HFGenerator.from_loaded(p, tok), chunks=2
    )
    runner = ray_rollout(cfg, proto)
    assert runner is not None
    there = EngineRollout(
        proto, None, cfg.rollout_engine, hf_generator(tok), chunks=cfg.rollout.n_chunks, runner=runner
    )
    rows = [q for q in questions for _ in range(2)]
    try:
        a, b = _rows(here.run(rows, 1, model)), _rows(there.run(rows, 1, model))
        assert _rows_equal(a, b)
        assert [(t.question_id, t.sample_index) for t in there.last.trajectories] == [
            (q.id, 0) for q in questions for _ in "ab"
        ]
        assert a["completion_ids"][0] != a["completion_ids"][1]  # the two samples of a question are random draws
        with torch.no_grad():  # the trainer's update: the actors must sample from the new weights
            g = torch.Generator().manual_seed(0)
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=g) * 0.5)
        a2, b2 = _rows(here.run(rows, 1, model)), _rows(there.run(rows, 1, model))
        assert _rows_equal(a2, b2)
        assert b2["completion_ids"] != b["completion_ids"]
    finally:
        there.close()


@pytest.mark.slow
def test_cli_train_grpo_on_two_actors_equals_two_chunks_in_process(
    setup: dict[str, str], ray_local: Any, tmp_path: Path
) -> None:
    """``effirag train grpo … rollout.ray_actors=2`` logs the rewards and losses and saves the weights of
    ``rollout.chunks=2`` in process: the second step's rollout samples from the weights the first step trained."""
    import json

    from safetensors.torch import load_file
    from typer.testing import CliRunner

    from effirag.cli.main import app
    from effirag.train.rl.log import read_steps

    base = [f"env.{k}={v}" for k, v in setup.items()] + ["max_steps=2", "save_steps=2", "learning_rate=0.01"]
    base += ["num_generations=2", "questions_per_step=2", "env.engine.max_steps=2", "env.engine.max_new_tokens=8"]
    base += [
        "env.engine.max_inserted_tokens=48",
        "env.engine.k=1",
        "env.engine.passage_mode=sparse",
        "objective.format_weight=0.5",
    ]
    base += ["scale_rewards=none", "objective.cost=memory", "objective.cost_alpha=1.0"]
    command = ["train", "grpo", "--config", "configs/rl/dsr1_grpo_cost.yaml", "--quiet", "--json"]
    runs = {"here": ["rollout.chunks=2"], "ray": ["rollout.ray_actors=2"]}
    for name, extra in runs.items():
        res = CliRunner().invoke(app, [*command, *base, f"output_dir={tmp_path / name}", *extra])
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["steps"] == 2
    here, ray = (read_steps(tmp_path / n / "steps.jsonl") for n in runs)
    keys = ("reward", "loss", "generated_tokens_per_q", "inserted_tokens_per_q")
    assert [[r[k] for k in keys] for r in here] == [[r[k] for k in keys] for r in ray]
    assert here[0]["generated_tokens_per_q"] != here[1]["generated_tokens_per_q"]  # the steps sampled differently
    a, b = (load_file(str(tmp_path / n / "policy" / "model.safetensors")) for n in runs)
    assert a.keys() == b.keys() and all(bool((a[k] == b[k]).all()) for k in a)
    start = load_file(f"{setup['model']}/model.safetensors")
    assert not all(bool((a[k] == start[k]).all()) for k in a)  # the first step trained: the second sampled anew


def test_actor_paths_keep_a_reranker_spec_and_make_its_folder_absolute(tmp_path: Path, monkeypatch: Any) -> None:
    """Ray actors may run elsewhere, so the config's folders become absolute; a ``cross-encoder:DIR`` reranker is a
    spec, not a path: its folder becomes absolute and its kind stays (a bare folder stays a bare folder)."""
    from effirag.train.rl.rollout_ray import _absolute

    def env(**kw: Any) -> PPORunConfig:
        return PPORunConfig(env=EnvConfig(**{"model": "m", "index": "i", "reranker": "cross-encoder:ce", **kw}))

    monkeypatch.chdir(tmp_path)
    out = _absolute(env()).env
    assert (out.model, out.index, out.reranker) == (
        str(tmp_path / "m"),
        str(tmp_path / "i"),
        f"cross-encoder:{tmp_path / 'ce'}",
    )
    assert _absolute(env(reranker="rr")).env.reranker == str(tmp_path / "rr")
    assert _absolute(env(reranker="")).env.reranker == ""
    assert _absolute(env(model="hf:m?chat=1")).env.model == f"hf:{tmp_path / 'm'}?chat=1"


@pytest.mark.slow
def test_cli_train_ppo_joins_a_ray_address_and_equals_two_chunks_in_process(
    setup: dict[str, str], ray_local: Any, tmp_path: Path
) -> None:
    """``effirag train ppo … rollout.ray_actors=2 rollout.ray_address=ADDR``, run as its own process, joins the Ray
    instance at ADDR (the module's, whose GCS address it is given) and trains 2 PPO steps whose rewards, losses and
    final weights are those of ``rollout.chunks=2`` in process: the actors sampled with the policy's weights of each
    step (``ray.init(address=…)`` joins that instance or fails: it never starts one of its own)."""
    import json
    import os
    import subprocess

    from safetensors.torch import load_file
    from typer.testing import CliRunner

    from effirag.cli.main import app
    from effirag.train.rl.log import read_steps

    base = [f"env.{k}={v}" for k, v in setup.items()] + ["steps=2", "save_steps=2", "lr=0.01", "seed=5"]
    base += ["questions_per_step=2", "samples_per_question=2", "mini_batch_size=2", "ppo_epochs=1"]
    base += ["env.engine.max_steps=2", "env.engine.max_new_tokens=8", "env.engine.max_inserted_tokens=48"]
    base += ["env.engine.k=1", "env.engine.passage_mode=sparse", "objective.format_weight=0.5"]
    command = ["train", "ppo", "--config", "configs/rl/dsr1_ppo_cost.yaml", "--quiet", "--json"]
    here = CliRunner().invoke(app, [*command, *base, f"output_dir={tmp_path / 'here'}", "rollout.chunks=2"])
    assert here.exit_code == 0, here.output
    address = ray_local.get_runtime_context().gcs_address
    env = {**os.environ, "PYTHONPATH": str(Path("src").resolve()) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    ray_run = [f"output_dir={tmp_path / 'ray'}", "rollout.ray_actors=2", f"rollout.ray_address={address}"]
    code = "from effirag.cli.main import app; app()"
    proc = subprocess.run(
        [sys.executable, "-c", code, *command, *base, *ray_run], env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["steps"] == 2
    a_log, b_log = (read_steps(tmp_path / n / "steps.jsonl") for n in ("here", "ray"))
    keys = ("reward", "policy_loss", "value_loss", "generated_tokens_per_q")
    # the same samples (rewards, tokens: exact); losses and weights to float reduction order, which differs between
    # the actors' and the trainer's thread counts (a CI run saw a step-2 policy loss 8e-5 apart, relative)
    exact = ("reward", "generated_tokens_per_q")
    assert [r[k] for r in a_log for k in exact] == pytest.approx([r[k] for r in b_log for k in exact], abs=1e-6)
    assert [r[k] for r in a_log for k in keys] == pytest.approx([r[k] for r in b_log for k in keys], rel=1e-3, abs=1e-6)
    a, b = (load_file(str(tmp_path / n / "policy" / "model.safetensors")) for n in ("here", "ray"))
    start = load_file(f"{setup['model']}/model.safetensors")
    assert not all(bool((a[k] == start[k]).all()) for k in a)  # the steps trained
    # the two runs' weight updates agree to 5% of the update's norm over all tensors: Adam's first steps divide each
    # gradient element by its own magnitude, so an element whose gradient cancels to near zero may move by about lr
    # either way when the reduction order differs (a CI run under load saw weights more than 1e-4 apart)
    assert a.keys() == b.keys()
    gap = sum(float((a[k] - b[k]).norm()) ** 2 for k in a) ** 0.5
    update = sum(float((a[k] - start[k]).norm()) ** 2 for k in a) ** 0.5
    assert gap <= 0.05 * update, (gap, update)
