"""WorldConfig validation, presets vs configs/world/*.yaml, and the ``effirag world generate`` CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from effirag.cli.main import app
from effirag.errors import ConfigError
from effirag.world import PRESETS, generate_world, load_world_config
from effirag.world.config import WorldConfig
from effirag.world.plan import make_plan, split_counts

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        (["passages=-5"], "passages"),
        (["test_questions=-1"], "test_questions"),
        (["two_hop=0.5"], "comparison"),  # the mix sums to 1.1
        (["known_share=1.5"], "known_share"),
        (["share_person=0.9"], "share_film"),  # type shares no longer sum to 1
        (["max_words=70"], "max_words"),
    ],
)
def test_bad_values_fail_naming_the_field(overrides: list[str], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_world_config("demo", overrides=overrides)
    assert err.value.field == field


def test_more_questions_than_chains_fails_before_any_file_is_written(tmp_path: Path) -> None:
    cfg = load_world_config("demo", overrides=["passages=400", "train_questions=5000"])
    out = tmp_path / "never"
    with pytest.raises(ConfigError) as err:
        generate_world(cfg, out)
    assert err.value.field in {"one_hop", "two_hop", "three_hop", "four_hop", "comparison"}
    assert "chains" in str(err.value)
    assert not out.exists()


def test_too_few_persons_for_the_roles_names_share_person() -> None:
    cfg = load_world_config("demo", overrides=["share_person=0.1", "share_film=0.62"])
    with pytest.raises(ConfigError) as err:
        make_plan(cfg)
    assert err.value.field == "share_person"


def test_split_counts_are_largest_remainder_rounding() -> None:
    """Hand-worked: 10 × (0.25, 0.35, 0.4) = 2.5, 3.5, 4 → floors 2, 3, 4 (sum 9); the one left goes to the
    first of the tied remainders 0.5 → 3, 3, 4."""
    assert split_counts(10, {"a": 0.25, "b": 0.35, "c": 0.4}) == {"a": 3, "b": 3, "c": 4}
    assert sum(split_counts(333, {"a": 0.2, "b": 0.4, "c": 0.15, "d": 0.1, "e": 0.15}).values()) == 333


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_config_files_mirror_the_presets(preset: str) -> None:
    from_file = load_world_config(None, REPO / "configs" / "world" / f"{preset}.yaml")
    assert from_file == load_world_config(preset)


def test_presets_are_feasible_and_demo_is_small() -> None:
    for name in PRESETS:
        make_plan(load_world_config(name))
    demo = load_world_config("demo")
    assert demo.passages <= 5000 and demo.test_questions * demo.two_hop >= 100
    assert load_world_config("large").passages == 1_000_000
    assert WorldConfig() == demo  # the defaults are the demo preset


def test_flags_override_file_and_preset(tmp_path: Path) -> None:
    f = tmp_path / "w.yaml"
    f.write_text("passages: 900\nseed: 3\n")
    cfg = load_world_config("small", f, ["seed=4"], passages=500)
    assert (cfg.passages, cfg.seed, cfg.train_questions) == (500, 4, 5000)


def test_cli_generate_then_data_stats(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "w"
    res = runner.invoke(
        app,
        ["world", "generate", "--preset", "demo", "--seed", "0", "--passages", "400", "--out", str(out), "--json",
         "train_questions=40", "dev_questions=10", "test_questions=40"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["passages"] == 400
    res = runner.invoke(
        app, ["data", "stats", "--questions", str(out / "questions_test.jsonl"), "--corpus", str(out / "corpus.jsonl"),
              "--json"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    stats = json.loads(res.stdout)
    assert stats["n_questions"] == 40 and stats["n_passages"] == 400
    assert stats["gold_passages"]["found"] == stats["gold_passages"]["total"] > 0


def test_cli_bad_config_is_one_line_naming_the_field(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["world", "generate", "--out", str(tmp_path / "x"), "one_hop=0.9"])
    assert res.exit_code == 2
    assert "WorldConfig.comparison" in res.output and "sum to 1" in res.output


@pytest.mark.slow
def test_files_are_identical_across_processes_with_different_hash_seeds(tmp_path: Path) -> None:
    """String hashing is randomised per process; no output may depend on set or dict-of-set iteration order."""
    import hashlib
    import os
    import subprocess
    import sys

    digests = []
    for hash_seed in ("1", "2"):
        out = tmp_path / hash_seed
        code = (
            "from effirag.world import generate_world, load_world_config; "
            f"generate_world(load_world_config('demo', overrides=['passages=300', 'train_questions=30', "
            f"'dev_questions=10', 'test_questions=20']), {str(out)!r})"
        )
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        subprocess.run([sys.executable, "-c", code], check=True, env=env)
        digests.append({p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.iterdir())})
    assert digests[0] == digests[1]
