"""``effirag profile cost``: c_g and c_e (Dynamic Search-R1 §3.3, eq. 3) measured on a tiny model built from a config,
written as config values that a dsr1 recipe takes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from effirag.rewards.profiling import TokenCosts, cost_config
from tiny_models import make_tiny_model

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "configs" / "rl" / "dsr1_grpo_latency.yaml"


def test_cost_config_rounds_to_four_digits_under_the_recipe() -> None:
    costs = TokenCosts(c_g=0.00271234, c_e=0.000112345, overhead_s=0.01, n_calls=4, rms_residual_s=0.0)
    assert cost_config(costs) == {"objective": {"c_g": 0.002712, "c_e": 0.0001123}}
    assert cost_config(costs, "../r.yaml") == {"extends": "../r.yaml", "objective": {"c_g": 0.002712, "c_e": 0.0001123}}


@pytest.mark.slow
def test_profile_cost_writes_values_the_dsr1_recipe_takes(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from effirag.cli.main import app
    from effirag.config import load_config
    from effirag.train.rl.grpo import GRPORunConfig

    model = make_tiny_model(tmp_path / "model", arch="qwen2", seed=3)
    out = tmp_path / "costs" / "dsr1_measured.yaml"
    grid = ["--prompt-tokens", "8", "--prompt-tokens", "96", "--new-tokens", "1", "--new-tokens", "12"]
    args = ["profile", "cost", "--backend", f"hf:{model}", *grid, "--repeats", "1", "--json"]
    r = CliRunner().invoke(app, [*args, "--out", str(out), "--recipe", str(RECIPE)])
    assert r.exit_code == 0, r.output
    fit = json.loads(r.stdout)
    assert fit["n_calls"] == 4 and fit["c_g"] > 0 and fit["c_e"] >= 0
    cfg = load_config(GRPORunConfig, out)  # the recipe, with the measured values in place of its own
    assert cfg.env.protocol == "dsr1" and cfg.objective.cost == "latency" and cfg.objective.cost_alpha == 0.2
    assert cfg.objective.c_g == pytest.approx(fit["c_g"], rel=1e-3) and cfg.objective.c_g != 0.0027
    assert cfg.objective.c_e == pytest.approx(fit["c_e"], rel=1e-3, abs=1e-12)
    frag = tmp_path / "fragment.yaml"
    assert CliRunner().invoke(app, [*args, "--out", str(frag)]).exit_code == 0
    assert set(yaml.safe_load(frag.read_text())) == {"objective"}
