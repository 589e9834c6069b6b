"""Every YAML under configs/ and recipes/ loads into its config class (a typo in a field name fails here, not an hour
into a run), and the demo recipe's stages form one chain that ends in checkpoints/demo-policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from demo_policy.config import StageConfig

from effirag.config import load_config

REPO = Path(__file__).resolve().parents[1]
YAMLS = sorted(p.relative_to(REPO).as_posix() for d in ("configs", "recipes") for p in (REPO / d).rglob("*.y*ml"))
RECIPE = REPO / "recipes" / "demo_policy"
STAGES = sorted(p.name for p in RECIPE.glob("stage*.yaml"))


def load_any(rel: str) -> Any:
    """The config a YAML file holds, by where it lives (an unknown place is an error: say which class reads it)."""
    from effirag.env import load_run_config
    from effirag.train.pipeline import SFTRunConfig
    from effirag.train.reranker import RerankerConfig
    from effirag.train.rl.grpo import GRPORunConfig
    from effirag.train.rl.ppo_config import PPORunConfig
    from effirag.world import load_world_config

    path = REPO / rel
    demo = rel.startswith(("recipes/demo_policy/", "recipes/hiprag_musique/"))  # these recipes name their algorithm
    if rel.startswith("configs/world/"):
        return load_world_config(None, path)
    if rel.startswith("configs/sft/") or (rel.startswith("recipes/smollm2/") and path.stem.startswith("sft")):
        return load_config(SFTRunConfig, path)
    if (rel.startswith("configs/rl/") or demo) and "_grpo" in path.stem:  # RL recipes name it
        return load_run_config(GRPORunConfig, path)
    if rel.startswith("recipes/smollm2/") and path.stem.startswith("grpo"):
        return load_run_config(GRPORunConfig, path)
    if (rel.startswith("configs/rl/") or demo) and "_ppo" in path.stem:
        return load_run_config(PPORunConfig, path)
    if (rel.startswith("configs/dpo/") or demo) and "ipdpo" in path.stem:  # preference recipes name their algorithm
        from effirag.train.dpo.config import IPDPORunConfig

        return load_run_config(IPDPORunConfig, path)
    if (rel.startswith("configs/dpo/") or demo) and "step_dpo" in path.stem:
        from effirag.train.dpo.config import StepDPORunConfig

        return load_config(StepDPORunConfig, path)
    if rel == "configs/verl/agent_loop.yaml":  # verl's agent loop list: every key but name / _target_ is LoopConfig's
        import yaml

        from effirag.config import from_dict
        from effirag.integrations.verl_loop import LoopConfig

        entries = yaml.safe_load(path.read_text(encoding="utf-8"))
        return [from_dict(LoopConfig, {k: v for k, v in e.items() if k not in ("name", "_target_")}) for e in entries]
    if rel.startswith("configs/verl/"):
        from effirag.integrations.verl import check_search_tool_config

        return check_search_tool_config(path)
    if rel.startswith("configs/mcts/") or (demo and path.stem.startswith("mcts")):
        from effirag.train.mcts import load_run_config

        return load_run_config(path)
    if rel == "recipes/demo_policy/reranker.yaml":
        return load_config(RerankerConfig, path)
    if rel.startswith(("recipes/demo_policy/stage", "recipes/demo_policy/start_policy")):
        return load_config(StageConfig, path)
    raise AssertionError(f"{rel}: no config class is known to read it; add it to load_any")


@pytest.mark.parametrize("rel", YAMLS)
def test_every_yaml_loads_into_its_config_class(rel: str) -> None:
    assert load_any(rel) is not None


def test_the_recipe_has_seven_stages_and_no_extends() -> None:
    """One flattened YAML per stage: stage1 … stage7, none of them `extends` another."""
    assert [s.split("_")[0] for s in STAGES] == [f"stage{i}" for i in range(1, 8)]
    for name in STAGES:
        assert "extends:" not in (RECIPE / name).read_text("utf-8"), name


@pytest.mark.parametrize("name", STAGES)
def test_demo_stages_chain_to_the_committed_checkpoint(name: str) -> None:
    """Each stage's `previous_stage` exports exactly the model it starts from (stage 1 starts fresh), the last stage
    exports checkpoints/demo-policy-sft and no other does, every stage reads the demo world and writes observations with
    the demo engine's budget (160 tokens)."""
    cfg = load_config(StageConfig, RECIPE / name)
    last = name == STAGES[-1]
    assert (cfg.train.export_dir == Path("checkpoints/demo-policy-sft")) is last
    if name == STAGES[0]:
        assert cfg.previous_stage is None and cfg.train.model is None
    else:
        assert cfg.previous_stage == Path("recipes/demo_policy") / STAGES[STAGES.index(name) - 1]
        prev = load_config(StageConfig, REPO / cfg.previous_stage)
        assert prev.train.export_dir == cfg.train.model
    assert cfg.data.source.world == Path("runs/world-demo-seed0")
    assert (cfg.data.source.preset, cfg.data.source.seed) == ("demo", 0)
    assert cfg.data.max_inserted_tokens == 160


def test_start_policy_stage_continues_the_committed_sft_checkpoint() -> None:
    """The start policy's SFT stage starts from checkpoints/demo-policy-sft, exports checkpoints/start-policy, and
    sets the behaviour rates docs/demo_policy.md records (known hops searched at 0.8 in every agent protocol, no
    long-winded text, no needless paging, no re-search: those rows cost the start its EM guard)."""
    cfg = load_config(StageConfig, RECIPE / "start_policy.yaml")
    assert (cfg.train.model, cfg.train.export_dir) == (
        Path("checkpoints/demo-policy-sft"),
        Path("checkpoints/start-policy"),
    )
    b = cfg.data.behaviour
    assert b.known_search == dict.fromkeys(("tearag", "searchr1", "hiprag", "reasonrag", "routerag", "dsr1"), 0.8)
    assert (b.verbose_rate, b.more_info_rate, b.repeat_rate, b.memory_steps) == ({}, 0.0, {}, True)
    assert cfg.data.max_inserted_tokens == 160
