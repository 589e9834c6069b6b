"""A user's own reward term and advantage estimator, each in the user's own module outside ``src/``, named only in
the run's YAML (``objective.imports``, ``objective.terms``, ``objective.advantage``), train 2 GRPO steps and 2 PPO
steps.

The term ``brevity`` is −scale · generated tokens, so its logged mean is −scale · ``generated_tokens_per_q``. The
estimator ``centred`` hands each trainer r minus the mean of r over the step's batch: the mean of what GRPO's reward
function returns (TRL's logged ``reward``) and of PPO's outcomes (the log's ``reward``) is then 0, while the mean of
r itself (``reward/total``) is not.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from effirag.config import load_config
from effirag.errors import ConfigError
from effirag.rewards.compose import RewardConfig
from effirag.train.objective import build_objective
from effirag.train.rl.grpo import GRPORunConfig
from effirag.train.rl.log import read_steps
from effirag.train.rl.ppo_config import PPORunConfig
from effirag.train.rl.ppo_run import run_ppo
from effirag.train.rl.run import run_grpo

RL_QUESTIONS_N = 2

TERM_MODULE = """
from dataclasses import dataclass

from effirag.rewards import register_term


@dataclass(frozen=True)
class Brevity:
    scale: float = 0.5


@register_term("brevity", Brevity)
def brevity(cfg, batch):
    return [-cfg.scale * t.generated_tokens for t in batch.trajectories]
"""

ESTIMATOR_MODULE = """
from dataclasses import dataclass

from effirag.train.algos import register_advantage


@dataclass(frozen=True)
class Centred:
    shift: float = 0.0


def centred(cfg, batch):
    mean = sum(batch.rewards) / len(batch.rewards)
    return [r - mean + cfg.shift for r in batch.rewards]


register_advantage("centred", Centred, group=centred, outcome=centred, scale_rewards="none")
"""

REWARD = {
    "imports": ["user_rewards_mod", "user_algos_mod"],
    "outcome_weight": 1.0,
    "terms": {"brevity": {"weight": 1.0, "scale": 0.01}},
    "advantage": "centred",
}
ENGINE = {"max_steps": 2, "max_new_tokens": 8, "max_inserted_tokens": 48, "k": 1, "passage_mode": "sparse"}


@pytest.fixture
def user_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The two user modules in a folder outside the package, put on sys.path."""
    folder = tmp_path / "user_code"
    folder.mkdir()
    (folder / "user_rewards_mod.py").write_text(textwrap.dedent(TERM_MODULE), encoding="utf-8")
    (folder / "user_algos_mod.py").write_text(textwrap.dedent(ESTIMATOR_MODULE), encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    return folder


def _yaml(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def _check_log(steps: list[dict[str, Any]]) -> None:
    assert [r["step"] for r in steps] == [1, 2]
    for r in steps:
        assert r["reward/brevity"] == pytest.approx(-0.01 * r["generated_tokens_per_q"], abs=1e-6)  # TRL logs float32
        assert r["reward/total"] == pytest.approx(r["reward/outcome"] + r["reward/brevity"], abs=1e-6)
        assert r["reward/total"] != pytest.approx(0.0, abs=1e-6)
        assert r["reward"] == pytest.approx(0.0, abs=1e-6)  # the estimator centred r on the batch


@pytest.mark.slow
def test_user_term_and_estimator_train_grpo_and_ppo(setup: dict[str, str], tmp_path: Path, user_modules: Path) -> None:
    base = {"env": {**setup, "engine": ENGINE}, "objective": REWARD}
    grpo = {**base, "output_dir": str(tmp_path / "grpo"), "max_steps": 2, "save_steps": 2, "num_generations": 2}
    grpo.update(questions_per_step=2, learning_rate=0.001)
    cfg = load_config(GRPORunConfig, _yaml(tmp_path / "grpo.yaml", grpo))
    res = run_grpo(cfg)
    assert res.steps == 2
    _check_log(read_steps(tmp_path / "grpo" / "steps.jsonl"))
    ppo = {**base, "output_dir": str(tmp_path / "ppo"), "steps": 2, "save_steps": 2, "questions_per_step": 2}
    ppo.update(samples_per_question=2, mini_batch_size=2, lr=0.001)
    pcfg = load_config(PPORunConfig, _yaml(tmp_path / "ppo.yaml", ppo))
    assert run_ppo(pcfg).steps == 2
    _check_log(read_steps(tmp_path / "ppo" / "steps.jsonl"))


def test_unknown_names_and_missing_modules_fail_when_the_run_is_built(user_modules: Path) -> None:
    with pytest.raises(ConfigError, match="unknown reward term"):
        build_objective(RewardConfig(terms={"nope": {"weight": 1.0}}), "grpo")
    with pytest.raises(ConfigError, match="unknown estimator"):
        build_objective(RewardConfig(advantage="nope"), "ppo")
    with pytest.raises(ConfigError, match="cannot be imported"):
        build_objective(RewardConfig(imports=("no_such_user_module",)), "grpo")
    with pytest.raises(ConfigError, match="does not serve the ppo trainer"):
        build_objective(RewardConfig(advantage="grpo"), "ppo")
    with pytest.raises(ConfigError, match="unknown field"):
        build_objective(RewardConfig(imports=("user_rewards_mod",), terms={"brevity": {"weight": 1, "x": 2}}), "grpo")
    with pytest.raises(ConfigError, match="set by its flat field"):
        RewardConfig(terms={"outcome": {"weight": 1.0}})
    ok = build_objective(RewardConfig(imports=("user_algos_mod",), advantage="centred"), "ppo")
    assert ok.advantage.name == "centred" and ok.scale_rewards == "none"
